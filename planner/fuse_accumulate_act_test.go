package planner

import (
	"slices"
	"strings"
	"testing"
)

// TestFuseAccumulateAct: in residualBlock's training plan on a target
// with AccumulateAct, the gradient of the stem's leaky ReLU output (the
// shortcut's plus conv1's dx) is no accumulate step any more: the leaky
// ReLU's backward from its output reads both terms, the ones the
// accumulate read; without AccumulateAct, or with fusion off, the
// accumulate stays. Verify refuses a second dy of another shape.
func TestFuseAccumulateAct(t *testing.T) {
	gpu := CPU
	gpu.FusedReLU, gpu.ShareSumGrads, gpu.FoldBatchNorm, gpu.NoFoldWhy = true, true, false, ""
	with := gpu
	with.AccumulateAct = true
	count := func(p *Plan, k Kernel) int {
		n := 0
		for _, s := range p.Backward {
			if s.Kernel == k {
				n++
			}
		}
		return n
	}
	kept := mustBuild(t, residualBlock(), Options{Training: true, Fusion: true, Target: gpu})
	var terms []string
	for _, s := range kept.Backward {
		if s.Kernel == KAccumulate {
			terms = []string{kept.Buffers[s.In[0]].Name, kept.Buffers[s.In[1]].Name}
		}
	}
	if count(kept, KAccumulate) != 1 || terms == nil {
		t.Fatalf("the plan without AccumulateAct has %d accumulate steps, want 1", count(kept, KAccumulate))
	}
	p := mustBuild(t, residualBlock(), Options{Training: true, Fusion: true, Target: with})
	if n := count(p, KAccumulate); n != 0 || len(p.Backward) != len(kept.Backward)-1 {
		t.Errorf("%d accumulate steps left and %d backward steps, want 0 and %d", n, len(p.Backward), len(kept.Backward)-1)
	}
	found := false
	for i, s := range p.Backward {
		if s.Kernel != KUnaryBwd || len(s.In) != 3 {
			continue
		}
		found = true
		got := []string{p.Buffers[s.In[1]].Name, p.Buffers[s.In[2]].Name}
		if s.Layer != "stem_act" || !s.Attr.FromOutput || !slices.Equal(got, terms) {
			t.Errorf("%s (from output %v) sums %q, want stem_act's backward summing %q", s.Layer, s.Attr.FromOutput, got, terms)
		}
		p.Backward[i].In[2] = p.Params[0].Buf
		if err := Verify(p); err == nil || !strings.Contains(err.Error(), "second dy") {
			t.Errorf("Verify took a second dy of a weight's shape: %v", err)
		}
	}
	if !found || !strings.Contains(strings.Join(p.Fusions, "\n"), "accumulate + stem_act -> unary_bwd") {
		t.Errorf("no activation backward takes the sum; fusions %q", p.Fusions)
	}
	if off := mustBuild(t, residualBlock(), Options{Training: true, Fusion: false, Target: with}); count(off, KAccumulate) == 0 {
		t.Error("with fusion off the accumulate is gone")
	}
}
