#!/usr/bin/env bash
# session.sh runs, on a GPU machine, what bench/gpu/session-bundle.sh built:
#   1. the machine, and the cuda package's Real tests (the gpuhost
#      conformance suite on the GPU);
#   2. selftest of the CUDA program of every valid spec (selftest-all.sh);
#   3. CIFAR ResNet-18 at batch 128: mlbuild's CUDA program (bench: training
#      step, batch-128 and batch-1 inference; info: the memory it takes)
#      against PyTorch in fp32 and bf16, eager and compiled, in one run;
#      then the same model with precision "bf16" and "tf32" (cuBLAS's fast
#      compute types): selftest, bench and the GEMM facts of info;
#   4. torchvision's classifiers on the GPU against PyTorch (zoo.sh, from
#      ZOO_BUNDLE, default BUNDLE/../zoo: session-bundle.sh writes it apart);
#   5. the host CPU: CIFAR ResNet-18's peak resident memory in training
#      against PyTorch's (cpu_memory.py), and the imported resnet18 (224,
#      weights embedded) predicting one sample against bench's batch-1
#      latency, on 16 and 2 threads (from CPU_BUNDLE, default BUNDLE/../cpu);
#   7. the host CPU: bench-zoo, the zoo's CPU inference against this
#      machine's PyTorch on 1 and 16 threads (from CPU_BUNDLE/zoo).
# Usage: session.sh BUNDLE OUTDIR [PARTS]   (PARTS: e.g. "1 2 3 4 5", the default;
# TORCH_MODES: part 3's PyTorch modes, comma-separated, default all six)
set -uo pipefail
b=$(cd "$1" && pwd) out=$2 parts=${3:-1 2 3 4 5}
mkdir -p "$out"
work=$(mktemp -d)
export MLBUILD_CUDA_CACHE=$work/kernels
step() { echo; echo "== $*"; }
unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" && chmod +x "$2"; }
want() { [[ " $parts " == *" $1 "* ]]; }

if want 1; then
	step "machine"; cat "$b/VERSION"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total,memory.used --format=csv,noheader
	step "the cuda package's Real tests on this GPU"
	unxz "$b/cuda.test.xz" "$work/cuda.test"
	(cd "$work" && MLBUILD_CUDA_REAL=1 timeout 300 ./cuda.test -test.run Real -test.v 2>&1 | grep -E '^\s*(--- |ok|FAIL|PASS)' | tail -n 40)
fi
if want 2; then
	step "selftest of every valid spec's CUDA program"
	mkdir -p "$work/st"
	python3 - "$b/selftest.tar.xz" "$work/st" <<'PY'
import sys, tarfile
t = tarfile.open(sys.argv[1], "r:xz")
try:
    t.extractall(sys.argv[2], filter="data")
except TypeError:  # a Python without extraction filters: check the names ourselves
    assert all(not m.name.startswith("/") and ".." not in m.name.split("/") for m in t.getmembers())
    t.extractall(sys.argv[2])
PY
	timeout 420 bash "$b/selftest-all.sh" "$work/st" 2>&1 | tee "$out/selftest-all.txt" | tail -n 60
fi
if want 3; then
	step "CIFAR ResNet-18, batch 128: mlbuild CUDA"
	unxz "$b/r18/resnet18_cifar.xz" "$work/r18"
	"$work/r18" info | grep -iE 'memory|arena|backend|device|gpu' | head -n 12
	timeout 240 "$work/r18" bench --json --iters 30 2>&1 | tee "$out/r18-mlbuild.json" | tail -n 3
	for p in bf16 tf32; do
		step "CIFAR ResNet-18, batch 128: mlbuild CUDA, precision $p"
		unxz "$b/r18/resnet18_cifar_$p.xz" "$work/r18-$p"
		"$work/r18-$p" info | grep -E '^ *GEMM' | head -n 2
		timeout 240 "$work/r18-$p" selftest 2>&1 | tee "$out/r18-$p-selftest.txt" | tail -n 4
		timeout 240 "$work/r18-$p" bench --json --iters 30 2>&1 | tee "$out/r18-$p-mlbuild.json" | tail -n 3
	done
	step "CIFAR ResNet-18, batch 128: PyTorch"
	PYTHONUNBUFFERED=1 timeout 420 python3 "$b/r18/torch_resnet_cifar.py" ${TORCH_MODES:-} 2>&1 | grep -v Warning | tee "$out/r18-torch.jsonl" | tail -n 6
fi
if want 4; then
	step "torchvision classifiers on the GPU against PyTorch"
	mkdir -p "$work/zoo"
	z=${ZOO_BUNDLE:-$b/../zoo}
	timeout 900 bash "$z/zoo.sh" "$z" "$out" 2>&1 | tail -n 20
fi
if want 5; then
	step "host CPU: CIFAR ResNet-18 training, peak resident memory, mlbuild and PyTorch"
	lscpu | grep -E 'Model name|^CPU\(s\)'
	c=${CPU_BUNDLE:-$b/../cpu}
	unxz "$c/resnet18_cifar-cpu.xz" "$work/r18cpu"
	PYTHONUNBUFFERED=1 timeout 300 python3 "$c/cpu_memory.py" "$work/r18cpu" 16 3 2>&1 | tee "$out/r18-cpu-memory.jsonl"
	if [ -f "$c/resnet18-224.xz" ]; then
		step "host CPU: imported resnet18 (224, weights embedded), one sample through predict against bench's batch 1"
		unxz "$c/resnet18-224.xz" "$work/zr18"
		for t in 16 2; do
			timeout 200 "$work/zr18" bench --json --iters 5 --threads $t | tail -n 1
			for i in 1 2 3 4 5; do
				s0=$(date +%s%N)
				"$work/zr18" predict --threads $t "$c/one.npy" >/dev/null
				echo "predict of one sample, $t threads: $(( ($(date +%s%N) - s0) / 1000 )) us"
			done
		done
	fi
fi
if want 7; then
	step "host CPU: torchvision classifiers' inference, mlbuild against PyTorch (bench-zoo)"
	c=${CPU_BUNDLE:-$b/../cpu}
	mkdir -p "$work/zoo7"
	names=()
	for f in "$c"/zoo/*.xz; do
		m=$(basename "$f" .xz)
		mkdir -p "$work/zoo7/$m.d" && unxz "$f" "$work/zoo7/$m.d/$m" && names+=("$m")
	done
	THREADS=${ZOO_THREADS:-"1 16"} ITERS=${ZOO_ITERS:-5} timeout 420 bash "$c/zoo/bench.sh" "$work/zoo7" "${names[@]}" 2>&1 | tee "$out/bench-zoo.md"
fi
