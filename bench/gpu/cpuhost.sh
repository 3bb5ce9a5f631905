#!/usr/bin/env bash
# cpuhost.sh runs, on the GPU machine's host CPU, what cpuhost-bundle.sh
# built: mlbuild's CPU programs against PyTorch 2.x (the `python3` there)
# side by side, each pinned with taskset to the same cores:
#  1. the small GPT (testdata/text/gpt_moby.cue; make bench-gpt's recipe)
#     trained STEPS steps (default 600) on 1 and 2 cores: validation loss
#     and ms a step on both sides;
#  2. models/gpt.cue's training step at batch 64 on CORES_BIG cores
#     (default "2 16"): the median of mlbuild bench's 2 steps, f32 and
#     bf16 (the spec with precision: "bf16"), against the mean of
#     TORCH_STEPS (default 4; the first left out, as bench leaves out its
#     first) of the twin's (--time-only) in fp32, fp32 with
#     scaled_dot_product_attention and under bf16 autocast with it
#     (TORCH_GPT_MODES, default "fp32 sdpa bf16", picks among them; a
#     mode left out prints nan; ML_F32=0 leaves mlbuild's f32 out); with
#     ROUNDS=N (default 1) each side runs N times, the two sides in turn,
#     and each column is its least (the host's speed drifts between
#     minutes; every round's times go to big-rounds.txt);
#  3. generation at batch 1, greedy, GEN_TOKENS tokens (default 1000) after
#     a 16-character prompt, with the KV cache, on GEN_CORES cores
#     (default "1 2 16"): mlbuild in f32 and with --precision bf16, its
#     time the least of 2 runs of n+1 tokens less the least of 3 of 1
#     (process start, weights and their rounding left out), against the PyTorch twin's loop in fp32,
#     with bf16 weights and under bf16 autocast; the weights are
#     GEN_TRAIN_LIMIT samples' training (default 64: one step);
#     then on more than one core with MLBUILD_DECODE_POOL=1 (the decode's
#     kernels through ParallelFor, as before the decode team);
#     3b. the text of --precision bf16 against f32's (greedy, 500 tokens)
#     on the small GPT's weights of part 1 and on those of part 3.
#  4. (run before 3) CIFAR ResNet-18 (bench/models/resnet18_cifar.cue, batch 128, f32 and
#     bf16 plans) on RESNET_CORES cores (default "1 2 16"): training step
#     and inference against PyTorch's twin in fp32, fp32 channels_last and
#     bf16 autocast + channels_last (bench/resnet-cpu/run.sh, pinned).
# PARTS (default "1 2 3 4") picks the parts to run: PARTS=3 is generation
# alone (3b then trains the small GPT's weights itself).
# Usage: bash cpuhost.sh BUNDLE OUT
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for p in small gpt gpt-bf16; do python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$b/$p.xz" "$work/$p" && chmod +x "$work/$p"; done
echo "mlbuild $(cat "$b/VERSION"); $(python3 -c 'import torch; print("torch", torch.__version__, "oneDNN", torch.backends.mkldnn.is_available())')"
lscpu | grep -E '^(Model name|CPU\(s\)|Flags)' | sed 's/^\(Flags:\).*\(amx_bf16\).*/\1 ... \2 .../' | cut -c1-120
cpus() { [ "$1" = 1 ] && echo 0 || echo "0-$(($1 - 1))"; }
# least X...: the least of the numbers given, nan if none
least() { python3 -c 'import sys; v=[float(x) for x in sys.argv[1:] if x != "nan"]; print(min(v) if v else "nan")' "$@"; }
steps=${STEPS:-600}
parts=" ${PARTS:-1 2 3 4} "
if [[ $parts == *" 1 "* ]]; then
echo; echo "== 1. small GPT, $steps steps, batch 16"
echo "| cores | mlbuild val loss | PyTorch val loss | difference | mlbuild ms/step | PyTorch ms/step | ratio |"
echo "|--:|--:|--:|--:|--:|--:|--:|"
for t in 1 2; do
	GOMAXPROCS=$t taskset -c "$(cpus $t)" "$work/small" train --data "$b/data" --limit $((steps * 16)) --epochs 1 --threads $t \
		--metrics "$out/small-m$t.jsonl" --out "$work/small-w$t.safetensors" --quiet --force >/dev/null
	read -r ml_val ml_ms < <(python3 - "$out/small-m$t.jsonl" 512 <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("event") == "epoch":
        val, rate = m["val_loss"], m["images_per_sec"]
print(val, 1000 * int(sys.argv[2]) / rate)
PY
)
	taskset -c "$(cpus $t)" python3 "$b/torch_gpt.py" "$b/data/moby-dick.txt" --vocab 89 --context 32 --width 32 --heads 2 --layers 2 \
		--dropout 0.1 --tie --batch 16 --steps "$steps" --lr 3e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --threads $t 2>/dev/null >"$out/small-torch$t.json"
	read -r tv tms < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["val_loss"], d["step_ms"])' "$out/small-torch$t.json")
	python3 -c "import sys; a,b,c,d=map(float,sys.argv[2:6]); print(f'| {sys.argv[1]} | {a:.4f} | {b:.4f} | {a-b:+.4f} | {c:.1f} | {d:.1f} | {c/d:.2f} |')" $t "$ml_val" "$tv" "$ml_ms" "$tms"
done
fi
if [[ $parts == *" 2 "* ]]; then
echo; echo "== 2. models/gpt.cue training step, batch 64 x 256, ms"
echo "| cores | mlbuild f32 | mlbuild bf16 | PyTorch fp32 | PyTorch fp32 + SDPA | PyTorch bf16 autocast + SDPA | f32 / PyTorch's best | bf16 / PyTorch's best |"
echo "|--:|--:|--:|--:|--:|--:|--:|--:|"
for t in ${CORES_BIG:-2 16}; do
	ml() { GOMAXPROCS=$t taskset -c "$(cpus $t)" timeout 300 "$work/$1" bench --json --iters 2 --threads $t 2>/dev/null | tail -n 1 |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["train_step_ms"], 1))' 2>/dev/null || echo nan; }
	tw() { taskset -c "$(cpus $t)" timeout 400 python3 "$b/torch_gpt.py" "$b/data/moby-dick.txt" --vocab 89 --context 256 --width 384 --heads 6 --layers 6 \
		--dropout 0.2 --tie --batch 64 --steps "${TORCH_STEPS:-4}" --time-only --lr 1e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --warmup 100 --min-lr 1e-4 --threads $t "$@" 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["step_ms"])' 2>/dev/null || echo nan; }
	modes=" ${TORCH_GPT_MODES:-fp32 sdpa bf16} " A=() B=() P1=() P2=() P3=()
	for _ in $(seq "${ROUNDS:-1}"); do
		[ "${ML_F32:-1}" = 1 ] && A+=("$(ml gpt)")
		B+=("$(ml gpt-bf16)")
		[[ $modes == *" fp32 "* ]] && P1+=("$(tw)")
		[[ $modes == *" sdpa "* ]] && P2+=("$(tw --sdpa)")
		[[ $modes == *" bf16 "* ]] && P3+=("$(tw --bf16 --sdpa)")
	done
	a=$(least "${A[@]}") b16=$(least "${B[@]}") p1=$(least "${P1[@]}") p2=$(least "${P2[@]}") p3=$(least "${P3[@]}")
	echo "rounds: mlbuild f32 ${A[*]:-}; bf16 ${B[*]}; PyTorch fp32 ${P1[*]:-}; fp32 + SDPA ${P2[*]:-}; bf16 ${P3[*]:-}" >>"$out/big-rounds.txt"
	python3 -c "import sys,math; t,a,b,*p=sys.argv[1:]; a,b=float(a),float(b); p=[float(x) for x in p]; best=min(x for x in p if not math.isnan(x)); print(f'| {t} | {a:.0f} | {b:.0f} | ' + ' | '.join(f'{x:.0f}' for x in p) + f' | {a/best:.2f} | {b/best:.2f} |')" $t $a $b16 $p1 $p2 $p3 | tee -a "$out/big.txt"
done
fi
if [[ $parts == *" 4 "* ]]; then
	echo; echo "== 4. CIFAR ResNet-18, batch 128 (issue #30)"
	for p in resnet18_f32 resnet18_bf16; do
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$b/$p.xz" "$b/resnet-cpu/$p" && chmod +x "$b/resnet-cpu/$p"
	done
	PIN=1 THREADS="${RESNET_CORES:-1 2 16}" PYTHON=python3 bash "$b/resnet-cpu/run.sh" - "$b/resnet-cpu" 2>"$out/resnet-cpu-torch.txt" | tee "$out/resnet-cpu.md"
fi
[[ $parts == *" 3 "* ]] || exit 0
echo; echo "== 3. generation, batch 1, greedy, KV cache, tokens/s"
GOMAXPROCS=16 "$work/gpt" train --data "$b/data" --limit "${GEN_TRAIN_LIMIT:-64}" --epochs 1 --out "$work/w.safetensors" --quiet --force >/dev/null
n=${GEN_TOKENS:-1000}
# mlrate CORES PRECISION: mlbuild's tokens/s, the least time of 2 runs of
# n+1 tokens less the least of 3 runs of 1 (process start, weights and
# their rounding left out)
mlrate() {
	local g=(taskset -c "$(cpus $1)" env GOMAXPROCS=$1 MLBUILD_DECODE_POOL=${POOL:-0} "$work/gpt" generate --weights "$work/w.safetensors" --prompt "Call me Ishmael." --temperature 0 --seed 1 --kv-cache --precision "$2")
	"${g[@]}" --tokens 1 >/dev/null 2>&1
	local one=1e9 all=1e9 s e
	for _ in 1 2 3; do
		s=$(date +%s.%N); "${g[@]}" --tokens 1 >/dev/null 2>>"$out/gen-err$1-$2.txt"; e=$(date +%s.%N)
		one=$(echo "$s $e $one" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
	done
	for _ in 1 2; do
		s=$(date +%s.%N); "${g[@]}" --tokens $((n + 1)) >"$out/gen$1-$2.txt" 2>>"$out/gen-err$1-$2.txt"; e=$(date +%s.%N)
		all=$(echo "$s $e $all" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
	done
	echo "$one $all" | awk -v k="$n" '{d = $2 - $1; printf "%.1f", (d > 0 ? k / d : 0)}'
}
# torchrate CORES DTYPE: the twin's tokens/s (fp32, bf16 weights, autocast)
torchrate() {
	taskset -c "$(cpus $1)" python3 "$b/torch_kv.py" "$n" 16 "$1" --jump --dtype "$2" 2>/dev/null | sed -n 's/.* \([0-9.]*\) tokens\/s.*/\1/p' | head -n 1
}
echo "| cores | mlbuild f32 | mlbuild bf16 | PyTorch fp32 | PyTorch bf16 weights | PyTorch autocast bf16 | f32 / PyTorch fp32 | bf16 / PyTorch's best |"
echo "|--:|--:|--:|--:|--:|--:|--:|--:|"
for t in ${GEN_CORES:-1 2 16}; do
	m32=$(mlrate "$t" f32) m16=$(mlrate "$t" bf16)
	p32=$(torchrate "$t" fp32) p16=$(torchrate "$t" bf16) pac=$(torchrate "$t" autocast)
	python3 - "$t" "$m32" "$m16" "${p32:-0}" "${p16:-0}" "${pac:-0}" <<'PY' | tee -a "$out/gen.txt"
import sys
t, m32, m16, p32, p16, pac = sys.argv[1], *map(float, sys.argv[2:])
r = lambda a, b: f"{a / b:.2f}" if b > 0 else "none"
f = lambda v: f"{v:.1f}" if v > 0 else "failed"
print(f"| {t} | {f(m32)} | {f(m16)} | {f(p32)} | {f(p16)} | {f(pac)} | {r(m32, p32)} | {r(m16, max(p32, p16, pac))} |")
PY
done
# the decode team against ParallelFor (MLBUILD_DECODE_POOL=1, as before it)
for t in ${GEN_CORES:-1 2 16}; do
	[ "$t" = 1 ] && continue
	echo "$t cores, ParallelFor instead of the decode team: f32 $(POOL=1 mlrate "$t" f32), bf16 $(POOL=1 mlrate "$t" bf16) tokens/s" | tee -a "$out/gen.txt"
done
# the text: bf16 against f32, greedy, the same prompt, on the small GPT's
# weights of part 1 (600 steps) and on these
echo; echo "== 3b. generated text, --precision bf16 against f32 (greedy, 500 tokens)"
[ -f "$work/small-w1.safetensors" ] || GOMAXPROCS=1 taskset -c 0 "$work/small" train --data "$b/data" --limit $((steps * 16)) --epochs 1 --threads 1 \
	--out "$work/small-w1.safetensors" --quiet --force >/dev/null
for w in "small:$work/small-w1.safetensors" "gpt:$work/w.safetensors"; do
	p=${w%%:*} f=${w#*:}
	[ -f "$f" ] || { echo "$p: no weights"; continue; }
	for prec in f32 bf16; do
		GOMAXPROCS=16 "$work/$p" generate --weights "$f" --prompt "Call me Ishmael." --temperature 0 --tokens 500 --precision $prec >"$out/text-$p-$prec.txt" 2>&1
	done
	python3 - "$p" "$out/text-$p-f32.txt" "$out/text-$p-bf16.txt" <<'PY'
import sys
a, b = open(sys.argv[2]).read(), open(sys.argv[3]).read()
n = 0
while n < min(len(a), len(b)) and a[n] == b[n]:
    n += 1
print(f"{sys.argv[1]}: the first {n} of {len(a)} characters the same; f32: {a[:160]!r}; bf16: {b[:160]!r}")
PY
	printf '%s: sampled at 0.8 in bf16: ' "$p"
	GOMAXPROCS=16 "$work/$p" generate --weights "$f" --prompt "Call me Ishmael." --temperature 0.8 --seed 3 --tokens 300 --precision bf16 2>&1 | python3 -c 'import sys; print(repr(sys.stdin.read()))'
done
