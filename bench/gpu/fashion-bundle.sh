#!/usr/bin/env bash
# fashion-bundle.sh builds here (Go, no GPU) the folder that fashion.sh runs
# on a GPU machine for issue #28's accuracy goal: the CUDA programs of
# bench/models/resnet18_fashion.cue in f32 and in bf16 (the same spec with
# precision: "bf16" set here, so the two cannot drift apart), the four
# Fashion-MNIST IDX files (gzipped, from make data-fashion's folder) and the
# PyTorch twin. About 45 MiB, under the 64 MiB a call of the device tool
# carries.
# With them models/mnist.cue in f32 and bf16 and MNIST (fashion.sh's MNIST=1).
# Usage: bench/gpu/fashion-bundle.sh [FASHION_DIR [DIR]]  (defaults data/fashion, .gpu/fashion)
# There: bash DIR/fashion.sh DIR OUT [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/../.."
data=${1:-data/fashion} dir=${2:-.gpu/fashion}
rm -rf "$dir" && mkdir -p "$dir/data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -o "$tmp/mlbuild" ./cmd/mlbuild
spec=bench/models/resnet18_fashion.cue
sed -e 's/name: "resnet18_fashion"/name: "resnet18_fashion_bf16"\n\tprecision: "bf16"/' "$spec" >"$tmp/resnet18_fashion_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/resnet18_fashion_bf16.cue"
"$tmp/mlbuild" compile "$spec" --backend cuda --target linux/amd64 -o "$tmp/f32" --cache-dir "$tmp/cache" --force
"$tmp/mlbuild" compile "$tmp/resnet18_fashion_bf16.cue" --backend cuda --target linux/amd64 -o "$tmp/bf16" --cache-dir "$tmp/cache" --force
for p in f32 bf16; do xz -6 -T0 -c "$tmp/$p" >"$dir/r18f-$p.xz"; done
# models/mnist.cue and its bf16 twin (made here as above), with MNIST, for
# fashion.sh's MNIST=1
sed -e 's/\tname: "mnist"/\tname:      "mnist_bf16"\n\tprecision: "bf16"/' models/mnist.cue >"$tmp/mnist_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/mnist_bf16.cue"
"$tmp/mlbuild" compile models/mnist.cue --backend cuda --target linux/amd64 -o "$tmp/mnist-f32" --cache-dir "$tmp/cache" --force
"$tmp/mlbuild" compile "$tmp/mnist_bf16.cue" --backend cuda --target linux/amd64 -o "$tmp/mnist-bf16" --cache-dir "$tmp/cache" --force
for p in f32 bf16; do xz -6 -T0 -c "$tmp/mnist-$p" >"$dir/mnist-$p.xz"; done
mkdir -p "$dir/mnist"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	gzip -6 -c "data/mnist/$f" >"$dir/mnist/$f.gz"
done
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	gzip -6 -c "$data/$f" >"$dir/data/$f.gz"
done
(cd "$data" && md5sum train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte) >"$dir/data/MD5SUMS"
cp bench/gpu/fashion.sh bench/gpu/torch_resnet_fashion.py bench/gpu/torch_resnet_cifar.py "$dir/"
du -sh "$dir"
