#!/usr/bin/env bash
# profile.sh runs, on a GPU machine, what profile-bundle.sh built: for each
# program, bench's medians (training step, inference), then a few steps
# again with MLBUILD_CUDA_PROFILE=1, whose table says which ops take the
# step's time; then PyTorch's twins' steps in fp32 and in bf16 (autocast;
# channels_last for the ResNet, scaled_dot_product_attention for the GPT),
# eager and compiled, in the same call. TORCH=0 skips PyTorch; R18_MODES
# picks torch_resnet_cifar.py's modes (default eager_fp32,eager_bf16,
# compile_ro_bf16,eager_tf32); GPT_MODES picks torch_gpt.py's modes, ;-separated
# (default: fp32 eager, fp32 + SDPA, fp32 + SDPA compiled, bf16 + SDPA,
# bf16 + SDPA compiled); PROGS picks the programs (default r18-f32
# r18-tf32 r18-bf16 gpt-f32 gpt-bf16); LINES how many lines of each profile to print (36);
# COLD=1 first times each program's kernel compile on an empty kernel cache,
# one part at a time (MLBUILD_NVRTC_JOBS=1) and on every core (info's kernels line).
# Usage: bash profile.sh BUNDLE OUT
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
export MLBUILD_CUDA_CACHE=$work/kernels
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" && chmod +x "$2"; }
echo "mlbuild $(cat "$b/VERSION")"; nvidia-smi -L
for p in ${PROGS:-r18-f32 r18-tf32 r18-bf16 gpt-f32 gpt-bf16}; do
	unxz "$b/$p.xz" "$work/$p"
	if [ "${COLD:-0}" = 1 ]; then # the kernels' cold start: NVRTC on an empty cache, one part at a time, then side by side
		for jobs in 1 0; do
			echo "== $p: cold start, MLBUILD_NVRTC_JOBS=$jobs (0: every core)"
			MLBUILD_NVRTC_JOBS=$jobs MLBUILD_CUDA_CACHE=$(mktemp -d -p "$work") timeout 300 "$work/$p" info 2>&1 | grep -E '^ *kernels' || echo "(no kernels line)"
		done
	fi
	echo; echo "== $p: bench"
	timeout 240 "$work/$p" bench --json --iters 20 2>&1 | tee "$out/$p-bench.json" | tail -n 2
	echo "== $p: profile (5 iterations)"
	MLBUILD_CUDA_PROFILE=1 timeout 240 "$work/$p" bench --iters 5 2>"$out/$p-profile.txt" >/dev/null
	head -n "${LINES:-36}" "$out/$p-profile.txt"
done
[ "${TORCH:-1}" = 0 ] && exit 0
if [ "${TORCH_R18:-1}" != 0 ]; then
	echo; echo "== PyTorch ResNet-18"
	(cd "$b" && PYTHONUNBUFFERED=1 timeout 300 python3 torch_resnet_cifar.py ${R18_MODES:-eager_fp32,eager_bf16,compile_ro_bf16,eager_tf32} 2>&1 | grep -v Warning | tee "$out/r18-torch.jsonl" | tail -n 8)
fi
[ "${TORCH_GPT:-1}" = 0 ] && exit 0
t=(python3 torch_gpt.py moby-dick.txt --vocab 89 --context 256 --width 384 --heads 6 --layers 6 --dropout 0.2 --tie
	--batch 64 --lr 1e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --warmup 100 --min-lr 1e-4 --device cuda)
IFS=';' read -r -a modes <<<"${GPT_MODES:-fp32;--sdpa;--sdpa --compile;--bf16 --sdpa;--bf16 --sdpa --compile}"
for mode in "${modes[@]}"; do
	[ "$mode" = fp32 ] && mode=""
	echo "== PyTorch GPT $mode, 100 steps (timing)"
	(cd "$b" && timeout 200 "${t[@]}" --steps 100 --time-only $mode 2>&1 | grep -v Warning | tail -n 3)
done
