#!/usr/bin/env bash
# fashion.sh runs, on a GPU machine, what fashion-bundle.sh built: CIFAR
# ResNet-18 on Fashion-MNIST (padded to 32×32) trained by mlbuild's CUDA
# programs in f32 and in bf16, each evaluated on the 10,000 test images,
# then the same recipe in PyTorch (bf16 autocast + channels_last, and fp32),
# one after the other on one GPU. Logs and weights go to OUT.
# Usage: bash fashion.sh BUNDLE OUT [EPOCHS]   (EPOCHS: the spec's 8)
set -euo pipefail
b=$(cd "$1" && pwd) out=$2 epochs=${3:-8}
mkdir -p "$out" "$out/data"
for f in "$b"/data/*.gz; do gunzip -c "$f" >"$out/data/$(basename "$f" .gz)"; done
(cd "$out/data" && md5sum -c "$b/data/MD5SUMS")
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for p in f32 bf16; do
	xz -dc "$b/r18f-$p.xz" >"$out/r18f-$p" && chmod +x "$out/r18f-$p"
	echo "== mlbuild $p"
	/usr/bin/time -f "wall %e s" "$out/r18f-$p" train --data "$out/data" --epochs "$epochs" --validation-split 0 \
		--out "$out/w-$p.safetensors" --metrics "$out/m-$p.jsonl" --force 2>&1 | tee "$out/train-$p.log" | tail -n 12
	"$out/r18f-$p" eval --data "$out/data" --weights "$out/w-$p.safetensors" --json | tee "$out/eval-$p.json"
done
cd "$b"
for m in bf16 fp32; do
	echo "== PyTorch $m"
	python3 torch_resnet_fashion.py "$out/data" "$m" "$epochs" | tee "$out/torch-$m.json"
done
