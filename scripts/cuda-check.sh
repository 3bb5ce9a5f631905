#!/usr/bin/env bash
# cuda-check.sh: run every emit/gpu kernel test case, printed in the CUDA
# dialect, on a real NVIDIA GPU and compare it with rt/cpu.
#
#   scripts/cuda-check.sh [--cpu] [DIR]     (DIR defaults to cudacheck-out)
#
# With Go on PATH it (re)writes DIR through TestCUDACheckExport: DIR/kernels.cu
# (kernels and host driver), DIR/data/*.in|*.want (raw little-endian float32)
# and DIR/shim/ (headers for the CPU build). Without Go it uses a DIR written
# earlier, so the folder can be carried to a GPU machine that has no Go.
# Then it builds kernels.cu with nvcc (-O2 -arch=$CUDA_ARCH, default native)
# and runs it; the driver prints one line per case and last "N passed, M
# failed". --cpu builds the same file with g++ through the CUDA shim instead.
#
# Exit status: 0 all cases passed, 1 a case failed or a step broke, 2 no
# nvcc (or, with --cpu, no g++), or no Go and no DIR written before.
set -euo pipefail

cpu=0
if [[ "${1:-}" == "--cpu" ]]; then
	cpu=1
	shift
fi
dir=${1:-cudacheck-out}
root=$(cd "$(dirname "$0")/.." && pwd)

if command -v go >/dev/null 2>&1; then
	mkdir -p "$dir"
	abs=$(cd "$dir" && pwd)
	echo "cuda-check: writing $dir with go test ./emit/gpu -run TestCUDACheckExport"
	(cd "$root" && MLBUILD_CUDA_OUT="$abs" go test ./emit/gpu -run '^TestCUDACheckExport$' -count=1 >/dev/null)
elif [[ -f "$dir/kernels.cu" ]]; then
	echo "cuda-check: go not on PATH; using the kernels.cu already in $dir"
else
	echo "cuda-check: go not on PATH and $dir/kernels.cu does not exist: write it on a machine with Go first" >&2
	exit 2
fi

if [[ $cpu == 1 ]]; then
	if ! command -v g++ >/dev/null 2>&1; then
		echo "cuda-check: g++ not on PATH" >&2
		exit 2
	fi
	g++ --version | head -n 1
	g++ -x c++ -std=c++20 -O1 -pthread -Wno-attributes -I "$dir/shim" -o "$dir/cuda-check-cpu" "$dir/kernels.cu"
	exec "$dir/cuda-check-cpu" "$dir/data"
fi

if ! command -v nvcc >/dev/null 2>&1; then
	echo "cuda-check: nvcc not on PATH, so nothing ran; $dir/kernels.cu is ready for a CUDA machine (or try --cpu)" >&2
	exit 2
fi
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi
nvcc --version | tail -n 2
arch=${CUDA_ARCH:-native}
echo "cuda-check: nvcc -O2 -arch=$arch -o $dir/cuda-check $dir/kernels.cu"
nvcc -O2 -arch="$arch" -o "$dir/cuda-check" "$dir/kernels.cu"
exec "$dir/cuda-check" "$dir/data"
