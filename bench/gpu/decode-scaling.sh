#!/usr/bin/env bash
# decode-scaling.sh runs, on the GPU machine's host CPU, what
# decode-scaling-bundle.sh built: models/gpt.cue's `generate` (greedy,
# KV cache, TOKENS tokens after a 16-character prompt, so the window jumps
# as cpuhost.sh's runs do; weights of one training step, as cpuhost.sh
# makes them) pinned with taskset to the first 1, 2, 4, 8 and 16 CPUs,
# GOMAXPROCS and --threads the same, in f32 and bf16, one row a core
# count, in tokens/s:
#  - f32, bf16: the least of RUNS runs of TOKENS+1 tokens less the least
#    of RUNS runs of 1 (process start, weights and their rounding left
#    out), cpuhost.sh's measure;
#  - in-program: the program's own clock around its calls but those after
#    the prompt and the jumps (MLBUILD_DECODE_STATS=1, one more run), and
#    below the table the decode team's account a token from that run:
#    steps and their parts, the caller's time in its own parts, in parts
#    that late members had not claimed, waiting for members, and outside
#    steps (layer norms, adds, kernels of one part, the prefills' share),
#    a member's time in parts;
#  - base f32, base bf16: cpuhost.sh's measure of the program built from
#    BASE (where the bundle has it: BASE=REV at bundle time);
#  - PyTorch fp32: the twin's eager KV-cache loop (bench/generate/
#    torch_kv.py --jump) on the same CPUs (TORCH=0 leaves it out), and
#    mlbuild bf16 over it;
#  - then on the most cores, the in-program rates with the part rule's
#    least changed from 16 KB to each of PART_KB (default "8 32"; empty
#    leaves it out; their accounts go to OUT/stats.txt only);
#  - then (BENCH=0 leaves it out) rt/cpu's BenchmarkTeamStep (the team's
#    synchronisation alone: an empty step, ns) and BenchmarkDecodeToken
#    (one token of the decode's kernels, on the team and through
#    ParallelFor, with each kind's µs) on each core count.
# About 2 minutes on that host with the defaults, by an estimate from the
# rates measured there before (not yet run there); each run is cut at 120 s.
# Usage: bash decode-scaling.sh BUNDLE OUT
#   CORES (default "1 2 4 8 16"), TOKENS (1000), RUNS (2), TORCH (1),
#   PART_KB ("8 32"), BENCH (1);
#   WEIGHTS=FILE uses those weights instead of training a step
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
progs=gpt
[ -f "$b/gpt-base.xz" ] && progs="gpt gpt-base"
for p in $progs cpu.test; do python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$b/$p.xz" "$work/$p" && chmod +x "$work/$p"; done
echo "mlbuild $(cat "$b/VERSION")$([ -f "$b/BASE" ] && echo ", base $(cat "$b/BASE")"); $(python3 -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'no torch')"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|L2 cache|L3 cache|NUMA node0 CPU)' | cut -c1-100
cpus() { [ "$1" = 1 ] && echo 0 || echo "0-$(($1 - 1))"; }
n=${TOKENS:-1000} runs=${RUNS:-2}
if [ -n "${WEIGHTS:-}" ]; then
	cp "$WEIGHTS" "$work/w.safetensors"
else
	GOMAXPROCS=16 timeout 300 "$work/gpt" train --data "$b/data" --limit 64 --epochs 1 --out "$work/w.safetensors" --quiet --force >/dev/null ||
		{ echo "training the weights failed"; exit 1; }
fi
# gen PROG CORES PRECISION TOKENS: one pinned run of generate
gen() {
	taskset -c "$(cpus "$2")" env GOMAXPROCS="$2" MLBUILD_DECODE_PART_KB="${PARTKB:-}" timeout 120 "$work/$1" generate --weights "$work/w.safetensors" \
		--prompt "Call me Ishmael." --temperature 0 --seed 1 --kv-cache --precision "$3" --threads "$2" --tokens "$4"
}
# rate PROG CORES PRECISION: cpuhost.sh's tokens/s
rate() {
	gen "$1" "$2" "$3" 1 >/dev/null 2>&1
	local one=1e9 all=1e9 s e
	for _ in $(seq "$runs"); do
		s=$(date +%s.%N); gen "$1" "$2" "$3" 1 >/dev/null 2>>"$out/err.txt"; e=$(date +%s.%N)
		one=$(echo "$s $e $one" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
		s=$(date +%s.%N); gen "$1" "$2" "$3" $((n + 1)) >"$out/text-$1-$2-$3.txt" 2>>"$out/err.txt"; e=$(date +%s.%N)
		all=$(echo "$s $e $all" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
	done
	echo "$one $all" | awk -v k="$n" '{d = $2 - $1; printf "%.1f", (d > 0 ? k / d : 0)}'
}
# inprog CORES PRECISION: the in-program rate; the account goes to stats.txt
inprog() {
	MLBUILD_DECODE_STATS=1 gen gpt "$1" "$2" "$n" 2>"$work/stats" >/dev/null
	sed "s/^decode stats:/$1 cores $2${PARTKB:+, parts of $PARTKB KB}:/" "$work/stats" >>"$out/stats.txt"
	sed -n 's/.* at \([0-9.]*\) tokens\/s.*/\1/p' "$work/stats" | head -n 1
}
: >"$out/stats.txt"
echo
echo "== models/gpt.cue generate, batch 1, greedy, KV cache, $n tokens, tokens/s"
echo "| cores | f32 | bf16 | f32 in-program | bf16 in-program | base f32 | base bf16 | PyTorch fp32 | bf16 / PyTorch fp32 |"
echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for t in ${CORES:-1 2 4 8 16}; do
	f=$(rate gpt "$t" f32) h=$(rate gpt "$t" bf16)
	fin=$(inprog "$t" f32) hin=$(inprog "$t" bf16)
	bf=0 bh=0 pt=0
	if [[ $progs == *gpt-base* ]]; then bf=$(rate gpt-base "$t" f32) bh=$(rate gpt-base "$t" bf16); fi
	if [ "${TORCH:-1}" = 1 ]; then
		pt=$(taskset -c "$(cpus "$t")" timeout 120 python3 "$b/torch_kv.py" "$n" 16 "$t" --jump --dtype fp32 2>/dev/null | sed -n 's/.* \([0-9.]*\) tokens\/s.*/\1/p' | head -n 1)
	fi
	python3 - "$t" "$f" "$h" "${fin:-0}" "${hin:-0}" "$bf" "$bh" "${pt:-0}" <<'PY' | tee -a "$out/table.txt"
import sys
t, *v = sys.argv[1:]
v = [float(x) for x in v]
f = lambda x: f"{x:.1f}" if x > 0 else "none"
print(f"| {t} | " + " | ".join(f(x) for x in v) + f" | {v[1] / v[6]:.2f} |" if v[6] > 0 else f"| {t} | " + " | ".join(f(x) for x in v) + " | none |")
PY
done
echo
echo "== the decode team's account a token (MLBUILD_DECODE_STATS=1)"
cat "$out/stats.txt"
cores=(${CORES:-1 2 4 8 16})
least=${cores[0]} most=${cores[${#cores[@]} - 1]}
for p in f32 bf16; do
	cmp -s "$out/text-gpt-$least-$p.txt" "$out/text-gpt-$most-$p.txt" && echo "$p: the text on $most cores is the text on $least" ||
		echo "$p: the text on $most cores differs from $least's (or a run failed: $out/err.txt)"
done
if [ -n "${PART_KB-8 32}" ]; then
	echo
	echo "== the part rule on $most cores: in-program tokens/s with parts of at least N KB (MLBUILD_DECODE_PART_KB; the rule's 16 in the table above)"
	for kb in ${PART_KB-8 32}; do
		echo "$kb KB: f32 $(PARTKB=$kb inprog "$most" f32), bf16 $(PARTKB=$kb inprog "$most" bf16)" | tee -a "$out/parts.txt"
	done
fi
if [ "${BENCH:-1}" = 1 ]; then
	echo
	echo "== rt/cpu benchmarks, pinned: a team's empty step (ns a step) and one token of models/gpt.cue's decode at position 128 (random weights; ms a token and µs a token a kind)"
	for t in ${cores[@]}; do
		[ "$t" = 1 ] && continue
		for bt in 'TeamStep$:100000x' 'DecodeToken:300x'; do
			taskset -c "$(cpus "$t")" timeout 120 "$work/cpu.test" -test.run '^$' -test.bench "${bt%:*}" -test.cpu "$t" -test.benchtime "${bt#*:}" 2>&1 |
				grep -E '^Benchmark' | tee -a "$out/bench.txt"
		done
	done
fi
echo "done in $(($(date +%s) - start)) s"
