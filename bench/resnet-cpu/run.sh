#!/usr/bin/env bash
# `make bench-resnet-cpu`: CIFAR ResNet-18 (bench/models/resnet18_cifar.cue,
# batch 128) on the CPU, mlbuild's programs against PyTorch's twin, side by
# side in one run (issue #30's training-step goal: at most 0.8× PyTorch's
# time on 1, 2 and all cores).
#
#   bench/resnet-cpu/run.sh MLBUILD OUT_DIR
#
# Compiles the spec in f32 and in bf16 (resnet18_cifar_bf16.cue) for the CPU
# into OUT_DIR (MLBUILD "-": OUT_DIR holds them already, resnet18_f32 and
# resnet18_bf16, as on a machine without Go: bench/gpu/cpuhost.sh part 4),
# then for each thread count of THREADS (default "1 <all
# cores>"): each program's `bench --threads T --iters ITERS` (default 3;
# median training step, batch-128 and batch-1 inference) and
# torch_resnet_cpu.py (fp32, fp32 channels_last, bf16 autocast +
# channels_last). PYTHON picks the Python with torch (default python3, then
# Debian's /usr/bin/python3; `apt-get install python3-torch` where none has
# it). PIN=1 runs both sides of T threads on cores 0..T-1 (taskset). Ratios are mlbuild's time over PyTorch's best fp32 mode (f32 rows)
# or best mode of all (bf16 rows); the table goes to stdout.
set -euo pipefail
mlbuild=$1 out=$2
[ "$mlbuild" = - ] || mlbuild=$(realpath "$mlbuild")
mkdir -p "$out" && out=$(realpath "$out")
here=$(dirname "$(realpath "$0")")
models=$here/../models
threads=${THREADS:-"1 $(nproc)"} iters=${ITERS:-3}
py=${PYTHON:-}
for cand in python3 /usr/bin/python3; do
	[ -n "$py" ] && break
	"$cand" -c 'import torch' 2>/dev/null && py=$cand
done
[ -n "$py" ] || { echo "bench-resnet-cpu: no Python with torch (apt-get install python3-torch)" >&2; exit 1; }
for p in f32 bf16; do
	[ "$mlbuild" = - ] && continue
	spec=$models/resnet18_cifar.cue
	[ $p = bf16 ] && spec=$models/resnet18_cifar_bf16.cue
	"$mlbuild" compile "$spec" -o "$out/resnet18_$p" >/dev/null
done
pin() { # pin T CMD...: CMD on cores 0..T-1 where PIN=1
	local t=$1
	shift
	if [ "${PIN:-0}" = 1 ]; then taskset -c "0-$((t - 1))" "$@"; else "$@"; fi
}
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; PyTorch $("$py" -c 'import torch; print(torch.__version__)')"
echo
echo "| threads | program | train step (ms) | PyTorch (ms) | ratio | infer b128 (ms) | PyTorch | ratio | b1 (ms) | PyTorch | ratio |"
echo "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for t in $threads; do
	tv=$(pin "$t" "$py" "$here/torch_resnet_cpu.py" "$t" "$iters" 2>/dev/null || true)
	for p in f32 bf16; do
		ml=$(GOMAXPROCS=$t pin "$t" "$out/resnet18_$p" bench --json --iters "$iters" --threads "$t" 2>&1 | tail -n 1)
		python3 - "$t" "$p" "$ml" "$tv" <<'PY'
import json, sys
t, p, ml, tv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
try:
    a = json.loads(ml)
except ValueError:
    print(f"| {t} | mlbuild {p} | failed: {ml[:80]} | | | | | | | | |"); sys.exit(0)
rows = [json.loads(l) for l in tv.splitlines() if l.startswith("{")]
rows = [r for r in rows if "error" not in r and (p == "bf16" or r["mode"].startswith("fp32"))]
if not rows:
    print(f"| {t} | mlbuild {p} | {a['train_step_ms']:.0f} | no PyTorch row | | | | | | | |"); sys.exit(0)
best = lambda k: min(rows, key=lambda r: r[k])
bt, bi, b1 = best("train_step_ms"), best("infer_b128_ms"), best("infer_b1_ms")
print(f"| {t} | mlbuild {p} vs PyTorch's best {'fp32' if p == 'f32' else 'mode'} ({bt['mode']}, {bi['mode']}, {b1['mode']}) | "
      f"{a['train_step_ms']:.0f} | {bt['train_step_ms']:.0f} | {a['train_step_ms'] / bt['train_step_ms']:.2f} | "
      f"{a['infer_batch_ms']:.0f} | {bi['infer_b128_ms']:.0f} | {a['infer_batch_ms'] / bi['infer_b128_ms']:.2f} | "
      f"{a['infer_batch1_ms']:.2f} | {b1['infer_b1_ms']:.2f} | {a['infer_batch1_ms'] / b1['infer_b1_ms']:.2f} |")
PY
	done
	echo "$tv" | sed 's/^/    PyTorch: /' >&2
done
