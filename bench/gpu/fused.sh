#!/usr/bin/env bash
# fused.sh runs, on a GPU machine, what fused-bundle.sh built:
#  1. selftest of the tiny ResNet's and CIFAR ResNet-18's bf16 and f32
#     CUDA programs (every step against its CPU reference);
#  2. CIFAR ResNet-18's training step and inference, this tree's programs
#     and BASE's alternating (ROUNDS rounds, bf16 and f32), then PyTorch's
#     twin (R18_MODES, default compile_ro_bf16,eager_fp32) in the same call;
#  3. the op profile of this tree's bf16 step (MLBUILD_CUDA_PROFILE=1: GPU
#     time between events around each op);
#  4. the step's cuDNN convolutions alone, as the programs call them (the
#     cuda package's TestRealConvResNet18Step), and PyTorch's calls on the
#     same shapes (conv_nhwc.py);
#  5. cuDNN's fused call on the inference's geometries (the cuda package's
#     TestRealConvEpilogue: bias+relu, bias+z+relu and bias alone against
#     the plain forward, checked and timed in graphs);
#  6. selftest of every valid test spec's and model's CUDA program
#     (selftest-all.sh; the bundle built with SELFTEST_ALL=1), each
#     within SELFTEST_LIMIT seconds (default 120).
# Usage: bash fused.sh BUNDLE OUT   (PARTS picks parts, default "1 2 3 4")
set -euo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
xz -dc "$b/programs.tar.xz" | tar -C "$work" -xf -
p=$work/st
cat "$b/VERSION"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for part in ${PARTS:-1 2 3 4}; do
	case $part in
	1)
		echo "== 1. selftest"
		for prog in tiny-bf16 r18-bf16-new r18-f32-new; do
			echo "-- $prog"
			timeout 300 "$p/$prog" selftest >"$out/selftest-$prog.txt" 2>&1 || true
			tail -n 1 "$out/selftest-$prog.txt"
			grep -iE 'FAIL|error' "$out/selftest-$prog.txt" | head -n 10 || true
		done
		;;
	2)
		echo "== 2. training step and inference, this tree against base"
		for r in $(seq "${ROUNDS:-2}"); do
			for prog in r18-bf16-new r18-bf16-base r18-f32-new r18-f32-base; do
				echo "-- round $r $prog"
				timeout 240 "$p/$prog" bench --json --iters 20 2>&1 | tail -n 1
			done
		done
		(cd "$b" && PYTHONUNBUFFERED=1 timeout 300 python3 torch_resnet_cifar.py ${R18_MODES:-compile_ro_bf16,eager_fp32} 2>&1 | grep -v Warning | tail -n 4)
		;;
	3)
		echo "== 3. profile of this tree's bf16 step"
		(MLBUILD_CUDA_PROFILE=1 timeout 240 "$p/r18-bf16-new" bench --iters 5 2>&1 | grep -v '^{' | tee "$out/profile.txt" | head -n 100) || true
		;;
	4)
		echo "== 4. the step's cuDNN convolutions alone, mlbuild's calls and PyTorch's"
		(cd "$p" && MLBUILD_CUDA_REAL=1 timeout 240 ./cudatest -test.run 'TestRealConvResNet18Step' -test.v 2>&1 | grep -E 'real_test|^(--- |ok|FAIL|PASS)' | tail -n 20) || true
		(cd "$b" && PYTHONUNBUFFERED=1 timeout 200 python3 conv_nhwc.py 2>&1 | grep -v Warning | tail -n 14) || true
		;;
	5)
		echo "== 5. cuDNN's fused epilogue on the inference's convolutions"
		(cd "$p" && MLBUILD_CUDA_REAL=1 timeout 240 ./cudatest -test.run 'TestRealConvEpilogue' -test.v 2>&1 | grep -E 'real_test|^(--- |ok|FAIL|PASS)' | tail -n 60) || true
		;;
	6)
		echo "== 6. selftest of every valid test spec and model"
		if [ -d "$p/all/selftest" ]; then
			SELFTEST_LIMIT=${SELFTEST_LIMIT:-120} bash "$b/selftest-all.sh" "$p/all" 2>&1 | tee "$out/selftest-all.txt" | grep -vE '^[0-9]+ passed' || true
		else
			echo "no programs: build the bundle with SELFTEST_ALL=1"
		fi
		;;
	esac
done
