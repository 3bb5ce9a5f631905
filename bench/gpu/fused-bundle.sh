#!/usr/bin/env bash
# fused-bundle.sh builds here (Go, no GPU) the folder that fused.sh runs on
# a GPU machine: CIFAR ResNet-18's CUDA programs in bf16 and f32 of this
# tree and of BASE (default 243f9fb, before the fused ReLUs of
# planner/fuse_norm_act.go, fuse_sum_act.go and share_sum_grads.go), the
# tiny ResNet's (testdata/specs/bf16/resnet_tiny_bf16.cue) and PyTorch's
# twin (bench/gpu/torch_resnet_cifar.py), the cuda package's tests (the
# step's cuDNN convolutions timed alone) and PyTorch's
# (bench/gpu/conv_nhwc.py); with SELFTEST_ALL=1 also the CUDA program of
# every valid test spec and model (fused.sh's part 6).
# Usage: bench/gpu/fused-bundle.sh [DIR [BASE]]  (defaults .gpu/fused, 243f9fb)
# There: bash DIR/fused.sh DIR OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu/fused} base=${2:-243f9fb}
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
for v in new base; do
	m=$tmp/mlbuild
	[ "$v" = base ] && m=$tmp/mlbuild-base
	c "$m" bench/models/resnet18_cifar_bf16.cue "r18-bf16-$v"
	c "$m" bench/models/resnet18_cifar.cue "r18-f32-$v"
done
c "$tmp/mlbuild" testdata/specs/bf16/resnet_tiny_bf16.cue tiny-bf16
go test -c -trimpath -o "$tmp/st/cudatest" ./cuda
if [ -n "${SELFTEST_ALL:-}" ]; then
	# fused.sh's part 6: every valid test spec's and model's CUDA program
	# (models/gpt.cue left out: its selftest alone takes minutes)
	mkdir -p "$tmp/st/all/selftest"
	for spec in testdata/specs/valid/*.cue models/*.cue; do
		name=$(basename "$spec" .cue)
		case $spec in models/gpt.cue) continue ;; models/*) name=model_$name ;; esac
		if ! "$tmp/mlbuild" compile "$spec" --backend cuda --target linux/amd64 -o "$tmp/st/all/selftest/$name" --cache-dir "$tmp/cache-all" --force >"$tmp/compile.log" 2>&1; then
			echo "$spec: $(tail -n 1 "$tmp/compile.log")" >>"$tmp/st/all/selftest/COMPILE-FAILED"
		fi
	done
fi
tar -C "$tmp" -cf - st | xz -6 --lzma2=dict=256MiB >"$dir/programs.tar.xz"
cp bench/gpu/fused.sh bench/gpu/torch_resnet_cifar.py bench/gpu/conv_nhwc.py bench/gpu/selftest-all.sh "$dir/"
echo "mlbuild $(git describe --always --dirty 2>/dev/null || echo unknown), base $base" >"$dir/VERSION"
du -sh "$dir"
