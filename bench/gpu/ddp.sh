#!/usr/bin/env bash
# ddp.sh runs, on a machine with 2 NVIDIA GPUs, PyTorch (torchrun) and no
# Go, what ddp-bundle.sh built: the evidence of issue #29 on real GPUs.
#
#  1. CIFAR ResNet-18 (random 3×32×32 images, f32), training images/s on one
#     GPU at batch 128 and on `--gpus 2` at batch 256 (128 a GPU);
#  2. PyTorch DDP's twin (torchrun --nproc_per_node 1 and 2, the same model,
#     precision and batch a GPU, random data on the GPU): median step time;
#  3. models/mnist.cue on 2 GPUs trained to the end and evaluated (≥ 99.0%
#     asked), and the first 20 step losses of 1 GPU and 2 GPUs side by side;
#  4. two processes of one GPU each (CUDA_VISIBLE_DEVICES=0 and 1) meeting
#     through the rendezvous on 127.0.0.1, as two nodes, against --gpus 2:
#     the step losses and the weights compared;
#  5. the same two processes, node 1 killed (kill -9) mid-training: node 0's
#     exit status and time to exit (< 60 s asked).
#
# Every command runs under timeout(1); a step that fails is reported and the
# next one runs. Lines starting "RESULT" are the figures to read; all logs go
# to OUT.
# Usage: bash ddp.sh BUNDLE OUT        DRY_RUN=1: print the commands, run none
#        STEPS=1,2,3,4,5 (the default) chooses the steps.
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
dry=${DRY_RUN:-0} steps=${STEPS:-1,2,3,4,5}
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec 3>&1 # the script's own output, which DRY_RUN's lines go to past any log
port=$((29500 + RANDOM % 1000))
export MLBUILD_RENDEZVOUS_TOKEN=${MLBUILD_RENDEZVOUS_TOKEN:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}

say() { echo "== $*"; }
result() { echo "RESULT $*"; }
want() { [[ ",$steps," == *",$1,"* ]]; }
# run SECONDS CMD...: CMD under a timeout (killed 10 s after it), or, with
# DRY_RUN=1, printed.
run() {
	local s=$1
	shift
	if [ "$dry" = 1 ]; then
		echo "would run (at most ${s}s): $*" >&3
		return 0
	fi
	timeout -k 10 "$s" "$@"
}
# field FILE EVENT KEY [INDEX]: KEY of the EVENT lines of a metrics file
# (INDEX: that one, 1-based; else all, one a line).
field() {
	[ "$dry" = 1 ] && { echo 0; return; }
	python3 - "$@" <<'EOF'
import json, sys
path, event, key = sys.argv[1:4]
vals = [json.loads(l)[key] for l in open(path) if l.strip() and json.loads(l)["event"] == event]
if len(sys.argv) > 4:
    vals = vals[int(sys.argv[4]) - 1:int(sys.argv[4])]
print("\n".join(str(v) for v in vals))
EOF
}

# --metrics appends: a rerun into the same OUT starts afresh.
rm -f "$out"/*.jsonl
say "machine"
if [ "$dry" != 1 ]; then
	nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
	timeout 30 nvidia-smi topo -m | tee "$out/topo.txt"
	cat "$b/VERSION"
	for p in resnet18_cifar_b128 resnet18_cifar_b256 mnist; do
		xz -dc "$b/$p.xz" >"$out/$p" && chmod +x "$out/$p"
	done
	mkdir -p "$out/mnist"
	for f in "$b"/mnist/*.gz; do gunzip -c "$f" >"$out/mnist/$(basename "$f" .gz)"; done
fi
run 60 "$out/mnist" info | tee "$out/info.txt"

if want 1; then
	say "1. ResNet-18, random CIFAR-shaped data, f32: 1 GPU (batch 128) and --gpus 2 (batch 256 = 2 × 128)"
	# 25,600 images of 3×32×32 stored as 96×32 IDX images (the channels'
	# planes one above the other), labels 0-9.
	if [ "$dry" != 1 ]; then
		mkdir -p "$out/cifar"
		python3 - "$out/cifar" <<'EOF'
import os, struct, sys
d, n, t = sys.argv[1], 25600, 1024
for name, count in (("train", n), ("t10k", t)):
    with open(os.path.join(d, name + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, 96, 32) + os.urandom(count * 96 * 32))
    with open(os.path.join(d, name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, count) + bytes(b % 10 for b in os.urandom(count)))
EOF
	fi
	# Two epochs: the first compiles kernels and warms up; the second's
	# images/s is the figure.
	run 900 "$out/resnet18_cifar_b128" train --data "$out/cifar" --epochs 2 --validation-split 0 --quiet --force \
		--out "$out/r18-1.safetensors" --metrics "$out/r18-1.jsonl" >"$out/r18-1.log" 2>&1 || say "FAILED: see $out/r18-1.log"
	run 900 "$out/resnet18_cifar_b256" train --gpus 2 --data "$out/cifar" --epochs 2 --validation-split 0 --quiet --force \
		--out "$out/r18-2.safetensors" --metrics "$out/r18-2.jsonl" >"$out/r18-2.log" 2>&1 || say "FAILED: see $out/r18-2.log"
	one=$(field "$out/r18-1.jsonl" epoch images_per_sec 2) two=$(field "$out/r18-2.jsonl" epoch images_per_sec 2)
	result "mlbuild resnet18 f32 1 GPU  batch 128: ${one:-?} images/s (epoch 2)"
	result "mlbuild resnet18 f32 2 GPUs batch 256: ${two:-?} images/s (epoch 2); scaling $(python3 -c "print(round(${two:-0}/max(${one:-0},1e-9),2))" 2>/dev/null || echo ?)x"
fi

if want 2; then
	say "2. PyTorch DDP (torchrun), the same model, f32 (TF32 off), 128 images a GPU, random data on the GPU"
	for n in 1 2; do
		(cd "$b" && run 600 torchrun --standalone --nproc_per_node "$n" torch_ddp_resnet.py 128 50) >"$out/torch-ddp-$n.log" 2>&1 || say "FAILED: see $out/torch-ddp-$n.log"
		result "pytorch ddp resnet18 $n GPU(s): $(grep -h '^{' "$out/torch-ddp-$n.log" 2>/dev/null | tail -n 1)"
	done
fi

if want 3; then
	say "3. models/mnist.cue on 2 GPUs to the end, evaluated; first 20 losses of 1 GPU against 2"
	run 1200 "$out/mnist" train --gpus 2 --data "$out/mnist" --quiet --force --out "$out/mnist-2.safetensors" \
		--metrics "$out/mnist-2.jsonl" >"$out/mnist-2.log" 2>&1 || say "FAILED: see $out/mnist-2.log"
	tail -n 3 "$out/mnist-2.log" 2>/dev/null
	run 300 "$out/mnist" eval --data "$out/mnist" --weights "$out/mnist-2.safetensors" --json >"$out/mnist-2-eval.json" 2>&1 || say "FAILED: see $out/mnist-2-eval.json"
	acc=$([ "$dry" = 1 ] && echo 0 || python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['accuracy'])" "$out/mnist-2-eval.json" 2>/dev/null)
	result "mnist 2 GPUs test accuracy: ${acc:-?} ($(python3 -c "print('PASS' if float('${acc:-0}') >= 0.99 else 'BELOW 99.0%')" 2>/dev/null))"
	# One GPU, the same run's first epoch (its schedule: --epochs as the
	# spec's, so the learning rates agree step by step).
	run 900 "$out/mnist" train --data "$out/mnist" --quiet --force --out "$out/mnist-1.safetensors" \
		--metrics "$out/mnist-1.jsonl" >"$out/mnist-1.log" 2>&1 || say "FAILED: see $out/mnist-1.log"
	if [ "$dry" != 1 ]; then
		echo "step  loss 1 GPU    loss 2 GPUs   difference"
		paste <(field "$out/mnist-1.jsonl" step loss | head -n 20) <(field "$out/mnist-2.jsonl" step loss | head -n 20) |
			awk '{ printf "%4d  %-12s  %-12s  %.3g\n", NR, $1, $2, $2 - $1 }'
	fi
fi

# nodes I EXTRA...: node I of 2 (GPU I alone); called with & it becomes
# the program, so that $! is the program's own pid (step 5 kills it).
nodes() {
	local i=$1
	shift
	if [ "$dry" = 1 ]; then
		echo "would run in the background: CUDA_VISIBLE_DEVICES=$i $out/mnist train --data $out/mnist --nodes 2 --node-rank $i --rendezvous 127.0.0.1:$port --rendezvous-timeout 2m --force $*" >&3
		exit 0
	fi
	CUDA_VISIBLE_DEVICES=$i exec "$out/mnist" train --data "$out/mnist" --nodes 2 --node-rank "$i" \
		--rendezvous "127.0.0.1:$port" --rendezvous-timeout 2m --force "$@"
}
# guard PID...: kill -9 them after 15 minutes, so that no step waits for
# ever; it prints the guard's pid, to end it when they finish in time.
guard() {
	(
		trap 'exit 0' TERM
		for _ in $(seq 900); do sleep 1; done
		echo "the guard killed $* after 15 minutes" >>"$out/guard.log"
		kill -9 "$@"
	) >/dev/null 2>&1 &
	echo $!
}

if want 4; then
	say "4. two processes of one GPU each through the rendezvous on 127.0.0.1:$port, against --gpus 2 (1 epoch)"
	run 600 "$out/mnist" train --gpus 2 --epochs 1 --data "$out/mnist" --quiet --force --out "$out/g2.safetensors" \
		--metrics "$out/g2.jsonl" >"$out/g2.log" 2>&1 || say "FAILED: see $out/g2.log"
	nodes 0 --epochs 1 --out "$out/n0.safetensors" --metrics "$out/n0.jsonl" >"$out/n0.log" 2>&1 &
	p0=$!
	nodes 1 --epochs 1 --out "$out/n1.safetensors" --metrics "$out/n1.jsonl" >"$out/n1.log" 2>&1 &
	p1=$!
	g=$(guard $p0 $p1)
	wait $p0
	c0=$?
	wait $p1
	c1=$?
	kill "$g" 2>/dev/null
	result "two nodes: exit statuses $c0 and $c1 (want 0 and 0)"
	grep -h "GPUs of 2 nodes" "$out/n0.log" "$out/n1.log" 2>/dev/null
	if [ "$dry" != 1 ]; then
		python3 - "$out/n0.jsonl" "$out/g2.jsonl" <<'EOF'
import json, sys
def steps(p):
    return [(e["loss"], e["acc"]) for e in map(json.loads, open(p)) if e["event"] == "step"]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
same = sum(x == y for x, y in zip(a, b))
worst = max((abs(x[0] - y[0]) for x, y in zip(a, b)), default=float("nan"))
print(f"RESULT two nodes against --gpus 2: {same} of {len(b)} steps with the same loss and accuracy ({len(a)} steps on the nodes); largest loss difference {worst:.3g}")
EOF
		if cmp -s "$out/n0.safetensors" "$out/g2.safetensors"; then
			result "two nodes' weights: the same bytes as --gpus 2's"
		else
			result "two nodes' weights: differ from --gpus 2's"
		fi
		[ -e "$out/n1.safetensors" ] && result "node 1 wrote weights (it should not)"
	fi
fi

if want 5; then
	say "5. two processes, node 1 killed (kill -9) mid-training: node 0's exit"
	# 100 epochs: far more than the kill waits for (the guard ends them
	# should the kill fail).
	nodes 0 --epochs 100 --out "$out/k0.safetensors" --metrics "$out/k0.jsonl" >"$out/k0.log" 2>&1 &
	p0=$!
	nodes 1 --epochs 100 --out "$out/k1.safetensors" >"$out/k1.log" 2>&1 &
	p1=$!
	g=$(guard $p0 $p1)
	if [ "$dry" != 1 ]; then
		# wait for training to run (steps in the metrics), at most 3 minutes
		for _ in $(seq 360); do
			[ "$(grep -c '"event":"step"' "$out/k0.jsonl" 2>/dev/null || echo 0)" -ge 100 ] && break
			kill -0 $p0 2>/dev/null || break
			sleep 0.5
		done
		kill -0 $p0 2>/dev/null || result "FAIL: node 0 ended before node 1 was killed (see $out/k0.log)"
		echo "killing node 1 (pid $p1) after $(grep -c '"event":"step"' "$out/k0.jsonl" 2>/dev/null) steps"
		start=$(date +%s.%N)
		kill -9 $p1
		wait $p0
		c0=$?
		took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
		wait $p1
		kill "$g" 2>/dev/null
		result "node 0 after node 1's kill -9: exit status $c0 in ${took} s ($(python3 -c "print('PASS' if $c0 != 0 and $took < 60 else 'FAIL')"): non-zero within 60 s)"
		grep -h "node 1" "$out/k0.log" | tail -n 2
	else
		echo "would kill -9 node 1 after 100 steps and time node 0's exit"
		wait $p0 $p1
		kill "$g" 2>/dev/null
	fi
fi
say "done; logs in $out"
