package cuda

import (
	"fmt"
	"os"
	"strconv"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// OpenHostDevice opens the GPU a produced program runs on, as its
// environment chooses:
//
//	MLBUILD_CUDA_DEVICE  the GPU's ordinal (default 0)
//	MLBUILD_CUDA_TF32    refused: the spec's precision ("tf32") replaced it
//	MLBUILD_CUDA_CACHE   the kernel cache folder ("off": none)
//	MLBUILD_CUDA_BLOCKING 1: launch every kernel alone and wait for it, so
//	                     that a GPU fault names its kernel (slow; also
//	                     CUDA_LAUNCH_BLOCKING=1, the variable CUDA users know)
//
// and the library overrides of LoadLibraries.
func OpenHostDevice() (gpuhost.Device, error) {
	opts := Options{}
	if v := os.Getenv("MLBUILD_CUDA_DEVICE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("MLBUILD_CUDA_DEVICE=%q: want a GPU ordinal (0, 1, …)", v)
		}
		opts.Ordinal = n
	}
	if v := os.Getenv("MLBUILD_CUDA_TF32"); v != "" {
		return nil, fmt.Errorf(`MLBUILD_CUDA_TF32=%q: this switch is gone; a GEMM's precision is the spec's now: write precision: "tf32" (or "bf16") in the spec and compile again (mlbuild plan --backend cuda shows each step's), and unset MLBUILD_CUDA_TF32`, v)
	}
	for _, name := range []string{"MLBUILD_CUDA_BLOCKING", "CUDA_LAUNCH_BLOCKING"} {
		switch v := os.Getenv(name); v {
		case "", "0":
		case "1":
			opts.Blocking = true
		default:
			return nil, fmt.Errorf("%s=%q: want 1 (every kernel launched alone and waited for, so a fault names it) or 0 (the default: one CUDA graph a step)", name, v)
		}
	}
	d, err := OpenDevice(opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}
