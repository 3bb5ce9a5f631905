package planner

import "testing"

// TestChooseMethods: every convolution step of a training plan records how
// it runs; the first conv's backward, which needs no dx, and stride-1
// layers run direct on the CPU, and a backend's own rule replaces the
// CPU's.
func TestChooseMethods(t *testing.T) {
	p := mustBuild(t, lenet5(), Options{Training: true, Fusion: true})
	seen := 0
	for _, ph := range []Phase{p.Forward, p.Backward} {
		for _, s := range ph {
			if s.Kernel != KConv2D && s.Kernel != KConv2DBwd {
				continue
			}
			seen++
			if s.Attr.Method != "direct" {
				t.Errorf("%s %s: method %q, want direct for a stride-1 convolution", s.Kernel, s.Layer, s.Attr.Method)
			}
		}
	}
	if seen != 4 {
		t.Errorf("saw %d convolution steps, want 4", seen)
	}
	gpu := mustBuild(t, lenet5(), Options{Training: true, Fusion: true,
		ConvMethod: func(g ConvGeom, backward, needDx bool) string {
			if backward && !needDx {
				return "gpu-no-dx"
			}
			return "gpu"
		}})
	for _, s := range gpu.Backward {
		if s.Kernel == KConv2DBwd && s.Layer == "conv1" && s.Attr.Method != "gpu-no-dx" {
			t.Errorf("first conv's backward: method %q, want the backend's no-dx choice", s.Attr.Method)
		}
	}
	g := ConvGeom{N: 2, C: 3, H: 9, W: 9, OC: 4, OH: 4, OW: 4, KH: 3, KW: 3, SH: 2, SW: 2, DH: 1, DW: 1, Groups: 1}
	if m := DefaultConvMethod(g, false, false); m != "im2col+gemm" {
		t.Errorf("a stride-2 convolution runs %q on the CPU, want im2col+gemm", m)
	}
}
