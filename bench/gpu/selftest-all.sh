#!/usr/bin/env bash
# selftest-all.sh runs, on a Linux machine with an NVIDIA GPU, the selftest
# of every CUDA program in BUNDLE/selftest/ (bundle.sh compiles one for each
# spec of testdata/specs/valid/ and models/): each plan step on the GPU
# against its CPU reference, and every GEMM shape. It prints each program's
# summary line and its failing rows, names the specs that did not compile,
# and exits 1 when any program failed, did not compile or did not finish
# within SELFTEST_LIMIT seconds (default 300: models/gpt.cue's checks every
# step at batch 64×256 against the CPU and takes longer; such a program is
# counted apart, as timed out, neither passed nor failed).
# Usage: selftest-all.sh BUNDLE       (run.sh calls it)
set -uo pipefail
b=$(cd "${1:?usage: selftest-all.sh BUNDLE}" && pwd)
if [ ! -d "$b/selftest" ]; then
	echo "selftest-all: $b/selftest is missing: build the bundle with bench/gpu/bundle.sh" >&2
	exit 2
fi
failed=0 passed=0 slow=0
for p in "$b"/selftest/*; do
	[ -x "$p" ] && [ -f "$p" ] || continue
	name=$(basename "$p")
	echo "== $name"
	res=$(timeout -k 10 "${SELFTEST_LIMIT:-300}" "$p" selftest 2>&1); rc=$?
	echo "$res" | grep -E 'FAIL|^[0-9]+ passed' | head -n 20
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		echo "TIMED OUT after ${SELFTEST_LIMIT:-300} s"
		slow=$((slow + 1))
	elif [ "$rc" -ne 0 ]; then
		failed=$((failed + 1))
		[ -n "$(echo "$res" | grep -E '^[0-9]+ passed')" ] || echo "$res" | tail -n 5
	else
		passed=$((passed + 1))
	fi
done
if [ -s "$b/selftest/COMPILE-FAILED" ]; then
	echo "COMPILE-FAILED (no program to test):"
	sed 's/^/  /' "$b/selftest/COMPILE-FAILED"
	failed=$((failed + $(wc -l <"$b/selftest/COMPILE-FAILED")))
fi
echo "selftest-all: $passed programs passed, $failed failed, $slow timed out"
[ "$failed" -eq 0 ] && [ "$slow" -eq 0 ]
