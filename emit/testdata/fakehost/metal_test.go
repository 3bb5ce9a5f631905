package main

// This file is copied next to the main.go of generated Metal programs by
// emit's tests (TestMetalPrograms): it runs the program's own tables
// through rt/gpuhost on mps/fakemetal, whose protocol checks must all pass.

import (
	"strings"
	"testing"

	"mlbuildprog/mps"
	"mlbuildprog/mps/fakemetal"
	"mlbuildprog/rt/gpuhost"
)

// newFakeModel starts the model on a fake device that knows every kernel of
// the program with the buffer sizes of its constant shapes.
func newFakeModel(t *testing.T) (*fakemetal.Fake, *gpuhost.Model) {
	t.Helper()
	var ks []fakemetal.Kernel
	for _, k := range program.Kernels {
		ks = append(ks, fakemetal.Kernel{Name: k.Name, BufferBytes: k.ArgBytes})
	}
	f := fakemetal.New(ks...)
	e, err := mps.NewEngine(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpuhost.New(mps.NewHostDevice(e), &program)
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

// opsOf is how many dispatches and MPS multiplications the phases
// encode: a batched GEMM is one multiplication per matrix on Metal
// (mps's encoder.Gemm).
func opsOf(phases ...[]gpuhost.PlanStep) int {
	n := 0
	for _, ph := range phases {
		for _, st := range ph {
			for _, op := range st.Ops {
				if op.Gemm != nil {
					n += max(op.Gemm.Shape.Batch, 1)
				} else {
					n++
				}
			}
		}
	}
	return n
}

// oneCommandBuffer runs fn and checks it used exactly one command buffer,
// committed once and waited for once, with ops dispatches and GEMMs.
func oneCommandBuffer(t *testing.T, f *fakemetal.Fake, what string, ops int, fn func()) {
	t.Helper()
	before := f.Stats()
	fn()
	after := f.Stats()
	if d := after.CommandBuffers - before.CommandBuffers; d != 1 {
		t.Errorf("%s used %d command buffers, want 1", what, d)
	}
	if d := after.Commits - before.Commits; d != 1 {
		t.Errorf("%s committed %d times, want 1", what, d)
	}
	if d := after.Waits - before.Waits; d != 1 {
		t.Errorf("%s waited %d times, want 1", what, d)
	}
	if d := (after.Dispatches - before.Dispatches) + (after.Gemms - before.Gemms); d != ops {
		t.Errorf("%s encoded %d dispatches and GEMMs, want %d", what, d, ops)
	}
}

// TestHostOnFake runs training steps (fed by the host and device-resident),
// both inference plans and the selftest through the program's tables on
// the fake, then checks the protocol (buffers alive and large enough,
// encoders ended before commit, MPS outside compute encoders, one commit
// and one wait per command buffer, nothing released twice) and that nothing
// leaked.
func TestHostOnFake(t *testing.T) {
	f, m := newFakeModel(t)
	x := m.TrainInput()
	for i := range x {
		x[i] = float32(i%7) / 7
		if v := program.Meta.Vocab; v > 0 {
			x[i] = float32(i % v) // token ids
		}
	}
	labels := m.TrainLabels()
	for i := range labels {
		labels[i] = float32(i%3) / 3
	}
	trainOps := opsOf(program.TrainForward, program.TrainBackward, program.TrainUpdate) + 1
	for step := 1; step <= 2; step++ {
		oneCommandBuffer(t, f, "training step", trainOps, func() { m.TrainStep(1e-3, step) })
	}
	// The first inference after training folds the batch norms into the
	// weights again (a command buffer of its own, where the plan folds:
	// rt/gpuhost's fold.go); the next is one command buffer.
	for _, one := range []bool{false, true} {
		folds := map[bool]int{false: program.EvalFolds, true: program.OneFolds}[one]
		before := f.Stats()
		m.Infer(one)
		want := 1
		if folds > 0 {
			want = 2
		}
		if got := f.Stats().CommandBuffers - before.CommandBuffers; got != want {
			t.Errorf("the first inference (one=%v) after training used %d command buffers, want %d (%d fold steps)", one, got, want, folds)
		}
	}
	oneCommandBuffer(t, f, "inference", opsOf(program.EvalInfer[program.EvalFolds:]), func() { m.Infer(false) })
	oneCommandBuffer(t, f, "one-sample inference", opsOf(program.OneInfer[program.OneFolds:]), func() { m.Infer(true) })

	// Device-resident training: advance, two gathers, the step, record
	// (of rows, or for a text of windows of one stream of ids).
	B := program.Meta.Batch
	rows := 2*B + 1
	var ok bool
	var err error
	if rk := program.Resident; rk != nil && rk.Windows > 0 {
		ok, err = m.LoadTrainWindows(make([]float32, rows+rk.Windows), rows)
	} else {
		ok, err = m.LoadTrainSet(make([]float32, rows*program.TrainInputSize/B), make([]float32, rows*program.TrainLabelsSize/B), rows)
	}
	if err != nil || !ok {
		t.Fatalf("loading the training set: %v, %v", ok, err)
	}
	order := make([]int, 2*B)
	for i := range order {
		order[i] = (i * 7) % rows
	}
	if err := m.StartEpoch(order, []uint64{11, 12}, []float32{1e-3, 1e-3}, 3, 0); err != nil {
		t.Fatal(err)
	}
	oneCommandBuffer(t, f, "resident training step", trainOps+4, func() {
		if err := m.QueueSteps(1); err != nil {
			t.Fatal(err)
		}
	})
	if loss, correct, err := m.StepResults(); err != nil || len(loss) != 1 || len(correct) != 1 {
		t.Errorf("StepResults after one step: %v, %v, %v", loss, correct, err)
	}

	// The KV-cache decode of a language model: a token is one command
	// buffer of the decode's steps; a window of 4 ids one of the
	// one-sample inference and the caches' copies (the prefill).
	if dc := program.Decode; dc != nil {
		tm := m.TokenModel()
		token := opsOf(dc.Step, dc.Last)
		oneCommandBuffer(t, f, "decode of a first id", token, func() { tm.NextLogits([]int32{1}, 0) })
		oneCommandBuffer(t, f, "decode of a token", token, func() { tm.NextLogits([]int32{1, 2}, 1) })
		if dc.Context >= 4 {
			oneCommandBuffer(t, f, "prefill of a window", opsOf(program.OneInfer)+len(dc.Fills), func() { tm.NextLogits([]int32{1, 2, 0, 1}, 0) })
		}
	} else if m.TokenModel() != nil {
		t.Error("a program without a decode is a TokenModel")
	}

	rowsST := m.SelfTest()
	steps := len(program.TrainForward) + len(program.TrainBackward) + len(program.TrainUpdate) + len(program.EvalInfer) + len(program.OneInfer)
	if len(rowsST) != steps+len(program.GemmShapes) {
		t.Errorf("selftest gave %d rows, want %d steps + %d GEMM shapes", len(rowsST), steps, len(program.GemmShapes))
	}
	for _, row := range rowsST {
		if row.Err != nil {
			t.Errorf("%s: %v", row.Name, row.Err)
		}
		// The fake computes GEMMs for real: the MPS path must match cpu.Sgemm.
		if strings.HasPrefix(row.Name, "GEMM") && !(row.MaxError <= row.Tol) {
			t.Errorf("%s: max error %g > tolerance %g", row.Name, row.MaxError, row.Tol)
		}
	}
	if err := m.Device().Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("objects left after Close:\n%s", strings.Join(leaks, "\n"))
	}
}
