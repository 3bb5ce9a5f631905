#!/bin/sh
# sgemm.sh prints sgemm GFLOP/s of mlbuild's rt/cpu.Sgemm, OpenBLAS (C
# driver) and PyTorch CPU side by side, on 1 thread and on all cores, from
# one run (see bench/sgemm/main.go). Extra arguments go to the driver, e.g.
#   bench/sgemm.sh -sizes 256,512 -reps 5
# With SGEMM_BOOST=1 (root only) the run gets its own session at autogroup
# nice -15, so that other work on a shared machine disturbs all three
# implementations less; it is printed with the results.
# OpenBLAS is the OpenMP build selected with LD_LIBRARY_PATH, so that its
# pool and PyTorch's are libgomp's one pool (see /work/shared/BENCHMARKS.md).
# With SGEMM_BASE=<git revision> mlbuild's Sgemm at that revision runs too,
# as the column "base", alternated sample by sample with the others, e.g.
#   SGEMM_BASE=main bench/sgemm.sh -sizes 128,256 -thread-counts 2
set -eu
cd "$(dirname "$0")/.."
if [ "${SGEMM_BOOST:-}" = 1 ] && [ -z "${SGEMM_BOOSTED:-}" ]; then
	exec env SGEMM_BOOSTED=1 setsid sh -c 'echo -15 >/proc/self/autogroup && echo "sgemm.sh: autogroup $(cat /proc/self/autogroup)" && exec nice -n -15 "$0" "$@"' "$0" "$@"
fi
bench/setup.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
blasdir=/usr/lib/$(gcc -print-multiarch)/openblas-openmp
gcc -O2 -o "$tmp/openblas_worker" bench/sgemm/workers/openblas_worker.c -lopenblas
go build -o "$tmp/sgemm" ./bench/sgemm
base=""
if [ -n "${SGEMM_BASE:-}" ]; then
	mkdir "$tmp/base"
	git archive "$SGEMM_BASE" | tar -x -C "$tmp/base"
	(cd "$tmp/base" && go build -o "$tmp/sgemm-base" ./bench/sgemm)
	echo "base: $(git rev-parse --short "$SGEMM_BASE") ($SGEMM_BASE)"
	base="$tmp/sgemm-base"
fi
export LD_LIBRARY_PATH="$blasdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. bench/openblas-coretype.sh
"$tmp/sgemm" -openblas "$tmp/openblas_worker" -torch "/usr/bin/python3 bench/sgemm/workers/torch_worker.py" -base "$base" "$@"
