package main

// This file is copied next to the main.go of the generated CUDA programs
// whose tests run the program itself as a command (cuda_fault_test.go,
// cuda_text_test.go) by emit's tests (TestCUDAPrograms).

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"mlbuildprog/cuda"
	"mlbuildprog/cuda/fakecuda"
	"mlbuildprog/rt/gpuhost"
)

// TestMain lets the tests of cuda_fault_test.go and cuda_text_test.go run
// this program as a command on the fake GPU: with MLBUILD_FAKEHOST_FAIL_AT set to n, the test binary is the
// program (gpuhost.Main, as main.go runs it, on a fake whose nth graph
// launch faults; 0: none) with the arguments in MLBUILD_FAKEHOST_ARGS, one
// per line. MLBUILD_FAKEHOST_FAIL_KERNEL names a kernel whose first run
// faults instead, and MLBUILD_CUDA_BLOCKING=1 makes the sequences blocking.
func TestMain(m *testing.M) {
	if at := os.Getenv("MLBUILD_FAKEHOST_FAIL_AT"); at != "" {
		n, err := strconv.Atoi(at)
		if err != nil {
			panic(err)
		}
		os.Args = append(os.Args[:1], strings.Split(os.Getenv("MLBUILD_FAKEHOST_ARGS"), "\n")...)
		gpuhost.Main(func() (gpuhost.Device, error) {
			f := fakecuda.New(fakecuda.Options{WorkDir: os.Getenv("MLBUILD_FAKECUDA_DIR")})
			if n > 0 {
				f.FailGraphLaunch(n, cuda.ErrorLaunchFailed)
			}
			if k := os.Getenv("MLBUILD_FAKEHOST_FAIL_KERNEL"); k != "" {
				f.FailKernel(k, cuda.ErrorLaunchFailed)
			}
			return cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: os.Getenv("MLBUILD_FAKEHOST_CACHE"),
				Blocking: os.Getenv("MLBUILD_CUDA_BLOCKING") == "1"})
		}, &program)
	}
	os.Exit(m.Run())
}
