#!/usr/bin/env bash
# run.sh runs, on a Linux machine with an NVIDIA GPU, what bench/gpu/bundle.sh
# built: every program's info and selftest; models/mnist.cue trained with its
# own settings and evaluated (on the GPU, and the GPU's weights on the CPU
# program); the first steps' losses of the CPU and CUDA programs side by side;
# kernel start-up cold and from the cache; then epoch times and inference
# latency of the three models against PyTorch eager and torch.compile, in one
# run. Usage: run.sh BUNDLE OUTDIR [EPOCHS]
set -uo pipefail
b=$(cd "$1" && pwd); out=$2; epochs=${3:-4}
mkdir -p "$out"
work=$(mktemp -d)
data=$work/mnist
mkdir -p "$data"
for f in "$b"/mnist/*.gz; do gunzip -c "$f" >"$data/$(basename "$f" .gz)"; done
export MLBUILD_CUDA_CACHE=$work/kernels
step() { echo; echo "== $*"; }
step "machine"; cat "$b/VERSION"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader
step "the cuda package's tests on this GPU (the Real cases: the gpuhost conformance suite, start-up, facts)"
MLBUILD_CUDA_REAL=1 "$b/bin/cuda.test" -test.run Real -test.v 2>&1 | grep -E '^\s*(--- |ok|FAIL|PASS)' | tail -n 30
for m in mnist lenet5 mlp; do
	step "$m info"; "$b/bin/$m" info | sed -n '1,/^$/p'
	step "$m start-up: cold kernel cache, then warm (the kernels line; wall time of the whole info command)"
	rm -rf "$MLBUILD_CUDA_CACHE"
	for i in cold warm; do
		s=$(date +%s.%N); k=$("$b/bin/$m" info | grep '^kernels:'); e=$(date +%s.%N)
		echo "$i: $k; info took $(python3 -c "print(f'{$e-$s:.3f}')") s"
	done
	step "$m selftest"; "$b/bin/$m" selftest | tail -n 25
done
step "selftest of every valid test spec and model (selftest-all.sh; the failing rows in $out/selftest-all.txt)"
"$b/selftest-all.sh" "$b" >"$out/selftest-all.txt" 2>&1; echo "selftest-all exit $?"
grep -E '^(==|[0-9]+ passed|COMPILE|selftest-all:)' "$out/selftest-all.txt" | tail -n 80
step "mnist: CPU and CUDA programs, first steps' losses"
for p in mnist mnist-cpu; do
	"$b/bin/$p" train --data "$data" --epochs 1 --limit 5000 --validation-split 0 --out "$work/$p-first.safetensors" --metrics "$work/$p-first.jsonl" --quiet >/dev/null
done
python3 - "$work/mnist-first.jsonl" "$work/mnist-cpu-first.jsonl" <<'PY'
import json, sys
g, c = ([json.loads(l) for l in open(p) if '"step"' in l] for p in sys.argv[1:3])
worst = 0.0
for a, b in zip(g[:20], c[:20]):
    d = abs(a['loss'] - b['loss']); worst = max(worst, d)
    print(f"step {a['step']:3d}  cuda {a['loss']:.6f}  cpu {b['loss']:.6f}  |diff| {d:.2e}")
print(f"largest difference over the first {min(20, len(g))} steps: {worst:.2e}")
PY
step "mnist with MLBUILD_CUDA_BLOCKING=1 (every op launched alone and waited for, so a fault names its kernel): the same first steps"
s=$(date +%s.%N)
MLBUILD_CUDA_BLOCKING=1 "$b/bin/mnist" train --data "$data" --epochs 1 --limit 5000 --validation-split 0 --out "$work/blocking.safetensors" --metrics "$work/blocking.jsonl" --quiet >/dev/null
e=$(date +%s.%N)
python3 - "$work/mnist-first.jsonl" "$work/blocking.jsonl" "$s" "$e" <<'PY'
import json, sys
g, b = ([json.loads(l) for l in open(p) if '"step"' in l] for p in sys.argv[1:3])
same = sum(1 for x, y in zip(g, b) if x['loss'] == y['loss'])
print(f"{len(b)} steps in {float(sys.argv[4]) - float(sys.argv[3]):.2f} s with the command's start-up; losses identical to the graphs' for {same} of {min(len(g), len(b))} steps")
PY
step "mnist: full training with the spec's settings"
"$b/bin/mnist" train --data "$data" --out "$out/mnist-cuda.safetensors" --metrics "$out/mnist-train.jsonl" 2>&1 | tail -n 15
step "mnist: evaluation of the GPU-trained weights, on the GPU and on the CPU"
"$b/bin/mnist" eval --data "$data" --weights "$out/mnist-cuda.safetensors" | tail -n 1
"$b/bin/mnist-cpu" eval --data "$data" --weights "$out/mnist-cuda.safetensors" | tail -n 1
step "epoch times and inference (mlbuild CUDA)"
for m in mnist lenet5 mlp; do
	rm -f "$work/$m-bench.jsonl"
	"$b/bin/$m" train --data "$data" --epochs "$epochs" --validation-split 0 --out "$work/$m-bench.safetensors" --metrics "$work/$m-bench.jsonl" --quiet >/dev/null
	"$b/bin/$m" bench --json --iters 50 >"$work/$m-bench.json"
	python3 - "$m" "$work/$m-bench.jsonl" "$work/$m-bench.json" >>"$out/mlbuild.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[2]) if '"epoch"' in l]
secs = [60000 / e['images_per_sec'] for e in ev if e.get('images_per_sec')]
bench = json.load(open(sys.argv[3]))
rest = secs[1:] or secs
print(json.dumps(dict(model=sys.argv[1], first_epoch_s=round(secs[0], 4), epoch_s=[round(s, 4) for s in rest],
      median_epoch_s=round(sorted(rest)[len(rest)//2], 4), infer_batch_ms=bench.get('infer_batch_ms'), infer_one_ms=bench.get('infer_batch1_ms'),
      train_step_ms=bench.get('train_step_ms'))))
PY
	tail -n 1 "$out/mlbuild.jsonl"
done
# TF32 GEMMs are a spec's precision now (precision: "tf32"; MLBUILD_CUDA_TF32
# is refused): session.sh measures bench/models/resnet18_cifar_tf32.cue.

step "mnist: where a training step's time goes (ncu: the kernels of about three training steps)"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
if [ -n "$ncu" ]; then
	# skip start-up and the first 20 steps (each step is ~21 kernels and GEMMs), then time one step's kernels
	timeout 240 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 600 --launch-count 150 \
		"$b/bin/mnist" train --data "$data" --epochs 1 --limit 10000 --validation-split 0 --out "$work/prof.safetensors" --quiet >"$out/ncu.csv" 2>"$work/ncu.err"
	python3 - "$out/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print("ncu gave no rows"); sys.exit()
h = rows[0]; ki, vi = h.index('Kernel Name'), h.index('Metric Value')
t = collections.Counter(); n = collections.Counter(); seq = []
for r in rows[1:]:
    try: v = float(r[vi].replace(',', ''))
    except ValueError: continue
    t[r[ki][:70]] += v; n[r[ki][:70]] += 1; seq.append((r[ki], v))
tot = sum(t.values())
# A step ends with its record kernel: the kernels after the first record up
# to the last one are whole steps.
ends = [i for i, (k, _) in enumerate(seq) if '_record' in k]
if len(ends) >= 2:
    whole = sum(v for _, v in seq[ends[0]+1:ends[-1]+1]); steps = len(ends) - 1
    print(f"{len(seq)} kernels, {tot/1e3:.1f} us in all; {steps} whole steps among them, {(ends[-1]-ends[0])//steps} kernels and {whole/1e3/steps:.0f} us of kernels a step")
else:
    print(f"{len(seq)} kernels, {tot/1e3:.1f} us in all; fewer than two step ends among them")
for k, v in t.most_common(30): print(f"{v/1e3:9.1f} us  x{n[k]:<3d} {k}")
PY
else
	echo "no ncu here"
fi
step "mnist: where a batch-250 inference's time goes (ncu: the kernels of two inferences of eval, in order)"
if [ -n "$ncu" ]; then
	timeout 120 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 120 --launch-count 40 \
		"$b/bin/mnist" eval --data "$data" --weights "$out/mnist-cuda.safetensors" >"$out/ncu-infer.csv" 2>"$work/ncu-infer.err"
	python3 - "$out/ncu-infer.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print("ncu gave no rows"); sys.exit()
h = rows[0]; ki, vi = h.index('Kernel Name'), h.index('Metric Value')
seq = []
for r in rows[1:]:
    try: seq.append((r[ki][:70], float(r[vi].replace(',', ''))))
    except ValueError: pass
# one inference starts with the first convolution's kernel (direct)
starts = [i for i, (k, _) in enumerate(seq) if 'conv_direct' in k]
if len(starts) >= 2:
    one = seq[starts[0]:starts[1]]
    print(f"one inference: {len(one)} kernels, {sum(v for _, v in one)/1e3:.1f} us of kernels")
    for k, v in one: print(f"{v/1e3:9.1f} us  {k}")
else:
    for k, v in seq: print(f"{v/1e3:9.1f} us  {k}")
PY
fi
step "PyTorch reference (eager and torch.compile reduce-overhead)"
PYTHONUNBUFFERED=1 python3 "$b/torch_gpu_mnist.py" "$b/mnist" "$epochs" flagship,lenet5,mlp | tee "$out/torch.jsonl"
step "side by side"
python3 - "$out/mlbuild.jsonl" "$out/torch.jsonl" <<'PY'
import json, sys
ml = {r['model']: r for r in map(json.loads, open(sys.argv[1]))}
tr = {}
for r in map(json.loads, open(sys.argv[2])):
    if 'model' in r: tr[(r['model'], r['mode'])] = r
names = {'mnist': 'flagship', 'lenet5': 'lenet5', 'mlp': 'mlp'}
print('| model | mlbuild epoch s | eager | ratio | compiled | ratio | mlbuild infer b250 ms (host to host) | eager (input and output on the GPU) | compiled (same) | ratio vs best |')
print('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
for m, t in names.items():
    a, e, c = ml.get(m), tr.get((t, 'eager')), tr.get((t, 'compiled'))
    if not (a and e and c) or 'failed' in e or 'failed' in c: print('|', m, '| missing |'); continue
    best = min(e['infer_batch_ms'], c['infer_batch_ms'])
    print(f"| {m} | {a['median_epoch_s']:.3f} | {e['median_epoch_s']:.3f} | {e['median_epoch_s']/a['median_epoch_s']:.2f}x | {c['median_epoch_s']:.3f} | {c['median_epoch_s']/a['median_epoch_s']:.2f}x | {a['infer_batch_ms']:.3f} | {e['infer_batch_ms']:.3f} | {c['infer_batch_ms']:.3f} | {best/a['infer_batch_ms']:.2f}x |")
print()
print('Inference latency host to host (input from host memory, outputs back in host memory, as mlbuild bench measures): ms, and PyTorch best / mlbuild')
print('| model | mlbuild b250 | eager | compiled | ratio | mlbuild b1 | eager | compiled | ratio |')
print('|---|--:|--:|--:|--:|--:|--:|--:|--:|')
for m, t in names.items():
    a, e, c = ml.get(m), tr.get((t, 'eager')), tr.get((t, 'compiled'))
    if not (a and e and c) or 'infer_batch_host_ms' not in e or 'infer_batch_host_ms' not in c: print('|', m, '| missing |'); continue
    bb = min(e['infer_batch_host_ms'], c['infer_batch_host_ms']); b1 = min(e['infer_one_host_ms'], c['infer_one_host_ms'])
    print(f"| {m} | {a['infer_batch_ms']:.3f} | {e['infer_batch_host_ms']:.3f} | {c['infer_batch_host_ms']:.3f} | {bb/a['infer_batch_ms']:.2f}x | {a['infer_one_ms']:.3f} | {e['infer_one_host_ms']:.3f} | {c['infer_one_host_ms']:.3f} | {b1/a['infer_one_ms']:.2f}x |")
PY
