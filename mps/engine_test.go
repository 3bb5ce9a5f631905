package mps_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/mlbuild/mlbuild/mps"
	"github.com/mlbuild/mlbuild/mps/fakemetal"
)

// A small dense classifier: batch 5, 7 inputs, 3 classes.
const (
	batch   = 5
	inputs  = 7
	classes = 3
)

// source stands in for the generated Metal kernels: the fake only looks
// for each kernel's definition.
const source = `#include <metal_stdlib>
using namespace metal;
kernel void bias_relu(device float *y [[buffer(0)]], device const float *b [[buffer(1)]], constant uint2 &shape [[buffer(2)]], uint i [[thread_position_in_grid]]) {}
kernel void softmax_xent(device const float *logits [[buffer(0)]], device const float *labels [[buffer(1)]], device float *loss [[buffer(2)]], device float *dlogits [[buffer(3)]], uint i [[thread_position_in_grid]]) {}
kernel void sgd(device float *w [[buffer(0)]], device const float *g [[buffer(1)]], constant float &lr [[buffer(2)]], uint i [[thread_position_in_grid]]) {}
`

func float32s(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func uint32Bytes(vs ...uint32) []byte {
	out := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(out[4*i:], v)
	}
	return out
}

// kernels registers the three kernels with the fake; bias_relu is simulated
// so the test can follow the data.
func kernels() []fakemetal.Kernel {
	return []fakemetal.Kernel{
		{Name: "bias_relu", BufferBytes: []int{4 * batch * classes, 4 * classes}, ConstantBytes: 8,
			Run: func(bufs [][]byte, c []byte, grid, tg mps.Size) {
				y, b := float32s(bufs[0]), float32s(bufs[1])
				n := int(binary.LittleEndian.Uint32(c[4:]))
				for i := range y {
					y[i] = max(0, y[i]+b[i%n])
				}
			}},
		{Name: "softmax_xent", BufferBytes: []int{4 * batch * classes, 4 * batch * classes, 4, 4 * batch * classes}},
		{Name: "sgd", BufferBytes: []int{4 * classes * inputs, 4 * classes * inputs}, ConstantBytes: 4},
	}
}

// model is the state the training step works on: one state arena (weights,
// bias, weight gradient), one work arena (logits, labels, loss, dlogits), and
// the double-buffered input.
type model struct {
	state, work mps.Buffer
	input       *mps.DoubleBuffer
}

// Byte offsets in the arenas.
const (
	offW      = 0
	offB      = offW + 4*classes*inputs
	offDW     = offB + 4*classes
	stateSize = offDW + 4*classes*inputs

	offLogits  = 0
	offLabels  = offLogits + 4*batch*classes
	offLoss    = offLabels + 4*batch*classes
	offDLogits = offLoss + 4
	workSize   = offDLogits + 4*batch*classes
)

func newModel(t *testing.T, e *mps.Engine) *model {
	t.Helper()
	state, err := e.NewBuffer("state", stateSize)
	if err != nil {
		t.Fatal(err)
	}
	work, err := e.NewBuffer("work", workSize)
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.NewDoubleBuffer("input", 4*batch*inputs)
	if err != nil {
		t.Fatal(err)
	}
	return &model{state: state, work: work, input: in}
}

// encodeStep encodes one training step the way a generated program does:
// forward GEMM, fused bias+ReLU, loss, weight-gradient GEMM, update.
func (m *model) encodeStep(s *mps.Step) error {
	x := m.input.Current()
	if err := s.Gemm(mps.GemmSpec{TransB: true, M: batch, N: classes, K: inputs, Alpha: 1,
		A: mps.MatrixOperand{Buffer: x}, B: mps.MatrixOperand{Buffer: m.state, Offset: offW}, C: mps.MatrixOperand{Buffer: m.work, Offset: offLogits}}); err != nil {
		return err
	}
	if err := s.Dispatch("bias_relu", []mps.Binding{{Buffer: m.work, Offset: offLogits}, {Buffer: m.state, Offset: offB}},
		mps.Size{Width: batch * classes, Height: 1, Depth: 1}, mps.Size{Width: 64, Height: 1, Depth: 1}, uint32Bytes(batch, classes)); err != nil {
		return err
	}
	if err := s.Dispatch("softmax_xent", []mps.Binding{{Buffer: m.work, Offset: offLogits}, {Buffer: m.work, Offset: offLabels}, {Buffer: m.work, Offset: offLoss}, {Buffer: m.work, Offset: offDLogits}},
		mps.Size{Width: batch, Height: 1, Depth: 1}, mps.Size{Width: 32, Height: 1, Depth: 1}, nil); err != nil {
		return err
	}
	if err := s.Gemm(mps.GemmSpec{TransA: true, M: classes, N: inputs, K: batch, Alpha: 1,
		A: mps.MatrixOperand{Buffer: m.work, Offset: offDLogits}, B: mps.MatrixOperand{Buffer: x}, C: mps.MatrixOperand{Buffer: m.state, Offset: offDW}}); err != nil {
		return err
	}
	return s.Dispatch("sgd", []mps.Binding{{Buffer: m.state, Offset: offW}, {Buffer: m.state, Offset: offDW}},
		mps.Size{Width: classes * inputs, Height: 1, Depth: 1}, mps.Size{Width: 256, Height: 1, Depth: 1}, uint32Bytes(math.Float32bits(0.1)))
}

func fill(xs []float32, r *rand.Rand) {
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
}

func newEngine(t *testing.T, f *fakemetal.Fake) *mps.Engine {
	t.Helper()
	e, err := mps.NewEngine(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadLibrary(source); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"bias_relu", "softmax_xent", "sgd"} {
		if _, err := e.Pipeline(k); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestTrainingStepProtocol runs three training steps on the fake, with the
// loader filling the next input buffer while each step is in flight, and
// checks the protocol, the counts, the data and that nothing leaks.
func TestTrainingStepProtocol(t *testing.T) {
	f := fakemetal.New(kernels()...)
	e := newEngine(t, f)
	if got := e.DeviceName(); !strings.Contains(got, "fakemetal") {
		t.Errorf("DeviceName() = %q, want the fake's name", got)
	}
	m := newModel(t, e)
	r := rand.New(rand.NewPCG(1, 2))
	fill(m.state.Float32s(), r)
	fill(m.input.Current().Float32s(), r)
	const steps = 3
	for i := range steps {
		x := append([]float32(nil), m.input.Current().Float32s()...)
		w := append([]float32(nil), m.state.Float32s()[offW/4:offB/4]...)
		b := append([]float32(nil), m.state.Float32s()[offB/4:offDW/4]...)
		dl := m.work.Float32s()[offDLogits/4 : offDLogits/4+batch*classes]
		fill(dl, r) // softmax_xent is not simulated: its output is what we put there
		dlogits := append([]float32(nil), dl...)

		s, err := e.Begin("train step")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.encodeStep(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		fill(m.input.Next().Float32s(), r) // the loader, overlapping the GPU
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		m.input.Swap()

		logits := m.work.Float32s()[offLogits/4 : offLogits/4+batch*classes]
		for bi := range batch {
			for c := range classes {
				var sum float64
				for k := range inputs {
					sum += float64(x[bi*inputs+k]) * float64(w[c*inputs+k])
				}
				want := max(0, float32(sum)+b[c])
				if got := logits[bi*classes+c]; math.Abs(float64(got-want)) > 1e-5 {
					t.Fatalf("step %d: logits[%d,%d] = %v, want relu(x·Wᵀ+b) = %v", i, bi, c, got, want)
				}
			}
		}
		dW := m.state.Float32s()[offDW/4:]
		for c := range classes {
			for k := range inputs {
				var sum float64
				for bi := range batch {
					sum += float64(dlogits[bi*classes+c]) * float64(x[bi*inputs+k])
				}
				if got := dW[c*inputs+k]; math.Abs(float64(got)-sum) > 1e-4 {
					t.Fatalf("step %d: dW[%d,%d] = %v, want dlogitsᵀ·x = %v", i, c, k, got, sum)
				}
			}
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	want := fakemetal.Stats{CommandBuffers: steps, Encoders: 2 * steps, Dispatches: 3 * steps, Gemms: 2 * steps, Commits: steps, Waits: steps}
	if got := f.Stats(); got != want {
		t.Errorf("stats = %+v, want %+v", got, want)
	}
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("objects still referenced after Close:\n%s", strings.Join(leaks, "\n"))
	}
	// MPS encodes must come after the compute encoder before them ended.
	log := f.Log()
	open := false
	for _, line := range log {
		switch {
		case strings.HasSuffix(line, " computeCommandEncoder"):
			open = true
		case strings.HasSuffix(line, " endEncoding"):
			open = false
		case strings.HasSuffix(line, " encodeToCommandBuffer:leftMatrix:rightMatrix:resultMatrix:") && open:
			t.Errorf("GEMM encoded inside a compute encoder; log:\n%s", strings.Join(log, "\n"))
		}
	}
}

// TestGemmLayouts checks that Gemm hands MPS the right shapes for every
// transpose combination, with padded rows, offsets, alpha and beta.
func TestGemmLayouts(t *testing.T) {
	const m, n, k = 3, 4, 5
	for _, tc := range []struct {
		transA, transB bool
		alpha, beta    float64
	}{{false, false, 1, 0}, {true, false, 2, 0}, {false, true, 1, 1}, {true, true, 0.5, -1}} {
		f := fakemetal.New()
		e, err := mps.NewEngine(f)
		if err != nil {
			t.Fatal(err)
		}
		aRows, aCols := m, k
		if tc.transA {
			aRows, aCols = k, m
		}
		bRows, bCols := k, n
		if tc.transB {
			bRows, bCols = n, k
		}
		const pad, off = 8, 16 // two floats of row padding, four floats of offset
		mk := func(rows, cols int) (mps.Buffer, mps.MatrixOperand, []float32) {
			buf, err := e.NewBuffer("", off+rows*(cols*4+pad))
			if err != nil {
				t.Fatal(err)
			}
			fill(buf.Float32s(), rand.New(rand.NewPCG(uint64(rows), uint64(cols))))
			return buf, mps.MatrixOperand{Buffer: buf, Offset: off, RowBytes: cols*4 + pad}, append([]float32(nil), buf.Float32s()...)
		}
		elem := func(v []float32, cols, i, j int) float64 { return float64(v[off/4+i*(cols+pad/4)+j]) }
		_, A, av := mk(aRows, aCols)
		_, B, bv := mk(bRows, bCols)
		cbuf, C, cv := mk(m, n)
		s, err := e.Begin("gemm")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Gemm(mps.GemmSpec{TransA: tc.transA, TransB: tc.transB, M: m, N: n, K: k, Alpha: tc.alpha, Beta: tc.beta, A: A, B: B, C: C}); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		got := cbuf.Float32s()
		for i := range m {
			for j := range n {
				var sum float64
				for p := range k {
					var a, b float64
					if tc.transA {
						a = elem(av, aCols, p, i)
					} else {
						a = elem(av, aCols, i, p)
					}
					if tc.transB {
						b = elem(bv, bCols, j, p)
					} else {
						b = elem(bv, bCols, p, j)
					}
					sum += a * b
				}
				want := tc.alpha*sum + tc.beta*elem(cv, n, i, j)
				if g := float64(got[off/4+i*(n+pad/4)+j]); math.Abs(g-want) > 1e-4 {
					t.Fatalf("%+v: C[%d,%d] = %v, want %v", tc, i, j, g, want)
				}
			}
		}
		if pad := got[off/4+n]; pad != cv[off/4+n] {
			t.Errorf("%+v: GEMM wrote into row padding", tc)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEngineErrors checks that misuse and failures become errors that say
// where and what.
func TestEngineErrors(t *testing.T) {
	t.Run("no device", func(t *testing.T) {
		f := fakemetal.New()
		f.RemoveDevice()
		_, err := mps.NewEngine(f)
		if !errors.Is(err, mps.ErrNoDevice) || !strings.Contains(err.Error(), "--backend cpu") {
			t.Fatalf("NewEngine without a device: %v, want ErrNoDevice with the --backend cpu hint", err)
		}
	})
	t.Run("compile error", func(t *testing.T) {
		e, err := mps.NewEngine(fakemetal.New())
		if err != nil {
			t.Fatal(err)
		}
		err = e.LoadLibrary("#error use of undeclared identifier 'x'\n")
		if err == nil || !strings.Contains(err.Error(), "compiling the Metal kernels") || !strings.Contains(err.Error(), "undeclared identifier") {
			t.Fatalf("LoadLibrary of bad source: %v, want Metal's message", err)
		}
	})
	t.Run("failed command buffer", func(t *testing.T) {
		f := fakemetal.New(kernels()...)
		f.FailCommandBuffer(2, "Caused GPU Address Fault Error")
		e := newEngine(t, f)
		m := newModel(t, e)
		for i, name := range []string{"epoch 1 step 1", "epoch 1 step 2"} {
			s, err := e.Begin(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.encodeStep(s); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			err = s.Wait()
			if i == 0 && err != nil {
				t.Fatal(err)
			}
			if i == 1 && (!errors.Is(err, mps.ErrStepFailed) || !strings.Contains(err.Error(), `"epoch 1 step 2"`) || !strings.Contains(err.Error(), "GPU Address Fault")) {
				t.Fatalf("Wait of a failed step: %v, want ErrStepFailed naming the step and Metal's message", err)
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Check(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("misuse", func(t *testing.T) {
		f := fakemetal.New(kernels()...)
		e := newEngine(t, f)
		m := newModel(t, e)
		if _, err := e.NewBuffer("empty", 0); err == nil || !strings.Contains(err.Error(), `"empty"`) {
			t.Errorf("NewBuffer of 0 bytes: %v", err)
		}
		s, err := e.Begin("step 7")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Begin("step 8"); err == nil || !strings.Contains(err.Error(), `"step 7" is still open`) {
			t.Errorf("Begin with a step open: %v", err)
		}
		one := mps.Size{Width: 1, Height: 1, Depth: 1}
		checks := []struct {
			err  error
			want string
		}{
			{s.Dispatch("no_such_kernel", nil, one, one, nil), `kernel "no_such_kernel": no such function`},
			{s.Dispatch("sgd", []mps.Binding{{Buffer: m.state, Offset: stateSize}}, one, one, nil), `kernel "sgd": buffer argument 0`},
			{s.Dispatch("sgd", []mps.Binding{{Buffer: m.state, Offset: offDW, Bytes: stateSize}}, one, one, nil), "outside the buffer"},
			{s.Dispatch("sgd", nil, one, mps.Size{Width: 2048, Height: 1, Depth: 1}, nil), "threadgroup 2048x1x1"},
			{s.Gemm(mps.GemmSpec{M: batch, N: classes, K: inputs, Alpha: 1, A: mps.MatrixOperand{Buffer: m.state}, B: mps.MatrixOperand{Buffer: m.state}, C: mps.MatrixOperand{Buffer: m.state, Offset: stateSize - 8}}), "GEMM operand C"},
			{s.Gemm(mps.GemmSpec{M: 1, N: 1, K: 1, A: mps.MatrixOperand{Buffer: m.state, Offset: 2}, B: mps.MatrixOperand{Buffer: m.state}, C: mps.MatrixOperand{Buffer: m.work}}), "multiples of 4"},
		}
		for _, c := range checks {
			if c.err == nil || !strings.Contains(c.err.Error(), c.want) || !strings.Contains(c.err.Error(), `step "step 7"`) {
				t.Errorf("got error %v, want one naming the step and containing %q", c.err, c.want)
			}
		}
		if err := s.Wait(); err == nil || !strings.Contains(err.Error(), "Wait before Commit") {
			t.Errorf("Wait before Commit: %v", err)
		}
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Dispatch("sgd", nil, one, one, nil); err == nil || !strings.Contains(err.Error(), "after Commit") {
			t.Errorf("Dispatch after Commit: %v", err)
		}
		if err := e.Close(); err == nil || !strings.Contains(err.Error(), "still open") {
			t.Errorf("Close with a step open: %v", err)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("second Wait: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Check(); err != nil {
			t.Fatalf("the Engine's own checks must keep the fake's protocol: %v", err)
		}
	})
}
