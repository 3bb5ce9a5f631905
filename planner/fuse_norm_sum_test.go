package planner

import (
	"slices"
	"strings"
	"testing"
)

// TestFuseNormSum: in a training plan for a target whose batch norms add a
// residual in the plan's precision, residualBlock's bn2 takes the sum with
// the stem's activation and the ReLU after it, and no binary step is left,
// while the backward is step for step the one the sum's plan has; an
// inference plan, and a target whose NormSum names another precision,
// keep the sum. Verify refuses a residual of another shape.
func TestFuseNormSum(t *testing.T) {
	gpu := CPU
	gpu.FusedReLU, gpu.ShareSumGrads, gpu.FoldBatchNorm, gpu.NoFoldWhy = true, true, false, ""
	norm := gpu
	norm.NormSum = map[string]bool{PrecisionF32: true}
	other := gpu
	other.NormSum = map[string]bool{PrecisionBF16: true}
	backward := func(p *Plan) []string {
		var s []string
		for _, st := range p.Backward {
			s = append(s, string(st.Kernel)+" "+st.Layer+" "+st.Attr.Act)
		}
		return s
	}
	kept := mustBuild(t, residualBlock(), Options{Training: true, Fusion: true, Target: gpu})
	for _, tc := range []struct {
		name     string
		target   Target
		training bool
		fused    bool
	}{
		{"training", norm, true, true},
		{"inference", norm, false, false},
		{"another precision", other, true, false},
	} {
		p := mustBuild(t, residualBlock(), Options{Training: tc.training, Fusion: true, Target: tc.target})
		sums, taken := 0, 0
		for _, s := range p.Forward {
			if s.Kernel == KBinary {
				sums++
			}
			if s.Kernel != KBatchNorm || len(s.In) < 6 {
				continue
			}
			taken++
			z, y := p.Buffers[s.In[5]], p.Buffers[s.Out[0]]
			if s.Layer != "bn2" || s.Attr.Act != "relu" || z.Name != "stem_act.out" || y.Name != "out.out" {
				t.Errorf("%s: %s takes residual %s with act %q and writes %s; want bn2, stem_act.out, relu, out.out", tc.name, s.Layer, z.Name, s.Attr.Act, y.Name)
			}
		}
		if want := map[bool]int{true: 0, false: 1}[tc.fused]; sums != want || taken != 1-want {
			t.Errorf("%s: %d sums left and %d batch norms with a residual; want %d and %d", tc.name, sums, taken, want, 1-want)
		}
		if said := strings.Contains(strings.Join(p.Fusions, "\n"), "bn2 + sum -> batchnorm (the sum and relu after the normalisation, in its kernel)"); said != tc.fused {
			t.Errorf("%s: fusions %q", tc.name, p.Fusions)
		}
		if !tc.fused {
			continue
		}
		if got, want := backward(p), backward(kept); !slices.Equal(got, want) {
			t.Errorf("%s: the backward changed:\n%q\nwant\n%q", tc.name, got, want)
		}
		for i, s := range p.Forward {
			if len(s.In) == 6 && s.Kernel == KBatchNorm {
				p.Forward[i].In[5] = s.In[1]
				if err := Verify(p); err == nil || !strings.Contains(err.Error(), "sixth input") {
					t.Errorf("Verify took a residual of gamma's shape: %v", err)
				}
			}
		}
	}
}
