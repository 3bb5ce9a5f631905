package cuda_test

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

// fakeWorkDir keeps the kernels g++ builds for one test run, shared by
// every fake of it so each source is built once; TestMain removes it.
var fakeWorkDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cuda-test-kernels-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fakeWorkDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// openFake opens a Device on a new fake GPU whose leaks are checked when
// the test ends.
func openFake(t *testing.T, opts cuda.Options) (*cuda.Device, *fakecuda.Fake) {
	t.Helper()
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	opts.Libraries = f.Libraries()
	if opts.KernelCacheDir == "" {
		opts.KernelCacheDir = t.TempDir()
	}
	d, err := cuda.OpenDevice(opts)
	if err != nil {
		t.Fatal(err)
	}
	return d, f
}

// fakeSuite is the conformance suite on fake GPUs opened with opts: fail
// makes a fake's next launch fail, check looks at each fake when its test
// ends, and every fake must hold nothing after Close.
func fakeSuite(opts cuda.Options, fail func(*fakecuda.Fake), check func(*testing.T, *cuda.Device, *fakecuda.Fake)) gpuhosttest.Suite {
	fakes := map[gpuhost.Device]*fakecuda.Fake{}
	return gpuhosttest.Suite{
		Language: gpuhosttest.CUDA,
		Open: func(t *testing.T) gpuhost.Device {
			d, f := openFake(t, opts)
			fakes[d] = f
			t.Cleanup(func() {
				check(t, d, f)
				if leaks := f.Leaks(); len(leaks) > 0 && !t.Failed() && len(f.Faults()) == 0 {
					t.Errorf("after Close the fake still holds: %v", leaks)
				}
			})
			return d
		},
		FailNextLaunch: func(d gpuhost.Device) { fail(fakes[d]) },
		Caller:         true,
		Precisions:     []gpuhost.Precision{gpuhost.PrecisionBF16, gpuhost.PrecisionTF32},
		RoundsOperands: true,
		BF16Operands:   true,
		Conv:           true,
		ConvPrecisions: []gpuhost.Precision{gpuhost.PrecisionTF32},
		ConvBF16:       true,
		ConvNHWC:       true,
		ConvEpilogue:   true,
	}
}

func failGraph(f *fakecuda.Fake) { f.FailNextGraphLaunch(cuda.ErrorIllegalAddress) }

func TestConformanceOnFake(t *testing.T) {
	gpuhosttest.Run(t, fakeSuite(cuda.Options{}, failGraph, func(*testing.T, *cuda.Device, *fakecuda.Fake) {}))
}

// TestConformanceInPartsOnFake runs the suite with each program's kernels
// cut into parts that compile side by side (Engine.LoadModules), one
// kernel a part: every load must find its kernels across the modules.
func TestConformanceInPartsOnFake(t *testing.T) {
	defer cuda.SetPartBytes(1)()
	gpuhosttest.Run(t, fakeSuite(cuda.Options{CompileJobs: 2}, failGraph, func(t *testing.T, d *cuda.Device, f *fakecuda.Fake) {
		for _, l := range d.Engine().KernelLoads() {
			if l.Parts < 2 || l.Jobs != 2 || f.Stats().Compiles < l.Compiled {
				t.Errorf("a load of %d parts, %d compiled (the fake counts %d), %d at once: want every kernel a part, 2 at once", l.Parts, l.Compiled, f.Stats().Compiles, l.Jobs)
			}
		}
	}))
}

// TestConformanceBlockingOnFake runs the suite on devices whose sequences
// are blocking (MLBUILD_CUDA_BLOCKING=1): op lists launched one by one.
func TestConformanceBlockingOnFake(t *testing.T) {
	failKernel := func(f *fakecuda.Fake) { f.FailKernel("*", cuda.ErrorIllegalAddress) }
	gpuhosttest.Run(t, fakeSuite(cuda.Options{Blocking: true}, failKernel, func(t *testing.T, _ *cuda.Device, f *fakecuda.Fake) {
		if s := f.Stats(); s.Captures != 0 || s.GraphLaunches != 0 {
			t.Errorf("blocking sequences made %d captures and %d graph launches, want none", s.Captures, s.GraphLaunches)
		}
	}))
}

// TestConformanceProfileOnFake runs the suite on devices that profile
// their sequences (MLBUILD_CUDA_PROFILE=1): op lists launched back to
// back between timing events, one event wait a launch; the events are
// destroyed by Close (the suite's leak check).
func TestConformanceProfileOnFake(t *testing.T) {
	failKernel := func(f *fakecuda.Fake) { f.FailKernel("*", cuda.ErrorIllegalAddress) }
	gpuhosttest.Run(t, fakeSuite(cuda.Options{Blocking: true, Profile: true, ProfileOut: io.Discard}, failKernel, func(t *testing.T, _ *cuda.Device, f *fakecuda.Fake) {
		if s := f.Stats(); s.Captures != 0 || s.GraphLaunches != 0 {
			t.Errorf("profiled sequences made %d captures and %d graph launches, want none", s.Captures, s.GraphLaunches)
		}
	}))
}
