#!/bin/sh
# sgemm.sh prints sgemm GFLOP/s of mlbuild's rt/cpu.Sgemm, OpenBLAS (C
# driver) and PyTorch CPU side by side, on 1 thread and on all cores, from
# one run (see bench/sgemm/main.go). Extra arguments go to the driver, e.g.
#   bench/sgemm.sh -sizes 256,512 -reps 5
# OpenBLAS is the OpenMP build selected with LD_LIBRARY_PATH, so that its
# pool and PyTorch's are libgomp's one pool (see /work/shared/BENCHMARKS.md).
set -eu
cd "$(dirname "$0")/.."
bench/setup.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
blasdir=/usr/lib/$(gcc -print-multiarch)/openblas-openmp
gcc -O2 -o "$tmp/openblas_worker" bench/sgemm/workers/openblas_worker.c -lopenblas
go build -o "$tmp/sgemm" ./bench/sgemm
export LD_LIBRARY_PATH="$blasdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$tmp/sgemm" -openblas "$tmp/openblas_worker" -torch "/usr/bin/python3 bench/sgemm/workers/torch_worker.py" "$@"
