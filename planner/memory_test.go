package planner

import "testing"

// TestMemoryByUse: Plan.Memory accounts for the plan's memory from its
// buffers: weights, their gradients and Adam's two moments in the state
// arena (moments twice the gradients, gradients the size of the trainable
// params), the work arena's uses at its fullest step adding up to no more
// than the arena, activations kept for backward only in training plans,
// and the total the two arenas.
func TestMemoryByUse(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func() *Plan
	}{
		{"flagship train", func() *Plan { return mustBuild(t, flagship(), Options{Training: true, Fusion: true}) }},
		{"lenet5 train", func() *Plan { return mustBuild(t, lenet5(), Options{Training: true, Fusion: true}) }},
		{"regularised infer", func() *Plan { return mustBuild(t, regularised(), Options{Fusion: true}) }},
	} {
		p := c.build()
		m, st := p.Memory(), p.Stats()
		if m.Total != st.StateBytes+st.FoldedBytes+st.PeakWorkBytes || m.Work != st.PeakWorkBytes || m.Folded != st.FoldedBytes {
			t.Errorf("%s: total %d, work %d, folded %d; want the arenas' %d + %d + %d", c.name, m.Total, m.Work, m.Folded, st.StateBytes, st.FoldedBytes, st.PeakWorkBytes)
		}
		if m.Weights < 4*st.Params || m.Weights+m.Gradients+m.Optimizer > st.StateBytes {
			t.Errorf("%s: weights %d for %d params; state uses %d of %d", c.name, m.Weights, st.Params, m.Weights+m.Gradients+m.Optimizer, st.StateBytes)
		}
		live := m.KeptForBackward + m.Activations + m.ActivationGrads + m.Scratch
		if live <= 0 || live > m.Work {
			t.Errorf("%s: %d bytes alive at the fullest step, work arena %d", c.name, live, m.Work)
		}
		if p.Training {
			if m.Gradients != 4*st.Params || m.Optimizer != 2*m.Gradients || m.KeptForBackward == 0 || m.PeakPhase == "" {
				t.Errorf("%s (adam): gradients %d, optimizer %d for %d params; kept for backward %d at %s step %d", c.name, m.Gradients, m.Optimizer, st.Params, m.KeptForBackward, m.PeakPhase, m.PeakStep)
			}
		} else if m.Gradients != 0 || m.Optimizer != 0 || m.KeptForBackward != 0 || m.ActivationGrads != 0 || m.PeakPhase != "forward" {
			t.Errorf("%s: an inference plan keeps nothing for backward: %+v", c.name, m)
		}
	}
}
