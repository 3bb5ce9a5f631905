#!/usr/bin/env bash
# padding-bundle.sh builds here (Go, no GPU) the folder that padding.sh
# runs on a GPU machine: the evidence of issue #31's padding masks on the
# GPU. testdata/text/gpt_moby_docs.cue (Moby-Dick's paragraphs as
# documents, padded, every attention masking the padding) for CUDA and for
# the CPU; testdata/specs/valid/gpt_tiny_pad.cue for CUDA; models/gpt.cue's
# bf16 and f32 CUDA programs, and CIFAR ResNet-18's (bench/models), of this
# tree and of BASE (default 86c8e32, the commit before padding masks), so
# that one run shows whether the unpadded models' steps moved (the loss
# kernel of every program changed: it skips rows of zero labels); and
# Moby-Dick as make data-text joins it.
# Usage: bench/gpu/padding-bundle.sh [TEXT_DIR [DIR [BASE]]]  (defaults data/text, .gpu/padding, 86c8e32)
# There: bash DIR/padding.sh DIR OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
text=${1:-data/text} dir=${2:-.gpu/padding} base=${3:-86c8e32}
rm -rf "$dir" && mkdir -p "$dir/data"
dir=$(cd "$dir" && pwd)
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
git worktree add -q --detach "$tmp/base" "$base"
(cd "$tmp/base" && go build -trimpath -o "$tmp/mlbuild-base" ./cmd/mlbuild)
sed -e 's/name: "gpt"/name: "gpt_bf16"\n\tprecision: "bf16"/' models/gpt.cue >"$tmp/gpt_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/gpt_bf16.cue"
c() { "$1" compile "$2" --backend "$3" --target linux/amd64 -o "$tmp/st/$4" --cache-dir "$tmp/cache-$(basename "$1")" --force >/dev/null; }
mkdir -p "$tmp/st"
c "$tmp/mlbuild" testdata/text/gpt_moby_docs.cue cuda docs-cuda
c "$tmp/mlbuild" testdata/text/gpt_moby_docs.cue cpu docs-cpu
c "$tmp/mlbuild" testdata/specs/valid/gpt_tiny_pad.cue cuda tiny-pad-cuda
for who in mlbuild mlbuild-base; do
	c "$tmp/$who" models/gpt.cue cuda "gpt-f32-$who"
	c "$tmp/$who" "$tmp/gpt_bf16.cue" cuda "gpt-bf16-$who"
	c "$tmp/$who" bench/models/resnet18_cifar.cue cuda "r18-f32-$who"
	c "$tmp/$who" bench/models/resnet18_cifar_bf16.cue cuda "r18-bf16-$who"
done
tar -C "$tmp" -cf - st | xz -6 --lzma2=dict=256MiB >"$dir/programs.tar.xz"
cp "$text/moby-dick.txt" "$dir/data/"
cp bench/gpu/padding.sh "$dir/"
echo "mlbuild $(git describe --always --dirty 2>/dev/null || echo unknown), base $base" >"$dir/VERSION"
du -sh "$dir"
