#!/usr/bin/env bash
# bf16conv.sh runs, on a GPU machine, what bf16conv-bundle.sh built:
#  1. the cuda package's real tests of bfloat16 library convolutions
#     (the conformance suite's ConvBF16 case, ResNet-18's layer timed);
#  2. selftest of the tiny ResNet's and CIFAR ResNet-18's bf16 CUDA
#     programs (every step against its float32 reference);
#  3. CIFAR ResNet-18's bf16 training step, this tree's program and
#     BASE's alternating (ROUNDS rounds), then PyTorch's twin
#     (R18_MODES, default compile_ro_bf16,eager_tf32) in the same call.
# Usage: bash bf16conv.sh BUNDLE OUT   (PARTS picks parts, default "1 2 3")
set -euo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
xz -dc "$b/programs.tar.xz" | tar -C "$work" -xf -
p=$work/st
cat "$b/VERSION"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for part in ${PARTS:-1 2 3}; do
	case $part in
	1)
		echo "== 1. cuda real tests"
		(cd "$p" && MLBUILD_CUDA_REAL=1 timeout 240 ./cudatest -test.run 'TestReal(Conformance|ConvResNet)' -test.v 2>&1 | grep -E '^(--- |PASS|FAIL|ok)|    --- FAIL|real_test|conv.go' | tail -n 40) || true
		;;
	2)
		echo "== 2. selftest"
		for prog in tiny-bf16 r18-bf16-new; do
			echo "-- $prog"
			timeout 300 "$p/$prog" selftest >"$out/selftest-$prog.txt" 2>&1 || true
			tail -n 3 "$out/selftest-$prog.txt"
			grep -iE 'FAIL|error' "$out/selftest-$prog.txt" | head -n 10 || true
		done
		;;
	3)
		echo "== 3. training step, this tree against base"
		for r in $(seq "${ROUNDS:-2}"); do
			for prog in r18-bf16-new r18-bf16-base; do
				echo "-- round $r $prog"
				timeout 240 "$p/$prog" bench --json --iters 20 2>&1 | tail -n 1
			done
		done
		(cd "$b" && PYTHONUNBUFFERED=1 timeout 300 python3 torch_resnet_cifar.py ${R18_MODES:-compile_ro_bf16,eager_tf32} 2>&1 | grep -v Warning | tail -n 4)
		;;
	esac
done
