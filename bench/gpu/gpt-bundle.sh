#!/usr/bin/env bash
# gpt-bundle.sh builds here (Go, no GPU) the folder that gpt.sh runs on a
# GPU machine for issue #31: models/gpt.cue's CUDA program in f32 and in
# bf16 (the same spec with precision: "bf16" set here), its CPU program
# (generate, with the KV cache), Moby-Dick as make data-text joins it, and
# the PyTorch twins (bench/gpt/torch_gpt.py, training; bench/generate/
# torch_kv.py, generation with a KV cache).
# Usage: bench/gpu/gpt-bundle.sh [TEXT_DIR [DIR]]  (defaults data/text, .gpu/gpt)
# There: bash DIR/gpt.sh DIR OUT [EPOCHS]; GEN_ONLY=1 bash DIR/gpt.sh DIR OUT
# times generation alone (a few minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
text=${1:-data/text} dir=${2:-.gpu/gpt}
rm -rf "$dir" && mkdir -p "$dir/data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
sed -e 's/name: "gpt"/name: "gpt_bf16"\n\tprecision: "bf16"/' models/gpt.cue >"$tmp/gpt_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/gpt_bf16.cue"
"$tmp/mlbuild" compile models/gpt.cue --backend cuda --target linux/amd64 -o "$tmp/cuda-f32" --cache-dir "$tmp/cache" --force
"$tmp/mlbuild" compile "$tmp/gpt_bf16.cue" --backend cuda --target linux/amd64 -o "$tmp/cuda-bf16" --cache-dir "$tmp/cache" --force
"$tmp/mlbuild" compile models/gpt.cue --backend cpu --target linux/amd64 -o "$tmp/cpu" --cache-dir "$tmp/cache" --force
for p in cuda-f32 cuda-bf16 cpu; do xz -6 -T0 -c "$tmp/$p" >"$dir/gpt-$p.xz"; done
cp "$text/moby-dick.txt" "$dir/data/"
cp bench/gpu/gpt.sh bench/gpt/torch_gpt.py bench/generate/torch_kv.py "$dir/"
du -sh "$dir"
