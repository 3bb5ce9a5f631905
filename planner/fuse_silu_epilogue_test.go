package planner

import "testing"

// TestFuseSiLUEpilogue: on the CPU, the inference plan of swishes folds
// both silu steps that fuseSiLU made (sig1·conv1 and sig2·conv2) into
// their convolutions, which then write mul1's and mul2's outputs with
// Act silu, and no silu step is left; the training plan, a target
// without SiLUEpilogue and fusion off fold nothing.
func TestFuseSiLUEpilogue(t *testing.T) {
	count := func(p *Plan) (fused, silus int) {
		for _, s := range p.Forward {
			switch {
			case s.Attr.Act == "silu":
				fused++
				if s.Kernel != KConv2D {
					t.Errorf("silu fused into a %s step (%s)", s.Kernel, s.Layer)
				}
			case s.Kernel == KUnary && s.Attr.Chain[0].Op == "silu":
				silus++
			}
		}
		return
	}
	p := mustBuild(t, swishes(), Options{Fusion: true})
	if fused, silus := count(p); fused != 2 || silus != 0 {
		t.Errorf("cpu inference: %d steps with a silu epilogue, %d silu steps; want 2, 0", fused, silus)
	}
	for _, s := range p.Forward {
		if s.Attr.Act == "silu" && !(s.Layer == "conv1" && p.Buffers[s.Out[0]].Name == "mul1.out" || s.Layer == "conv2" && p.Buffers[s.Out[0]].Name == "mul2.out") {
			t.Errorf("%s writes %s with silu; want conv1 writing mul1.out or conv2 writing mul2.out", s.Layer, p.Buffers[s.Out[0]].Name)
		}
	}
	noEpilogue := CPU
	noEpilogue.SiLUEpilogue = false
	for name, opts := range map[string]Options{
		"training":                      {Training: true, Fusion: true},
		"a target without SiLUEpilogue": {Fusion: true, Target: noEpilogue},
		"fusion off":                    {Fusion: false},
	} {
		p := mustBuild(t, swishes(), opts)
		if fused, _ := count(p); fused != 0 {
			t.Errorf("%s: %d steps with a silu epilogue, want 0", name, fused)
		}
	}
}
