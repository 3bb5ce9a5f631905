#!/bin/sh
# models.sh measures three MNIST models compiled by mlbuild (an MLP
# 784-512-256-10, LeNet-5 and models/mnist.cue) against the same
# architectures in PyTorch CPU: training epoch time (batch 250, Adam lr 1e-3),
# inference at batch 250 and latency at batch 1, on 1 thread and on all
# cores, from one run, as a Markdown table with ratios (see
# bench/models/main.go). Extra arguments go to the driver, e.g.
#   bench/models.sh -reps 5 -epoch-reps 3
#   bench/models.sh -limit 5000 -reps 1 -epoch-reps 1   (a quick check)
# PyTorch is Debian's python3-torch on /usr/bin/python3 with the OpenMP build
# of OpenBLAS selected by LD_LIBRARY_PATH, so that its pool and torch's are
# libgomp's one pool (see /work/shared/BENCHMARKS.md). It takes about ten
# minutes on two cores.
set -eu
cd "$(dirname "$0")/.."
bench/setup.sh
scripts/fetch-mnist.sh data/mnist >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/mlbuild" ./cmd/mlbuild
for m in mlp lenet5; do
	"$tmp/mlbuild" compile "bench/models/$m.cue" -o "$tmp/$m" >/dev/null
done
"$tmp/mlbuild" compile models/mnist.cue -o "$tmp/mnist" >/dev/null
blasdir=/usr/lib/$(gcc -print-multiarch)/openblas-openmp
export LD_LIBRARY_PATH="$blasdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
go build -o "$tmp/models" ./bench/models
. bench/openblas-coretype.sh
echo "command: bench/models.sh $*"
echo "mlbuild: $(git describe --always --dirty 2>/dev/null || echo unknown), $(go version)"
"$tmp/models" -bin "$tmp" -torch "/usr/bin/python3 bench/models/torch_models.py" -data data/mnist "$@"
