package cuda_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

func openFakeWith(t *testing.T, fo fakecuda.Options, opts cuda.Options) (*cuda.Device, *fakecuda.Fake, error) {
	t.Helper()
	if fo.WorkDir == "" {
		fo.WorkDir = fakeWorkDir
	}
	f := fakecuda.New(fo)
	opts.Libraries = f.Libraries()
	if opts.KernelCacheDir == "" {
		opts.KernelCacheDir = t.TempDir()
	}
	d, err := cuda.OpenDevice(opts)
	if err == nil {
		t.Cleanup(func() { d.Close() })
	}
	return d, f, err
}

// loadSuite loads the conformance suite's kernels.
func loadSuite(t *testing.T, d gpuhost.Device) {
	t.Helper()
	src, infos, err := gpuhosttest.Source(gpuhosttest.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadKernels(src, infos); err != nil {
		t.Fatal(err)
	}
}

func TestNoDevice(t *testing.T) {
	_, _, err := openFakeWith(t, fakecuda.Options{Devices: -1}, cuda.Options{})
	if err == nil || !errors.Is(err, cuda.ErrNoDevice) || !errors.Is(err, gpuhost.ErrNoDevice) {
		t.Fatalf("Open without a GPU: %v, want an error wrapping ErrNoDevice", err)
	}
	var ce *cuda.Error
	if !errors.As(err, &ce) || ce.Call != "cuInit" || ce.Name != "CUDA_ERROR_NO_DEVICE" {
		t.Errorf("error %v: want a *cuda.Error of cuInit named CUDA_ERROR_NO_DEVICE", err)
	}
	_, _, err = openFakeWith(t, fakecuda.Options{}, cuda.Options{Ordinal: 2})
	if err == nil || !strings.Contains(err.Error(), "GPU 2 asked for, but the driver sees 1") {
		t.Errorf("Open of GPU 2 on a one-GPU machine: %v", err)
	}
}

func TestOutOfMemoryNamesBytes(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{Memory: 64 << 20}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Alloc("weights", 100<<20)
	if err == nil {
		t.Fatal("Alloc of 100 MiB on a 64 MiB GPU: no error")
	}
	// 32 MiB are cuBLAS's workspace.
	for _, want := range []string{`buffer "weights"`, "104857600 bytes needed", "33554432 of 67108864 bytes free", "CUDA_ERROR_OUT_OF_MEMORY", "smaller"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	var ce *cuda.Error
	if !errors.As(err, &ce) || ce.Code != int(cuda.ErrorOutOfMemory) {
		t.Errorf("error %v: want a *cuda.Error with code 2", err)
	}
}

func TestKernelCache(t *testing.T) {
	dir := t.TempDir()
	open := func(fo fakecuda.Options, cacheDir string) (*cuda.Device, *fakecuda.Fake) {
		d, f, err := openFakeWith(t, fo, cuda.Options{KernelCacheDir: cacheDir})
		if err != nil {
			t.Fatal(err)
		}
		loadSuite(t, d)
		return d, f
	}
	d1, f1 := open(fakecuda.Options{}, dir)
	l1 := d1.Engine().KernelLoads()
	if f1.Stats().Compiles != 1 || l1[0].FromCache || l1[0].Arch != "sm_90" || l1[0].CacheFile == "" {
		t.Fatalf("first load: %d compiles, %+v; want one compile for sm_90 written to the cache", f1.Stats().Compiles, l1)
	}
	d2, f2 := open(fakecuda.Options{}, dir)
	if l := d2.Engine().KernelLoads(); f2.Stats().Compiles != 0 || !l[0].FromCache || l[0].CacheFile != l1[0].CacheFile {
		t.Fatalf("second load: %d compiles, %+v; want the image from the cache", f2.Stats().Compiles, l)
	}
	// Another architecture is another entry.
	_, f3 := open(fakecuda.Options{CCMajor: 8, CCMinor: 6}, dir)
	if f3.Stats().Compiles != 1 {
		t.Errorf("sm_86 after sm_90: %d compiles, want 1", f3.Stats().Compiles)
	}
	// A corrupt entry is recompiled and rewritten, silently.
	for _, corrupt := range []func(b []byte) []byte{
		func(b []byte) []byte { return b[:len(b)/2] },
		func(b []byte) []byte { b[len(b)-2] ^= 0x55; return b },
		func(b []byte) []byte { return []byte("garbage") },
	} {
		b, err := os.ReadFile(l1[0].CacheFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l1[0].CacheFile, corrupt(b), 0o644); err != nil {
			t.Fatal(err)
		}
		d4, f4 := open(fakecuda.Options{}, dir)
		if f4.Stats().Compiles != 1 || d4.Engine().KernelLoads()[0].FromCache {
			t.Errorf("after corrupting the entry: %d compiles, want 1", f4.Stats().Compiles)
		}
		_, f5 := open(fakecuda.Options{}, dir)
		if f5.Stats().Compiles != 0 {
			t.Errorf("after the rewrite: %d compiles, want 0 (the entry was not repaired)", f5.Stats().Compiles)
		}
	}
	// A cached image the driver refuses (here: for another GPU) is compiled again.
	b, _ := os.ReadFile(l1[0].CacheFile)
	os.WriteFile(l1[0].CacheFile, []byte(strings.Replace(string(b), "sm_90\n", "sm_10\n", 1)), 0o644)
	if _, f := open(fakecuda.Options{}, dir); f.Stats().Compiles != 1 {
		t.Errorf("an image the driver refuses: %d compiles, want 1", f.Stats().Compiles)
	}
	// Off: every load compiles and nothing is written.
	for range 2 {
		d, f := open(fakecuda.Options{}, "off")
		if f.Stats().Compiles != 1 || d.Engine().KernelLoads()[0].CacheFile != "" {
			t.Errorf("cache off: %d compiles, cache file %q", f.Stats().Compiles, d.Engine().KernelLoads()[0].CacheFile)
		}
	}
}

func TestCacheDirFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	d, err := cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), Getenv: func(k string) string {
		if k == "MLBUILD_CUDA_CACHE" {
			return dir
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	loadSuite(t, d)
	if p := d.Engine().KernelLoads()[0].CacheFile; !strings.HasPrefix(p, dir+string(os.PathSeparator)) {
		t.Errorf("cache file %q is not under $MLBUILD_CUDA_CACHE %q", p, dir)
	}
}

func TestCompileErrorShowsLog(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := "extern \"C\" __global__ void broken(float* __restrict__ x) {\n    x[0] = ;\n}\n"
	err = d.LoadKernels(src, []gpuhost.KernelInfo{{Name: "broken", ArgBytes: []int{4}}})
	if err == nil {
		t.Fatal("LoadKernels of a broken source: no error")
	}
	for _, want := range []string{"nvrtcCompileProgram", "NVRTC_ERROR_COMPILATION", "--gpu-architecture=sm_90", "expected"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

func TestArchChoice(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		archs        []int32
		want, err    string
	}{
		{9, 0, nil, "sm_90", ""},
		{8, 9, nil, "sm_89", ""},
		{12, 1, []int32{75, 80, 90, 120}, "compute_120", ""},
		{9, 0, []int32{75, 80, 86}, "compute_86", ""},
		{6, 0, []int32{75, 80}, "", "compiles for sm_75 and newer, this GPU is sm_60"},
	} {
		d, _, err := openFakeWith(t, fakecuda.Options{CCMajor: c.major, CCMinor: c.minor, Archs: c.archs}, cuda.Options{})
		if err != nil {
			t.Fatal(err)
		}
		arch, _, err := d.Engine().Arch()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, cuda.ErrNoDevice) {
				t.Errorf("sm_%d%d with NVRTC archs %v: %v, want an error with %q", c.major, c.minor, c.archs, err, c.err)
			}
			continue
		}
		if err != nil || arch != c.want {
			t.Errorf("sm_%d%d with NVRTC archs %v: %q, %v; want %q", c.major, c.minor, c.archs, arch, err, c.want)
			continue
		}
		// The image loads and runs on the fake GPU.
		loadSuite(t, d)
	}
}

// TestRecordingRefusesEverythingElse: inside Record only the Encoder may
// be used, as CUDA stream capture demands.
func TestRecordingRefusesEverythingElse(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loadSuite(t, d)
	b, err := d.Alloc("b", 1024)
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.Record("other", func(gpuhost.Encoder) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	_, err = d.Record("step", func(e gpuhost.Encoder) error {
		errs = append(errs, d.Upload(b, 0, make([]byte, 4)))
		errs = append(errs, d.Download(make([]byte, 4), b, 0))
		_, aerr := d.Alloc("late", 64)
		errs = append(errs, aerr)
		errs = append(errs, d.Free(b))
		errs = append(errs, d.Sync())
		_, rerr := d.Record("nested", func(gpuhost.Encoder) error { return nil })
		errs = append(errs, rerr)
		errs = append(errs, other.Launch())
		errs = append(errs, d.LoadKernels("", nil))
		return e.Dispatch("conf_accumulate", []gpuhost.Arg{{Buf: b, Bytes: 1024}, {Buf: b, Bytes: 1024}}, 4, 64)
	})
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	for i, e := range errs {
		if e == nil || !strings.Contains(e.Error(), `while sequence "step" is being recorded`) {
			t.Errorf("call %d during Record: %v, want a refusal naming the sequence", i, e)
		}
	}
	// An encoder kept past its Record is refused too.
	var kept gpuhost.Encoder
	if _, err := d.Record("keeper", func(e gpuhost.Encoder) error { kept = e; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := kept.Gemm(gpuhost.Gemm{M: 1, N: 1, K: 1, A: gpuhost.Operand{Buf: b}, B: gpuhost.Operand{Buf: b}, C: gpuhost.Operand{Buf: b}}); err == nil {
		t.Error("an encoder used after its Record: no error")
	}
}

// TestOneGraphLaunchPerStep checks the promise of the CUDA backend: after
// recording, a step is one graph launch, with no direct launch, no
// allocation and no synchronisation of its own.
func TestOneGraphLaunchPerStep(t *testing.T) {
	d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loadSuite(t, d)
	x, _ := d.Alloc("x", 1024)
	acc, _ := d.Alloc("acc", 1024)
	c, _ := d.Alloc("c", 1024)
	seq, err := d.Record("step", func(e gpuhost.Encoder) error {
		for range 3 {
			if err := e.Dispatch("conf_accumulate", []gpuhost.Arg{{Buf: x, Bytes: 1024}, {Buf: acc, Bytes: 1024}}, 4, 64); err != nil {
				return err
			}
		}
		return e.Gemm(gpuhost.Gemm{M: 16, N: 16, K: 16, Alpha: 1, A: gpuhost.Operand{Buf: acc}, B: gpuhost.Operand{Buf: x}, C: gpuhost.Operand{Buf: c}})
	})
	if err != nil {
		t.Fatal(err)
	}
	before := f.Stats()
	if before.KernelRuns != 0 || before.GemmRuns != 0 || before.Captures != 1 {
		t.Fatalf("after Record: %+v; want one capture and nothing run", before)
	}
	for range 10 {
		if err := seq.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	after := f.Stats()
	if after.GraphLaunches-before.GraphLaunches != 10 || after.Launches != 0 || after.Gemms != 0 ||
		after.KernelRuns != 30 || after.GemmRuns != 10 || after.Allocs != before.Allocs || after.Syncs-before.Syncs != 1 {
		t.Errorf("10 launches and a Sync: before %+v, after %+v", before, after)
	}
	if err := d.Free(acc); err == nil || !strings.Contains(err.Error(), `sequence "step" uses`) {
		t.Errorf("Free of a buffer a sequence uses: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("after Close: %v", leaks)
	}
}

// TestMathModeDefault: the handle keeps cuBLAS's default math, so every
// f32 GEMM is cublasSgemm in exact fp32; a fast precision is asked for
// per GEMM by its compute type.
func TestMathModeDefault(t *testing.T) {
	_, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := f.MathMode(); m != cuda.BLASDefaultMath {
		t.Errorf("math mode %d, want CUBLAS_DEFAULT_MATH (0)", m)
	}
}

// TestTF32EnvironmentRefused: the old switch names its replacement, the
// spec's precision, instead of being ignored.
func TestTF32EnvironmentRefused(t *testing.T) {
	t.Setenv("MLBUILD_CUDA_TF32", "1")
	_, err := cuda.OpenHostDevice()
	if err == nil || !strings.Contains(err.Error(), `precision: "tf32"`) || !strings.Contains(err.Error(), "MLBUILD_CUDA_TF32") {
		t.Fatalf("MLBUILD_CUDA_TF32=1: %v, want an error pointing at the spec's precision", err)
	}
}

// TestGemmEntryPointPerPrecision checks which cuBLAS function each
// precision calls, with which arguments: f32 stays cublasSgemm (and its
// strided batched form) exactly as before; bf16 and tf32 call
// cublasGemmEx (cublasGemmStridedBatchedEx) on CUDA_R_32F matrices with
// CUBLAS_COMPUTE_32F_FAST_16BF (75) or _FAST_TF32 (77) and
// CUBLAS_GEMM_DEFAULT (-1).
func TestGemmEntryPointPerPrecision(t *testing.T) {
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	l := f.Libraries()
	var calls []string
	sgemm, sgemmB, ex, exB := l.BLAS.Sgemm, l.BLAS.SgemmStridedBatched, l.BLAS.GemmEx, l.BLAS.GemmStridedBatchedEx
	l.BLAS.Sgemm = func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, lda int32,
		b cuda.DevicePtr, ldb int32, beta *float32, c cuda.DevicePtr, ldc int32) cuda.BLASStatus {
		calls = append(calls, "Sgemm")
		return sgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
	l.BLAS.SgemmStridedBatched = func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, lda int32, sa int64,
		b cuda.DevicePtr, ldb int32, sb int64, beta *float32, c cuda.DevicePtr, ldc int32, sc int64, batch int32) cuda.BLASStatus {
		calls = append(calls, fmt.Sprintf("SgemmStridedBatched %d", batch))
		return sgemmB(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch)
	}
	l.BLAS.GemmEx = func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, at, lda int32,
		b cuda.DevicePtr, bt, ldb int32, beta *float32, c cuda.DevicePtr, ct, ldc int32, compute, algo int32) cuda.BLASStatus {
		calls = append(calls, fmt.Sprintf("GemmEx types %d %d %d compute %d algo %d", at, bt, ct, compute, algo))
		return ex(h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, compute, algo)
	}
	l.BLAS.GemmStridedBatchedEx = func(h cuda.BLASHandle, ta, tb cuda.Operation, m, n, k int32, alpha *float32, a cuda.DevicePtr, at, lda int32, sa int64,
		b cuda.DevicePtr, bt, ldb int32, sb int64, beta *float32, c cuda.DevicePtr, ct, ldc int32, sc int64, batch, compute, algo int32) cuda.BLASStatus {
		calls = append(calls, fmt.Sprintf("GemmStridedBatchedEx %d types %d %d %d compute %d algo %d", batch, at, bt, ct, compute, algo))
		return exB(h, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta, c, ct, ldc, sc, batch, compute, algo)
	}
	d, err := cuda.OpenDevice(cuda.Options{Libraries: l, KernelCacheDir: t.TempDir(), Blocking: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var bufs [3]gpuhost.Buffer
	for i := range bufs {
		if bufs[i], err = d.Alloc("m", 4*2*8*8); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []gpuhost.Precision{gpuhost.PrecisionF32, gpuhost.PrecisionBF16, gpuhost.PrecisionTF32} {
		for _, batch := range []int{1, 2} {
			seq, err := d.Record("gemm", func(e gpuhost.Encoder) error {
				return e.Gemm(gpuhost.Gemm{M: 8, N: 8, K: 8, Batch: batch, Alpha: 1, Precision: p,
					A: gpuhost.Operand{Buf: bufs[0], MatrixBytes: 256}, B: gpuhost.Operand{Buf: bufs[1], MatrixBytes: 256},
					C: gpuhost.Operand{Buf: bufs[2], MatrixBytes: 256}})
			})
			if err == nil {
				err = seq.Launch()
			}
			if err == nil {
				err = d.Sync()
			}
			if err != nil {
				t.Fatalf("%v batch %d: %v", p, batch, err)
			}
		}
	}
	want := []string{"Sgemm", "SgemmStridedBatched 2",
		"GemmEx types 0 0 0 compute 75 algo -1", "GemmStridedBatchedEx 2 types 0 0 0 compute 75 algo -1",
		"GemmEx types 0 0 0 compute 77 algo -1", "GemmStridedBatchedEx 2 types 0 0 0 compute 77 algo -1"}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("cuBLAS calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	_, err = d.Record("gemm", func(e gpuhost.Encoder) error {
		return e.Gemm(gpuhost.Gemm{M: 8, N: 8, K: 8, Alpha: 1, Precision: 7,
			A: gpuhost.Operand{Buf: bufs[0]}, B: gpuhost.Operand{Buf: bufs[1]}, C: gpuhost.Operand{Buf: bufs[2]}})
	})
	if err == nil || !strings.Contains(err.Error(), "does not compute") {
		t.Errorf("a GEMM in an unknown precision: %v", err)
	}
}

func factsText(d gpuhost.Device) string {
	var b strings.Builder
	for _, f := range d.Facts() {
		b.WriteString(f.Key + ": " + f.Value + "\n")
	}
	return b.String()
}

func TestFacts(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{Name: "Test GPU 80GB", Memory: 1 << 30}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loadSuite(t, d)
	text := factsText(d)
	for _, want := range []string{
		"device: Test GPU 80GB (GPU 0)", "compute capability: 9.0 (sm_90)", "driver: CUDA 13.0",
		"memory: 1.0 GiB total, 1.0 GiB free", "CUDA driver: fakecuda, version 13.0", "NVRTC: fakecuda (g++), version 13.0",
		"cuBLAS: fakecuda (Go), version 13.0.0", "GEMM: cuBLAS 13.0.0, per step's precision: f32 cublasSgemm (exact fp32); bf16 cublasGemmEx CUBLAS_COMPUTE_32F_FAST_16BF", "kernels: sm_90, compiled by NVRTC 13.0",
		"kernel cache: /",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("facts lack %q:\n%s", want, text)
		}
	}
	if d.Name() != "Test GPU 80GB" {
		t.Errorf("Name %q", d.Name())
	}
}

// TestGPUFaultIsReportedAndSticks drives the Engine below the Device's
// checks: a kernel given an address outside every allocation faults, the
// fault shows at the next wait, names itself, and sticks, as on a GPU.
func TestFaultIsReportedAndSticks(t *testing.T) {
	d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loadSuite(t, d)
	e := d.Engine()
	fn, err := e.Function("conf_accumulate")
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Alloc(1024, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(fn, 4, 64, []cuda.DevicePtr{p, p + 1<<40}); err != nil {
		t.Fatalf("Launch returned the fault early: %v", err)
	}
	err = e.Synchronize()
	var ce *cuda.Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_ILLEGAL_ADDRESS" || ce.Call != "cuStreamSynchronize" {
		t.Fatalf("Synchronize after a fault: %v", err)
	}
	if faults := f.Faults(); len(faults) != 1 || !strings.Contains(faults[0], "kernel conf_accumulate, argument 1") {
		t.Errorf("faults %q", faults)
	}
	if _, err := e.Alloc(16, "after"); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("Alloc after a fault: %v, want the sticky error", err)
	}
	if _, err := e.Function("conf_accumulate"); err == nil {
		t.Error("Function after a fault: no error")
	}
}

// TestEngineCallsFromManyGoroutines: the Engine runs every call on its own
// locked thread, so callers on any goroutine (any thread) are served; the
// fake checks that a context is current on the calling thread.
func TestEngineCallsFromManyGoroutines(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := d.Engine()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			runtime.LockOSThread() // each caller on a thread of its own
			defer runtime.UnlockOSThread()
			p, err := e.Alloc(256+i, "g")
			if err == nil {
				err = e.CopyIn(p, make([]byte, 256))
			}
			if err == nil {
				err = e.Free(p)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestFakeContextIsPerThread holds the fake to CUDA's rule that makes the
// Engine's thread necessary: a context is current on one OS thread only.
func TestFakeContextIsPerThread(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the fake tells threads apart only on Linux")
	}
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	lib := f.Libraries()
	d := lib.Driver
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ctx cuda.Context
	var p cuda.DevicePtr
	if r := d.MemAlloc(&p, 16); r != cuda.ErrorInvalidContext {
		t.Errorf("cuMemAlloc with no context: %d, want 201", r)
	}
	if d.Init(0) != 0 || d.DevicePrimaryCtxRetain(&ctx, 0) != 0 || d.CtxSetCurrent(ctx) != 0 {
		t.Fatal("setting up a context failed")
	}
	if r := d.MemAlloc(&p, 16); r != 0 {
		t.Fatalf("cuMemAlloc with the context current: %d", r)
	}
	other := make(chan cuda.Result)
	go func() {
		runtime.LockOSThread()
		var q cuda.DevicePtr
		other <- d.MemAlloc(&q, 16)
	}()
	if r := <-other; r != cuda.ErrorInvalidContext {
		t.Errorf("cuMemAlloc on another thread: %d, want 201 (CUDA_ERROR_INVALID_CONTEXT)", r)
	}
	if d.MemFree(p) != 0 || d.DevicePrimaryCtxRelease(0) != 0 {
		t.Error("cleanup failed")
	}
}

// TestFakeCaptureRules holds the fake to CUDA's stream capture rules.
func TestFakeCaptureRules(t *testing.T) {
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	d := f.Libraries().Driver
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ctx cuda.Context
	var s cuda.Stream
	if d.Init(0) != 0 || d.DevicePrimaryCtxRetain(&ctx, 0) != 0 || d.CtxSetCurrent(ctx) != 0 || d.StreamCreate(&s, 0) != 0 {
		t.Fatal("setup failed")
	}
	var p cuda.DevicePtr
	var g cuda.Graph
	buf := make([]byte, 4)
	for _, c := range []struct {
		what   string
		unsafe func() cuda.Result
	}{
		{"cuMemAlloc", func() cuda.Result { return d.MemAlloc(&p, 16) }},
		{"cuStreamSynchronize", func() cuda.Result { return d.StreamSynchronize(s) }},
		{"cuMemcpyHtoD", func() cuda.Result { return d.MemcpyHtoD(p, unsafePointer(buf), 4) }},
	} {
		if r := d.StreamBeginCapture(s, cuda.CaptureModeThreadLocal); r != 0 {
			t.Fatalf("begin capture: %d", r)
		}
		if r := c.unsafe(); r != cuda.ErrorStreamCaptureUnsup {
			t.Errorf("%s during a thread-local capture: %d, want 900", c.what, r)
		}
		if r := d.StreamEndCapture(s, &g); r != cuda.ErrorStreamCaptureInvalid || g != 0 {
			t.Errorf("end of a capture %s invalidated: %d, graph %#x; want 901 and no graph", c.what, r, g)
		}
	}
	// Relaxed mode allows an allocation.
	if d.StreamBeginCapture(s, cuda.CaptureModeRelaxed) != 0 || d.MemAlloc(&p, 16) != 0 || d.StreamEndCapture(s, &g) != 0 || g == 0 {
		t.Error("an allocation during a relaxed capture failed")
	}
}

// TestTablesComplete checks the function tables: every field names a C
// symbol once, and the fake fills every field, so nothing the Engine
// calls is left untested.
func TestTablesComplete(t *testing.T) {
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	l := f.Libraries()
	seen := map[string]bool{}
	for _, table := range []any{l.Driver, l.NVRTC, l.BLAS} {
		v := reflect.ValueOf(table).Elem()
		for i := range v.NumField() {
			field := v.Type().Field(i)
			sym := field.Tag.Get("sym")
			prefix := map[string]string{"DriverAPI": "cu", "NVRTCAPI": "nvrtc", "BLASAPI": "cublas"}[v.Type().Name()]
			if sym == "" || !strings.HasPrefix(sym, prefix) || seen[sym] {
				t.Errorf("%s.%s: symbol %q is missing, repeated or not a %s function", v.Type().Name(), field.Name, sym, prefix)
			}
			seen[sym] = true
			if v.Field(i).IsNil() {
				t.Errorf("the fake leaves %s.%s (%s) nil", v.Type().Name(), field.Name, sym)
			}
		}
	}
	if len(seen) < 50 {
		t.Errorf("only %d symbols in the tables", len(seen))
	}
}

// TestFakeWithoutGxxSaysWhatToInstall: the fake needs g++; without it the
// error names the package, and the tests that need it fail, never skip.
func TestFakeWithoutGxxSaysWhatToInstall(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{WorkDir: t.TempDir()}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	src, infos, err := gpuhosttest.Source(gpuhosttest.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	err = d.LoadKernels(src, infos)
	if err == nil || !strings.Contains(err.Error(), "g++ not found") || !strings.Contains(err.Error(), "apt-get install g++") {
		t.Errorf("LoadKernels on the fake without g++: %v", err)
	}
}

// TestPanicInRecordEndsTheCapture: a panicking encode leaves the device
// usable, not stuck capturing.
func TestPanicInRecordEndsTheCapture(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		d.Record("boom", func(gpuhost.Encoder) error { panic("boom") })
	}()
	if _, err := d.Alloc("after", 64); err != nil {
		t.Errorf("Alloc after a panic in Record: %v", err)
	}
	if _, err := d.Record("after", func(gpuhost.Encoder) error { return nil }); err != nil {
		t.Errorf("Record after a panic in Record: %v", err)
	}
}

// BenchmarkEngineCall is the cost of one call on the engine's thread (a
// stream synchronisation the fake answers at once): the hop every Launch
// pays.
func BenchmarkEngineCall(b *testing.B) {
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	d, err := cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: "off"})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	e := d.Engine()
	for b.Loop() {
		if err := e.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPinnedCopiesFromAnyThread: copies, launches and waits run on the
// caller's own thread (the fake refuses a call from a thread without the
// context current, so each goroutine on a fresh thread checks that the
// engine made it current there); Pin page-locks host memory until Close,
// refuses a range pinned twice, and a copy from pinned memory is right.
func TestPinnedCopiesFromAnyThread(t *testing.T) {
	d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc("x", 4096)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]byte, 4096)
	for i := range host {
		host[i] = byte(i * 7)
	}
	if err := d.Pin(host); err != nil {
		t.Fatal(err)
	}
	if err := d.Pin(host[100:200]); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED") {
		t.Errorf("pinning a pinned range again: %v, want CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", err)
	}
	if f.Pinned() != 4096 || f.Stats().Pins != 1 {
		t.Errorf("%d bytes pinned in %d calls, want 4096 in 1", f.Pinned(), f.Stats().Pins)
	}
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			runtime.LockOSThread() // a thread no engine call has used
			defer runtime.UnlockOSThread()
			got := make([]byte, 4096)
			err := d.Upload(b, 0, host)
			if err == nil {
				err = d.Download(got, b, 0)
			}
			if err == nil {
				err = d.Sync()
			}
			if err == nil && string(got) != string(host) {
				err = errors.New("the bytes read back differ from those written")
			}
			errs <- err
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Pinned() != 0 {
		t.Errorf("%d bytes still pinned after Close", f.Pinned())
	}
}

// TestFaultNamesItsKernel: a kernel fault inside a graph names the
// sequence and tells how to name the kernel; with Options.Blocking the
// same fault names the op and its kernel.
func TestFaultNamesItsKernel(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{Blocking: blocking})
		if err != nil {
			t.Fatal(err)
		}
		seq := gemmAndTwoKernels(t, d)
		if err := seq.Launch(); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		f.FailKernel("conf_accumulate", cuda.ErrorIllegalAddress)
		err = seq.Launch()
		if err == nil {
			err = d.Sync()
		}
		if err == nil {
			t.Fatalf("blocking %v: a kernel fault gave no error", blocking)
		}
		want := []string{`sequence "training step"`, "CUDA_ERROR_ILLEGAL_ADDRESS", "MLBUILD_CUDA_BLOCKING=1"}
		if blocking {
			want = []string{`sequence "training step"`, "op 1 (kernel conf_accumulate)", "of its 3 ops", "CUDA_ERROR_ILLEGAL_ADDRESS"}
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("blocking %v: the error does not say %q: %v", blocking, w, err)
			}
		}
		if s := f.Stats(); blocking != (s.GraphLaunches == 0) {
			t.Errorf("blocking %v: %d graph launches", blocking, s.GraphLaunches)
		}
		d.Close()
	}
}

// gemmAndTwoKernels loads the suite's kernels on d and records the
// sequence "training step": a 16×16×16 GEMM, then conf_accumulate twice.
func gemmAndTwoKernels(t *testing.T, d *cuda.Device) gpuhost.Sequence {
	t.Helper()
	loadSuite(t, d)
	x, _ := d.Alloc("x", 1024)
	acc, _ := d.Alloc("acc", 1024)
	c, _ := d.Alloc("c", 1024)
	seq, err := d.Record("training step", func(e gpuhost.Encoder) error {
		if err := e.Gemm(gpuhost.Gemm{M: 16, N: 16, K: 16, Alpha: 1, A: gpuhost.Operand{Buf: acc}, B: gpuhost.Operand{Buf: x}, C: gpuhost.Operand{Buf: c}}); err != nil {
			return err
		}
		for range 2 {
			if err := e.Dispatch("conf_accumulate", []gpuhost.Arg{{Buf: x, Bytes: 1024}, {Buf: acc, Bytes: 1024}}, 4, 64); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestCallWaitsOnce: an inference through Call is one graph launch, its
// copies and one wait, with no direct launches.
func TestCallWaitsOnce(t *testing.T) {
	d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	loadSuite(t, d)
	x, _ := d.Alloc("x", 1024)
	acc, _ := d.Alloc("acc", 1024)
	seq, err := d.Record("inference", func(e gpuhost.Encoder) error {
		return e.Dispatch("conf_accumulate", []gpuhost.Arg{{Buf: x, Bytes: 1024}, {Buf: acc, Bytes: 1024}}, 4, 64)
	})
	if err != nil {
		t.Fatal(err)
	}
	in, out := make([]byte, 1024), make([]byte, 512)
	for i := 0; i < len(in); i += 4 {
		binary.LittleEndian.PutUint32(in[i:], math.Float32bits(float32(i)/7))
	}
	before := f.Stats()
	if err := d.Call(seq, []gpuhost.Transfer{{Buf: x, Host: in}}, []gpuhost.Transfer{{Buf: acc, Off: 512, Host: out}}); err != nil {
		t.Fatal(err)
	}
	after := f.Stats()
	if after.Syncs-before.Syncs != 1 || after.GraphLaunches-before.GraphLaunches != 1 || after.Copies-before.Copies != 2 || after.Launches != before.Launches {
		t.Errorf("one Call: before %+v, after %+v; want 1 wait, 1 graph launch, 2 copies", before, after)
	}
	if !bytes.Equal(out, in[512:]) { // acc was zero: acc += x
		t.Errorf("Call's output is not its input added to zero")
	}
}

// TestBlockingFromEnvironment: a value of MLBUILD_CUDA_BLOCKING other than
// 0 or 1 is refused before any library is loaded, naming the variable.
func TestBlockingFromEnvironment(t *testing.T) {
	for _, name := range []string{"MLBUILD_CUDA_BLOCKING", "CUDA_LAUNCH_BLOCKING"} {
		t.Setenv(name, "yes")
		_, err := cuda.OpenHostDevice()
		if err == nil || !strings.Contains(err.Error(), name+`="yes"`) {
			t.Errorf("%s=yes: %v, want an error naming the variable", name, err)
		}
		t.Setenv(name, "")
	}
}

// TestBLASEnumValues pins the C enum values this package passes to
// cuBLAS to NVIDIA's (cublas_api.h and library_types.h; reference:
// https://docs.nvidia.com/cuda/cublas/#cublascomputetype-t,
// #cublasgemmalgo-t and #cudadatatype-t): a wrong value would run a GEMM
// in another precision, or fail, only on a real GPU.
func TestBLASEnumValues(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int32
	}{
		{"CUDA_R_32F", cuda.DataR32F, 0},
		{"CUDA_R_16BF", cuda.DataR16BF, 14},
		{"CUBLAS_COMPUTE_32F", cuda.Compute32F, 68},
		{"CUBLAS_COMPUTE_32F_FAST_16BF", cuda.ComputeFast16BF, 75},
		{"CUBLAS_COMPUTE_32F_FAST_TF32", cuda.ComputeFastTF32, 77},
		{"CUBLAS_GEMM_DEFAULT", cuda.GemmDefault, -1},
		{"CUBLAS_DEFAULT_MATH", cuda.BLASDefaultMath, 0},
		{"CUBLAS_OP_N", int32(cuda.OpN), 0},
		{"CUBLAS_OP_T", int32(cuda.OpT), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	// The symbols and their arity: purego passes every argument of the
	// Go signature, so the count must be the C function's.
	blas := reflect.TypeOf(cuda.BLASAPI{})
	for name, args := range map[string]int{"cublasGemmEx": 19, "cublasGemmStridedBatchedEx": 23, "cublasSgemm_v2": 14, "cublasSgemmStridedBatched": 18} {
		found := false
		for i := range blas.NumField() {
			if f := blas.Field(i); f.Tag.Get("sym") == name {
				found = true
				if n := f.Type.NumIn(); n != args {
					t.Errorf("%s takes %d arguments in BLASAPI, the C function %d", name, n, args)
				}
				if f.Tag.Get("optional") != "" {
					t.Errorf("%s is optional; every cuBLAS 11 and newer has it", name)
				}
			}
		}
		if !found {
			t.Errorf("BLASAPI has no %s", name)
		}
	}
}

// TestKernelPartsCacheAndErrors loads the suite's kernels cut into parts:
// each part compiles once and comes from the kernel cache the next time,
// and a part NVRTC rejects is named by its number and first kernel.
func TestKernelPartsCacheAndErrors(t *testing.T) {
	defer cuda.SetPartBytes(1)()
	src, infos, err := gpuhosttest.Source(gpuhosttest.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	parts := len(cuda.SplitSource(src))
	if parts != len(infos) {
		t.Fatalf("the suite's %d kernels split into %d parts, want one a part", len(infos), parts)
	}
	dir := t.TempDir()
	for i, wantCompiled := range []int{parts, 0} {
		d, f, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{KernelCacheDir: dir, CompileJobs: 3})
		if err != nil {
			t.Fatal(err)
		}
		loadSuite(t, d)
		l := d.Engine().KernelLoads()[0]
		if l.Parts != parts || l.Compiled != wantCompiled || f.Stats().Compiles != wantCompiled || l.FromCache != (wantCompiled == 0) {
			t.Errorf("load %d: %+v, the fake compiled %d; want %d parts, %d compiled", i+1, l, f.Stats().Compiles, parts, wantCompiled)
		}
		var facts []string
		for _, f := range d.Facts() {
			facts = append(facts, f.Key+": "+f.Value)
		}
		want := fmt.Sprintf("%d parts, %d compiled by NVRTC", parts, parts)
		if wantCompiled == 0 {
			want = "from the cache"
		}
		if !strings.Contains(strings.Join(facts, "\n"), want) {
			t.Errorf("load %d: the facts lack %q:\n%s", i+1, want, strings.Join(facts, "\n"))
		}
	}
	d, _, err := openFakeWith(t, fakecuda.Options{}, cuda.Options{KernelCacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	broken := src + "\n// a kernel that does not compile\nextern \"C\" __global__ void broken(float* __restrict__ x) {\n    x[0] = ;\n}\n"
	err = d.LoadKernels(broken, append(infos, gpuhost.KernelInfo{Name: "broken", ArgBytes: []int{4}}))
	if err == nil {
		t.Fatal("LoadKernels of a source with a broken kernel: no error")
	}
	// the broken kernel is small enough to share the last part
	for _, want := range []string{fmt.Sprintf(" of %d (from kernel ", len(cuda.SplitSource(broken))), "NVRTC_ERROR_COMPILATION", "expected"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}
