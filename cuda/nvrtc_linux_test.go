//go:build linux

package cuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

// TestNVRTCLibrary drives a real NVRTC through purego, which needs no GPU:
// the binding of the NVRTC table, the compile of the conformance suite's
// kernels to PTX and CUBIN, and a compile error's log. Debian bookworm's
// non-free libnvrtc11.2 (NVRTC 11.8) is enough: point MLBUILD_NVRTC_LIB at
// its libnvrtc.so.11.2 (see docs in /work/shared/BENCHMARKS.md on how to
// unpack it without installing). Without the variable the test is skipped.
func TestNVRTCLibrary(t *testing.T) {
	path := os.Getenv("MLBUILD_NVRTC_LIB")
	if path == "" {
		t.Skip("set MLBUILD_NVRTC_LIB to a libnvrtc.so to compile the kernels with a real NVRTC")
	}
	h, err := dlopen(path)
	if err != nil {
		t.Fatalf("dlopen %s: %v", path, err)
	}
	l := &Libraries{NVRTC: &NVRTCAPI{}}
	if err := bind(l.NVRTC, h, path, "too old"); err != nil {
		t.Fatal(err)
	}
	var major, minor, n int32
	if r := l.NVRTC.Version(&major, &minor); r != NVRTCSuccess || major < 11 {
		t.Fatalf("nvrtcVersion: %d, %d.%d", r, major, minor)
	}
	if r := l.NVRTC.GetNumSupportedArchs(&n); r != NVRTCSuccess || n == 0 {
		t.Fatalf("nvrtcGetNumSupportedArchs: %d, %d", r, n)
	}
	archs := make([]int32, n)
	l.NVRTC.GetSupportedArchs(&archs[0])
	t.Logf("NVRTC %d.%d from %s compiles for sm %v", major, minor, path, archs)
	e := &Engine{lib: l, nvrtcVersion: "x", archs: archs}
	src, _, err := gpuhosttest.Source(gpuhosttest.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	ptx, err := e.compile(src, "ptx", []string{"--gpu-architecture=compute_80"})
	if err != nil {
		t.Fatal(err)
	}
	text := cString(&ptx[0])
	for _, want := range []string{".target sm_80", ".entry conf_saxpy", ".entry conf_block_sum", ".entry conf_accumulate", "bar.sync"} {
		if !strings.Contains(text, want) {
			t.Errorf("the PTX lacks %q", want)
		}
	}
	if ptx[len(ptx)-1] != 0 {
		t.Error("the PTX image is not NUL-terminated")
	}
	cubin, err := e.compile(src, "cubin", []string{"--gpu-architecture=sm_80"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(cubin), "\x7fELF") {
		t.Errorf("the CUBIN image starts %q, want an ELF file", cubin[:min(8, len(cubin))])
	}
	_, err = e.compile("extern \"C\" __global__ void broken(float* x) {\n    x[0] = ;\n}\n", "ptx", []string{"--gpu-architecture=compute_80"})
	if err == nil || !strings.Contains(err.Error(), "NVRTC_ERROR_COMPILATION") || !strings.Contains(err.Error(), "mlbuild_kernels.cu(2)") {
		t.Errorf("compiling a broken source: %v, want NVRTC_ERROR_COMPILATION with the log naming line 2", err)
	}
	if dir := os.Getenv("MLBUILD_PTX_OUT"); dir != "" {
		os.WriteFile(filepath.Join(dir, "conformance.ptx"), ptx[:len(ptx)-1], 0o644)
	}
}
