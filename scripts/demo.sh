#!/usr/bin/env bash
# The main job end to end: validate and summarise models/mnist.cue, compile
# it to a standalone binary, train it on MNIST, evaluate it on the test set
# and predict a few test digits. Usage: scripts/demo.sh MLBUILD DATA_DIR
set -euo pipefail
mlbuild=${1:-bin/mlbuild}
data=${2:-data/mnist}
out=bin
mkdir -p "$out"

step() { printf '\n== %s\n' "$*"; }

step "mlbuild validate models/mnist.cue"
"$mlbuild" validate models/mnist.cue

step "mlbuild shapes models/mnist.cue"
"$mlbuild" shapes models/mnist.cue

step "mlbuild compile models/mnist.cue -o $out/mnist"
"$mlbuild" compile models/mnist.cue -o "$out/mnist"
ls -l "$out/mnist"

step "$out/mnist train --data $data"
start=$(date +%s)
"$out/mnist" train --data "$data" --out "$out/mnist.safetensors" --metrics "$out/mnist-metrics.jsonl"
echo "training wall time: $(( $(date +%s) - start ))s"

step "$out/mnist eval --data $data --weights $out/mnist.safetensors"
"$out/mnist" eval --data "$data" --weights "$out/mnist.safetensors" | tee "$out/mnist-eval.txt"

step "$out/mnist predict (the first 5 test digits)"
"$out/mnist" predict --weights "$out/mnist.safetensors" --limit 5 "$data/t10k-images-idx3-ubyte"
printf '(their labels: '
od -An -tu1 -j8 -N5 "$data/t10k-labels-idx1-ubyte" | tr -s ' ' | sed 's/^ //'
printf ')\n'

step "$out/mnist predict on an image file (the first test digit as a PGM)"
{ printf 'P5\n28 28\n255\n'; dd if="$data/t10k-images-idx3-ubyte" bs=1 skip=16 count=784 status=none; } >"$out/digit0.pgm"
"$out/mnist" predict --weights "$out/mnist.safetensors" "$out/digit0.pgm"

acc=$(awk '/^accuracy:/ {print $2}' "$out/mnist-eval.txt")
awk -v a="$acc" 'BEGIN { if (a + 0 < 0.99) { printf "test accuracy %s is below 0.99\n", a; exit 1 } }'
echo "demo done: test accuracy $acc"
