#!/bin/sh
# generate.sh measures `generate`'s tokens/s of models/gpt.cue's program on
# the CPU with its KV cache and without (--kv-cache=false: a forward pass
# over the whole context a token), and a PyTorch twin (bench/generate/
# torch_kv.py: the same GPT, eager, with and without a KV-cache loop),
# on GEN_THREADS threads (default 1). The weights are one training step's
# (generation's cost does not depend on them); the prompt is 16 characters
# and the tokens (GEN_TOKENS, default 200) stay within the context of 256,
# so no window slides. GEN_TORCH_NOCACHE=1 adds the twin without its
# cache (a forward pass over the context a token). Needs make data-text.
set -eu
cd "$(dirname "$0")/.."
tokens=${GEN_TOKENS:-200}
threads=${GEN_THREADS:-1}
data=${MLBUILD_TEXT_DIR:-data/text}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/mlbuild" ./cmd/mlbuild
"$tmp/mlbuild" compile models/gpt.cue -o "$tmp/gpt" --cache-dir "$tmp/cache" >/dev/null
GOMAXPROCS=$threads "$tmp/gpt" train --data "$data" --limit 64 --epochs 1 --threads "$threads" --out "$tmp/w.safetensors" --quiet >/dev/null
for kv in true false; do
	start=$(date +%s.%N)
	GOMAXPROCS=$threads "$tmp/gpt" generate --weights "$tmp/w.safetensors" --prompt "Call me Ishmael." --tokens "$tokens" --temperature 0 --kv-cache=$kv >/dev/null
	end=$(date +%s.%N)
	echo "$start $end $tokens $kv $threads" | awk '{s = $2 - $1; printf "mlbuild --kv-cache=%s: %d tokens in %.3fs, %.1f tokens/s (%d thread%s; process start and weights included)\n", $4, $3, s, $3 / s, $5, ($5 > 1 ? "s" : "")}'
done
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	/usr/bin/python3 bench/generate/torch_kv.py "$tokens" 16 "$threads"
	if [ "${GEN_TORCH_NOCACHE:-}" = 1 ]; then # minutes on one thread
		/usr/bin/python3 bench/generate/torch_kv.py "$tokens" 16 "$threads" --no-cache
	fi
else
	echo "pytorch: not installed (/usr/bin/python3 has no torch); no twin"
fi
