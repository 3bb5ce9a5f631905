//go:build linux

package cuda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

func testEnv(vars map[string]string) searchEnv {
	return searchEnv{getenv: func(k string) string { return vars[k] }, home: "/home/u", arch: "amd64"}
}

// TestSearchOrder pins the documented order: override, sonames, toolkit
// folders (CUDA_HOME first), pip wheel folders.
func TestSearchOrder(t *testing.T) {
	got := blasLibrary.candidates(testEnv(map[string]string{"CUDA_HOME": "/opt/cuda", "VIRTUAL_ENV": "/venv"}))
	want := []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
		"/opt/cuda/lib64/libcublas.so.13"}
	if !slices.Equal(got[:4], want) {
		t.Errorf("first candidates %q, want %q", got[:4], want)
	}
	index := func(s string) int {
		i := slices.Index(got, s)
		if i < 0 {
			t.Fatalf("%s is not searched; candidates:\n%s", s, strings.Join(got, "\n"))
		}
		return i
	}
	order := []string{
		"/opt/cuda/targets/*/lib/libcublas.so.13",
		"/usr/local/cuda/lib64/libcublas.so.13",
		"/usr/local/cuda/targets/*/lib/libcublas.so.12",
		"/usr/local/cuda-*/targets/*/lib/libcublas.so.13",
		"/venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"/venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"/home/u/.local/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so.12",
	}
	for i := 1; i < len(order); i++ {
		if index(order[i-1]) >= index(order[i]) {
			t.Errorf("%s is searched after %s", order[i-1], order[i])
		}
	}
	nv := nvrtcLibrary.candidates(testEnv(nil))
	if !slices.Contains(nv, "/usr/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12") ||
		!slices.Contains(nv, "libnvrtc.so.11.2") {
		t.Errorf("NVRTC candidates lack the cuda_nvrtc wheel or 11.2 soname:\n%s", strings.Join(nv, "\n"))
	}
	drv := driverLibrary.candidates(testEnv(map[string]string{"CUDA_HOME": "/opt/cuda"}))
	if drv[0] != "libcuda.so.1" || slices.ContainsFunc(drv, func(s string) bool { return strings.HasPrefix(s, "/opt/cuda") }) {
		t.Errorf("driver candidates %q: want the soname first and no toolkit folder (its libcuda is a stub)", drv)
	}
	if !slices.Contains(drv, "/usr/lib/x86_64-linux-gnu/libcuda.so.1") {
		t.Errorf("driver candidates %q lack the multiarch folder", drv)
	}
}

// TestOverrideIsTheOnlyCandidate: a variable pointing at a file means that
// file, and nothing silently replaces it.
func TestOverrideIsTheOnlyCandidate(t *testing.T) {
	for _, lib := range []library{driverLibrary, nvrtcLibrary, blasLibrary} {
		got := lib.candidates(testEnv(map[string]string{lib.env: "/x/" + lib.name + ".so"}))
		if !slices.Equal(got, []string{"/x/" + lib.name + ".so"}) {
			t.Errorf("%s with %s set: candidates %q", lib.name, lib.env, got)
		}
	}
}

func TestOpenTriesInOrderAndExpandsGlobs(t *testing.T) {
	var opened []string
	glob := func(p string) ([]string, error) {
		if p == "/usr/local/cuda-*/lib64/libnvrtc.so.12" {
			return []string{"/usr/local/cuda-12.9/lib64/libnvrtc.so.12", "/usr/local/cuda-12.10/lib64/libnvrtc.so.12"}, nil
		}
		return nil, nil
	}
	openFile := func(p string) (uintptr, error) {
		opened = append(opened, p)
		if p == "/usr/local/cuda-12.10/lib64/libnvrtc.so.12" {
			return 42, nil
		}
		return 0, errors.New("cannot open")
	}
	h, path, tried := nvrtcLibrary.open(testEnv(nil), glob, openFile)
	if h != 42 || path != "/usr/local/cuda-12.10/lib64/libnvrtc.so.12" || tried != nil {
		t.Fatalf("open = %d, %q, %v; want the newest cuda-12.10 match", h, path, tried)
	}
	if opened[0] != "libnvrtc.so.13" || slices.Contains(opened, "/usr/local/cuda-12.9/lib64/libnvrtc.so.12") {
		t.Errorf("opened %q: want the sonames first and 12.10 before 12.9", opened)
	}
}

func TestCompareNatural(t *testing.T) {
	in := []string{"cuda-12.9", "cuda-13.0", "cuda-12.10", "cuda-11.8", "python3.9", "python3.12"}
	slices.SortFunc(in, compareNatural)
	want := []string{"cuda-11.8", "cuda-12.9", "cuda-12.10", "cuda-13.0", "python3.9", "python3.12"}
	if !slices.Equal(in, want) {
		t.Errorf("sorted %q, want %q", in, want)
	}
}

// TestMissingLibrariesOneMessage: every missing library in one error that
// lists each place tried, how to fix it, and the CPU backend.
func TestMissingLibrariesOneMessage(t *testing.T) {
	glob := func(p string) ([]string, error) { return nil, nil }
	openFile := func(p string) (uintptr, error) {
		if strings.Contains(p, "nvrtc") {
			return 7, nil
		}
		return 0, fmt.Errorf("%s: cannot open shared object file", p)
	}
	_, err := loadLibraries(testEnv(nil), glob, openFile)
	var missing *MissingLibraryError
	if !errors.As(err, &missing) {
		t.Fatalf("loadLibraries = %v, want a *MissingLibraryError", err)
	}
	if len(missing.Missing) != 2 || missing.Missing[0].Library != "CUDA driver" || missing.Missing[1].Library != "cuBLAS" {
		t.Fatalf("missing %+v, want the driver and cuBLAS", missing.Missing)
	}
	msg := err.Error()
	for _, want := range []string{
		"libcuda.so.1: libcuda.so.1: cannot open shared object file",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"/usr/local/cuda-*/targets/*/lib/libcublas.so.{13,12,11}: no match",
		"/home/u/.local/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.{13,12,11}: no match",
		"install the NVIDIA driver", "pip install nvidia-cublas", "MLBUILD_CUDA_LIB", "MLBUILD_CUBLAS_LIB",
		"--backend cpu",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "NVRTC:") {
		t.Errorf("the message lists NVRTC, which loaded:\n%s", msg)
	}
	if !errors.Is(err, ErrNoDevice) || !errors.Is(err, gpuhost.ErrNoDevice) {
		t.Errorf("the error does not wrap ErrNoDevice and gpuhost.ErrNoDevice")
	}
	// The brief form: a summary and a line per missing library with the
	// file, where it looked and the variable to set.
	brief := missing.Brief()
	want := []string{
		"NVIDIA's libraries are missing: CUDA driver and cuBLAS",
		"CUDA driver: libcuda.so.1 not found in the system loader's path and 4 folders (/usr/lib/x86_64-linux-gnu, /usr/lib64, /usr/lib/wsl/lib, …); set MLBUILD_CUDA_LIB to its path",
	}
	if len(brief) != 3 || brief[0] != want[0] || brief[1] != want[1] || !strings.HasPrefix(brief[2], "cuBLAS: libcublas.so.13 not found in the system loader's path and ") {
		t.Errorf("Brief() = %q, want 3 lines starting %q", brief, want)
	}
}

// TestLoadLibrariesRealOrMessage runs the real search. On a machine
// without NVIDIA's libraries (CI) it must fail with the full message; on
// a GPU machine it must load all three.
func TestLoadLibrariesRealOrMessage(t *testing.T) {
	l, err := LoadLibraries()
	if err == nil {
		if len(l.Files) != 3 || l.Driver.Init == nil || l.NVRTC.CompileProgram == nil || l.BLAS.Sgemm == nil {
			t.Fatalf("LoadLibraries: files %+v, tables incomplete", l.Files)
		}
		t.Logf("loaded %+v", l.Files)
		return
	}
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "--backend cpu") || !strings.Contains(err.Error(), "tried, in order") {
		t.Fatalf("LoadLibraries without NVIDIA's libraries: %v", err)
	}
	t.Logf("as expected here: %v", err)
}

func TestMappedFile(t *testing.T) {
	maps := "7f00-7f10 r--p 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6\n" +
		"7f20-7f30 r-xp 00000000 08:01 124 /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcublas.so.13.0.0.19\n"
	if got := mappedFile(maps, "libcublas.so"); got != "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcublas.so.13.0.0.19" {
		t.Errorf("mappedFile = %q", got)
	}
	if got := mappedFile(maps, "libnvrtc.so"); got != "" {
		t.Errorf("mappedFile of an unmapped library = %q", got)
	}
}

// TestNCCLSearchAndMessage: NCCL is looked for by soname, in the toolkit's
// folders and in the PyTorch wheel's nvidia/nccl/lib, and its absence is
// one message that says where it looked and that one GPU needs no NCCL.
func TestNCCLSearchAndMessage(t *testing.T) {
	got := ncclLibrary.candidates(testEnv(map[string]string{"VIRTUAL_ENV": "/venv"}))
	for _, want := range []string{"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", "/venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"/home/u/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"} {
		if !slices.Contains(got, want) {
			t.Errorf("NCCL candidates lack %s:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if got[0] != "libnccl.so.2" {
		t.Errorf("NCCL candidates start %q, want the soname", got[0])
	}
	l := &Libraries{}
	err := l.loadNCCL(testEnv(nil), func(string) ([]string, error) { return nil, nil },
		func(p string) (uintptr, error) { return 0, fmt.Errorf("%s: cannot open shared object file", p) })
	var missing *MissingLibraryError
	if !errors.As(err, &missing) || l.NCCL != nil {
		t.Fatalf("loadNCCL = %v, want a *MissingLibraryError and no table", err)
	}
	msg := err.Error()
	for _, want := range []string{"NCCL: not found; tried, in order:", "libnccl.so.2: libnccl.so.2: cannot open shared object file",
		"/usr/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2: no match", "pip install nvidia-nccl-cu12", "MLBUILD_NCCL_LIB",
		"or train on one GPU (--gpus 1), which needs no NCCL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "--backend cpu") {
		t.Errorf("the message of a missing NCCL suggests the CPU backend:\n%s", msg)
	}
}

// TestLoadNCCLRealOrMessage runs the real search: with NCCL installed it
// binds every symbol and reads its version, else the message.
func TestLoadNCCLRealOrMessage(t *testing.T) {
	l := &Libraries{}
	err := l.LoadNCCL()
	if err == nil {
		var v int32
		if l.NCCL.GetVersion(&v) != NCCLSuccess || v < 21200 {
			t.Fatalf("ncclGetVersion: %d", v)
		}
		t.Logf("loaded %+v", l.Files)
		return
	}
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "MLBUILD_NCCL_LIB") {
		t.Fatalf("LoadNCCL without NCCL: %v", err)
	}
	t.Logf("as expected here: %v", err)
}

// TestDNNSearchAndMessage: cuDNN is looked for by soname, in the
// toolkit's folders and in the PyTorch wheel's nvidia/cudnn/lib, and its
// absence is one message that says where it looked, how to install it
// and that the program's convolutions need it.
func TestDNNSearchAndMessage(t *testing.T) {
	got := dnnLibrary.candidates(testEnv(map[string]string{"VIRTUAL_ENV": "/venv"}))
	for _, want := range []string{"libcudnn.so.9", "/usr/local/cuda/lib64/libcudnn.so.9", "/venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
		"/home/u/.local/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9", "/usr/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
		"/venv/lib/python3*/site-packages/nvidia/cu13/lib/libcudnn.so.9"} {
		if !slices.Contains(got, want) {
			t.Errorf("cuDNN candidates lack %s:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if got[0] != "libcudnn.so.9" {
		t.Errorf("cuDNN candidates start %q, want the soname", got[0])
	}
	if o := dnnLibrary.candidates(testEnv(map[string]string{"MLBUILD_CUDNN_LIB": "/x/libcudnn.so.9"})); !slices.Equal(o, []string{"/x/libcudnn.so.9"}) {
		t.Errorf("with MLBUILD_CUDNN_LIB set: candidates %q", o)
	}
	l := &Libraries{}
	err := l.loadDNNFrom(testEnv(nil), func(string) ([]string, error) { return nil, nil },
		func(p string) (uintptr, error) { return 0, fmt.Errorf("%s: cannot open shared object file", p) })
	var missing *MissingLibraryError
	if !errors.As(err, &missing) || l.DNN != nil || !errors.Is(err, ErrNoDevice) {
		t.Fatalf("loadDNNFrom = %v, want a *MissingLibraryError wrapping ErrNoDevice and no table", err)
	}
	msg := err.Error()
	for _, want := range []string{"cuDNN: not found; tried, in order:", "libcudnn.so.9: libcudnn.so.9: cannot open shared object file",
		"/usr/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9: no match", "pip install nvidia-cudnn-cu13", "MLBUILD_CUDNN_LIB",
		"cuDNN runs this program's convolutions", "--backend cpu"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
}

// TestLoadDNNRealOrMessage runs the real search: with cuDNN installed it
// binds every symbol and reads its version, else the message.
func TestLoadDNNRealOrMessage(t *testing.T) {
	l := &Libraries{}
	err := l.LoadDNN()
	if err == nil {
		if v := l.DNN.GetVersion(); v < 8000 {
			t.Fatalf("cudnnGetVersion: %d", v)
		}
		t.Logf("loaded %+v", l.Files)
		return
	}
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "MLBUILD_CUDNN_LIB") {
		t.Fatalf("LoadDNN without cuDNN: %v", err)
	}
	t.Logf("as expected here: %v", err)
}

// TestConvAlgoPerfLayout: the perf struct the _v7 heuristics fill is
// cuDNN's 48 bytes, its size_t at byte 16.
func TestConvAlgoPerfLayout(t *testing.T) {
	var p ConvAlgoPerf
	if s, m := unsafe.Sizeof(p), unsafe.Offsetof(p.Memory); s != 48 || m != 16 || unsafe.Offsetof(p.MathType) != 28 {
		t.Errorf("ConvAlgoPerf: %d bytes, memory at %d, mathType at %d; cuDNN's: 48, 16, 28", s, m, unsafe.Offsetof(p.MathType))
	}
}

// TestOpFamily checks the profile's families: generated kernels without
// their numbers, GEMMs as one, library calls as they are.
func TestOpFamily(t *testing.T) {
	for what, want := range map[string]string{
		"kernel mlb012_batchnorm_nhwc": "kernel batchnorm_nhwc",
		"kernel mlb7_sgd_multi":        "kernel sgd_multi",
		"128x10x512 GEMM":              "GEMM",
		"forward convolution":          "forward convolution",
		"kernel conf_accumulate":       "kernel conf_accumulate",
	} {
		if got := opFamily(what); got != want {
			t.Errorf("opFamily(%q) = %q, want %q", what, got, want)
		}
	}
}
