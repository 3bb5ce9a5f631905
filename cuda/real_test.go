package cuda_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

// The TestReal tests run on the machine's NVIDIA GPU when MLBUILD_CUDA_REAL
// is 1, and then fail (never skip) if there is none. They are the GPU
// evidence: build the test binary here and run it there (no Go needed):
//
//	CGO_ENABLED=0 go test -c -o .gpu/cudatest ./cuda/
//	MLBUILD_CUDA_REAL=1 .gpu/cudatest -test.v -test.run Real
//
// cuda/testdata/real-gpu.txt keeps the output of the last such run.

func realOn(t *testing.T) {
	t.Helper()
	if os.Getenv("MLBUILD_CUDA_REAL") != "1" {
		t.Skip("set MLBUILD_CUDA_REAL=1 to run on this machine's NVIDIA GPU")
	}
}

// openReal opens GPU 0 with its kernel cache in cacheDir.
func openReal(t *testing.T, cacheDir string) *cuda.Device {
	t.Helper()
	d, err := cuda.OpenDevice(cuda.Options{KernelCacheDir: cacheDir})
	if err != nil {
		t.Fatalf("MLBUILD_CUDA_REAL=1 but the GPU cannot be opened: %v", err)
	}
	return d
}

func TestRealConformance(t *testing.T) {
	realOn(t)
	cache := t.TempDir()
	gpuhosttest.Run(t, gpuhosttest.Suite{
		Language:     gpuhosttest.CUDA,
		Open:         func(t *testing.T) gpuhost.Device { return openReal(t, cache) },
		Caller:       true,
		Precisions:   []gpuhost.Precision{gpuhost.PrecisionBF16, gpuhost.PrecisionTF32},
		BF16Operands: true,
	})
}

func TestRealFactsAndStartup(t *testing.T) {
	realOn(t)
	cache := t.TempDir()
	src, infos, err := gpuhosttest.Source(gpuhosttest.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true} {
		start := time.Now()
		d := openReal(t, cache)
		opened := time.Since(start)
		if err := d.LoadKernels(src, infos); err != nil {
			t.Fatal(err)
		}
		loads := d.Engine().KernelLoads()
		if loads[0].FromCache != want {
			t.Errorf("load %d: from cache %v, want %v", i+1, loads[0].FromCache, want)
		}
		t.Logf("open %d: Open %v, kernels %s from cache=%v in %v", i+1, opened.Round(time.Microsecond), loads[0].Arch, loads[0].FromCache, loads[0].Took.Round(time.Microsecond))
		if i == 0 {
			for _, f := range d.Facts() {
				t.Logf("  %s: %s", f.Key, f.Value)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRealGraphVersusDirect times the same work launched op by op and as
// one CUDA graph: a small kernel plus a 256³ SGEMM, and a chain of 20 small
// kernels.
func TestRealGraphVersusDirect(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	defer d.Close()
	loadSuite(t, d)
	e := d.Engine()
	fn, err := e.Function("conf_accumulate")
	if err != nil {
		t.Fatal(err)
	}
	const n = 256
	bufs := make([]gpuhost.Buffer, 5)
	for i := range bufs {
		if bufs[i], err = d.Alloc(fmt.Sprint("m", i), 4*n*n); err != nil {
			t.Fatal(err)
		}
	}
	ptrs := make([]cuda.DevicePtr, len(bufs))
	for i, b := range bufs {
		if ptrs[i], err = d.Pointer(b); err != nil {
			t.Fatal(err)
		}
	}
	gemm := gpuhost.Gemm{M: n, N: n, K: n, Alpha: 1, A: gpuhost.Operand{Buf: bufs[2]}, B: gpuhost.Operand{Buf: bufs[3]}, C: gpuhost.Operand{Buf: bufs[4]}}
	acc := []gpuhost.Arg{{Buf: bufs[0], Bytes: 1024}, {Buf: bufs[1], Bytes: 1024}}
	for _, c := range []struct {
		name    string
		kernels int
		gemm    bool
	}{{"kernel + 256^3 SGEMM", 1, true}, {"20 small kernels", 20, false}} {
		direct := func() error {
			for range c.kernels {
				if err := e.Launch(fn, 4, 64, ptrs[:2]); err != nil {
					return err
				}
			}
			if c.gemm {
				return e.Gemm(cuda.GemmArgs{M: n, N: n, K: n, Alpha: 1, A: ptrs[2], B: ptrs[3], C: ptrs[4], LDA: n, LDB: n, LDC: n})
			}
			return nil
		}
		seq, err := d.Record(c.name, func(en gpuhost.Encoder) error {
			for range c.kernels {
				if err := en.Dispatch("conf_accumulate", acc, 4, 64); err != nil {
					return err
				}
			}
			if c.gemm {
				return en.Gemm(gemm)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		const reps = 2000
		timeIt := func(step func() error) time.Duration {
			for range 50 { // warm up
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for range reps {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			return time.Since(start) / reps
		}
		var td, tg time.Duration
		for range 3 { // alternate, keep the best of each
			a, b := timeIt(direct), timeIt(seq.Launch)
			if td == 0 || a < td {
				td = a
			}
			if tg == 0 || b < tg {
				tg = b
			}
		}
		t.Logf("%s: direct %.1f µs per step, one CUDA graph %.1f µs per step (%.2fx)", c.name,
			float64(td.Nanoseconds())/1e3, float64(tg.Nanoseconds())/1e3, float64(td)/float64(tg))
	}
}

// TestRealZFault runs last (it spoils the process's CUDA context): a
// kernel given an address outside its memory faults, and the error names
// the failing call and CUDA's status.
func TestRealZFault(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
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
	if err := e.Launch(fn, 4, 64, []cuda.DevicePtr{p, p + 1<<44}); err != nil {
		t.Logf("the launch itself failed: %v", err)
	}
	err = e.Synchronize()
	var ce *cuda.Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Name, "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("Synchronize after an out-of-bounds kernel: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
	}
	t.Logf("fault reported as: %v", err)
	t.Logf("Close after the fault: %v", d.Close())
}
