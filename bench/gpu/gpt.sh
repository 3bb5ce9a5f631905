#!/usr/bin/env bash
# gpt.sh runs, on a GPU machine, what gpt-bundle.sh built (issue #31):
#  1. selftest of models/gpt.cue's CUDA programs (f32, bf16);
#  2. mlbuild trains models/gpt.cue on Moby-Dick on the GPU for EPOCHS
#     epochs (67 steps each: the training split's windows of 256 over the
#     batch of 64) with the spec's recipe, then evaluates the validation
#     split, and the CPU program generates 1,000 characters from those
#     weights with its KV cache (the README's sample);
#  3. PyTorch's twin trains the same model with the same recipe and steps
#     (fp32 eager: the quality row), then times 200 steps in each of its
#     configurations (fp32 eager, fp32 with SDPA, bf16 autocast + SDPA +
#     torch.compile), against the bf16 program's steps.
# Usage: bash gpt.sh BUNDLE OUT [EPOCHS]   (EPOCHS default 40)
# SELFTEST=0 skips 1 (selftest of this model checks every step against
# the CPU reference, minutes of the host's time at batch 64);
# TRAIN_SECONDS (default 0: no limit) interrupts training as Ctrl-C does,
# its checkpoint then holding the weights; TORCH_FULL=0 skips PyTorch's
# full-length quality run.
set -euo pipefail
b=$(cd "$1" && pwd) out=$2 epochs=${3:-40}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for p in cuda-f32 cuda-bf16 cpu; do xz -dc "$b/gpt-$p.xz" >"$out/gpt-$p" && chmod +x "$out/gpt-$p"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
steps=$((epochs * 67))
if [ "${SELFTEST:-1}" != 0 ]; then
	for p in cuda-f32 cuda-bf16; do
		echo "== selftest $p"
		"$out/gpt-$p" selftest 2>&1 | tail -n 3
	done
fi
echo "== mlbuild f32 train, $epochs epochs"
lim=()
[ "${TRAIN_SECONDS:-0}" = 0 ] || lim=(timeout -s INT "$TRAIN_SECONDS")
/usr/bin/time -f "wall %e s" "${lim[@]}" "$out/gpt-cuda-f32" train --data "$b/data" --epochs "$epochs" --out "$out/w.safetensors" \
	--metrics "$out/m-f32.jsonl" 2>&1 | grep -v "step " | tail -n 6 || true
[ -s "$out/w.safetensors" ] || cp "$out/w.ckpt.safetensors" "$out/w.safetensors"
grep '"event":"step"' "$out/m-f32.jsonl" | tail -n 1
"$out/gpt-cuda-f32" eval --data "$b/data" --weights "$out/w.safetensors" --json | tee "$out/eval-f32.json"
echo "== sample (CPU program, KV cache)"
start=$(date +%s.%N)
"$out/gpt-cpu" generate --weights "$out/w.safetensors" --prompt "Call me Ishmael." --tokens 1000 --temperature 0.8 \
	--top-k 200 --seed 1 --kv-cache >"$out/sample.txt"
end=$(date +%s.%N)
cat "$out/sample.txt"; echo
echo "1000 tokens in $(echo "$end - $start" | bc) s (16 cores, process start included)"
echo "== mlbuild bf16 train, 3 epochs (timing)"
"$out/gpt-cuda-bf16" train --data "$b/data" --epochs 3 --out "$out/w-bf16.safetensors" --metrics "$out/m-bf16.jsonl" 2>&1 | grep -v "step " | tail -n 3
cd "$b"
t=(python3 torch_gpt.py data/moby-dick.txt --vocab 89 --context 256 --width 384 --heads 6 --layers 6 --dropout 0.2 --tie
	--batch 64 --lr 1e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --warmup 100 --min-lr 1e-4 --device cuda)
if [ "${TORCH_FULL:-1}" != 0 ]; then
	echo "== PyTorch fp32 eager, $steps steps"
	"${t[@]}" --steps "$steps" | tee "$out/torch-f32.json"
fi
for mode in "" "--sdpa" "--bf16 --sdpa" "--bf16 --sdpa --compile"; do
	echo "== PyTorch $mode, 200 steps (timing)"
	"${t[@]}" --steps 200 --time-only $mode
done
