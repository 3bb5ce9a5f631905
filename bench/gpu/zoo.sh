#!/usr/bin/env bash
# zoo.sh runs, on the GPU machine, the CUDA programs of torchvision's
# classifiers that bench/gpu/zoo-bundle.sh compiled here, and compares each
# with PyTorch. The machine has PyTorch and torchvision but no Go, and the
# call carries at most 64 MiB, so the weights are not carried: the models
# are exported again there by bench/zoo/export.py (the same script, seed and
# photographs), imported there by the carried mlbuild, and the spec that
# import writes must equal the one the CUDA program was compiled from (it
# is compared, then the program checks the weights against its params by
# name and shape). Each program then predicts the 32 photographs on the GPU
# and the largest absolute difference from PyTorch's (fp32, CPU) output is
# printed, with the predict time and bench's latencies.
#
#   zoo.sh BUNDLE OUTDIR
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
work=$(mktemp -d)
export MLBUILD_CUDA_CACHE=$work/kernels
# unpack FILE DEST: a gzip or xz file, or a plain one, as an executable
unpack() {
	case $1 in
	*.gz) gunzip -c "$1" >"$2" ;;
	*.xz) python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" ;;
	*) cp "$1" "$2" ;;
	esac
	chmod +x "$2"
}
unpack "$(ls "$b"/mlbuild* | head -n 1)" "$work/mlbuild"
table="$out/zoo-cuda.md"
echo "| model | spec as compiled | max abs diff vs PyTorch (batch 32) | predict 32 (s) | bench: batch-32 / batch-1 inference (ms) |" >"$table"
echo "|---|---|--:|--:|--:|" >>"$table"
for f in "$b"/cuda/*; do
	m=$(basename "${f%.[gx]z}")
	d=$work/$m
	mkdir -p "$d"
	unpack "$f" "$d/prog"
	if ! python3 "$b/export.py" "$d" "$b/photos" "$m" >"$d/export.log" 2>&1; then
		echo "| $m | export failed: $(tail -n1 "$d/export.log" | cut -c1-100) | | | |" >>"$table"
		continue
	fi
	if ! "$work/mlbuild" import "$d/$m.onnx" -o "$d" --name "$m" >"$d/import.log" 2>&1; then
		echo "| $m | import failed: $(grep -m1 -iE 'error|refus|not supported' "$d/import.log" | cut -c1-100) | | | |" >>"$table"
		continue
	fi
	same=same
	if ! diff -q <(grep -v '^//' "$d/$m.cue") <(grep -v '^//' "$b/specs/$m.cue") >/dev/null; then
		same=differs
		diff <(grep -v '^//' "$d/$m.cue") <(grep -v '^//' "$b/specs/$m.cue") | head -n 20 >"$out/$m.spec.diff"
	fi
	s=$(date +%s.%N)
	if ! "$d/prog" predict --weights "$d/$m.safetensors" --output "$d/y.npy" "$d/$m.x.npy" >"$d/predict.log" 2>&1; then
		echo "| $m | $same | predict failed: $(tail -n1 "$d/predict.log" | cut -c1-100) | | |" >>"$table"
		cp "$d/predict.log" "$out/$m.predict.log"
		continue
	fi
	e=$(date +%s.%N)
	diff=$(python3 -c "
import numpy as np, sys
a, b = np.load('$d/y.npy'), np.load('$d/$m.y.npy')
d = float(np.max(np.abs(a.reshape(-1).astype(np.float64) - b.reshape(-1)))) if a.size == b.size else None
print(f'{d:.2e} ({d / float(np.max(np.abs(b))):.1e} of the largest output)' if d is not None else f'shapes {a.shape} {b.shape}')")
lat=$("$d/prog" bench --json --iters 20 2>/dev/null | python3 -c "
import json, sys
j = json.load(sys.stdin); print(f\"{j.get('infer_batch_ms', 0):.2f} / {j.get('infer_batch1_ms', 0):.2f}\")" 2>/dev/null)
	echo "| $m | $same | $diff | $(python3 -c "print(f'{$e-$s:.2f}')") | ${lat:-?} |" >>"$table"
done
cat "$table"
