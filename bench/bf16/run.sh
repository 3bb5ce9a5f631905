#!/usr/bin/env bash
# run.sh runs on the AMX machine what bundle.sh built (see there): DIR/run.sh DIR [OUT]
set -uo pipefail
b=$(cd "${1:?usage: run.sh DIR [OUT]}" && pwd)
out=${2:-$b/out}
mkdir -p "$out"
work=$(mktemp -d)
data=$work/mnist
mkdir -p "$data"
for f in "$b"/mnist/*.gz; do gunzip -c "$f" >"$data/$(basename "$f" .gz)"; done
step() { echo; echo "== $*"; }
cat "$b/VERSION"
lscpu | grep -E 'Model name|^CPU\(s\)'
grep -o -w 'amx_bf16\|amx_tile\|avx512_bf16' /proc/cpuinfo | sort | uniq -c
step "rt/cpu tests on this CPU (AMX required)"
MLBUILD_WANT_AMX=1 "$b/bin/cpu.test" -test.run 'BF16|Sgemm|Dense|Gemm' -test.count=1 2>&1 | tail -n 3
step "selftest"
for m in mlp_bf16 mnist_bf16; do "$b/bin/$m" selftest | tail -n 3; done
step "accuracy: each model in both precisions, all cores (the MLPs 10 epochs, models/mnist.cue its spec's settings)"
for m in mlp mlp_bf16 mnist mnist_bf16; do
	epochs=()
	case $m in mlp*) epochs=(--epochs 10) ;; esac
	"$b/bin/$m" train --data "$data" "${epochs[@]}" --out "$work/$m.safetensors" --metrics "$work/$m-train.jsonl" --quiet >/dev/null 2>"$work/$m.err" || { echo "$m train failed:"; cat "$work/$m.err"; }
	echo "$m: $("$b/bin/$m" eval --data "$data" --weights "$work/$m.safetensors" | tail -n 1), epochs at $(grep '"event":"epoch"' "$work/$m-train.jsonl" | grep -o 'images_per_sec":[0-9]*' | cut -d: -f2 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') images/s (median)"
done
step "thread scaling: each program's bench (median of 50) at 1 to 16 threads"
for m in mlp mlp_bf16 mnist; do
	for t in 1 2 4 8 16; do
		"$b/bin/$m" bench --threads "$t" --json --iters 50 | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%-10s %2d threads: training step %.3f ms, batch-250 inference %.3f ms, batch 1 %.3f ms" % (r["model"], r["threads"], r["train_step_ms"], r["infer_batch_ms"], r["infer_batch1_ms"]))'
	done
done
step "speed against PyTorch (float32 and autocast bf16), 1 and 2 cores (taskset 2,3)"
cd "$b"
taskset -c 2,3 "$b/bin/models" -bin "$b/bin" -torch "python3 $b/torch_models.py" -data "$data" -models mlp,mlp_bf16 -thread-counts 1,2 "${@:3}" 2>&1 | tee "$out/models.txt" | tail -n 12
rm -rf "$work"
