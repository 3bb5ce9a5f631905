#!/usr/bin/env bash
# bf16conv-bundle.sh builds here (Go, no GPU) the folder that bf16conv.sh
# runs on a GPU machine: the evidence of issue #28's bfloat16 storage
# (planner/store_bf16.go: a bf16 plan's activations and gradients in
# bfloat16, its cuDNN convolutions multiplying bfloat16 tensors). CIFAR
# ResNet-18's bf16 CUDA program of this tree and of BASE (default
# 207d900, the commit before), the tiny ResNet's
# (testdata/specs/bf16/resnet_tiny_bf16.cue), the cuda package's tests
# (the real cuDNN's bfloat16 convolutions) and PyTorch's twin.
# Usage: bench/gpu/bf16conv-bundle.sh [DIR [BASE]]  (defaults .gpu/bf16conv, 207d900)
# There: bash DIR/bf16conv.sh DIR OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu/bf16conv} base=${2:-207d900}
rm -rf "$dir" && mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
git worktree add -q --detach "$tmp/base" "$base"
(cd "$tmp/base" && go build -trimpath -o "$tmp/mlbuild-base" ./cmd/mlbuild)
c() { "$1" compile "$2" --backend cuda --target linux/amd64 -o "$tmp/st/$3" --cache-dir "$tmp/cache-$(basename "$1")" --force >/dev/null; }
mkdir -p "$tmp/st"
c "$tmp/mlbuild" bench/models/resnet18_cifar_bf16.cue r18-bf16-new
c "$tmp/mlbuild-base" bench/models/resnet18_cifar_bf16.cue r18-bf16-base
c "$tmp/mlbuild" testdata/specs/bf16/resnet_tiny_bf16.cue tiny-bf16
go test -c -trimpath -o "$tmp/st/cudatest" ./cuda
tar -C "$tmp" -cf - st | xz -6 --lzma2=dict=256MiB >"$dir/programs.tar.xz"
cp bench/gpu/bf16conv.sh bench/gpu/torch_resnet_cifar.py "$dir/"
echo "mlbuild $(git describe --always --dirty 2>/dev/null || echo unknown), base $base" >"$dir/VERSION"
du -sh "$dir"
