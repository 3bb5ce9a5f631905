package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// newTestRand is the tests' generator, seeded per test so that a failure
// reproduces.
func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randSlice returns n values uniform in [-scale, scale).
func randSlice(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = (2*r.Float32() - 1) * scale
	}
	return s
}

// gradInput is one input of a differentiable kernel, with the gradient the
// backward kernel computed for it.
type gradInput struct {
	name string
	x    []float32
	grad []float32
}

// gradCheck compares analytic gradients against central differences of the
// scalar loss L = Σ proj·fwd(). It probes up to maxProbes elements of each
// input. With kinks set (ReLU, max), points where the two one-sided
// differences disagree sit on a kink within the step and are skipped, but
// never more than a quarter of them.
type gradCheck struct {
	h, rtol, atol float64
	kinks         bool
	maxProbes     int
}

// smoothCheck and kinkyCheck are the settings used for smooth functions and
// for piecewise ones.
var (
	smoothCheck = gradCheck{h: 1e-2, rtol: 2e-2, atol: 2e-3, maxProbes: 40}
	kinkyCheck  = gradCheck{h: 1e-3, rtol: 2e-2, atol: 5e-3, kinks: true, maxProbes: 40}
)

func (c gradCheck) run(t *testing.T, name string, proj []float32, fwd func() []float32, inputs ...gradInput) {
	t.Helper()
	loss := func() float64 {
		y := fwd()
		if len(y) != len(proj) {
			t.Fatalf("%s: forward output has %d elements, projection %d", name, len(y), len(proj))
		}
		var s float64
		for i, v := range y {
			s += float64(v) * float64(proj[i])
		}
		return s
	}
	r := newTestRand(99)
	for _, in := range inputs {
		if len(in.grad) != len(in.x) {
			t.Fatalf("%s: d%s has %d elements, %s %d", name, in.name, len(in.grad), in.name, len(in.x))
		}
		idx := r.Perm(len(in.x))
		if len(idx) > c.maxProbes {
			idx = idx[:c.maxProbes]
		}
		skipped, bad := 0, 0
		for _, i := range idx {
			orig := in.x[i]
			in.x[i] = orig + float32(c.h)
			lp := loss()
			in.x[i] = orig - float32(c.h)
			lm := loss()
			in.x[i] = orig
			// The actual perturbation in float32 may differ from h.
			step := float64(orig+float32(c.h)) - float64(orig-float32(c.h))
			num := (lp - lm) / step
			if c.kinks {
				l0 := loss()
				dp := (lp - l0) / (float64(orig+float32(c.h)) - float64(orig))
				dm := (l0 - lm) / (float64(orig) - float64(orig-float32(c.h)))
				if math.Abs(dp-dm) > 0.005*math.Max(math.Abs(dp), math.Abs(dm))+c.atol {
					skipped++
					continue
				}
			}
			ana := float64(in.grad[i])
			if diff := math.Abs(num - ana); diff > c.atol+c.rtol*math.Max(math.Abs(num), math.Abs(ana)) || math.IsNaN(diff) {
				if bad < 5 {
					t.Errorf("%s: d%s[%d] = %.6g, finite differences give %.6g", name, in.name, i, ana, num)
				}
				bad++
			}
		}
		if skipped*4 > len(idx) {
			t.Errorf("%s: d%s: %d of %d probes sat on kinks; the check proves too little", name, in.name, skipped, len(idx))
		}
		if bad > 0 {
			t.Errorf("%s: d%s: %d of %d probes wrong", name, in.name, bad, len(idx))
		}
	}
}

// closeTo reports the first element where got and want differ by more than
// tol relative to max(1, |want|), as an error message, or "".
func closeTo(got, want []float32, tol float64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) != math.IsNaN(w) || math.Abs(g-w) > tol*math.Max(1, math.Abs(w)) {
			return fmt.Sprintf("element %d = %.7g, want %.7g", i, g, w)
		}
	}
	return ""
}

// cloneF returns a copy of s.
func cloneF(s []float32) []float32 { return append([]float32(nil), s...) }

// actRef applies a fused activation to one value, the plain way.
func actRef(v float64, act Act, alpha float32) float64 {
	switch act {
	case ActReLU:
		return math.Max(v, 0)
	case ActLeakyReLU:
		if v < 0 {
			return float64(alpha) * v
		}
	case ActSigmoid:
		return 1 / (1 + math.Exp(-v))
	case ActTanh:
		return math.Tanh(v)
	case ActReLU6:
		return math.Min(math.Max(v, 0), 6)
	case ActSiLU:
		return v / (1 + math.Exp(-v))
	}
	return v
}

// allActs lists every fused activation with whether it has a kink.
var allActs = []struct {
	name  string
	act   Act
	kinky bool
}{
	{"none", ActNone, false},
	{"relu", ActReLU, true},
	{"leakyrelu", ActLeakyReLU, true},
	{"sigmoid", ActSigmoid, false},
	{"tanh", ActTanh, false},
	{"relu6", ActReLU6, true},
}
