#!/bin/sh
# generate.sh measures `generate`'s tokens/s of models/gpt.cue's program on
# the CPU with its KV cache, and a PyTorch twin (bench/generate/
# torch_kv.py: the same GPT, eager, with a KV-cache loop), on each thread
# count of GEN_THREADS (a list, default "1": e.g. "1 2 16"). The weights
# are one training step's (generation's cost does not depend on them); the
# prompt is 16 characters and the tokens (GEN_TOKENS, default 200) stay
# within the context of 256, so no window slides.
#
# mlbuild's rows: the best of GEN_REPEAT (default 3) runs of the program,
# timed from outside: "all" is GEN_TOKENS tokens over the whole run
# (process start, weights and prompt included); "per token" is the
# GEN_TOKENS-1 tokens past the first, the difference of a run of
# GEN_TOKENS tokens and one of 1 (start-up, weights and prompt excluded, as
# the twin's clock, which starts after its warm-up, excludes its set-up).
#
# Where Go is (this repository's machines) it builds mlbuild, compiles the
# model and trains the step (needs make data-text, or MLBUILD_TEXT_DIR).
# Elsewhere (a GPU machine's host) give a program built here and weights:
# GEN_PROGRAM=path/gpt GEN_WEIGHTS=path/w.safetensors; GEN_KEEP=DIR here
# keeps them as DIR/gpt and DIR/w.safetensors.
#
# The twin runs with /usr/bin/python3 where it has torch, else with the
# python3 of the PATH (a virtual environment's), or GEN_PYTHON.
# GEN_BF16=1 adds the rows of --precision bf16 (mlbuild) and of the twin
# with bf16 weights and under bf16 autocast.
# GEN_NOCACHE=1 adds the rows without a cache (--kv-cache=false: the whole
# forward pass a token, and the twin's forward pass over the context a
# token): minutes on one thread. (GEN_TORCH_NOCACHE=1, its former name,
# adds the twin's.)
set -eu
cd "$(dirname "$0")/.."
tokens=${GEN_TOKENS:-200}
if [ "$tokens" -lt 2 ]; then
	echo "generate.sh: GEN_TOKENS=$tokens: want 2 or more (the rate per token is that of the tokens past the first)" >&2
	exit 2
fi
threads=${GEN_THREADS:-1}
repeat=${GEN_REPEAT:-3}
data=${MLBUILD_TEXT_DIR:-data/text}
nocache=${GEN_NOCACHE:-}
prompt="Call me Ishmael."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog=${GEN_PROGRAM:-}
weights=${GEN_WEIGHTS:-}
if [ -z "$prog" ]; then
	CGO_ENABLED=0 go build -o "$tmp/mlbuild" ./cmd/mlbuild
	"$tmp/mlbuild" compile models/gpt.cue -o "$tmp/gpt" --cache-dir "$tmp/cache" >/dev/null
	prog=$tmp/gpt
fi
if [ -z "$weights" ]; then
	if [ ! -d "$data" ]; then
		echo "generate.sh: no weights (GEN_WEIGHTS) and no text to train a step on ($data: make data-text, or MLBUILD_TEXT_DIR)" >&2
		exit 2
	fi
	"$prog" train --data "$data" --limit 64 --epochs 1 --threads 1 --out "$tmp/w.safetensors" --quiet >/dev/null
	weights=$tmp/w.safetensors
fi
if [ -n "${GEN_KEEP:-}" ]; then
	mkdir -p "$GEN_KEEP"
	cp "$prog" "$GEN_KEEP/gpt"
	cp "$weights" "$GEN_KEEP/w.safetensors"
fi

# secs N KV THREADS RUNS [ARGS...]: the least wall-clock seconds of RUNS
# runs of generate for N tokens
secs() {
	best=
	i=0
	n=$1 kv=$2 t=$3 runs=$4
	shift 4
	while [ "$i" -lt "$runs" ]; do
		start=$(date +%s.%N)
		GOMAXPROCS=$t "$prog" generate --weights "$weights" --prompt "$prompt" --tokens "$n" --temperature 0 --kv-cache="$kv" "$@" >/dev/null
		end=$(date +%s.%N)
		best=$(echo "$start $end ${best:-1e9}" | awk '{s = $2 - $1; print (s < $3 ? s : $3)}')
		i=$((i + 1))
	done
	echo "$best"
}

py=
for p in ${GEN_PYTHON:-/usr/bin/python3 python3}; do
	if "$p" -c 'import torch' 2>/dev/null; then
		py=$p
		break
	fi
done

for t in $threads; do
	all=$(secs "$tokens" true "$t" "$repeat")
	one=$(secs 1 true "$t" "$repeat")
	echo "$tokens $all $one $t" | awk '{printf "mlbuild kv-cache: %d tokens in %.3fs, %.1f tokens/s all; per token past the first %.3f ms, %.1f tokens/s (%d thread%s)\n", $1, $2, $1 / $2, 1000 * ($2 - $3) / ($1 - 1), ($1 - 1) / ($2 - $3), $4, ($4 > 1 ? "s" : "")}'
	if [ "${GEN_BF16:-}" = 1 ]; then
		all=$(secs "$tokens" true "$t" "$repeat" --precision bf16)
		one=$(secs 1 true "$t" "$repeat" --precision bf16)
		echo "$tokens $all $one $t" | awk '{printf "mlbuild kv-cache bf16: %d tokens in %.3fs, %.1f tokens/s all; per token past the first %.3f ms, %.1f tokens/s (%d thread%s)\n", $1, $2, $1 / $2, 1000 * ($2 - $3) / ($1 - 1), ($1 - 1) / ($2 - $3), $4, ($4 > 1 ? "s" : "")}'
	fi
	if [ "$nocache" = 1 ]; then
		s=$(secs "$tokens" false "$t" 1)
		echo "$tokens $s $t" | awk '{printf "mlbuild no cache: %d tokens in %.3fs, %.1f tokens/s all (%d thread%s)\n", $1, $2, $1 / $2, $3, ($3 > 1 ? "s" : "")}'
	fi
	if [ -n "$py" ]; then
		"$py" bench/generate/torch_kv.py "$tokens" 16 "$t"
		if [ "${GEN_BF16:-}" = 1 ]; then
			"$py" bench/generate/torch_kv.py "$tokens" 16 "$t" --dtype bf16
			"$py" bench/generate/torch_kv.py "$tokens" 16 "$t" --dtype autocast
		fi
		if [ "$nocache" = 1 ] || [ "${GEN_TORCH_NOCACHE:-}" = 1 ]; then
			"$py" bench/generate/torch_kv.py "$tokens" 16 "$t" --no-cache
		fi
	else
		echo "pytorch: not installed (no torch in ${GEN_PYTHON:-/usr/bin/python3 or python3}); no twin"
	fi
done
