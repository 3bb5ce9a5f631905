package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Direct convolution: the "direct" forward method of a GPU target for
// layers whose window holds few values (C/G·KH·KW ≤ DirectMaxTaps, the
// first layer of an image model: 1·5·5 for MNIST). One thread computes
// the outputs of up to 8 channels at one pixel, y = act(b + Σ W·x) over
// its window, straight from x: no im2col columns, no GEMM whose inner
// dimension would be 25, no epilogue pass. The window's inputs are loaded
// once for all the thread's channels (one thread per output spent 57 µs
// on its 50 loads an output for the first layer of models/mnist.cue on an
// H100, more than im2col, GEMM and epilogue together); the weights are the
// same for a whole warp and stay in cache.
// Its backward runs as im2col and the GEMMs (the forward leaves no
// columns to share).

// ConvDirectMethod is the method name the planner records (Attr.Method).
const ConvDirectMethod = "direct"

// DirectMaxTaps bounds the window of a direct convolution: the products
// one thread sums.
const DirectMaxTaps = 32

// DirectFits reports whether a convolution of geometry g is small enough
// per output for the direct method.
func DirectFits(g planner.ConvGeom) bool {
	g = normConv(g)
	return g.C/g.Groups*g.KH*g.KW <= DirectMaxTaps
}

// directChannels is how many output channels one thread computes: the
// largest divisor of a group's channels up to 8.
func directChannels(ocg int) int {
	for d := min(8, ocg); d > 1; d-- {
		if ocg%d == 0 {
			return d
		}
	}
	return 1
}

// convDirectKernel computes y [N, OC, OH, OW] from x [N, C, H, W], W [OC,
// C/G, KH, KW] and the bias, one thread per pixel and directChannels output
// channels.
func convDirectKernel(g planner.ConvGeom, hasBias bool, act string, alpha float32) (*Kernel, error) {
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	ob := directChannels(ocg)
	n := g.N * g.OC / ob * g.OH * g.OW
	params := []Param{in("x", g.N*g.C*g.H*g.W), in("w", g.OC*cg*g.KH*g.KW), out("y", g.N*g.OC*g.OH*g.OW)}
	if hasBias {
		params = append(params, in("b", g.OC))
	}
	shape := []int{g.N, g.OC / ob, g.OH, g.OW}
	taps := cg * g.KH * g.KW
	var err error
	k := elementwise(fmt.Sprintf("direct convolution of [%d,%d,%d,%d] with a %dx%d window, %d output channels a thread, bias + %q", g.N, g.C, g.H, g.W, g.KH, g.KW, ob, act), n, params,
		func(i Expr) []Stmt {
			s := []Stmt{
				let("img", Int, coord(i, shape, 0)),
				let("o0", Int, mul(coord(i, shape, 1), i32(ob))),
				let("oh", Int, coord(i, shape, 2)),
				let("ow", Int, coord(i, shape, 3)),
				let("h0", Int, sub(mul(vr("oh"), i32(g.SH)), i32(g.PH))),
				let("w0", Int, sub(mul(vr("ow"), i32(g.SW)), i32(g.PW))),
				let("xb", Int, mul(add(mul(vr("img"), i32(g.C)), mul(div(vr("o0"), i32(ocg)), i32(cg))), i32(g.H*g.W))),
			}
			// The window, loaded once.
			for c := range cg {
				for kh := range g.KH {
					hh := add(vr("h0"), i32(kh*g.DH))
					for kw := range g.KW {
						ww := add(vr("w0"), i32(kw*g.DW))
						inside := and(ge(hh, i32(0)), lt(hh, i32(g.H)), ge(ww, i32(0)), lt(ww, i32(g.W)))
						s = append(s, let(fmt.Sprintf("x%d", (c*g.KH+kh)*g.KW+kw), Float,
							sel(inside, load("x", add(vr("xb"), add(i32(c*g.H*g.W), add(mul(hh, i32(g.W)), ww)))), flt(0))))
					}
				}
			}
			s = append(s, let("yb", Int, add(mul(add(mul(vr("img"), i32(g.OC)), vr("o0")), i32(g.OH*g.OW)), add(mul(vr("oh"), i32(g.OW)), vr("ow")))))
			for j := range ob {
				acc := fmt.Sprintf("acc%d", j)
				o := add(vr("o0"), i32(j))
				var init Expr = flt(0)
				if hasBias {
					init = load("b", o)
				}
				s = append(s, let(acc, Float, init), let("wb", Int, mul(o, i32(taps))))
				s[len(s)-1] = let(fmt.Sprintf("wb%d", j), Int, mul(o, i32(taps)))
				for t := range taps {
					s = append(s, set(acc, add(vr(acc), mul(load("w", add(vr(fmt.Sprintf("wb%d", j)), i32(t))), vr(fmt.Sprintf("x%d", t))))))
				}
				var e Expr
				e, err = actExpr(act, alpha, vr(acc))
				s = append(s, store("y", add(vr("yb"), i32(j*g.OH*g.OW)), e))
			}
			return s
		})
	return k, err
}

// convDirect lowers a forward convolution step whose method is direct.
func (l *lowering) convDirect(st *planner.Step) error {
	a := st.Attr
	g := normConv(*a.Conv)
	if !DirectFits(g) {
		return fmt.Errorf("method %q does not apply to a window of %d values (at most %d)", ConvDirectMethod, g.C/g.Groups*g.KH*g.KW, DirectMaxTaps)
	}
	if err := l.operands(st, 3, 2); err != nil {
		return err
	}
	x, w, b, y := st.In[0], st.In[1], st.In[2], st.Out[0]
	k, err := convDirectKernel(g, present(b), a.Act, float32(a.Alpha))
	ops := []operand{whole(x), whole(w), whole(y)}
	if present(b) {
		ops = append(ops, whole(b))
	}
	return l.launch("conv_direct", k, err, ops...)
}
