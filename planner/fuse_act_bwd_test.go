package planner

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestFuseActBwd: on a target whose max pool backward applies activation
// derivatives, both of the flagship's pools take their convolution's relu
// and the convolutions' backward steps apply none; on the CPU, with fusion
// off, and where the convolution's output has a second reader, nothing
// changes.
func TestFuseActBwd(t *testing.T) {
	gpu := Target{Name: "gpu", Conv: CPU.Conv, PoolBwdAct: true}
	count := func(p *Plan) (pools, applied int) {
		for _, s := range p.Backward {
			if s.Kernel == KMaxPool2DBwd && s.Attr.Act != "" {
				pools++
				if s.Attr.Act != "relu" {
					t.Errorf("%s: pool backward with %q, want relu", s.Layer, s.Attr.Act)
				}
			}
			if s.Kernel == KConv2DBwd && s.Attr.ActApplied {
				applied++
				if s.Attr.Act != "relu" {
					t.Errorf("%s: conv2d_bwd with ActApplied keeps Act %q, want relu", s.Layer, s.Attr.Act)
				}
			}
		}
		return
	}
	p := mustBuild(t, flagship(), Options{Training: true, Fusion: true, Target: gpu})
	if pools, applied := count(p); pools != 2 || applied != 2 {
		t.Errorf("gpu target: %d pool backward steps with a derivative, %d conv2d_bwd with ActApplied; want 2 and 2", pools, applied)
	}
	n := 0
	for _, f := range p.Fusions {
		if strings.Contains(f, "relu derivative -> maxpool2d_bwd") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("gpu target: %d fusion lines for the derivatives, want 2: %q", n, p.Fusions)
	}
	// Each pool's dx is its convolution's dy, which no other step touches.
	for _, s := range p.Backward {
		if s.Kernel != KConv2DBwd || !s.Attr.ActApplied {
			continue
		}
		w := 0
		for _, o := range p.Backward {
			if writes(&o, s.In[3]) {
				w++
				if o.Kernel != KMaxPool2DBwd || o.Attr.Act == "" {
					t.Errorf("%s's dy is written by %s (%s)", s.Layer, o.Layer, o.Kernel)
				}
			}
		}
		if w != 1 {
			t.Errorf("%s's dy has %d writers, want the pool alone", s.Layer, w)
		}
	}

	for _, tc := range []struct {
		name string
		m    *spec.Model
		opts Options
	}{
		{"cpu", flagship(), Options{Training: true, Fusion: true, Target: CPU}},
		{"no fusion", flagship(), Options{Training: true, Fusion: false, Target: gpu}},
		{"second reader", branched(), Options{Training: true, Fusion: true, Target: gpu}},
	} {
		p := mustBuild(t, tc.m, tc.opts)
		relu := false
		for _, s := range p.Backward {
			relu = relu || s.Kernel == KConv2DBwd && s.Attr.Act == "relu"
		}
		if tc.opts.Fusion && !relu {
			t.Errorf("%s: no conv2d_bwd with a fused relu: nothing to refuse", tc.name)
		}
		if pools, applied := count(p); pools != 0 || applied != 0 {
			t.Errorf("%s: %d pool backward steps with a derivative, %d conv2d_bwd with ActApplied; want none", tc.name, pools, applied)
		}
	}
}

// branched's convolution output (after its relu) feeds a max pool and a
// global average pool, whose gradients add up.
func branched() *spec.Model {
	b := newModel("branched", 1, 8, 8)
	b.conv("conv1", 4, 3, 1)
	r := b.unary("relu1", spec.OpReLU, 0)
	p := b.pool("pool1", spec.OpMaxPool2D, 2)
	g := b.add(spec.Node{Name: "gap", Op: spec.OpGlobalAvgPool}, func(in [][]int) []int { return in[0][:1] }, r)
	b.flatten("flat", p)
	d := b.dense("fc1", 4)
	b.binary("sum", spec.OpAdd, d, g)
	b.dense("fc2", 10)
	return b.model()
}
