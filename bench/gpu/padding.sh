#!/usr/bin/env bash
# padding.sh runs, on a GPU machine, what padding-bundle.sh built:
#  1. selftest of the padded GPTs' CUDA programs (gpt_tiny_pad: every
#     step against the CPU reference and every gradient against finite
#     differences, with the padding id at the end of a sample, at its
#     start, in the middle and alone; gpt_moby_docs at batch 16);
#  2. gpt_moby_docs trained for EPOCHS (default 2) on Moby-Dick's
#     paragraphs on the GPU and, the same recipe and seed, by its CPU
#     program on the host: the validation losses side by side, and text
#     the GPU program generates, ending where it draws the padding id;
#  3. models/gpt.cue's and CIFAR ResNet-18's training steps (bench, median
#     of ITERS, default 20) in f32 and bf16, this tree's program and BASE's
#     alternating ROUNDS times (default 3): padding masks must not slow
#     the unpadded models. PARTS (default "1 2 3") picks the parts.
# Usage: bash padding.sh BUNDLE OUT
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
cat "$b/VERSION"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
work=$(mktemp -d) # the programs and weights, left out of OUT
trap 'rm -rf "$work"' EXIT
xz -dc "$b/programs.tar.xz" | tar -C "$work" -xf -
p=$work/st
want() { [[ " ${PARTS:-1 2 3} " == *" $1 "* ]]; }
if want 1; then
echo "== 1. selftest"
for prog in tiny-pad-cuda docs-cuda; do
	echo "-- $prog"
	timeout 600 "$p/$prog" selftest | tail -n 4
done
fi
if want 2; then
echo "== 2. gpt_moby_docs, ${EPOCHS:-2} epochs, GPU and host CPU"
for prog in docs-cuda docs-cpu; do
	echo "-- $prog"
	timeout 900 "$p/$prog" train --data "$b/data" --epochs "${EPOCHS:-2}" --seed 1 --out "$work/$prog.safetensors" --quiet | tail -n 2
	timeout 300 "$p/$prog" eval --data "$b/data" --weights "$work/$prog.safetensors" --json
done
for seed in 1 2 3; do
	echo "-- docs-cuda generate --seed $seed"
	timeout 300 "$p/docs-cuda" generate --weights "$work/docs-cuda.safetensors" --prompt "Call me" --tokens 2000 --temperature 0.8 --top-k 20 --seed "$seed" | head -c 3000
	echo "[exit ${PIPESTATUS[0]}]"
done
fi
if want 3; then
echo "== 3. models/gpt.cue's and CIFAR ResNet-18's steps, this tree against base"
for r in $(seq "${ROUNDS:-3}"); do
	for m in gpt r18; do
		for prec in f32 bf16; do
			for who in mlbuild mlbuild-base; do
				ms=$(timeout 300 "$p/$m-$prec-$who" bench --iters "${ITERS:-20}" --json | tr ',' '\n' | grep -i '"train' | head -n 1)
				echo "round $r $m $prec $who $ms"
			done
		done
	done
done
fi
