#!/usr/bin/env bash
# fashion.sh runs, on a GPU machine, what fashion-bundle.sh built: CIFAR
# ResNet-18 on Fashion-MNIST (padded to 32×32) trained by mlbuild's CUDA
# programs in f32 and in bf16, each evaluated on the 10,000 test images,
# then the same recipe in PyTorch (bf16 autocast + channels_last, and fp32),
# one after the other on one GPU. Logs and weights go to OUT.
# SEEDS (default 1, the spec's) lists the seeds of mlbuild's runs, each
# trained and evaluated in f32 and bf16; TORCH=0 leaves PyTorch's out;
# MNIST=1 also trains models/mnist.cue in f32 and bf16 with its own
# settings and evaluates it (the bundle's mnist-*.xz and mnist/ data).
# Usage: bash fashion.sh BUNDLE OUT [EPOCHS]   (EPOCHS: the spec's 8)
set -euo pipefail
b=$(cd "$1" && pwd) out=$2 epochs=${3:-8}
mkdir -p "$out" "$out/data"
for f in "$b"/data/*.gz; do gunzip -c "$f" >"$out/data/$(basename "$f" .gz)"; done
(cd "$out/data" && md5sum -c "$b/data/MD5SUMS")
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for s in ${SEEDS:-1}; do
	for p in f32 bf16; do
		xz -dc "$b/r18f-$p.xz" >"$out/r18f-$p" && chmod +x "$out/r18f-$p"
		echo "== mlbuild $p, seed $s"
		/usr/bin/time -f "wall %e s" "$out/r18f-$p" train --data "$out/data" --epochs "$epochs" --validation-split 0 --seed "$s" \
			--out "$out/w-$p-$s.safetensors" --metrics "$out/m-$p-$s.jsonl" --force 2>&1 | tee "$out/train-$p-$s.log" | tail -n 12
		"$out/r18f-$p" eval --data "$out/data" --weights "$out/w-$p-$s.safetensors" --json | tee "$out/eval-$p-$s.json"
	done
done
if [ "${MNIST:-0}" = 1 ]; then
	mkdir -p "$out/mnist"
	for f in "$b"/mnist/*.gz; do gunzip -c "$f" >"$out/mnist/$(basename "$f" .gz)"; done
	for p in f32 bf16; do
		xz -dc "$b/mnist-$p.xz" >"$out/mnist-$p" && chmod +x "$out/mnist-$p"
		echo "== models/mnist.cue $p"
		"$out/mnist-$p" train --data "$out/mnist" --out "$out/wm-$p.safetensors" --force 2>&1 | tail -n 2
		"$out/mnist-$p" eval --data "$out/mnist" --weights "$out/wm-$p.safetensors" --json | tee "$out/eval-mnist-$p.json"
	done
fi
[ "${TORCH:-1}" = 0 ] && exit 0
cd "$b"
for m in bf16 fp32; do
	echo "== PyTorch $m"
	python3 torch_resnet_fashion.py "$out/data" "$m" "$epochs" | tee "$out/torch-$m.json"
done
