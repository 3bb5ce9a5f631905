package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Pooling in a convolution's epilogue: a max pool that reads only a
// convolution's output is folded into that convolution
// (planner/fuse_pool.go, Attr.Pool), so that the convolution writes the
// pooled values and its full-size output never goes to memory. In a
// training plan the convolution also writes each window's argmax (its
// third output), from which the pool's backward (maxPoolArgmaxBwdKernel)
// routes the gradient without the full-size output. Two
// methods pool: the direct kernel (convDirectKernel: a thread computes its
// pixels' windows of convolution outputs in registers) and the Winograd
// output transform (wgOutputKernel: a thread's m×m output tile holds whole
// windows when the window divides m). The im2col methods write their
// output through a GEMM and do not pool.

// directPoolMaxWindow bounds the windows a direct convolution pools: the
// accumulators of one channel a thread keeps.
const directPoolMaxWindow = 16

// PoolEpilogue is the GPU targets' planner.Target.PoolEpilogue: whether
// the forward convolution of geometry g, computed by method, can write the
// max pool of geometry pool over its output instead of the output itself.
// The pool's window must equal its stride (the windows tile the output
// without overlap), with no padding or dilation; then the direct method
// pools windows of up to directPoolMaxWindow outputs, and Winograd F(m×m)
// windows whose sides divide m.
func PoolEpilogue(g planner.ConvGeom, method string, pool planner.ConvGeom) bool {
	g, pool = normConv(g), normConv(pool)
	if !tilingPool(g, pool) {
		return false
	}
	if method == ConvDirectMethod {
		return DirectFits(g) && pool.KH*pool.KW <= directPoolMaxWindow
	}
	if wa := WinogradByMethod(method); wa != nil {
		return wa.Fits(g) && wa.m%pool.KH == 0 && wa.m%pool.KW == 0
	}
	return false
}

// tilingPool reports whether pool is a pool over g's output whose windows
// tile it: window = stride, no padding, no dilation, and the window rule's
// output size.
func tilingPool(g, pool planner.ConvGeom) bool {
	return pool.N == g.N && pool.C == g.OC && pool.OC == g.OC && pool.H == g.OH && pool.W == g.OW &&
		pool.KH == pool.SH && pool.KW == pool.SW && pool.PH == 0 && pool.PW == 0 && pool.DH == 1 && pool.DW == 1 &&
		pool.KH >= 1 && pool.KW >= 1 && pool.OH == g.OH/pool.KH && pool.OW == g.OW/pool.KW && pool.OH >= 1 && pool.OW >= 1
}

// epiloguePool is the pool a forward convolution step writes (nil for
// none), checked against its method.
func epiloguePool(a planner.Attr) (*planner.ConvGeom, error) {
	if a.Pool == nil {
		return nil, nil
	}
	if !PoolEpilogue(*a.Conv, a.Method, *a.Pool) {
		p := *a.Pool
		return nil, fmt.Errorf("method %q cannot max-pool its output with a %dx%d window of stride %dx%d, padding %dx%d, in its epilogue",
			a.Method, p.KH, p.KW, p.SH, p.SW, p.PH, p.PW)
	}
	pool := normConv(*a.Pool)
	return &pool, nil
}

// poolArgmax is the argmax a forward convolution step writes (its third
// output; NoBuf for none), which needs an epilogue pool.
func poolArgmax(st *planner.Step, pool *planner.ConvGeom) (planner.BufID, error) {
	if len(st.Out) < 3 || !present(st.Out[2]) {
		return planner.NoBuf, nil
	}
	if pool == nil {
		return planner.NoBuf, fmt.Errorf("an argmax output without an epilogue pool")
	}
	return st.Out[2], nil
}

// maxPoolArgmaxBwdKernel is the backward of a max pool folded into a
// training step's convolution (planner.KMaxPool2DArgmaxBwd): the pool's
// windows tile the convolution's output (window = stride, no padding:
// PoolEpilogue), and one thread per window writes each of its pixels of
// dx: the window's dy, times act's derivative taken from the pooled
// output y when act is set, at the argmax's position, zero elsewhere.
// Rows and columns past the last whole window (an odd output under 2×2
// windows) belong to no window: the threads of the partial windows there
// write their zeros.
func maxPoolArgmaxBwdKernel(pool planner.ConvGeom, act string, alpha float32) (*Kernel, error) {
	g := normConv(pool)
	if g.SH != g.KH || g.SW != g.KW || g.PH != 0 || g.PW != 0 || g.DH != 1 || g.DW != 1 || g.OH != g.H/g.KH || g.OW != g.W/g.KW || g.OH < 1 || g.OW < 1 {
		return nil, fmt.Errorf("a max pool backward from the argmax needs windows that tile the input (window %dx%d, stride %dx%d, padding %dx%d, %dx%d to %dx%d)",
			g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.H, g.W, g.OH, g.OW)
	}
	d, err := actGradFromY(act, alpha, vr("yv"))
	if err != nil {
		return nil, err
	}
	// The cells: the windows, and past them the partial windows of the
	// rows and columns no window covers.
	ch, cw := ceilDiv(g.H, g.KH), ceilDiv(g.W, g.KW)
	ragged := ch != g.OH || cw != g.OW
	n := g.N * g.C * ch * cw
	ohw, hw := g.OH*g.OW, g.H*g.W
	doc := fmt.Sprintf("max pool backward from the argmax [%d,%d,%d,%d] <- %dx%d, one thread per %dx%d window", g.N, g.C, g.H, g.W, g.OH, g.OW, g.KH, g.KW)
	if act != "" {
		doc += fmt.Sprintf(", times %s' of y", act)
	}
	params := []Param{in("arg", g.N*g.C*ohw), in("dy", g.N*g.C*ohw)}
	if act != "" {
		params = append(params, in("y", g.N*g.C*ohw))
	}
	params = append(params, out("dx", g.N*g.C*hw))
	return elementwise(doc, n, params, func(i Expr) []Stmt {
		s := []Stmt{
			let("p", Int, div(i, i32(ch*cw))),
			let("wh", Int, rem(div(i, i32(cw)), i32(ch))),
			let("ww", Int, rem(i, i32(cw))),
			let("base", Int, add(mul(vr("p"), i32(hw)), add(mul(vr("wh"), i32(g.KH*g.W)), mul(vr("ww"), i32(g.KW))))),
			let("a", Int, i32(-1)),
			let("gv", Float, flt(0)),
		}
		oi := add(mul(vr("p"), i32(ohw)), add(mul(vr("wh"), i32(g.OW)), vr("ww")))
		route := []Stmt{let("oi", Int, oi), set("a", Cast{To: Int, X: load("arg", vr("oi"))})}
		if act != "" {
			route = append(route, let("yv", Float, load("y", vr("oi"))), set("gv", mul(load("dy", vr("oi")), d)))
		} else {
			route = append(route, set("gv", load("dy", vr("oi"))))
		}
		if ragged {
			s = append(s, when(and(lt(vr("wh"), i32(g.OH)), lt(vr("ww"), i32(g.OW))), route...))
		} else {
			s = append(s, route...)
		}
		for qh := range g.KH {
			for qw := range g.KW {
				st := store("dx", add(vr("base"), i32(qh*g.W+qw)), sel(eq(vr("a"), i32(qh*g.KW+qw)), vr("gv"), flt(0)))
				if g.H%g.KH != 0 && qh >= g.H%g.KH || g.W%g.KW != 0 && qw >= g.W%g.KW {
					// past the plane's edge in the last, partial cells
					st = when(and(lt(add(mul(vr("wh"), i32(g.KH)), i32(qh)), i32(g.H)), lt(add(mul(vr("ww"), i32(g.KW)), i32(qw)), i32(g.W))), st)
				}
				s = append(s, st)
			}
		}
		return s
	}), nil
}
