package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Direct convolution: the "direct" forward method of a GPU target for
// layers whose window holds few values (C/G·KH·KW ≤ DirectMaxTaps, the
// first layer of an image model: 1·5·5 for MNIST). One thread computes one
// output, y = act(b + Σ W·x) over its window, straight from x: no im2col
// columns, no GEMM whose inner dimension would be 25, no epilogue pass.
// The weights are read by every thread of a channel and stay in cache.
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

// convDirectKernel computes y [N, OC, OH, OW] from x [N, C, H, W], W [OC,
// C/G, KH, KW] and the bias, one thread per output.
func convDirectKernel(g planner.ConvGeom, hasBias bool, act string, alpha float32) (*Kernel, error) {
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	n := g.N * g.OC * g.OH * g.OW
	params := []Param{in("x", g.N*g.C*g.H*g.W), in("w", g.OC*cg*g.KH*g.KW), out("y", n)}
	if hasBias {
		params = append(params, in("b", g.OC))
	}
	e, err := actExpr(act, alpha, vr("acc"))
	if err != nil {
		return nil, err
	}
	shape := []int{g.N, g.OC, g.OH, g.OW}
	return elementwise(fmt.Sprintf("direct convolution of [%d,%d,%d,%d] with a %dx%d window, one thread per output, bias + %q", g.N, g.C, g.H, g.W, g.KH, g.KW, act), n, params,
		func(i Expr) []Stmt {
			s := []Stmt{
				let("img", Int, coord(i, shape, 0)),
				let("o", Int, coord(i, shape, 1)),
				let("h0", Int, sub(mul(coord(i, shape, 2), i32(g.SH)), i32(g.PH))),
				let("w0", Int, sub(mul(coord(i, shape, 3), i32(g.SW)), i32(g.PW))),
				let("xb", Int, mul(add(mul(vr("img"), i32(g.C)), mul(div(vr("o"), i32(ocg)), i32(cg))), i32(g.H*g.W))),
				let("wb", Int, mul(vr("o"), i32(cg*g.KH*g.KW))),
				let("acc", Float, flt(0)),
			}
			if hasBias {
				s[len(s)-1] = let("acc", Float, load("b", vr("o")))
			}
			for c := range cg {
				for kh := range g.KH {
					hh := add(vr("h0"), i32(kh*g.DH))
					for kw := range g.KW {
						ww := add(vr("w0"), i32(kw*g.DW))
						inside := and(ge(hh, i32(0)), lt(hh, i32(g.H)), ge(ww, i32(0)), lt(ww, i32(g.W)))
						xv := sel(inside, load("x", add(vr("xb"), add(i32(c*g.H*g.W), add(mul(hh, i32(g.W)), ww)))), flt(0))
						wv := load("w", add(vr("wb"), i32((c*g.KH+kh)*g.KW+kw)))
						s = append(s, set("acc", add(vr("acc"), mul(wv, xv))))
					}
				}
			}
			return append(s, store("y", i, e))
		}), nil
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
