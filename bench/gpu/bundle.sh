#!/usr/bin/env bash
# bundle.sh builds, on a machine with Go and no GPU, everything the GPU run
# needs into one folder (default .gpu/, which git ignores): the CUDA programs
# of models/mnist.cue, LeNet-5 and the MLP (linux/amd64, CGO_ENABLED=0), the
# gzipped MNIST files, the PyTorch reference and run.sh. Copy that folder to
# a Linux machine with an NVIDIA GPU and its driver (no Go, no CUDA toolkit
# needed for mlbuild's programs) and run `DIR/run.sh DIR OUTDIR` there: it
# runs selftest (of every valid test spec and model, selftest-all.sh), trains models/mnist.cue with its own settings, and measures
# the three models against PyTorch eager and torch.compile in one run.
# Usage: bench/gpu/bundle.sh [DIR]        (make cuda-bundle)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu}
rm -rf "$dir/bin" "$dir/mnist"
mkdir -p "$dir/bin" "$dir/mnist"
scripts/fetch-mnist.sh data/mnist >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/mlbuild" ./cmd/mlbuild
for spec in models/mnist.cue bench/models/lenet5.cue bench/models/mlp.cue; do
	name=$(basename "$spec" .cue)
	"$tmp/mlbuild" compile "$spec" --backend cuda --target linux/amd64 -o "$dir/bin/$name" --cache-dir "$tmp/cache" --force
done
"$tmp/mlbuild" compile models/mnist.cue --backend cpu --target linux/amd64 -o "$dir/bin/mnist-cpu" --cache-dir "$tmp/cache" --force
# the CUDA program of every valid test spec and every model, for selftest-all.sh;
# a spec that does not compile is listed in selftest/COMPILE-FAILED and run.sh says so
rm -rf "$dir/selftest"
mkdir -p "$dir/selftest"
for spec in testdata/specs/valid/*.cue models/*.cue; do
	name=$(basename "$spec" .cue)
	case $spec in models/*) name=model_$name ;; esac
	if ! "$tmp/mlbuild" compile "$spec" --backend cuda --target linux/amd64 -o "$dir/selftest/$name" --cache-dir "$tmp/cache" --force >"$tmp/compile.log" 2>&1; then
		echo "$spec: $(tail -n 1 "$tmp/compile.log")" >>"$dir/selftest/COMPILE-FAILED"
	fi
done
# the cuda package's tests, whose Real cases run on the GPU (the conformance suite among them)
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$dir/bin/cuda.test" ./cuda
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	gzip -c "data/mnist/$f" >"$dir/mnist/$f.gz"
done
cp bench/gpu/torch_gpu_mnist.py bench/gpu/run.sh bench/gpu/selftest-all.sh bench/gpu/gemm_algos.cu "$dir/"
echo "mlbuild $(git describe --always --dirty 2>/dev/null || echo unknown)" >"$dir/VERSION"
du -sh "$dir"
