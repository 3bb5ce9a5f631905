#!/usr/bin/env bash
# bundle.sh builds, on a machine with Go, what the bf16 measurement needs on
# a machine whose CPU has Intel AMX (this repository's own CPU does not):
# the CPU programs of the benchmark MLP in float32 and in bf16
# (bench/models/mlp.cue, mlp_bf16.cue) and of models/mnist.cue in both, the
# model benchmark's driver (bench/models) and PyTorch worker, rt/cpu's tests,
# the gzipped MNIST files and run.sh, into one folder (default .gpu/bf16,
# which git ignores). On the AMX machine, `DIR/run.sh DIR` checks the AMX
# path, trains each model in both precisions and evaluates it, and compares
# training and inference with PyTorch (float32, and autocast to bfloat16)
# on 1 and 2 cores in one run. Usage: bench/bf16/bundle.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu/bf16}
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/mnist"
scripts/fetch-mnist.sh data/mnist >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/mlbuild" ./cmd/mlbuild
# models/mnist.cue with precision "bf16": the same spec, its dense layers on bfloat16
sed -e 's/^\tname: "mnist"/\tname:      "mnist_bf16"\n\tprecision: "bf16"/' models/mnist.cue >"$tmp/mnist_bf16.cue"
grep -q 'precision: "bf16"' "$tmp/mnist_bf16.cue"
for spec in bench/models/mlp.cue bench/models/mlp_bf16.cue models/mnist.cue "$tmp/mnist_bf16.cue"; do
	"$tmp/mlbuild" compile "$spec" --backend cpu --target linux/amd64 -o "$dir/bin/$(basename "$spec" .cue)" --cache-dir "$tmp/cache" --force >/dev/null
done
"$tmp/mlbuild" plan bench/models/mlp_bf16.cue >"$dir/plan-mlp_bf16.txt"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -o "$dir/bin/models" ./bench/models
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$dir/bin/cpu.test" ./rt/cpu
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	gzip -c "data/mnist/$f" >"$dir/mnist/$f.gz"
done
cp bench/models/torch_models.py bench/bf16/run.sh "$dir/"
echo "mlbuild $(git describe --always --dirty 2>/dev/null || echo unknown)" >"$dir/VERSION"
du -sh "$dir"
