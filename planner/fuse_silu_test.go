package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// swishes has ONNX's SiLU twice (x·sigmoid(x), the product's operands in
// either order), a sigmoid whose output is also read elsewhere, and a
// sigmoid that gates another tensor: only the first two are SiLUs.
func swishes() *spec.Model {
	b := newModel("swishes", 3, 8, 8)
	c1 := b.conv("conv1", 4, 3, 1)
	s1 := b.unary("sig1", spec.OpSigmoid, 0, c1)
	m1 := b.binary("mul1", spec.OpMul, c1, s1)
	c2 := b.conv("conv2", 4, 3, 1, m1)
	s2 := b.unary("sig2", spec.OpSigmoid, 0, c2)
	m2 := b.binary("mul2", spec.OpMul, s2, c2)
	s3 := b.unary("sig3", spec.OpSigmoid, 0, m2)
	m3 := b.binary("mul3", spec.OpMul, m2, s3)
	a3 := b.binary("add3", spec.OpAdd, m3, s3)
	s4 := b.unary("sig4", spec.OpSigmoid, 0, a3)
	b.binary("gate", spec.OpMul, s4, m2)
	b.flatten("flat")
	b.dense("fc", 10)
	return b.model()
}

// TestFuseSiLU: on the CPU, inference and training plans hold one silu
// step for each of swishes' two SiLUs, from the sigmoid's input to the
// product's output, and keep the other two sigmoids and their products;
// the training plan's backward differentiates the silu steps; a target
// without SiLU, and the CPU with fusion off, fuse nothing.
func TestFuseSiLU(t *testing.T) {
	count := func(p *Plan) (silus, sigmoids, muls int) {
		for _, s := range p.Forward {
			switch {
			case s.Kernel == KUnary && s.Attr.Chain[0].Op == "silu":
				silus++
				if len(s.Attr.Chain) != 1 {
					t.Errorf("silu step %v: chain %v", s.Layer, s.Attr.Chain)
				}
			case s.Kernel == KUnary && s.Attr.Chain[0].Op == "sigmoid":
				sigmoids++
			case s.Kernel == KBinary && s.Attr.BinOp == "mul":
				muls++
			}
		}
		return
	}
	// The CPU without its silu epilogue, which would fold the inference
	// plan's silu steps into the convolutions (TestFuseSiLUEpilogue).
	cpu := CPU
	cpu.SiLUEpilogue = false
	for _, training := range []bool{false, true} {
		p := mustBuild(t, swishes(), Options{Training: training, Fusion: true, Target: cpu})
		if silus, sigmoids, muls := count(p); silus != 2 || sigmoids != 2 || muls != 2 {
			t.Errorf("cpu, training %v: %d silu steps, %d sigmoids, %d products; want 2, 2, 2", training, silus, sigmoids, muls)
		}
		for _, s := range p.Forward {
			if s.Kernel == KUnary && s.Attr.Chain[0].Op == "silu" {
				in, out := p.Buffers[s.In[0]].Name, p.Buffers[s.Out[0]].Name
				if len(s.Fused) != 2 || s.Fused[0]+s.Fused[1] != "sig1mul1" && s.Fused[0]+s.Fused[1] != "sig2mul2" ||
					in != map[string]string{"sig1": "conv1.out", "sig2": "conv2.out"}[s.Fused[0]] || out != s.Fused[1]+".out" {
					t.Errorf("cpu, training %v: silu step of %v reads %s, writes %s", training, s.Fused, in, out)
				}
			}
		}
		if training {
			bwd := 0
			for _, s := range p.Backward {
				if s.Kernel == KUnaryBwd && s.Attr.Chain[0].Op == "silu" {
					bwd++
				}
			}
			if bwd != 2 {
				t.Errorf("cpu training: %d silu backward steps, want 2", bwd)
			}
		}
	}
	noSiLU := CPU
	noSiLU.SiLU = false
	for name, opts := range map[string]Options{
		"a target without SiLU": {Fusion: true, Target: noSiLU},
		"fusion off":            {Fusion: false},
	} {
		p := mustBuild(t, swishes(), opts)
		if silus, sigmoids, muls := count(p); silus != 0 || sigmoids != 4 || muls != 4 {
			t.Errorf("%s: %d silu steps, %d sigmoids, %d products; want 0, 4, 4", name, silus, sigmoids, muls)
		}
	}
}
