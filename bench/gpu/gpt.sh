#!/usr/bin/env bash
# gpt.sh runs, on a GPU machine, what gpt-bundle.sh built (issue #31):
#  1. selftest of models/gpt.cue's CUDA programs (f32, bf16);
#  2. mlbuild trains models/gpt.cue on Moby-Dick on the GPU for EPOCHS
#     epochs (67 steps each: the training split's windows of 256 over the
#     batch of 64) with the spec's recipe, then evaluates the validation
#     split, and the CPU program generates 1,000 characters from those
#     weights with its KV cache (the README's sample);
#  3. generation at batch 1: `generate --tokens 1000` (greedy) of the f32
#     CUDA program with its KV cache (one CUDA graph a token) and without
#     (a forward pass over the window a token), against PyTorch's eager
#     KV-cache loop of the same shape on the same GPU (torch_kv.py
#     --device cuda --jump: the same window rule, ids to the host each
#     token), side by side with their ratio; then the same on the CPU, one
#     thread (GEN_CPU=0 skips it). mlbuild's time is that of 1,001 tokens
#     less that of 1 (process start, weights and kernels left out);
#  4. PyTorch's twin trains the same model with the same recipe and steps
#     (fp32 eager: the quality row), then times 200 steps in each of its
#     configurations (fp32 eager, fp32 with SDPA, bf16 autocast + SDPA +
#     torch.compile), against the bf16 program's steps.
# Usage: bash gpt.sh BUNDLE OUT [EPOCHS]   (EPOCHS default 40)
# SELFTEST=0 skips 1 (selftest of this model checks every step against
# the CPU reference, minutes of the host's time at batch 64);
# TRAIN_SECONDS (default 0: no limit) interrupts training as Ctrl-C does,
# its checkpoint then holding the weights; TORCH_FULL=0 skips PyTorch's
# full-length quality run. GEN_TOKENS (default 1000) sets part 3's
# length: at thousands of tokens a second, a thousand take less time than
# a process's start varies (0.1 s), so 10000 measures the rate better.
# QUALITY_ONLY=1 runs the quality rows alone (mlbuild f32 and PyTorch
# fp32 for each seed of SEEDS, default 1; TORCH_FULL=0 leaves PyTorch
# out; SAMPLE=1 then writes the README's sample from the first seed's
# weights with the CPU program); QUALITY_PRECISION=bf16 trains mlbuild's
# bf16 program instead of its f32 one, and QUALITY_TORCH adds flags to
# PyTorch's run (e.g. "--bf16 --sdpa": bf16 autocast, its fused attention). GEN_ONLY=1 runs 3 alone, on the weights of one
# training step on 64 windows (generation's speed does not depend on
# them): a few minutes. Every command runs under a time limit
# (LIMIT seconds, default 3600; generation's GEN_LIMIT, default 600).
set -euo pipefail
b=$(cd "$1" && pwd) out=$2 epochs=${3:-40}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for p in cuda-f32 cuda-bf16 cpu; do xz -dc "$b/gpt-$p.xz" >"$out/gpt-$p" && chmod +x "$out/gpt-$p"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
steps=$((epochs * 67))
lim=${LIMIT:-3600} glim=${GEN_LIMIT:-600}
to() { timeout -k 30 "$lim" "$@"; }

# generation runs part 3 (see the top).
generation() {
	local w=$1 g=$out/gen
	mkdir -p "$g"
	local n=${GEN_TOKENS:-1000}
	echo "== generation at batch 1: $n tokens, greedy, the window jumping by half past the context"
	# run NAME ARGS...: times one generate of 1 and one of n+1 tokens and
	# prints NAME's tokens/s from the difference ("failed" on an error or
	# a time-out), after an untimed one of 1 token (which fills the CUDA
	# program's kernel cache, so both timed runs start alike).
	run() {
		local name=$1 t0 t1 t2
		shift
		timeout -k 10 "$glim" "$@" --tokens 1 >"$g/$name-warm.txt" 2>&1 || { echo "$name: failed (exit $?): $(tail -n 2 "$g/$name-warm.txt")"; return 0; }
		t0=$(date +%s.%N)
		timeout -k 10 "$glim" "$@" --tokens 1 >"$g/$name-1.txt" 2>&1 || { echo "$name: failed (exit $?): $(tail -n 2 "$g/$name-1.txt")"; return 0; }
		t1=$(date +%s.%N)
		timeout -k 10 "$glim" "$@" --tokens $((n + 1)) >"$g/$name-1001.txt" 2>&1 || { echo "$name: failed (exit $?): $(tail -n 2 "$g/$name-1001.txt")"; return 0; }
		t2=$(date +%s.%N)
		echo "$t0 $t1 $t2" | awk -v n="$name" -v k="$n" '{d = ($3 - $2) - ($2 - $1); printf "%s: %d tokens in %.3f s, %.1f tokens/s (%d tokens %.3f s, 1 token %.3f s)\n", n, k, d, (d > 0 ? k / d : 0), k + 1, $3 - $2, $2 - $1}' | tee "$g/$name.rate"
	}
	ratio() { # ratio A B: A's tokens/s over B's
		local a b
		a=$(grep -o '[0-9.]* tokens/s' "$g/$1.rate" 2>/dev/null | head -n 1 | cut -d' ' -f1) || true
		b=$(grep -o '[0-9.]* tokens/s' "$g/$2.rate" 2>/dev/null | head -n 1 | cut -d' ' -f1) || true
		if [ -n "$a" ] && [ -n "$b" ]; then
			echo "$a $b" | awk -v A="$1" -v B="$2" '{printf "%s / %s: %.2fx (goal: 2x or more)\n", A, B, ($2 > 0 ? $1 / $2 : 0)}'
		else
			echo "$1 / $2: no ratio (a run failed)"
		fi
	}
	gen=(generate --weights "$w" --prompt "Call me Ishmael." --temperature 0 --seed 1)
	run mlbuild-cuda "$out/gpt-cuda-f32" "${gen[@]}" --kv-cache
	run mlbuild-cuda-nocache "$out/gpt-cuda-f32" "${gen[@]}" --kv-cache=false
	if cmp -s "$g/mlbuild-cuda-1001.txt" "$g/mlbuild-cuda-nocache-1001.txt"; then
		echo "the CUDA program's text is the same with its KV cache and without"
	else
		echo "the CUDA program's text differs with its KV cache and without (first bytes: $(head -c 60 "$g/mlbuild-cuda-1001.txt" | tr '\n' ' ') | $(head -c 60 "$g/mlbuild-cuda-nocache-1001.txt" | tr '\n' ' '))"
	fi
	if timeout -k 10 "$glim" python3 "$b/torch_kv.py" "$n" 16 1 --device cuda --jump >"$g/torch-cuda.txt" 2>&1; then
		sed -n 's/.* \([0-9.]* tokens\/s\).*/pytorch-cuda: \1/p' "$g/torch-cuda.txt" >"$g/pytorch-cuda.rate"
	fi
	cat "$g/torch-cuda.txt"
	ratio mlbuild-cuda pytorch-cuda
	if [ "${GEN_CPU:-1}" != 0 ]; then
		(export GOMAXPROCS=1; run mlbuild-cpu "$out/gpt-cpu" "${gen[@]}" --kv-cache)
		if timeout -k 10 "$glim" python3 "$b/torch_kv.py" "$n" 16 1 --jump >"$g/torch-cpu.txt" 2>&1; then
			sed -n 's/.* \([0-9.]* tokens\/s\).*/pytorch-cpu: \1/p' "$g/torch-cpu.txt" >"$g/pytorch-cpu.rate"
		fi
		cat "$g/torch-cpu.txt"
		ratio mlbuild-cpu pytorch-cpu
		if cmp -s "$g/mlbuild-cuda-1001.txt" "$g/mlbuild-cpu-1001.txt"; then
			echo "the CUDA and CPU programs' greedy texts are the same"
		else
			echo "the CUDA and CPU programs' greedy texts differ (floating-point order; first bytes: $(head -c 60 "$g/mlbuild-cuda-1001.txt" | tr '\n' ' ') | $(head -c 60 "$g/mlbuild-cpu-1001.txt" | tr '\n' ' '))"
		fi
	fi
}

if [ "${GEN_ONLY:-0}" = 1 ]; then
	echo "== weights: one training step on 64 windows"
	to "$out/gpt-cuda-f32" train --data "$b/data" --limit 64 --epochs 1 --out "$out/w-gen.safetensors" --quiet
	generation "$out/w-gen.safetensors"
	exit 0
fi
if [ "${QUALITY_ONLY:-0}" = 1 ]; then
	# The quality rows alone: for each seed of SEEDS (default 1), mlbuild
	# (f32, or QUALITY_PRECISION's) trains EPOCHS epochs and evaluates the validation split, then
	# PyTorch fp32 eager trains the same steps with the same seed; the
	# spread across seeds says how far apart two runs of one side fall.
	t=(python3 "$b/torch_gpt.py" "$b/data/moby-dick.txt" --vocab 89 --context 256 --width 384 --heads 6 --layers 6 --dropout 0.2 --tie
		--batch 64 --lr 1e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --warmup 100 --min-lr 1e-4 --device cuda)
	qp=${QUALITY_PRECISION:-f32}
	[ "$qp" = f32 ] || [ "$qp" = bf16 ] || { echo "gpt.sh: QUALITY_PRECISION is f32 or bf16, not $qp" >&2; exit 2; }
	for seed in ${SEEDS:-1}; do
		echo "== seed $seed: mlbuild $qp, $epochs epochs ($steps steps)"
		/usr/bin/time -f "wall %e s" timeout -k 30 "$lim" "$out/gpt-cuda-$qp" train --data "$b/data" --epochs "$epochs" --seed "$seed" \
			--out "$out/w-s$seed.safetensors" --metrics "$out/m-s$seed.jsonl" --quiet 2>&1 | tail -n 2 || true
		to "$out/gpt-cuda-$qp" eval --data "$b/data" --weights "$out/w-s$seed.safetensors" --json | tee "$out/eval-s$seed.json"
		[ "${TORCH_FULL:-1}" = 0 ] && continue
		echo "== seed $seed: PyTorch ${QUALITY_TORCH:-fp32 eager}, $steps steps"
		to "${t[@]}" --steps "$steps" --seed "$seed" ${QUALITY_TORCH:-} | tee "$out/torch-s$seed.json"
	done
	if [ "${SAMPLE:-0}" = 1 ]; then
		seed=$(echo ${SEEDS:-1} | cut -d' ' -f1)
		echo "== sample: the CPU program, 1000 tokens from seed $seed's weights (KV cache)"
		to "$out/gpt-cpu" generate --weights "$out/w-s$seed.safetensors" --prompt "Call me Ishmael." --tokens 1000 \
			--temperature 0.8 --top-k 200 --seed 1 --kv-cache | tee "$out/sample.txt"
		echo
	fi
	exit 0
fi
if [ "${SELFTEST:-1}" != 0 ]; then
	for p in cuda-f32 cuda-bf16; do
		echo "== selftest $p"
		to "$out/gpt-$p" selftest 2>&1 | tail -n 3
	done
fi
echo "== mlbuild f32 train, $epochs epochs"
tlim=(timeout -k 30 "$lim")
[ "${TRAIN_SECONDS:-0}" = 0 ] || tlim=(timeout -k 30 -s INT "$TRAIN_SECONDS")
/usr/bin/time -f "wall %e s" "${tlim[@]}" "$out/gpt-cuda-f32" train --data "$b/data" --epochs "$epochs" --out "$out/w.safetensors" \
	--metrics "$out/m-f32.jsonl" 2>&1 | grep -v "step " | tail -n 6 || true
[ -s "$out/w.safetensors" ] || cp "$out/w.ckpt.safetensors" "$out/w.safetensors"
grep '"event":"step"' "$out/m-f32.jsonl" | tail -n 1
to "$out/gpt-cuda-f32" eval --data "$b/data" --weights "$out/w.safetensors" --json | tee "$out/eval-f32.json"
echo "== sample (CPU program, KV cache)"
start=$(date +%s.%N)
to "$out/gpt-cpu" generate --weights "$out/w.safetensors" --prompt "Call me Ishmael." --tokens 1000 --temperature 0.8 \
	--top-k 200 --seed 1 --kv-cache >"$out/sample.txt"
end=$(date +%s.%N)
cat "$out/sample.txt"; echo
echo "$start $end" | awk '{printf "1000 tokens in %.2f s (16 cores, process start included)\n", $2 - $1}'
generation "$out/w.safetensors"
echo "== mlbuild bf16 train, 3 epochs (timing)"
to "$out/gpt-cuda-bf16" train --data "$b/data" --epochs 3 --out "$out/w-bf16.safetensors" --metrics "$out/m-bf16.jsonl" 2>&1 | grep -v "step " | tail -n 3
cd "$b"
t=(python3 torch_gpt.py data/moby-dick.txt --vocab 89 --context 256 --width 384 --heads 6 --layers 6 --dropout 0.2 --tie
	--batch 64 --lr 1e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --warmup 100 --min-lr 1e-4 --device cuda)
if [ "${TORCH_FULL:-1}" != 0 ]; then
	echo "== PyTorch fp32 eager, $steps steps"
	to "${t[@]}" --steps "$steps" | tee "$out/torch-f32.json"
fi
for mode in "" "--sdpa" "--bf16 --sdpa" "--bf16 --sdpa --compile"; do
	echo "== PyTorch $mode, 200 steps (timing)"
	to "${t[@]}" --steps 200 --time-only $mode || echo "PyTorch $mode: failed (exit $?)"
done
