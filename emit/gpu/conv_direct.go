package gpu

import (
	"fmt"
	"slices"

	"github.com/mlbuild/mlbuild/planner"
)

// Direct convolution: the "direct" forward method of a GPU target for
// layers whose window holds few values (C/G·KH·KW ≤ DirectMaxTaps, the
// first layer of an image model: 1·5·5 for MNIST). One thread computes
// the outputs of up to 8 channels at up to 2 neighbouring pixels of a row,
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
// computes: 2 where the row has them. Each weight a thread loads then
// feeds two products. For the first layer of models/mnist.cue on an H100
// (ncu, side by side): 1 pixel a thread 30.2 µs, 2 pixels 22.4 µs, 4
// pixels 24.7 µs (64 registers a thread against 48: fewer warps in
// flight).
func directPixels(ow int) int {
	return min(2, max(ow, 1))
}

// convDirectKernel computes y [N, OC, OH, OW] from x [N, C, H, W], W [OC,
// C/G, KH, KW] and the bias, one thread per directPixels pixels of a row
// and directChannels output channels.
//
// With a pool (a max pool of window = stride, no padding, over this
// convolution's output: PoolEpilogue), y is the pool's output [N, OC,
// pool.OH, pool.OW]: each of a thread's directPoolPixels pixels is the
// maximum of a window of the convolution's outputs, which the thread
// computes in registers, and act is applied to the maximum (the epilogue's
// activations do not decrease, so act of the maximum is the maximum of
// act, for a quarter of the work with 2×2 windows). With argmax (a
// training step), the thread also writes arg [N, OC, pool.OH, pool.OW]:
// the position in its window, row-major, of the first output whose
// activation equals the pooled value, the window's first maximum after the
// activation, as rt/cpu's MaxPool2DArgmax finds it in the activation's
// output.
//
// lay says where x and y are channels last (NHWC, as the plan may store
// them: planner.BF16Storage.Direct); a pooled y must be NCHW.
func convDirectKernel(g planner.ConvGeom, pool *planner.ConvGeom, hasBias bool, act string, alpha float32, argmax bool, lay directLayouts) (*Kernel, error) {
	if pool != nil && lay.y {
		return nil, fmt.Errorf("a direct convolution with an epilogue pool writes y NCHW, not channels last")
	}
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	ob := directChannels(ocg)
	// The thread computes px pixels of a row of y, each the maximum of a
	// wr×wc window of the convolution's outputs (1×1 without a pool).
	oh, ow, px, wr, wc := g.OH, g.OW, directPixels(g.OW), 1, 1
	if pool != nil {
		oh, ow, px, wr, wc = pool.OH, pool.OW, directPoolPixels(*pool), pool.KH, pool.KW
	}
	convCols := px * wc // the convolution's outputs a window row of the thread spans
	runs := ceilDiv(ow, px)
	n := g.N * g.OC / ob * oh * runs
	// Channels last, a threadgroup's outputs are one contiguous run of y
	// when its threads cover whole pixel pairs of full rows: they are
	// then staged in threadgroup memory and stored in y's order, a warp's
	// store writing consecutive elements, instead of each thread's 16
	// scattered ones (CIFAR ResNet-18's stem took 77 µs bf16 NHWC on an
	// H200 against 39 NCHW float32, twice the bytes).
	staged := lay.y && pool == nil && !argmax && ow%px == 0 && n%tgElem == 0 && tgElem%(g.OC/ob) == 0
	tile := tgElem * ob * px // the elements of y a staged threadgroup writes
	params := []Param{in("x", g.N*g.C*g.H*g.W), in("w", g.OC*cg*g.KH*g.KW), out("y", g.N*g.OC*oh*ow)}
	if hasBias {
		params = append(params, in("b", g.OC))
	}
	if argmax {
		params = append(params, out("arg", g.N*g.OC*oh*ow))
	}
	shape := []int{g.N, g.OC / ob, oh, runs}
	taps := cg * g.KH * g.KW
	// The rows of input the windows cover, as offsets from h0 in order,
	// and the columns.
	rowAt := map[int]int{}
	var rows []int
	for r := range wr {
		for kh := range g.KH {
			if off := r*g.SH + kh*g.DH; !slices.Contains(rows, off) {
				rows = append(rows, off)
			}
		}
	}
	slices.Sort(rows)
	for i, off := range rows {
		rowAt[off] = i
	}
	cols := (convCols-1)*g.SW + (g.KW-1)*g.DW + 1
	xv := func(c, row, col int) string { return fmt.Sprintf("x%d_%d_%d", c, row, col) }
	var err error
	doc := fmt.Sprintf("direct convolution of [%d,%d,%d,%d] with a %dx%d window, %d output channels and %d pixels a thread, bias + %q%s",
		g.N, g.C, g.H, g.W, g.KH, g.KW, ob, px, act, lay.doc())
	if pool != nil {
		doc = fmt.Sprintf("direct convolution of [%d,%d,%d,%d] with a %dx%d window and a %dx%d max pool, %d output channels and %d pooled pixels a thread, bias + %q",
			g.N, g.C, g.H, g.W, g.KH, g.KW, wr, wc, ob, px, act)
	}
	k := elementwise(doc, n, params,
		func(i Expr) []Stmt {
			s := []Stmt{
				let("img", Int, coord(i, shape, 0)),
				let("o0", Int, mul(coord(i, shape, 1), i32(ob))),
			}
			if lay.y {
				// channels last: consecutive threads take consecutive
				// channel blocks of one pixel pair, so that a warp's
				// stores run on in y and its threads share x's loads
				last := []int{g.N, oh, runs, g.OC / ob}
				s = []Stmt{
					let("img", Int, coord(i, last, 0)),
					let("o0", Int, mul(coord(i, last, 3), i32(ob))),
					let("oh", Int, coord(i, last, 1)),
					let("ow", Int, mul(coord(i, last, 2), i32(px))),
				}
			} else if pool == nil {
				s = append(s,
					let("oh", Int, coord(i, shape, 2)),
					let("ow", Int, mul(coord(i, shape, 3), i32(px))))
			} else {
				s = append(s,
					let("ph", Int, coord(i, shape, 2)),
					let("pw", Int, mul(coord(i, shape, 3), i32(px))),
					let("oh", Int, mul(vr("ph"), i32(pool.SH))),
					let("ow", Int, mul(vr("pw"), i32(pool.SW))))
			}
			s = append(s,
				let("h0", Int, sub(mul(vr("oh"), i32(g.SH)), i32(g.PH))),
				let("w0", Int, sub(mul(vr("ow"), i32(g.SW)), i32(g.PW))),
			)
			if lay.x {
				s = append(s, let("xc", Int, mul(div(vr("o0"), i32(ocg)), i32(cg))))
			} else {
				s = append(s, let("xb", Int, mul(add(mul(vr("img"), i32(g.C)), mul(div(vr("o0"), i32(ocg)), i32(cg))), i32(g.H*g.W))))
			}
			// The windows' inputs, loaded once.
			for c := range cg {
				for row, off := range rows {
					hh := add(vr("h0"), i32(off))
					for col := range cols {
						ww := add(vr("w0"), i32(col))
						inside := and(ge(hh, i32(0)), lt(hh, i32(g.H)), ge(ww, i32(0)), lt(ww, i32(g.W)))
						s = append(s, let(xv(c, row, col), Float,
							sel(inside, load("x", lay.xIndex(g, c, hh, ww)), flt(0))))
					}
				}
			}
			if staged { // the thread's first output in the threadgroup's run of y
				s = append(s, let("sb", Int, add(mul(mul(div(lidE, i32(g.OC/ob)), i32(px)), i32(g.OC)), mul(rem(lidE, i32(g.OC/ob)), i32(ob)))))
			}
			switch {
			case lay.y: // channels last: y's channel o0 at the thread's first pixel
				s = append(s, let("yb", Int, add(mul(add(mul(add(mul(vr("img"), i32(oh)), vr("oh")), i32(ow)), vr("ow")), i32(g.OC)), vr("o0"))))
			case pool == nil:
				s = append(s, let("yb", Int, add(mul(add(mul(vr("img"), i32(g.OC)), vr("o0")), i32(oh*ow)), add(mul(vr("oh"), i32(ow)), vr("ow")))))
			default:
				s = append(s, let("yb", Int, add(mul(add(mul(vr("img"), i32(g.OC)), vr("o0")), i32(oh*ow)), add(mul(vr("ph"), i32(ow)), vr("pw")))))
			}
			// Accumulator q of a channel is the convolution's output at
			// row q / convCols of the windows and column q % convCols.
			for j := range ob {
				o := add(vr("o0"), i32(j))
				wb := fmt.Sprintf("wb%d", j)
				acc := func(q int) string { return fmt.Sprintf("acc%d_%d", j, q) }
				var init Expr = flt(0)
				if hasBias {
					s = append(s, let(fmt.Sprintf("b%d", j), Float, load("b", o)))
					init = vr(fmt.Sprintf("b%d", j))
				}
				for q := range wr * convCols {
					s = append(s, let(acc(q), Float, init))
				}
				s = append(s, let(wb, Int, mul(o, i32(taps))))
				for c := range cg {
					for kh := range g.KH {
						for kw := range g.KW {
							t := (c*g.KH+kh)*g.KW + kw
							wv := fmt.Sprintf("w%d_%d", j, t)
							s = append(s, let(wv, Float, load("w", add(vr(wb), i32(t)))))
							for r := range wr {
								row := rowAt[r*g.SH+kh*g.DH]
								for p := range convCols {
									q := r*convCols + p
									s = append(s, set(acc(q), add(vr(acc(q)), mul(vr(wv), vr(xv(c, row, p*g.SW+kw*g.DW))))))
								}
							}
						}
					}
				}
				for p := range px {
					// the pixel's window: the maximum of its accumulators
					var v Expr = vr(acc(p * wc))
					for r := range wr {
						for cc := range wc {
							if q := r*convCols + p*wc + cc; q != p*wc {
								v = call(FnMax, v, vr(acc(q)))
							}
						}
					}
					var e Expr
					e, err = actExpr(act, alpha, v)
					at := add(vr("yb"), i32(j*oh*ow+p))
					if lay.y {
						at = add(vr("yb"), i32(p*g.OC+j))
					}
					if staged { // its place in the threadgroup's run of y
						at = add(vr("sb"), i32(p*g.OC+j))
						s = append(s, store("tile", at, e))
						continue
					}
					st := []Stmt{store("y", at, e)}
					if argmax {
						// the window's positions from last to first: the
						// first whose activation equals the pooled value wins
						yv, am := fmt.Sprintf("yv%d_%d", j, p), fmt.Sprintf("am%d_%d", j, p)
						st = []Stmt{let(yv, Float, e), store("y", at, vr(yv)), let(am, Float, flt(0))}
						for r := wr - 1; r >= 0; r-- {
							for cc := wc - 1; cc >= 0; cc-- {
								ev, _ := actExpr(act, alpha, vr(acc(r*convCols+p*wc+cc)))
								st = append(st, set(am, sel(eq(ev, vr(yv)), flt(float32(r*wc+cc)), vr(am))))
							}
						}
						st = append(st, store("arg", at, vr(am)))
					}
					first := "ow"
					if pool != nil {
						first = "pw"
					}
					if ow%px != 0 && p > 0 {
						st = []Stmt{when(lt(add(vr(first), i32(p)), i32(ow)), st...)}
					}
					s = append(s, st...)
				}
			}
			return s
		})
	if staged && err == nil {
		// no thread leaves early (n is a multiple of the threadgroup), and
		// every one reaches the barrier
		body := append([]Stmt{Shared{"tile", tile}, k.Body[0]}, k.Body[2:]...)
		k.Body = append(body, Barrier{},
			For{"e", lidE, i32(tile), i32(tgElem), []Stmt{store("y", add(mul(tgidE, i32(tile)), vr("e")), load("tile", vr("e")))}})
		k.Doc += ", staged through threadgroup memory"
	}
	return k, err
}

// directPoolPixels is how many neighbouring pixels of a row of a pool's
// output one thread of a pooled direct convolution computes: as many as
// keep its convolution outputs within directPixels' (2 a thread measured
// fastest unpooled: more outputs took more registers and fewer warps ran),
// and at least one, a whole window (4 outputs for 2×2).
func directPoolPixels(pool planner.ConvGeom) int {
	return max(1, directPixels(pool.OW)/(pool.KH*pool.KW))
}

// convDirect lowers a forward convolution step whose method is direct,
// with its epilogue pool if it has one.
func (l *lowering) convDirect(st *planner.Step) error {
	a := st.Attr
	g := normConv(*a.Conv)
	if !DirectFits(g) {
		return fmt.Errorf("method %q does not apply to a window of %d values (at most %d)", ConvDirectMethod, g.C/g.Groups*g.KH*g.KW, DirectMaxTaps)
	}
	if err := l.operands(st, 3, 2); err != nil {
		return err
	}
	pool, err := epiloguePool(a)
	if err != nil {
		return err
	}
	arg, err := poolArgmax(st, pool)
	if err != nil {
		return err
	}
	x, w, b, y := st.In[0], st.In[1], st.In[2], st.Out[0]
	last := l.channelsLast(x, y)
	k, err := convDirectKernel(g, pool, present(b), a.Act, float32(a.Alpha), present(arg), directLayouts{x: last[0], y: last[1]})
	ops := []operand{whole(x), whole(w), whole(y)}
	if present(b) {
		ops = append(ops, whole(b))
	}
	if present(arg) {
		ops = append(ops, whole(arg))
	}
	return l.launch("conv_direct", k, err, ops...)
}

// directBwdRun is how many neighbouring outputs of a row one iteration of
// the direct weight gradient covers: the row cut into runs of at most 8.
// A run's windows overlap, so each input is loaded once for all the taps
// that read it: one output an iteration loaded 25 inputs, dy and y for 26
// products and spent 57 µs on the first layer of models/mnist.cue on an
// H100 (ncu), bound by instruction issue, not by memory.
func directBwdRun(ow int) int {
	return ceilDiv(ow, ceilDiv(ow, 8))
}

// directBwdChunks is how many thread blocks share one output channel's
// sums in the direct weight gradient: about 1024 blocks in all.
func directBwdChunks(g planner.ConvGeom) int {
	return max(1, min(ceilDiv(1024, g.OC), ceilDiv(g.N*g.OH*g.OW, 1024)))
}

// DirectBwdScratch is the scratch, in float32s, of the direct weight
// gradient: each block's partial sums of its channel's taps and bias.
func DirectBwdScratch(g planner.ConvGeom) int {
	g = normConv(g)
	return directBwdChunks(g) * g.OC * (g.C/g.Groups*g.KH*g.KW + 1)
}

// convDirectBwdKernel computes the weight and bias gradients of a direct
// convolution that has no dx (the model input's layer) in one pass over
// dy: block (o, chunk) walks its chunk of the batch's runs of outputs
// (directBwdRun neighbours in a row), applies the activation's derivative
// to dy (from y), and sums dz·x for each of the window's taps and dz for
// the bias, in registers; the block's sums go to partial
// [chunks][OC][taps+1]. It replaces im2col, the gather of dy into rows,
// the bias gradient's pass and a GEMM with 25 outputs a channel.
// lay says where x and dy (and y, read with dy) are channels last.
func convDirectBwdKernel(g planner.ConvGeom, act string, alpha float32, lay directLayouts) (*Kernel, error) {
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	taps := cg * g.KH * g.KW
	chunks := directBwdChunks(g)
	run := directBwdRun(g.OW)
	runsRow := ceilDiv(g.OW, run)
	runs, ohw := g.N*g.OH*runsRow, g.OH*g.OW
	chunkLen := ceilDiv(runs, chunks)
	// The input columns a run's windows cover.
	cols := (run-1)*g.SW + (g.KW-1)*g.DW + 1
	// 128 threads: the shared sums of a 32-value window (33 × 128 floats)
	// stay within any GPU's 32 KiB of threadgroup memory.
	const tg = 128
	params := []Param{in("x", g.N*g.C*g.H*g.W), in("dy", g.N*g.OC*ohw)}
	if act != "" {
		params = append(params, in("y", g.N*g.OC*ohw))
	}
	params = append(params, out("partial", chunks*g.OC*(taps+1)))
	body := []Stmt{Shared{"sh", (taps + 1) * tg}, Shared{"sh2", (taps + 1) * 8},
		let("o", Int, div(tgidE, i32(chunks))),
		let("ch", Int, rem(tgidE, i32(chunks))),
		let("xc", Int, mul(div(vr("o"), i32(ocg)), i32(cg))),
	}
	for t := 0; t <= taps; t++ {
		body = append(body, let(fmt.Sprintf("acc%d", t), Float, flt(0)))
	}
	// Run q is (img, oh, ow0): its outputs ow0 … ow0+run-1, those past the
	// row's end counting as dz = 0.
	step := []Stmt{
		let("img", Int, div(vr("q"), i32(g.OH*runsRow))),
		let("oh", Int, rem(div(vr("q"), i32(runsRow)), i32(g.OH))),
		let("ow0", Int, mul(rem(vr("q"), i32(runsRow)), i32(run))),
	}
	if lay.y { // channels last: dy's channel o at the run's first output
		step = append(step, let("yi", Int, add(mul(add(mul(add(mul(vr("img"), i32(g.OH)), vr("oh")), i32(g.OW)), vr("ow0")), i32(g.OC)), vr("o"))))
	} else {
		step = append(step, let("yi", Int, add(mul(add(mul(vr("img"), i32(g.OC)), vr("o")), i32(ohw)), add(mul(vr("oh"), i32(g.OW)), vr("ow0")))))
	}
	for j := range run {
		yi := add(vr("yi"), i32(j))
		if lay.y {
			yi = add(vr("yi"), i32(j*g.OC))
		}
		dz := Expr(load("dy", yi))
		if act != "" {
			d, err := actGradFromY(act, alpha, load("y", yi))
			if err != nil {
				return nil, err
			}
			dz = mul(dz, d)
		}
		if g.OW%run != 0 && j > 0 {
			dz = sel(lt(add(vr("ow0"), i32(j)), i32(g.OW)), dz, flt(0))
		}
		step = append(step, let(fmt.Sprintf("dz%d", j), Float, dz))
	}
	step = append(step,
		let("h0", Int, sub(mul(vr("oh"), i32(g.SH)), i32(g.PH))),
		let("w0", Int, sub(mul(vr("ow0"), i32(g.SW)), i32(g.PW))))
	if !lay.x {
		step = append(step, let("xb", Int, mul(add(mul(vr("img"), i32(g.C)), vr("xc")), i32(g.H*g.W))))
	}
	for c := range cg {
		for kh := range g.KH {
			hh := add(vr("h0"), i32(kh*g.DH))
			// Each input of the row once, then the products that read it.
			for col := range cols {
				ww := add(vr("w0"), i32(col))
				inside := and(ge(hh, i32(0)), lt(hh, i32(g.H)), ge(ww, i32(0)), lt(ww, i32(g.W)))
				xv := fmt.Sprintf("x%d_%d_%d", c, kh, col)
				step = append(step, let(xv, Float, sel(inside,
					load("x", lay.xIndex(g, c, hh, ww)), flt(0))))
				for kw := range g.KW {
					// output j reads column j·SW + kw·DW with tap kw
					d := col - kw*g.DW
					if d < 0 || d%g.SW != 0 || d/g.SW >= run {
						continue
					}
					j := d / g.SW
					acc := fmt.Sprintf("acc%d", (c*g.KH+kh)*g.KW+kw)
					step = append(step, set(acc, add(vr(acc), mul(vr(fmt.Sprintf("dz%d", j)), vr(xv)))))
				}
			}
		}
	}
	for j := range run {
		step = append(step, set(fmt.Sprintf("acc%d", taps), add(vr(fmt.Sprintf("acc%d", taps)), vr(fmt.Sprintf("dz%d", j)))))
	}
	body = append(body, For{"j", lidE, i32(chunkLen), i32(tg), []Stmt{
		let("q", Int, add(mul(vr("ch"), i32(chunkLen)), vr("j"))),
		when(lt(vr("q"), i32(runs)), step...),
	}})
	// The block's sums: every thread's accumulators into shared memory, one
	// barrier, then 8 parts a sum of 16 values each (strided over the
	// threads: there are more parts than threads) and one thread the 8
	// results (a tree per accumulator cost 26 × 8 barriers a block).
	for t := 0; t <= taps; t++ {
		body = append(body, store("sh", add(i32(t*tg), lidE), vr(fmt.Sprintf("acc%d", t))))
	}
	const parts = 8
	body = append(body, Barrier{},
		strided("k", (taps+1)*parts, tg,
			let("st", Int, div(vr("k"), i32(parts))),
			let("sb", Int, add(mul(vr("st"), i32(tg)), mul(rem(vr("k"), i32(parts)), i32(tg/parts)))),
			let("ps", Float, flt(0)),
			loop("q", 0, tg/parts, 1, set("ps", add(vr("ps"), load("sh", add(vr("sb"), vr("q")))))),
			store("sh2", vr("k"), vr("ps"))),
		Barrier{},
		when(lt(lidE, i32(taps+1)),
			let("tot", Float, flt(0)),
			loop("q", 0, parts, 1, set("tot", add(vr("tot"), load("sh2", add(mul(lidE, i32(parts)), vr("q")))))),
			store("partial", add(mul(add(mul(vr("ch"), i32(g.OC)), vr("o")), i32(taps+1)), lidE), vr("tot"))))
	return &Kernel{
		Doc: fmt.Sprintf("direct weight and bias gradients of a %dx%d window over [%d,%d,%d,%d], runs of %d outputs, %d blocks a channel%s",
			g.KH, g.KW, g.N, g.C, g.H, g.W, run, chunks, lay.doc()),
		Params: params, Threadgroup: tg, Groups: g.OC * chunks, Body: body,
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
	last := l.channelsLast(x, dy, y)
	if a.Act != "" && last[1] != last[2] {
		return fmt.Errorf("direct weight gradient: dy and y in different layouts")
	}
	k, err := convDirectBwdKernel(g, a.Act, float32(a.Alpha), directLayouts{x: last[0], y: last[1]})
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

// directLayouts says which tensors of a direct convolution are channels
// last: x, and y (with dy, its gradient, in the weight gradient).
type directLayouts struct{ x, y bool }

// xIndex is x's element at channel c of the thread's group (from its
// first channel, "xc" channels last, "xb" the group's plane NCHW), row h,
// column w of the thread's image "img".
func (lay directLayouts) xIndex(g planner.ConvGeom, c int, h, w Expr) Expr {
	if lay.x {
		return add(mul(add(mul(add(mul(vr("img"), i32(g.H)), h), i32(g.W)), w), i32(g.C)), add(vr("xc"), i32(c)))
	}
	return add(vr("xb"), add(i32(c*g.H*g.W), add(mul(h, i32(g.W)), w)))
}

// doc is what a kernel's doc line adds for channels-last tensors.
func (lay directLayouts) doc() string {
	switch {
	case lay.x && lay.y:
		return " (x and y NHWC)"
	case lay.x:
		return " (x NHWC)"
	case lay.y:
		return " (y NHWC)"
	}
	return ""
}
