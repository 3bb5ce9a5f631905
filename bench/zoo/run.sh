#!/usr/bin/env bash
# `make zoo`: torchvision's image classifiers through mlbuild, each compared with PyTorch.
#
#   bench/zoo/run.sh MLBUILD IMAGES_DIR OUT_DIR [NAME ...]
#
# Exports each model with Debian's python3-torch and python3-torchvision
# (random weights, eval mode, a dynamic batch: bench/zoo/export.py; installed
# with apt-get when missing), then for each: `mlbuild import`, `mlbuild
# compile` for the CPU at the imported spec's batch (32), `predict --output`
# on the same 32 photographs PyTorch ran, and the largest absolute difference
# from PyTorch's output (the goal is 1e-4), also as a fraction of the
# largest output (export.py calibrates batch norm so outputs are near 1). With CUDA=1 it also compiles each
# model for CUDA into OUT_DIR/cuda/ for bench/gpu's run on a GPU machine.
# A model that fails a stage is a row that says which stage and why; the
# script goes on with the next. The table goes to OUT_DIR/zoo.md.
set -uo pipefail
mlbuild=$(realpath "$1") images=$(realpath "$2") out=$3
shift 3
mkdir -p "$out" && out=$(realpath "$out")
here=$(dirname "$(realpath "$0")")

if ! /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq && $sudo apt-get install -y -qq python3-torch python3-torchvision >/dev/null || exit 1
fi

models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet18 resnet50 vgg11 densenet121 efficientnet_b0 mobilenet_v2
	shufflenet_v2_x1_0 googlenet regnet_y_400mf mnasnet1_0 alexnet squeezenet1_0)

for m in "${models[@]}"; do
	[ -s "$out/$m.onnx" ] && [ -s "$out/$m.y.npy" ] && continue
	/usr/bin/python3 "$here/export.py" "$out" "$images" "$m" || echo "$m: export failed" >&2
done

# compare A B prints the largest absolute difference of two .npy files, or why not.
compare() {
	/usr/bin/python3 - "$1" "$2" <<'EOF'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
if a.size != b.size:
    print(f"shapes {list(a.shape)} and {list(b.shape)}"); sys.exit(1)
d = float(np.max(np.abs(a.reshape(-1).astype(np.float64) - b.reshape(-1))))
print(f"{d:.2e} ({d / float(np.max(np.abs(b))):.1e} of the largest output)")
EOF
}

table="$out/zoo.md"
{
	echo "| model | import | compile (s) | compile --weights, warm (s) | max abs diff vs PyTorch (batch 32) | predict 32 (s) |"
	echo "|---|---|--:|--:|--:|--:|"
} >"$table"
for m in "${models[@]}"; do
	d="$out/$m.d"
	rm -rf "$d" && mkdir -p "$d"
	row="| $m |"
	if [ ! -s "$out/$m.onnx" ]; then
		echo "$row not exported | | | | |" >>"$table"
		continue
	fi
	if ! "$mlbuild" import "$out/$m.onnx" -o "$d" --name "$m" >"$d/import.log" 2>&1; then
		why=$(grep -m1 -E 'not supported|cannot|refus|error' "$d/import.log" | cut -c1-120)
		echo "$row refused: ${why:-see $m.d/import.log} | | | | |" >>"$table"
		continue
	fi
	row="$row ok |"
	t0=$(date +%s.%N)
	if ! "$mlbuild" compile "$d/$m.cue" -o "$d/$m" --force >"$d/compile.log" 2>&1; then
		echo "$row failed: $(tail -n1 "$d/compile.log" | cut -c1-120) | | | |" >>"$table"
		continue
	fi
	t1=$(date +%s.%N)
	row="$row $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") |"
	# The issue's "compile --weights under 30 s warm": Go's build cache now
	# holds the runtime, and the weights change mlbuild's cache key.
	t0=$(date +%s.%N)
	if "$mlbuild" compile "$d/$m.cue" --weights "$d/$m.safetensors" -o "$d/$m-weights" --force >"$d/compile-weights.log" 2>&1; then
		t1=$(date +%s.%N)
		row="$row $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") |"
	else
		row="$row failed: $(tail -n1 "$d/compile-weights.log" | cut -c1-100) |"
	fi
	rm -f "$d/$m-weights"
	if [ "${CUDA:-0}" = 1 ]; then
		mkdir -p "$out/cuda"
		"$mlbuild" compile "$d/$m.cue" --backend cuda -o "$out/cuda/$m" --force >"$d/compile-cuda.log" 2>&1 ||
			echo "$m: CUDA compile failed: $(tail -n1 "$d/compile-cuda.log")" >&2
	fi
	t0=$(date +%s.%N)
	if ! "$d/$m" predict --weights "$d/$m.safetensors" --output "$d/y.npy" "$out/$m.x.npy" >"$d/predict.log" 2>&1; then
		echo "$row predict failed: $(tail -n1 "$d/predict.log" | cut -c1-100) | |" >>"$table"
		continue
	fi
	t1=$(date +%s.%N)
	diff=$(compare "$d/y.npy" "$out/$m.y.npy")
	echo "$row $diff | $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") |" >>"$table"
done
cat "$table"
