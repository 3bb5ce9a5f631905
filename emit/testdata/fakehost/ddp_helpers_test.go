package main

// The helpers of the data-parallel tests (cuda_ddp_test.go,
// cuda_syncbn_test.go, cuda_ddp_twins_test.go), copied by emit's
// TestCUDADataParallel next to the main.go of each program they test.

import (
	"fmt"
	"strconv"
	"testing"

	"mlbuildprog/cuda"
	"mlbuildprog/cuda/fakecuda"
	"mlbuildprog/rt/cpu"
	"mlbuildprog/rt/gpuhost"
)

// hostDevices are devs as the host's devices.
func hostDevices(devs []*cuda.Device) []gpuhost.Device {
	ds := make([]gpuhost.Device, len(devs))
	for i, d := range devs {
		ds[i] = d
	}
	return ds
}

// fakeDevices opens n fake GPUs of one NCCL world; prepare may set faults.
func fakeDevices(work, cache string, n int, prepare func(int, *fakecuda.Fake)) ([]*cuda.Device, error) {
	return worldDevices(fakecuda.NewNCCLWorld(), work, cache, n, prepare)
}

// worldDevices opens n fake GPUs of the NCCL world w.
func worldDevices(w *fakecuda.NCCLWorld, work, cache string, n int, prepare func(int, *fakecuda.Fake)) ([]*cuda.Device, error) {
	devs := make([]*cuda.Device, n)
	for i := range devs {
		f := fakecuda.New(fakecuda.Options{WorkDir: work, Name: "fake GPU " + strconv.Itoa(i)})
		if prepare != nil {
			prepare(i, f)
		}
		libs := f.Libraries()
		libs.NCCL = f.NCCL(w)
		d, err := cuda.OpenDevice(cuda.Options{Libraries: libs, KernelCacheDir: cache})
		if err != nil {
			return nil, err
		}
		devs[i] = d
	}
	return devs, nil
}

// trainData is a deterministic training set of rows MNIST-shaped rows with
// one-hot labels, the state's initial params (their init rules), the
// order of steps batches and their seeds.
func trainData(rows, steps int) (x, y, init []float32, order []int, seeds []uint64) {
	rng := cpu.NewRand(7)
	init = make([]float32, program.StateSize)
	for _, p := range program.Meta.Params {
		w := init[p.Offset : p.Offset+p.Size]
		switch p.Init {
		case "uniform":
			cpu.FillUniform(w, p.Bound, rng)
		case "ones":
			cpu.Fill(w, 1)
		}
	}
	B := program.Meta.Batch
	inW, labW := program.TrainInputSize/B, program.TrainLabelsSize/B
	x = make([]float32, rows*inW)
	for i := range x {
		x[i] = rng.Float32()
	}
	y = make([]float32, rows*labW)
	for r := 0; r < rows; r++ {
		y[r*labW+rng.Intn(labW)] = 1
	}
	order = make([]int, steps*B)
	for i := range order {
		order[i] = (i*37 + 11) % rows
	}
	seeds = make([]uint64, steps)
	for i := range seeds {
		seeds[i] = uint64(i+1) * 0x9E3779B97F4A7C15
	}
	return
}

// residentModel is what residentRun trains.
type residentModel interface {
	State() []float32
	LoadTrainSet(x, y []float32, rows int) (bool, error)
	StartEpoch(order []int, seeds []uint64, lrs []float32, step0, first int) error
	QueueSteps(n int) error
	StepResults() ([]float32, []int, error)
}

// residentRun trains steps steps device-resident (windows of window
// steps) and returns the losses, correct counts and the state after.
func residentRun(t *testing.T, m residentModel, steps, window int) ([]float32, []int, []float32) {
	t.Helper()
	l, c, s, err := residentTrain(m, steps, window)
	if err != nil {
		t.Fatal(err)
	}
	return l, c, s
}

// residentTrain is residentRun for any goroutine: it returns its error.
func residentTrain(m residentModel, steps, window int) ([]float32, []int, []float32, error) {
	B := program.Meta.Batch
	rows := steps*B + 5
	x, y, init, order, seeds := trainData(rows, steps)
	copy(m.State(), init)
	if ok, err := m.LoadTrainSet(x, y, rows); err != nil || !ok {
		return nil, nil, nil, fmt.Errorf("LoadTrainSet: %v, %v", ok, err)
	}
	lrs := make([]float32, len(seeds))
	for i := range lrs {
		lrs[i] = 1e-3
	}
	if err := m.StartEpoch(order, seeds, lrs, 1, 0); err != nil {
		return nil, nil, nil, err
	}
	var losses []float32
	var correct []int
	for done := 0; done < steps; done += window {
		if err := m.QueueSteps(min(window, steps-done)); err != nil {
			return nil, nil, nil, err
		}
		l, c, err := m.StepResults()
		if err != nil {
			return nil, nil, nil, err
		}
		losses, correct = append(losses, l...), append(correct, c...)
	}
	return losses, correct, append([]float32(nil), m.State()...), nil
}
