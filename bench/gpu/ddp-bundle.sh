#!/usr/bin/env bash
# ddp-bundle.sh builds here (Go, no GPU) the folder that ddp.sh runs on a
# machine with 2 GPUs (issue #29, data-parallel training): the CUDA
# programs of CIFAR ResNet-18 (bench/models/resnet18_cifar.cue with an IDX
# dataset of 3×32×32 images stored as 96×32, so that ddp.sh can train it
# on random data) at batch 128 (one GPU) and 256 (two GPUs, 128 each), of
# models/mnist.cue, the gzipped MNIST files, the PyTorch twins and ddp.sh.
# About 20 MiB, under the 64 MiB a call of the device tool carries.
# Usage: bench/gpu/ddp-bundle.sh [MNIST_DIR [DIR]]  (defaults data/mnist, .gpu/ddp; make ddp-bundle)
# There: bash DIR/ddp.sh DIR OUT       (DRY_RUN=1: print the commands only)
set -euo pipefail
cd "$(dirname "$0")/../.."
data=${1:-data/mnist} dir=${2:-.gpu/ddp}
scripts/fetch-mnist.sh "$data" >/dev/null
rm -rf "$dir" && mkdir -p "$dir/mnist"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
# The ResNet-18 spec with a dataset, at batch B: the spec's model and
# recipe unchanged (the file is rewritten here, so the two cannot drift).
r18() {
	local b=$1 out=$2
	awk -v b="$b" '
		/name: "resnet18_cifar"/ { sub(/resnet18_cifar/, "resnet18_cifar_b" b) }
		/batchSize: 128/ { sub(/128/, b) }
		{ lines[NR] = $0 }
		END {
			for (i = NR; i > 0 && lines[i] !~ /^}/; i--) {}
			for (j = 1; j < i; j++) print lines[j]
			print "\tdataset: {"
			print "\t\tformat:      \"idx\""
			print "\t\ttrainImages: \"train-images-idx3-ubyte\""
			print "\t\ttrainLabels: \"train-labels-idx1-ubyte\""
			print "\t\ttestImages:  \"t10k-images-idx3-ubyte\""
			print "\t\ttestLabels:  \"t10k-labels-idx1-ubyte\""
			print "\t\tclasses:     10"
			print "\t\timageShape: [3, 32, 32]"
			print "\t}"
			for (j = i; j <= NR; j++) print lines[j]
		}' bench/models/resnet18_cifar.cue >"$out"
	grep -q "batchSize: $b" "$out"
}
r18 128 "$tmp/resnet18_cifar_b128.cue"
r18 256 "$tmp/resnet18_cifar_b256.cue"
for spec in "$tmp/resnet18_cifar_b128.cue" "$tmp/resnet18_cifar_b256.cue" models/mnist.cue; do
	name=$(basename "$spec" .cue)
	GOOS=linux GOARCH=amd64 "$tmp/mlbuild" compile "$spec" --backend cuda --target linux/amd64 -o "$tmp/$name" --cache-dir "$tmp/cache" --force
	xz -6 -T0 -c "$tmp/$name" >"$dir/$name.xz"
done
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	gzip -6 -c "$data/$f" >"$dir/mnist/$f.gz"
done
cp bench/gpu/ddp.sh bench/gpu/torch_ddp_resnet.py bench/gpu/torch_resnet_cifar.py "$dir/"
echo "mlbuild $(git describe --always --dirty 2>/dev/null || echo unknown)" >"$dir/VERSION"
du -sh "$dir"
