package planner

import (
	"strings"
	"testing"
)

// TestFuseConvSum: in an inference plan for a target whose "lib"
// convolutions add a residual in their epilogue, residualBlock's conv2
// (its batch norm folded) takes the sum with the stem's activation and
// the ReLU after it, and no binary step is left; the training plan, and
// a target without ConvSum, keep the sum. Verify refuses a residual of
// another shape.
func TestFuseConvSum(t *testing.T) {
	lib := CPU
	lib.Conv = func(g ConvGeom, pass ConvPass) ConvChoice { return ConvChoice{Method: "lib"} }
	lib.FusedReLU, lib.FoldBatchNorm = true, true
	lib.ConvSum = map[string]bool{"lib": true}
	plain := lib
	plain.ConvSum = nil
	for _, tc := range []struct {
		name     string
		target   Target
		training bool
		fused    bool
	}{
		{"inference", lib, false, true},
		{"training", lib, true, false},
		{"no ConvSum", plain, false, false},
	} {
		p := mustBuild(t, residualBlock(), Options{Training: tc.training, Fusion: true, Target: tc.target})
		sums, taken := 0, 0
		for _, s := range p.Forward {
			if s.Kernel == KBinary {
				sums++
			}
			if s.Kernel != KConv2D || len(s.In) < 4 {
				continue
			}
			taken++
			z, y := p.Buffers[s.In[3]], p.Buffers[s.Out[0]]
			if s.Layer != "conv2" || s.Attr.Act != "relu" || z.Name != "stem_act.out" || y.Name != "out.out" {
				t.Errorf("%s: %s takes residual %s with act %q and writes %s; want conv2, stem_act.out, relu, out.out", tc.name, s.Layer, z.Name, s.Attr.Act, y.Name)
			}
		}
		if want := map[bool]int{true: 0, false: 1}[tc.fused]; sums != want || taken != 1-want {
			t.Errorf("%s: %d sums left and %d convolutions with a residual; want %d and %d", tc.name, sums, taken, want, 1-want)
		}
		if said := strings.Contains(strings.Join(p.Fusions, "\n"), "conv2 + sum -> conv2d (the sum and relu in the convolution's epilogue)"); said != tc.fused {
			t.Errorf("%s: fusions %q", tc.name, p.Fusions)
		}
		if !tc.fused {
			continue
		}
		for i, s := range p.Forward {
			if len(s.In) == 4 {
				p.Forward[i].In[3] = s.In[1]
				if err := Verify(p); err == nil || !strings.Contains(err.Error(), "fourth input") {
					t.Errorf("Verify took a residual of the weight's shape: %v", err)
				}
			}
		}
	}
}
