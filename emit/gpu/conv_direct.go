package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Direct convolution: the "direct" forward method of a GPU target for
// layers whose window holds few values (C/G·KH·KW ≤ DirectMaxTaps, the
// first layer of an image model: 1·5·5 for MNIST). One thread computes
// the outputs of up to 8 channels at up to 4 neighbouring pixels of a row,
// y = act(b + Σ W·x) over each window, straight from x: no im2col
// columns, no GEMM whose inner dimension would be 25, no epilogue pass.
// The windows' inputs are loaded once for all the thread's channels (one
// thread per output spent 57 µs on its 50 loads an output for the first
// layer of models/mnist.cue on an H100, more than im2col, GEMM and
// epilogue together), and each weight once for all its pixels; the
// weights are the same for a whole warp and stay in cache.
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

// directPixels is how many neighbouring pixels of a row one thread
// computes: 4 on rows of 8 pixels or more, else 2 or 1. Each weight a
// thread loads then feeds that many products: one pixel a thread spent
// 200 warp-wide weight loads on 200 products, and the load units, not the
// arithmetic, bounded the kernel (30 µs for the first layer of
// models/mnist.cue on an H100).
func directPixels(ow int) int {
	switch {
	case ow >= 8:
		return 4
	case ow >= 2:
		return 2
	}
	return 1
}

// convDirectKernel computes y [N, OC, OH, OW] from x [N, C, H, W], W [OC,
// C/G, KH, KW] and the bias, one thread per directPixels pixels of a row
// and directChannels output channels.
func convDirectKernel(g planner.ConvGeom, hasBias bool, act string, alpha float32) (*Kernel, error) {
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	ob, px := directChannels(ocg), directPixels(g.OW)
	runs := ceilDiv(g.OW, px)
	n := g.N * g.OC / ob * g.OH * runs
	params := []Param{in("x", g.N*g.C*g.H*g.W), in("w", g.OC*cg*g.KH*g.KW), out("y", g.N*g.OC*g.OH*g.OW)}
	if hasBias {
		params = append(params, in("b", g.OC))
	}
	shape := []int{g.N, g.OC / ob, g.OH, runs}
	taps := cg * g.KH * g.KW
	// The columns of input the run's windows cover.
	cols := (px-1)*g.SW + (g.KW-1)*g.DW + 1
	xv := func(c, kh, col int) string { return fmt.Sprintf("x%d_%d_%d", c, kh, col) }
	var err error
	doc := fmt.Sprintf("direct convolution of [%d,%d,%d,%d] with a %dx%d window, %d output channels and %d pixels a thread, bias + %q",
		g.N, g.C, g.H, g.W, g.KH, g.KW, ob, px, act)
	k := elementwise(doc, n, params,
		func(i Expr) []Stmt {
			s := []Stmt{
				let("img", Int, coord(i, shape, 0)),
				let("o0", Int, mul(coord(i, shape, 1), i32(ob))),
				let("oh", Int, coord(i, shape, 2)),
				let("ow", Int, mul(coord(i, shape, 3), i32(px))),
				let("h0", Int, sub(mul(vr("oh"), i32(g.SH)), i32(g.PH))),
				let("w0", Int, sub(mul(vr("ow"), i32(g.SW)), i32(g.PW))),
				let("xb", Int, mul(add(mul(vr("img"), i32(g.C)), mul(div(vr("o0"), i32(ocg)), i32(cg))), i32(g.H*g.W))),
			}
			// The windows' inputs, loaded once.
			for c := range cg {
				for kh := range g.KH {
					hh := add(vr("h0"), i32(kh*g.DH))
					for col := range cols {
						ww := add(vr("w0"), i32(col))
						inside := and(ge(hh, i32(0)), lt(hh, i32(g.H)), ge(ww, i32(0)), lt(ww, i32(g.W)))
						s = append(s, let(xv(c, kh, col), Float,
							sel(inside, load("x", add(vr("xb"), add(i32(c*g.H*g.W), add(mul(hh, i32(g.W)), ww)))), flt(0))))
					}
				}
			}
			s = append(s, let("yb", Int, add(mul(add(mul(vr("img"), i32(g.OC)), vr("o0")), i32(g.OH*g.OW)), add(mul(vr("oh"), i32(g.OW)), vr("ow")))))
			for j := range ob {
				o := add(vr("o0"), i32(j))
				wb := fmt.Sprintf("wb%d", j)
				acc := func(p int) string { return fmt.Sprintf("acc%d_%d", j, p) }
				var init Expr = flt(0)
				if hasBias {
					s = append(s, let(fmt.Sprintf("b%d", j), Float, load("b", o)))
					init = vr(fmt.Sprintf("b%d", j))
				}
				for p := range px {
					s = append(s, let(acc(p), Float, init))
				}
				s = append(s, let(wb, Int, mul(o, i32(taps))))
				for c := range cg {
					for kh := range g.KH {
						for kw := range g.KW {
							t := (c*g.KH+kh)*g.KW + kw
							wv := fmt.Sprintf("w%d_%d", j, t)
							s = append(s, let(wv, Float, load("w", add(vr(wb), i32(t)))))
							for p := range px {
								s = append(s, set(acc(p), add(vr(acc(p)), mul(vr(wv), vr(xv(c, kh, p*g.SW+kw*g.DW))))))
							}
						}
					}
				}
				for p := range px {
					var e Expr
					e, err = actExpr(act, alpha, vr(acc(p)))
					st := store("y", add(vr("yb"), i32(j*g.OH*g.OW+p)), e)
					if g.OW%px != 0 && p > 0 {
						st = when(lt(add(vr("ow"), i32(p)), i32(g.OW)), st)
					}
					s = append(s, st)
				}
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

// directBwdTG is the threads of a direct weight-gradient block.
const directBwdTG = 64

// directBwdChannels is how many output channels one block of the direct
// weight gradient sums for: the largest divisor of a group's channels up
// to 4 whose sums (taps+1 each, per thread, and 8 parts each) fit a block's 32 KiB of
// shared memory. The channels share the window's loads: one channel a
// block loaded 25 inputs, dy and y for 26 products, and the load units
// bounded the kernel (47 µs for the first layer of models/mnist.cue on an
// H100).
func directBwdChannels(g planner.ConvGeom) int {
	taps := g.C / g.Groups * g.KH * g.KW
	ocg := g.OC / g.Groups
	for d := min(4, ocg); d > 1; d-- {
		if ocg%d == 0 && (taps+1)*d*(directBwdTG+8)*4 <= 32<<10 {
			return d
		}
	}
	return 1
}

// directBwdChunks is how many thread blocks share one channel group's
// sums in the direct weight gradient: about 1024 blocks in all, at most
// 128 a group (the sum kernel adds them one by one).
func directBwdChunks(g planner.ConvGeom) int {
	groups := g.OC / directBwdChannels(g)
	return max(1, min(ceilDiv(1024, groups), ceilDiv(g.N*g.OH*g.OW, 4*directBwdTG), 128))
}

// DirectBwdScratch is the scratch, in float32s, of the direct weight
// gradient: each block's partial sums of its channels' taps and biases.
func DirectBwdScratch(g planner.ConvGeom) int {
	g = normConv(g)
	return directBwdChunks(g) * g.OC * (g.C/g.Groups*g.KH*g.KW + 1)
}

// convDirectBwdKernel computes the weight and bias gradients of a direct
// convolution that has no dx (the model input's layer) in one pass over
// dy: block (channel group, chunk) walks its chunk of the batch's pixels,
// applies the activation's derivative to dy (from y), and sums dz·x for
// each of the window's taps and dz for the bias, for each of its
// directBwdChannels channels, in registers; the block's sums go to partial
// [chunks][OC][taps+1]. It replaces im2col, the gather of dy into rows,
// the bias gradient's pass and a GEMM with 25 outputs a channel.
func convDirectBwdKernel(g planner.ConvGeom, act string, alpha float32) (*Kernel, error) {
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	taps := cg * g.KH * g.KW
	ob := directBwdChannels(g)
	chunks := directBwdChunks(g)
	pix, ohw := g.N*g.OH*g.OW, g.OH*g.OW
	chunkLen := ceilDiv(pix, chunks)
	const tg = directBwdTG
	sums := (taps + 1) * ob // a thread's accumulators
	params := []Param{in("x", g.N*g.C*g.H*g.W), in("dy", g.N*g.OC*ohw)}
	if act != "" {
		params = append(params, in("y", g.N*g.OC*ohw))
	}
	params = append(params, out("partial", chunks*g.OC*(taps+1)))
	acc := func(j, t int) string { return fmt.Sprintf("acc%d_%d", j, t) }
	body := []Stmt{Shared{"sh", sums * tg}, Shared{"sh2", sums * 8},
		let("o0", Int, mul(div(tgidE, i32(chunks)), i32(ob))),
		let("ch", Int, rem(tgidE, i32(chunks))),
		let("xc", Int, mul(div(vr("o0"), i32(ocg)), i32(cg))),
	}
	for j := range ob {
		for t := 0; t <= taps; t++ {
			body = append(body, let(acc(j, t), Float, flt(0)))
		}
	}
	step := []Stmt{
		let("img", Int, div(vr("p"), i32(ohw))),
		let("r", Int, rem(vr("p"), i32(ohw))),
		let("yi", Int, add(mul(add(mul(vr("img"), i32(g.OC)), vr("o0")), i32(ohw)), vr("r"))),
	}
	for j := range ob {
		yi := add(vr("yi"), i32(j*ohw))
		dz := Expr(load("dy", yi))
		if act != "" {
			d, err := actGradFromY(act, alpha, load("y", yi))
			if err != nil {
				return nil, err
			}
			dz = mul(dz, d)
		}
		step = append(step, let(fmt.Sprintf("dz%d", j), Float, dz))
	}
	step = append(step,
		let("h0", Int, sub(mul(div(vr("r"), i32(g.OW)), i32(g.SH)), i32(g.PH))),
		let("w0", Int, sub(mul(rem(vr("r"), i32(g.OW)), i32(g.SW)), i32(g.PW))),
		let("xb", Int, mul(add(mul(vr("img"), i32(g.C)), vr("xc")), i32(g.H*g.W))))
	for c := range cg {
		for kh := range g.KH {
			hh := add(vr("h0"), i32(kh*g.DH))
			for kw := range g.KW {
				ww := add(vr("w0"), i32(kw*g.DW))
				inside := and(ge(hh, i32(0)), lt(hh, i32(g.H)), ge(ww, i32(0)), lt(ww, i32(g.W)))
				t := (c*g.KH+kh)*g.KW + kw
				xv := fmt.Sprintf("x%d", t)
				step = append(step, let(xv, Float, sel(inside, load("x", add(vr("xb"), add(i32(c*g.H*g.W), add(mul(hh, i32(g.W)), ww)))), flt(0))))
				for j := range ob {
					step = append(step, set(acc(j, t), add(vr(acc(j, t)), mul(vr(fmt.Sprintf("dz%d", j)), vr(xv)))))
				}
			}
		}
	}
	for j := range ob {
		step = append(step, set(acc(j, taps), add(vr(acc(j, taps)), vr(fmt.Sprintf("dz%d", j)))))
	}
	body = append(body, For{"j", lidE, i32(chunkLen), i32(tg), []Stmt{
		let("p", Int, add(mul(vr("ch"), i32(chunkLen)), vr("j"))),
		when(lt(vr("p"), i32(pix)), step...),
	}})
	// The block's sums: every thread's accumulators into shared memory, one
	// barrier, then 8 parts a sum of tg/8 values each (strided over the
	// threads: there are more parts than threads) and one thread a sum
	// the 8 results (a tree per accumulator cost 26 × 8 barriers a block).
	for j := range ob {
		for t := 0; t <= taps; t++ {
			body = append(body, store("sh", add(i32((j*(taps+1)+t)*tg), lidE), vr(acc(j, t))))
		}
	}
	const parts = 8
	body = append(body, Barrier{},
		strided("k", sums*parts, tg,
			let("st", Int, div(vr("k"), i32(parts))),
			let("sb", Int, add(mul(vr("st"), i32(tg)), mul(rem(vr("k"), i32(parts)), i32(tg/parts)))),
			let("ps", Float, flt(0)),
			loop("q", 0, tg/parts, 1, set("ps", add(vr("ps"), load("sh", add(vr("sb"), vr("q")))))),
			store("sh2", vr("k"), vr("ps"))),
		Barrier{},
		strided("k", sums, tg,
			let("tot", Float, flt(0)),
			loop("q", 0, parts, 1, set("tot", add(vr("tot"), load("sh2", add(mul(vr("k"), i32(parts)), vr("q")))))),
			// sum k is tap k % (taps+1) of channel o0 + k / (taps+1), whose
			// (taps+1) sums follow each other in partial.
			store("partial", add(mul(add(mul(vr("ch"), i32(g.OC)), vr("o0")), i32(taps+1)), vr("k")), vr("tot"))))
	return &Kernel{
		Doc: fmt.Sprintf("direct weight and bias gradients of a %dx%d window over [%d,%d,%d,%d], %d channels a block, %d blocks a channel group",
			g.KH, g.KW, g.N, g.C, g.H, g.W, ob, chunks),
		Params: params, Threadgroup: tg, Groups: g.OC / ob * chunks, Body: body,
	}, nil
}

// convDirectBwdSumKernel adds the blocks' partial sums into dW [OC, taps]
// and db [OC].
func convDirectBwdSumKernel(g planner.ConvGeom, hasBias bool) *Kernel {
	taps := g.C / g.Groups * g.KH * g.KW
	chunks := directBwdChunks(g)
	n := g.OC * (taps + 1)
	params := []Param{in("partial", chunks*n), out("dw", g.OC*taps)}
	if hasBias {
		params = append(params, out("db", g.OC))
	}
	return elementwise(fmt.Sprintf("sum of %d blocks' weight and bias gradients of %d channels", chunks, g.OC), n, params, func(i Expr) []Stmt {
		s := []Stmt{let("acc", Float, load("partial", i)),
			loop("c", 1, chunks, 1, set("acc", add(vr("acc"), load("partial", add(i, mul(vr("c"), i32(n)))))))}
		s = append(s, let("o", Int, div(i, i32(taps+1))), let("t", Int, rem(i, i32(taps+1))))
		st := If{Cond: lt(vr("t"), i32(taps)), Then: []Stmt{store("dw", add(mul(vr("o"), i32(taps)), vr("t")), vr("acc"))}}
		if hasBias {
			st.Else = []Stmt{store("db", vr("o"), vr("acc"))}
		}
		return append(s, st)
	})
}

// convDirectBwd lowers the backward step of a direct convolution without
// dx: the weight and bias gradients in one pass and a sum.
func (l *lowering) convDirectBwd(st *planner.Step) error {
	a := st.Attr
	g := normConv(*a.Conv)
	if err := l.operands(st, 5, 3); err != nil {
		return err
	}
	x, y, dy, ws := st.In[0], st.In[2], st.In[3], st.In[4]
	dx, dw, db := st.Out[0], st.Out[1], st.Out[2]
	if present(dx) || !present(dw) {
		return fmt.Errorf("method %q computes the weight gradient of a layer without dx", ConvDirectMethod)
	}
	if b, err := l.buf(ws); err != nil {
		return err
	} else if b.Size < DirectBwdScratch(g) {
		return fmt.Errorf("scratch %q has %d float32s, the direct weight gradient needs %d (DirectBwdScratch)", b.Name, b.Size, DirectBwdScratch(g))
	}
	k, err := convDirectBwdKernel(g, a.Act, float32(a.Alpha))
	ops := []operand{whole(x), whole(dy)}
	if a.Act != "" {
		ops = append(ops, whole(y))
	}
	if err := l.launch("conv_direct_wgrad", k, err, append(ops, whole(ws))...); err != nil {
		return err
	}
	ops = []operand{whole(ws), whole(dw)}
	if present(db) {
		ops = append(ops, whole(db))
	}
	return l.launch("conv_direct_wgrad_sum", convDirectBwdSumKernel(g, present(db)), nil, ops...)
}
