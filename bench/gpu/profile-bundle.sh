#!/usr/bin/env bash
# profile-bundle.sh builds here (Go, no GPU) the folder that profile.sh
# runs on a GPU machine: the CUDA programs of CIFAR ResNet-18 in f32, tf32
# and bf16 (bench/models/resnet18_cifar*.cue) and of models/gpt.cue in f32 and
# bf16, to be timed by bench and profiled op by op (MLBUILD_CUDA_PROFILE=1),
# and the PyTorch twins (torch_resnet_cifar.py, bench/gpt/torch_gpt.py) for
# the same steps side by side.
# Moby-Dick (make data-text) is the twin's text.
# Usage: bench/gpu/profile-bundle.sh [DIR]  (default .gpu/profile)
# There: bash DIR/profile.sh DIR OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu/profile}
rm -rf "$dir" && mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
sed -e 's/name: "gpt"/name: "gpt_bf16"\n\tprecision: "bf16"/' models/gpt.cue >"$tmp/gpt_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/gpt_bf16.cue"
c() { "$tmp/mlbuild" compile "$1" --backend cuda --target linux/amd64 -o "$tmp/$2" --cache-dir "$tmp/cache" --force && xz -6 -T0 -c "$tmp/$2" >"$dir/$2.xz"; }
c bench/models/resnet18_cifar.cue r18-f32
c bench/models/resnet18_cifar_bf16.cue r18-bf16
c bench/models/resnet18_cifar_tf32.cue r18-tf32
c models/gpt.cue gpt-f32
c "$tmp/gpt_bf16.cue" gpt-bf16
cp data/text/moby-dick.txt bench/gpu/profile.sh bench/gpu/torch_resnet_cifar.py bench/gpt/torch_gpt.py "$dir/"
git rev-parse --short HEAD >"$dir/VERSION"
du -sh "$dir"
