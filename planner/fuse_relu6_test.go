package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// clippedConvs has three relu6s: one after a convolution (fused on the
// CPU), one after a convolution whose output is also read by an add (not
// fused: the add needs the pre-activation), and one after the add (not
// fused: an add has no epilogue).
func clippedConvs() *spec.Model {
	b := newModel("clipped", 3, 8, 8)
	c1 := b.conv("conv1", 4, 3, 1)
	r1 := b.unary("clip1", spec.OpReLU6, 0, c1)
	c2 := b.conv("conv2", 4, 3, 1, r1)
	r2 := b.unary("clip2", spec.OpReLU6, 0, c2)
	a := b.binary("add", spec.OpAdd, r2, c2)
	b.unary("clip3", spec.OpReLU6, 0, a)
	b.flatten("flat")
	b.dense("fc", 10)
	return b.model()
}

// TestFuseReLU6: on the CPU, inference and training plans fold conv1's
// relu6 into it (Act relu6, writing clip1's output) and keep the other
// two relu6 steps; the training plan's conv1 backward applies the
// derivative; a target without ReLU6Epilogue, and the CPU with fusion
// off, keep all three.
func TestFuseReLU6(t *testing.T) {
	count := func(p *Plan) (fusedConvs, relu6s int) {
		for _, s := range p.Forward {
			switch {
			case s.Kernel == KConv2D && s.Attr.Act == "relu6":
				fusedConvs++
				if s.Layer != "conv1" || p.Buffers[s.Out[0]].Name != "clip1.out" {
					t.Errorf("relu6 fused into %s, writing %s; want conv1 writing clip1.out", s.Layer, p.Buffers[s.Out[0]].Name)
				}
			case s.Kernel == KUnary && s.Attr.Chain[0].Op == "relu6":
				relu6s++
			}
		}
		return
	}
	for _, training := range []bool{false, true} {
		p := mustBuild(t, clippedConvs(), Options{Training: training, Fusion: true})
		if convs, relu6s := count(p); convs != 1 || relu6s != 2 {
			t.Errorf("cpu, training %v: %d convolutions with relu6, %d relu6 steps; want 1, 2", training, convs, relu6s)
		}
		if training {
			bwd := 0
			for _, s := range p.Backward {
				if s.Kernel == KConv2DBwd && s.Attr.Act == "relu6" {
					bwd++
				}
			}
			if bwd != 1 {
				t.Errorf("cpu training: %d conv2d_bwd steps with relu6, want 1", bwd)
			}
		}
	}
	noClamp := CPU
	noClamp.ReLU6Epilogue = false
	for name, opts := range map[string]Options{
		"a target without ReLU6Epilogue": {Fusion: true, Target: noClamp},
		"fusion off":                     {Fusion: false},
	} {
		p := mustBuild(t, clippedConvs(), opts)
		if convs, relu6s := count(p); convs != 0 || relu6s != 3 {
			t.Errorf("%s: %d convolutions with relu6, %d relu6 steps; want 0, 3", name, convs, relu6s)
		}
	}
}
