#!/usr/bin/env bash
# `make zoo-train`: torchvision's classifiers, imported by `make zoo`, trained
# further from their weights (issue #24: "trains when given train --init").
#
#   bench/zoo/train.sh MLBUILD ZOO_DIR IMAGES_DIR [NAME ...]
#
# For each model, a fine-tuning spec beside the import (ZOO_DIR/NAME.d/
# NAME-faces.cue): the imported spec with its 1000-class head made a 2-class
# one and a dataset, scikit-image's labelled LFW crops (IMAGES_DIR/faces:
# face/ and nonface/, 203 photographs, from `make data`) read as RGB,
# resized to 224x224 and normalised with ImageNet's statistics, a quarter
# held out as the test split; batch 8, Adam 1e-4. It is compiled and
# trained with `train --init NAME.safetensors --reinit HEAD` (every layer
# from the imported weights but the new head) for EPOCHS epochs (default
# 3) on the CPU, then evaluated (`eval`) on the held-out quarter. The
# table: the loss of the first step and of the last epoch, the test loss
# and accuracy, the training seconds. make zoo's weights are random
# (torchvision's init, not ImageNet's training), so this shows that the
# imported models train, not what a pretrained one would reach. CUDA=1 also compiles each for
# CUDA into ZOO_DIR/cuda-ft/ (bench/gpu runs them).
set -uo pipefail
mlbuild=$(realpath "$1") zoo=$(realpath "$2") images=$(realpath "$3")
shift 3
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet18 squeezenet1_0 mobilenet_v2)
epochs=${EPOCHS:-3}
echo "| model | head | first step loss | last epoch loss | test loss | test accuracy | training seconds |"
echo "|---|---|--:|--:|--:|--:|--:|"
for m in "${models[@]}"; do
	d=$zoo/$m.d
	if [ ! -s "$d/$m.cue" ] || [ ! -s "$d/$m.safetensors" ]; then
		echo "| $m | not imported (make zoo ZOO_MODELS=$m) | | | | | |"
		continue
	fi
	# The head: the layer that makes the 1000 class scores.
	line=$(grep -nE '(units|outChannels): 1000[,}]' "$d/$m.cue" | head -n 1)
	head=$(echo "$line" | sed -nE 's/^[0-9]+:[[:space:]]*\{?name: "([A-Za-z0-9_]+)".*/\1/p; s/^[0-9]+:[[:space:]]*([A-Za-z0-9_]+): \{.*/\1/p' | head -n 1)
	if [ -z "$head" ]; then
		echo "| $m | no 1000-class layer found | | | | | |"
		continue
	fi
	spec=$d/$m-faces.cue
	sed -E "${line%%:*}s/(units|outChannels): 1000/\\1: 2/; s/batchSize: 32/batchSize: 8/" "$d/$m.cue" | sed '$d' >"$spec"
	cat >>"$spec" <<'CUE'
	dataset: {
		format:     "imagefolder"
		classes:    2
		train:      "faces"
		testSplit:  0.25
		imageShape: [3, 224, 224]
		resize:     true
		normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
	}
}
CUE
	if ! "$mlbuild" compile "$spec" -o "$d/$m-faces" --force >"$d/ft-compile.log" 2>&1; then
		echo "| $m | $head | compile failed: $(tail -n 1 "$d/ft-compile.log" | cut -c1-100) | | | | |"
		continue
	fi
	if [ "${CUDA:-0}" = 1 ]; then
		mkdir -p "$zoo/cuda-ft"
		"$mlbuild" compile "$spec" --backend cuda -o "$zoo/cuda-ft/$m-faces" --force >"$d/ft-compile-cuda.log" 2>&1 ||
			echo "$m: CUDA compile failed: $(tail -n 1 "$d/ft-compile-cuda.log")" >&2
	fi
	rm -f "$d/ft.jsonl"
	t0=$(date +%s.%N)
	if ! "$d/$m-faces" train --data "$images" --init "$d/$m.safetensors" --reinit "$head" --epochs "$epochs" \
		--metrics "$d/ft.jsonl" --out "$d/$m-faces.safetensors" --force --quiet >"$d/ft-train.log" 2>&1; then
		echo "| $m | $head | train failed: $(tail -n 1 "$d/ft-train.log" | cut -c1-100) | | | | |"
		continue
	fi
	t1=$(date +%s.%N)
	ev=$("$d/$m-faces" eval --data "$images" --weights "$d/$m-faces.safetensors" --json 2>&1 | tail -n 1)
	python3 - "$d/ft.jsonl" "$m" "$head" "$(awk "BEGIN{printf \"%.0f\", $t1 - $t0}")" "$ev" <<'PY'
import json, sys
first = last = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "step" and first is None:
        first = e["loss"]
    if e.get("event") == "epoch":
        last = e
ev = json.loads(sys.argv[5])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {first:.3f} | {last['loss']:.3f} | {ev['loss']:.3f} | {100 * ev['accuracy']:.0f}% of {ev['samples']} | {sys.argv[4]} |")
PY
done
