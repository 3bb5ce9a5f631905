package app

import (
	"fmt"
	"os"
	"strings"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// KernelsEnv names the environment variable that picks the CPU's kernel
// set below the fastest this machine runs: one of cpu.GemmPaths() ("avx512",
// "avx2", "generic" on an AVX-512 machine). The GEMMs, convolutions and
// epilogues (activations, exponentials) follow it, so an AVX-512 machine
// runs what an AVX2-only one would: for measuring that machine's rows and
// for checking its paths, as oneDNN's ONEDNN_MAX_CPU_ISA serves PyTorch.
// The decode's matrix-vector kernels and bf16 products keep their own
// detection. A name this machine cannot run is a usage error.
const KernelsEnv = "MLBUILD_CPU_KERNELS"

// applyKernelsEnv sets the kernel set KernelsEnv names, the fastest when
// it is unset or empty.
func applyKernelsEnv() error {
	name := strings.TrimSpace(os.Getenv(KernelsEnv))
	if err := cpu.SetGemmPath(name); err != nil {
		return usageError{fmt.Sprintf("%s=%s: this machine runs %s", KernelsEnv, name, strings.Join(cpu.GemmPaths(), ", "))}
	}
	return nil
}
