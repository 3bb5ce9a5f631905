package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestCastInput: when every convolution of the tiny ResNet runs as the
// library method, its bf16 training and inference plans cast the input
// to a copy that the stem's forward and backward read, stored in
// bfloat16 (so the stem multiplies in bf16 too); the cast is the first
// step after any fold steps. Without KCast among the storage kernels the
// stem reads the float32 input and falls back to tf32, and an f32 plan
// casts nothing.
func TestCastInput(t *testing.T) {
	all := []Kernel{KBatchNorm, KBatchNormBwd, KUnary, KUnaryBwd, KBinary, KBinaryBwd, KAccumulate, KGlobalAvgPool, KGlobalAvgPoolBwd}
	target := castTarget
	for _, tc := range []struct {
		name      string
		precision string
		target    Target
		training  bool
		cast      bool
	}{
		{"training", PrecisionBF16, target(append(all, KCast)...), true, true},
		{"inference", PrecisionBF16, target(append(all, KCast)...), false, true},
		{"no cast kernel", PrecisionBF16, target(all...), true, false},
		{"f32", PrecisionF32, target(append(all, KCast)...), true, false},
	} {
		p := castPlan(t, tc.precision, tc.training, tc.target)
		casts := 0
		for i, st := range p.Forward {
			if st.Kernel != KCast {
				continue
			}
			casts++
			y := p.Buffers[st.Out[0]]
			if i != p.FoldSteps() || st.In[0] != p.Input || y.Elem != ElemBF16 {
				t.Errorf("%s: cast step %d of %d fold steps reads %s and writes %s (elem %q); want the first after the folds, the input, bfloat16", tc.name, i, p.FoldSteps(), p.Buffers[st.In[0]].Name, y.Name, y.Elem)
			}
		}
		if want := map[bool]int{true: 1, false: 0}[tc.cast]; casts != want {
			t.Errorf("%s: %d cast steps, want %d", tc.name, casts, want)
		}
		for _, st := range p.allSteps() {
			if (st.Kernel != KConv2D && st.Kernel != KConv2DBwd) || st.Layer != "stem" {
				continue
			}
			readsInput := st.In[0] == p.Input
			switch {
			case tc.cast && (readsInput || st.Attr.Precision != PrecisionBF16):
				t.Errorf("%s: the stem's %s reads the input %v in %q; want the cast, in bf16", tc.name, st.Kernel, readsInput, st.Attr.Precision)
			case !tc.cast && !readsInput:
				t.Errorf("%s: the stem's %s reads %s, not the input", tc.name, st.Kernel, p.Buffers[st.In[0]].Name)
			case !tc.cast && tc.precision == PrecisionBF16 && st.Attr.Precision != PrecisionTF32:
				t.Errorf("%s: the stem's %s in %q, want tf32 (its x, the input, stays float32)", tc.name, st.Kernel, st.Attr.Precision)
			}
		}
	}
}

// castTarget is storageTarget with every convolution on the library
// method "lib" (the stem too), so that a bf16 plan casts its input.
func castTarget(kernels ...Kernel) Target {
	t := storageTarget(kernels...)
	t.Conv = func(ConvGeom, ConvPass) ConvChoice { return ConvChoice{Method: "lib"} }
	return t
}

// castPlan is the tiny ResNet's plan in a precision, for training or
// inference, on a target.
func castPlan(t *testing.T, precision string, training bool, target Target) *Plan {
	t.Helper()
	m, err := spec.Load("../testdata/specs/bf16/resnet_tiny_bf16.cue")
	if err != nil {
		t.Fatal(err)
	}
	m.Precision = precision
	p, err := Build(m, Options{Training: training, Fusion: true, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
