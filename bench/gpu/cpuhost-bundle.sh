#!/usr/bin/env bash
# cpuhost-bundle.sh builds here (Go, no GPU) the folder that cpuhost.sh runs
# on the GPU machine's host CPU (16 cores, AMX; PyTorch 2.11 with oneDNN in
# the venv `python3` runs), for issue #31's CPU rows against PyTorch 2.x:
# the small GPT of make bench-gpt (testdata/text/gpt_moby.cue) trained side
# by side with its twin on 1 and 2 cores, models/gpt.cue's training step on
# 2 and 16 cores, and generation at batch 1 with the KV cache on 1, 2 and
# 16 cores, in f32 and bf16 (--precision), against PyTorch's eager
# KV-cache loop in fp32, with bf16 weights and under bf16 autocast; and
# for issue #30, CIFAR ResNet-18's training step and inference on 1, 2 and
# 16 cores against bench/resnet-cpu's PyTorch twin (cpuhost.sh part 4).
# Usage: bench/gpu/cpuhost-bundle.sh [TEXT_DIR [DIR]]  (defaults data/text, .gpu/cpuhost)
# There: bash DIR/cpuhost.sh DIR OUT (PARTS=3 for generation alone)
set -euo pipefail
cd "$(dirname "$0")/../.."
text=${1:-data/text} dir=${2:-.gpu/cpuhost}
rm -rf "$dir" && mkdir -p "$dir/data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
"$tmp/mlbuild" compile testdata/text/gpt_moby.cue --backend cpu --target linux/amd64 -o "$tmp/small" --cache-dir "$tmp/cache" --force >/dev/null
"$tmp/mlbuild" compile models/gpt.cue --backend cpu --target linux/amd64 -o "$tmp/gpt" --cache-dir "$tmp/cache" --force >/dev/null
sed -e 's/name: "gpt"/name: "gpt_bf16"\n\tprecision: "bf16"/' models/gpt.cue >"$tmp/gpt_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/gpt_bf16.cue"
"$tmp/mlbuild" compile "$tmp/gpt_bf16.cue" --backend cpu --target linux/amd64 -o "$tmp/gpt-bf16" --cache-dir "$tmp/cache" --force >/dev/null
"$tmp/mlbuild" compile bench/models/resnet18_cifar.cue --backend cpu --target linux/amd64 -o "$tmp/resnet18_f32" --cache-dir "$tmp/cache" --force >/dev/null
"$tmp/mlbuild" compile bench/models/resnet18_cifar_bf16.cue --backend cpu --target linux/amd64 -o "$tmp/resnet18_bf16" --cache-dir "$tmp/cache" --force >/dev/null
for p in small gpt gpt-bf16 resnet18_f32 resnet18_bf16; do xz -6 -T0 -c "$tmp/$p" >"$dir/$p.xz"; done
cp "$text/moby-dick.txt" "$dir/data/"
cp bench/gpu/cpuhost.sh bench/gpt/torch_gpt.py bench/generate/torch_kv.py "$dir/"
mkdir -p "$dir/resnet-cpu"
cp bench/resnet-cpu/run.sh bench/resnet-cpu/torch_resnet_cpu.py bench/gpu/torch_resnet_cifar.py "$dir/resnet-cpu/"
git rev-parse --short HEAD >"$dir/VERSION"
du -sh "$dir"
