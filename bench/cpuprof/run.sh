#!/usr/bin/env bash
# run.sh runs, on the machine to profile, what build.sh built: each
# program's bench (--iters ITERS, default 2) on CORES cores (default "1 2",
# pinned with taskset) with a CPU profile, then rt/cpu's GEMM benchmarks
# for the GPT's shapes and, with MLBUILD_WANT_AMX=1, its BF16 tests.
# PROGS (default: every program in the bundle) picks the programs.
# Usage: bash run.sh BUNDLE OUT
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out" && out=$(cd "$out" && pwd)
echo "mlbuild $(cat "$b/VERSION")"
lscpu | grep -E '^(Model name|CPU\(s\))'
grep -o 'amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
cpus() { [ "$1" = 1 ] && echo 0 || echo "0-$(($1 - 1))"; }
progs=${PROGS:-$(cd "$b" && ls | grep -v -e '\.sh$' -e '\.test$' -e VERSION)}
for p in $progs; do
	for t in ${CORES:-1 2}; do
		echo "== $p on $t cores"
		/usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KB" env GOMAXPROCS=$t PPROF_OUT="$out/$p-t$t.prof" \
			taskset -c "$(cpus $t)" "$b/$p" bench --json --iters "${ITERS:-2}" --threads $t 2>&1 | tail -n 2
	done
done
if [ "${GEMM:-1}" = 1 ]; then
	echo "== rt/cpu: the BF16 tests (MLBUILD_WANT_AMX=1)"
	MLBUILD_WANT_AMX=1 taskset -c 0-1 "$b/cpu.test" -test.run 'BF16|AMX' 2>&1 | tail -n 5
	echo "== rt/cpu: BenchmarkGemmGPT"
	taskset -c 0-1 "$b/cpu.test" -test.run '^$' -test.bench 'GemmGPT|AMXParts' -test.benchtime 3x 2>&1 | grep -E 'Benchmark|ok|FAIL'
fi
