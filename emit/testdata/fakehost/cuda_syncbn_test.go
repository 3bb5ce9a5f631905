package main

// This file is copied next to the main.go of the CUDA program of
// mnist_bn.cue (mnist_mlp.cue with a batch norm) by emit's
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

// TestSyncBatchNorm trains 10 steps on one fake GPU at batch 4 and on 2
// fake GPUs at 2 each: with synchronised batch norm (SetSyncBN, train
// --sync-bn) the losses agree within syncLossTol and every value of the
// state (weights, gradients, Adam's moments, the running statistics)
// within syncStateTol on 99% of it, and so do 5 host-fed steps' losses
// (TrainStep); with each GPU's own statistics (the
// default) the losses differ by more than notSyncLoss, since a batch of 2
// normalises with other means and variances than one of 4.
func TestSyncBatchNorm(t *testing.T) {
	const (
		steps        = 10
		syncLossTol  = 1e-4 // relative
		syncStateTol = 1e-4
		notSyncLoss  = 1e-2
	)
	work, cache := os.Getenv("MLBUILD_FAKECUDA_DIR"), t.TempDir()
	f := fakecuda.New(fakecuda.Options{WorkDir: work})
	d, err := cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	one, err := gpuhost.New(d, &program)
	if err != nil {
		t.Fatal(err)
	}
	wantLoss, _, wantState := residentRun(t, one, steps, 7)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, sync bool) ([]float32, []float32) {
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
		if sync {
			if err := r.SetSyncBN(); err != nil {
				t.Fatal(err)
			}
		}
		loss, _, state := residentRun(t, r, steps, 7)
		return loss, state
	}
	t.Run("synchronised", func(t *testing.T) {
		loss, state := run(t, true)
		for i := range wantLoss {
			if d := math.Abs(float64(loss[i] - wantLoss[i])); !(d <= syncLossTol*math.Max(1, math.Abs(float64(wantLoss[i])))) {
				t.Errorf("step %d: loss %v on 2 GPUs with synchronised batch norm, %v on one", i+1, loss[i], wantLoss[i])
			}
		}
		far, worst := 0, 0.0
		for i := range wantState {
			d := math.Abs(float64(state[i] - wantState[i]))
			worst = max(worst, d)
			if d > syncStateTol {
				far++
			}
		}
		if far > len(wantState)/100+1 {
			t.Errorf("%d of the %d values of the state differ by more than %g between 2 GPUs with synchronised batch norm and one", far, len(wantState), syncStateTol)
		}
		t.Logf("synchronised: first losses %v (one GPU: %v); largest state difference %.3g", loss[:3], wantLoss[:3], worst)
	})
	t.Run("host-fed, synchronised", func(t *testing.T) {
		// The host-fed step (TrainStep: the data-parallel step's parts
		// run once per call) against one GPU's, 5 steps.
		devs, err := fakeDevices(work, cache, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		one, err := gpuhost.New(devs[2], &program)
		if err != nil {
			t.Fatal(err)
		}
		defer devs[2].Close()
		ds, cs, err := cuda.StartReplicas(devs[:2], 30*time.Second)
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
		if err := r.SetSyncBN(); err != nil {
			t.Fatal(err)
		}
		B := program.Meta.Batch
		inW, labW := program.TrainInputSize/B, program.TrainLabelsSize/B
		x, y, init, order, _ := trainData(5*B, 5)
		copy(one.State(), init)
		copy(r.State(), init)
		for step := 1; step <= 5; step++ {
			var loss [2]float32
			for k, m := range []interface {
				TrainInput() []float32
				TrainLabels() []float32
				TrainStep(lr float32, step int) float32
			}{one, r} {
				in, lab := m.TrainInput(), m.TrainLabels()
				for i := range B {
					row := order[(step-1)*B+i]
					copy(in[i*inW:(i+1)*inW], x[row*inW:(row+1)*inW])
					copy(lab[i*labW:(i+1)*labW], y[row*labW:(row+1)*labW])
				}
				loss[k] = m.TrainStep(1e-3, step)
			}
			if d := math.Abs(float64(loss[1] - loss[0])); !(d <= syncLossTol*math.Max(1, math.Abs(float64(loss[0])))) {
				t.Errorf("host-fed step %d: loss %v on 2 GPUs with synchronised batch norm, %v on one", step, loss[1], loss[0])
			}
		}
	})
	t.Run("each GPU's own", func(t *testing.T) {
		loss, _ := run(t, false)
		worst := 0.0
		for i := range wantLoss {
			worst = max(worst, math.Abs(float64(loss[i]-wantLoss[i])))
		}
		if worst <= notSyncLoss {
			t.Errorf("the losses of 2 GPUs with each GPU's batch norm statistics are within %g of one GPU's (at most %g apart): the test cannot tell synchronised batch norm from the default", notSyncLoss, worst)
		}
		t.Logf("each GPU's own: first losses %v (one GPU: %v); largest loss difference %.3g", loss[:3], wantLoss[:3], worst)
	})
}
