package emit

// fakeTestTemplate is fake_test.go of a generated Metal program, written by
// the evidence tests (metal_programs_test.go) next to the program's
// main.go: it runs the program's own host code on mps/fakemetal, whose
// protocol checks must all pass. DRAWS is replaced by expected dropout
// draws computed with emit/gpu.
const fakeTestTemplate = `package main

import (
	"errors"
	"math"
	"strings"
	"testing"

	"mlbuildprog/mps"
	"mlbuildprog/mps/fakemetal"
)

// newFakeModel starts the model on a fake device that knows every kernel
// of metalSource with the buffer sizes of its constant shapes.
func newFakeModel(t *testing.T) (*fakemetal.Fake, *model) {
	t.Helper()
	var ks []fakemetal.Kernel
	for _, k := range kernels {
		ks = append(ks, fakemetal.Kernel{Name: k.name, BufferBytes: k.argBytes})
	}
	f := fakemetal.New(ks...)
	e, err := mps.NewEngine(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newModel(e)
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

func opsOf(phases ...[]planStep) int {
	n := 0
	for _, ph := range phases {
		for _, st := range ph {
			n += len(st.ops)
		}
	}
	return n
}

// oneCommandBuffer runs fn and checks it used exactly one command buffer,
// committed once and waited for once, with ops dispatches and GEMMs.
func oneCommandBuffer(t *testing.T, f *fakemetal.Fake, what string, ops int, fn func() error) {
	t.Helper()
	before := f.Stats()
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
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

// TestHostOnFake runs two training steps, both inference plans and the
// GEMM selftest through the program's host code on the fake, then checks
// the protocol (buffers alive and large enough, encoders ended before
// commit, MPS outside compute encoders, one commit and one wait per
// command buffer, nothing released twice) and that nothing leaked.
func TestHostOnFake(t *testing.T) {
	f, m := newFakeModel(t)
	x := m.TrainInput()
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	labels := m.TrainLabels()
	for i := range labels {
		labels[i] = float32(i%3) / 3
	}
	trainOps := opsOf(tForward, tBackward, tUpdate) + 1
	for step := 1; step <= 2; step++ {
		oneCommandBuffer(t, f, "training step", trainOps, func() error { _, err := m.trainStep(1e-3, step); return err })
		next := m.TrainInput()
		if &next[0] == &x[0] {
			t.Errorf("after step %d the next batch goes into the buffer the step read; want the other half of the double buffer", step)
		}
		x = next
	}
	oneCommandBuffer(t, f, "inference", opsOf(eInfer), func() error { _, err := m.infer(false); return err })
	oneCommandBuffer(t, f, "one-sample inference", opsOf(oInfer), func() error { _, err := m.infer(true); return err })
	for _, row := range m.checkGemms() {
		// The fake computes GEMMs for real: the MPS path must match cpu.Sgemm.
		if row.Err != nil || !(row.MaxError <= row.Tol) {
			t.Errorf("%s: error %v, max error %g > tolerance %g", row.Name, row.Err, row.MaxError, row.Tol)
		}
	}
	if err := m.e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("objects left after Close:\n%s", strings.Join(leaks, "\n"))
	}
}

// TestSelftestOnFake runs the whole selftest through the host code: every
// step alone in its own command buffer. The fake runs no kernels, so only
// the protocol and the GEMM rows are checked here; a Mac checks the rest.
func TestSelftestOnFake(t *testing.T) {
	f, m := newFakeModel(t)
	before := f.Stats().Commits
	rows := m.SelfTest()
	steps := len(tForward) + len(tBackward) + len(tUpdate) + len(eInfer) + len(oInfer)
	if len(rows) != steps+len(gemmShapes) {
		t.Errorf("selftest gave %d rows, want %d steps + %d GEMM shapes", len(rows), steps, len(gemmShapes))
	}
	if got := f.Stats().Commits - before; got != len(rows) {
		t.Errorf("selftest committed %d command buffers for %d rows", got, len(rows))
	}
	for _, row := range rows {
		if row.Err != nil {
			t.Errorf("%s: %v", row.Name, row.Err)
		}
	}
	if err := m.e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestFailedCommandBuffer: a GPU fault becomes an error naming the step.
func TestFailedCommandBuffer(t *testing.T) {
	f, m := newFakeModel(t)
	f.FailCommandBuffer(1, "Execution of the command buffer was aborted due to an error during execution")
	_, err := m.trainStep(1e-3, 1)
	if err == nil || !errors.Is(err, mps.ErrStepFailed) || !strings.Contains(err.Error(), "training step 1") {
		t.Fatalf("failed command buffer gave %v, want an error naming training step 1 that wraps mps.ErrStepFailed", err)
	}
	if _, err := m.trainStep(1e-3, 2); err != nil {
		t.Fatalf("the step after a failed one: %v", err)
	}
}

// TestNoDevice: without a Metal device the error says to use --backend cpu.
func TestNoDevice(t *testing.T) {
	f := fakemetal.New()
	f.RemoveDevice()
	_, err := mps.NewEngine(f)
	if err == nil || !errors.Is(err, mps.ErrNoDevice) || !strings.Contains(err.Error(), "--backend cpu") {
		t.Fatalf("no device gave %v, want mps.ErrNoDevice with the --backend cpu hint", err)
	}
}

// TestDropoutDraws checks the program's dropout hash against emit/gpu's.
func TestDropoutDraws(t *testing.T) {
	for _, d := range [][4]uint32{DRAWS} {
		if got := math.Float32bits(dropoutUniform(d[0], d[1], d[2])); got != d[3] {
			t.Errorf("dropoutUniform(%d, %d, %d) = %08x, want %08x", d[0], d[1], d[2], got, d[3])
		}
	}
}
`
