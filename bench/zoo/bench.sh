#!/usr/bin/env bash
# `make bench-zoo`: CPU inference of torchvision's classifiers, mlbuild's
# programs against PyTorch, side by side in one run (issue #30).
#
#   bench/zoo/bench.sh ZOO_DIR [NAME ...]
#
# ZOO_DIR is `make zoo`'s folder: each NAME.d/NAME is the CPU program of the
# imported model (batch 32; random weights: bench draws its own). For each
# model and each thread count of THREADS (default "1 <all cores>"): mlbuild's
# `bench --infer-only` (batch 32 and batch 1, median of ITERS, default 10)
# and bench/zoo/torch_bench.py (PyTorch's better of eager channels_last and
# frozen TorchScript, the same batches and median). Ratios are mlbuild's time
# over PyTorch's (below 1: mlbuild is faster; the issue's goal is 0.8).
# PYTHON picks the Python with torch and torchvision (default python3, then
# Debian's /usr/bin/python3). ISA=avx2 runs both sides on their AVX2
# kernels on an AVX-512 machine, an AVX2 machine's rows: mlbuild with
# MLBUILD_CPU_KERNELS=avx2, PyTorch with ATEN_CPU_CAPABILITY=avx2 and
# ONEDNN_MAX_CPU_ISA=AVX2 (DNNL_MAX_CPU_ISA for older oneDNN). The table
# goes to stdout.
set -uo pipefail
zoo=$1
shift
here=$(dirname "$(realpath "$0")")
threads=${THREADS:-"1 $(nproc)"} iters=${ITERS:-10}
py=${PYTHON:-}
for cand in python3 /usr/bin/python3; do
	[ -n "$py" ] && break
	"$cand" -c 'import torch, torchvision' 2>/dev/null && py=$cand
done
[ -n "$py" ] || { echo "bench-zoo: no Python with torch and torchvision (apt-get install python3-torchvision)" >&2; exit 1; }
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet18 resnet50 mobilenet_v2 efficientnet_b0 densenet121 squeezenet1_0 regnet_y_400mf)
if [ -n "${ISA:-}" ]; then
	[ "$ISA" = avx2 ] || { echo "bench-zoo: ISA is avx2 or unset, not $ISA" >&2; exit 2; }
	export MLBUILD_CPU_KERNELS=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores${ISA:+, both sides capped at $ISA}; PyTorch: $("$py" -c 'import torch; print(torch.__version__)')"
echo
echo "| model | threads | mlbuild b32 (ms) | PyTorch b32 (ms) | ratio | mlbuild b1 (ms) | PyTorch b1 (ms) | ratio |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|"
for m in "${models[@]}"; do
	bin=$zoo/$m.d/$m
	if [ ! -x "$bin" ]; then
		echo "| $m | | no program (make zoo ZOO_MODELS=$m) | | | | | |"
		continue
	fi
	for t in $threads; do
		ml=$("$bin" bench --infer-only --json --iters "$iters" --threads "$t" 2>&1 | tail -n 1)
		tv=$("$py" "$here/torch_bench.py" "$m" "$t" "$iters" 2>/dev/null | tail -n 1)
		python3 - "$m" "$t" "$ml" "$tv" <<'PY'
import json, sys
m, t = sys.argv[1], sys.argv[2]
try:
    a, b = json.loads(sys.argv[3]), json.loads(sys.argv[4])
except ValueError:
    print(f"| {m} | {t} | failed: {sys.argv[3][:60]} {sys.argv[4][:60]} | | | | | |")
    sys.exit(0)
r32, r1 = a["infer_batch_ms"] / b["best_b32_ms"], a["infer_batch1_ms"] / b["best_b1_ms"]
print(f"| {m} | {t} | {a['infer_batch_ms']:.1f} | {b['best_b32_ms']:.1f} | {r32:.2f} | {a['infer_batch1_ms']:.2f} | {b['best_b1_ms']:.2f} | {r1:.2f} |")
PY
	done
done
