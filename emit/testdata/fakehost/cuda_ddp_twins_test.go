package main

// This file is copied next to the main.go of the CUDA program of
// testdata/specs/bf16/resnet_tiny_bf16.cue by emit's
// TestCUDADataParallel, with ddp_helpers_test.go.

import (
	"math"
	"os"
	"testing"
	"time"

	"mlbuildprog/cuda"
	"mlbuildprog/cuda/fakecuda"
	"mlbuildprog/rt/gpuhost"
)

// TestDataParallelTwins trains the bf16 ResNet device-resident for 2
// steps on one fake GPU and on 2: the losses are finite, and every
// weight's bfloat16 twin, as the update kernels (on 2 GPUs, the
// replicas') left it, is the weight rounded to bfloat16 in the twin's
// order: a convolution's in KRSC order (gpuhost.BF16Twin.KRSC), as the
// host writes it. The program's convolutions read KRSC twins.
func TestDataParallelTwins(t *testing.T) {
	const steps = 2
	krsc := 0
	for _, tw := range program.BF16Twins {
		if tw.KRSC != [3]int{} {
			krsc++
		}
	}
	if krsc == 0 {
		t.Fatal("the program has no KRSC twin")
	}
	work, cache := os.Getenv("MLBUILD_FAKECUDA_DIR"), t.TempDir()
	check := func(t *testing.T, loss, state []float32) {
		for i, l := range loss {
			if math.IsNaN(float64(l)) || math.IsInf(float64(l), 0) {
				t.Errorf("step %d: loss %v", i+1, l)
			}
		}
		for _, tw := range program.BF16Twins {
			of := state[tw.Of.Offset : tw.Of.Offset+tw.Of.Size]
			want := make([]float32, (tw.Of.Size+1)/2)
			if f := tw.KRSC; f != [3]int{} {
				gpuhost.NarrowBF16NHWC(want, of, f[0], f[1], f[2])
			} else {
				gpuhost.NarrowBF16(want, of)
			}
			for i, w := range want {
				if got := state[tw.Offset+i]; math.Float32bits(got) != math.Float32bits(w) {
					t.Errorf("twin of %d values at %d (KRSC %v): place %d holds %#08x, want %#08x", tw.Of.Size, tw.Offset, tw.KRSC, i, math.Float32bits(got), math.Float32bits(w))
					break
				}
			}
		}
	}
	t.Run("1 GPU", func(t *testing.T) {
		f := fakecuda.New(fakecuda.Options{WorkDir: work})
		d, err := cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}()
		one, err := gpuhost.New(d, &program)
		if err != nil {
			t.Fatal(err)
		}
		loss, _, state := residentRun(t, one, steps, 2)
		check(t, loss, state)
	})
	t.Run("2 GPUs", func(t *testing.T) {
		devs, err := fakeDevices(work, cache, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		ds, cs, err := cuda.StartReplicas(devs, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r, err := gpuhost.NewReplicated(ds, cs, &program, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		}()
		if r.GPUs() != 2 {
			t.Fatalf("%d GPUs, want 2", r.GPUs())
		}
		loss, _, state := residentRun(t, r, steps, 2)
		check(t, loss, state)
	})
}
