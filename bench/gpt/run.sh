#!/usr/bin/env bash
# `make bench-gpt`: a small GPT (testdata/text/gpt_moby.cue: 2 layers, width
# 32, context 32, batch 16) trained on Moby-Dick by mlbuild's CPU program and
# by its PyTorch twin (bench/gpt/torch_gpt.py, the same model, data, split
# and recipe), side by side, on 1 and 2 threads: the validation loss after
# STEPS steps (issue #31: within 0.02 nats) and the time per step (issue
# #31: mlbuild at most 0.6x PyTorch's).
#
#   bench/gpt/run.sh MLBUILD TEXT_DIR [STEPS]
#
# PyTorch is Debian's python3-torch (/usr/bin/python3), installed with
# apt-get when missing, or PYTHON. The twin's recipe flags below must follow
# the spec's training section.
set -euo pipefail
mlbuild=$(realpath "$1") text=$(realpath "$2") steps=${3:-600}
here=$(dirname "$(realpath "$0")")
spec=$here/../../testdata/text/gpt_moby.cue
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq && $sudo apt-get install -y -qq python3-torch >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$mlbuild" compile "$spec" -o "$tmp/gpt" --cache-dir "$tmp/cache" >/dev/null
batch=16
echo "| threads | mlbuild val loss | PyTorch val loss | difference | mlbuild ms/step | PyTorch ms/step | ratio |"
echo "|--:|--:|--:|--:|--:|--:|--:|"
for t in 1 2; do
	"$tmp/gpt" train --data "$text" --limit $((steps * batch)) --epochs 1 --threads $t \
		--metrics "$tmp/m$t.jsonl" --out "$tmp/w$t.safetensors" --quiet --force >/dev/null
	# The epoch's rate is in tokens per second for a text dataset (the
	# metrics key is images_per_sec); a step is batch x context tokens.
	read -r ml_val ml_ms < <(python3 - "$tmp/m$t.jsonl" $((batch * 32)) <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("event") == "epoch":
        val, rate = m["val_loss"], m["images_per_sec"]
print(val, 1000 * int(sys.argv[2]) / rate)
PY
)
	tw=$("$py" "$here/torch_gpt.py" "$text/moby-dick.txt" --vocab 89 --context 32 --width 32 --heads 2 --layers 2 \
		--dropout 0.1 --tie --batch $batch --steps "$steps" --lr 3e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --threads $t)
	read -r tv tms < <(echo "$tw" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["val_loss"], d["step_ms"])')
	python3 -c "import sys; a,b,c,d=map(float,sys.argv[2:6]); print(f'| {sys.argv[1]} | {a:.4f} | {b:.4f} | {a-b:+.4f} | {c:.1f} | {d:.1f} | {c/d:.2f} |')" $t "$ml_val" "$tv" "$ml_ms" "$tms"
done
