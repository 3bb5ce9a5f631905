package gpu

import (
	"fmt"
	"math"
)

// Batch norm and the global average pool for tensors [outer, c, inner]
// stored channels-last (NHWC: element (n, ch, s) at (n·inner + s)·c + ch),
// where cuDNN's convolutions are fastest. A row is one (n, s) position,
// rows = outer·inner of them, each c channels long. The batch norm kernels
// split the rows into BatchNormGroups contiguous groups and the channels
// into chunks of at most nhwcLanes, one threadgroup a (group, chunk): its
// threads are nhwcLanes-wide lanes over the chunk's channels (a warp reads
// one row's 128 bytes) times row-lanes over the group's rows. A group's
// per-channel sums go through shared memory into a scratch "part" of
// 2·groups·c floats (the IR has no atomics), and a second kernel, whose
// threadgroups each merge the partials of their own channels, applies the
// result. Each operand says its layout (NHWC or NCHW), so that the stem's
// batch norm may read an NCHW tensor and write an NHWC one. An NCHW
// operand is read a float a channel, not a line a warp: its 8 row-lanes
// read 8 consecutive positions of a channel, one 32-byte sector between
// the threadgroup's warps, so it costs more than an NHWC one (unmeasured).

// nhwcLanes is the most channels a threadgroup of the NHWC batch norm
// kernels covers: a CUDA warp of 32 threads then reads one row's 32
// consecutive channels, one 128-byte line.
const nhwcLanes = 32

// nhwcWays is how many rows a thread of the NHWC batch norm kernels loads
// before it uses them, so that several loads are in flight: a thread's
// loads are of one bfloat16 each, and 256 threadgroups of 256 threads
// with 4 in flight left the H200 waiting on memory. CIFAR ResNet-18's
// bf16 step on an H200, alternating programs (docs/runs/gpu-thirteenth-f-2026-11-30.txt):
// 4 ways 2.865–2.885 ms, 8 ways 2.831–2.833, 16 ways 2.753–2.772; twice
// or four times BatchNormGroups' groups gained 0–20 µs more with 8 or 16
// ways (2.73–2.76) and lost 0.3–0.4 ms with four times.
const nhwcWays = 16

// nhwcMinRows is the fewest rows BatchNormGroups gives a group: 8
// row-lanes of a 256-thread threadgroup then have 8 rows each.
const nhwcMinRows = 64

// BatchNormGroups is how many row groups the NHWC batch norm kernels split
// the outer·inner rows of a [outer, c, inner] tensor into. Each
// threadgroup of the second kernel (apply) merges the partials of every
// group for its channels: 2·groups floats a channel against rows/groups
// values a channel it normalises, so groups ≤ sqrt(rows/8) keeps the merge
// under a quarter of the data (read from L2). On CIFAR ResNet-18 at batch
// 128 that bound gives 128, 64, 32 and 16 groups for rows 131072, 32768,
// 8192, 2048 at c 64, 128, 256, 512: times c/32 chunks, 256 threadgroups
// of 256 threads in every layer (about two a streaming multiprocessor of
// a 132-SM GPU), each normalising 32K to 4K values (16 to 128 a thread).
func BatchNormGroups(outer, c, inner int) int {
	rows := outer * inner
	g := int(math.Sqrt(float64(rows) / 8))
	g = min(g, ceilDiv(rows, nhwcMinRows))
	return max(g, 1)
}

// BatchNormScratch is the floats of the scratch "part" that the NHWC batch
// norm kernels of a [outer, c, inner] tensor share: per group g and
// channel ch a sum at g·c + ch and a second quantity at (groups + g)·c +
// ch. It holds float32 sums and must stay float32 in a bf16 plan.
func BatchNormScratch(outer, c, inner int) int {
	return 2 * BatchNormGroups(outer, c, inner) * c
}

// bnTile is how a threadgroup of the NHWC batch norm kernels lays its
// threads over its block of rows and channels. Threadgroup tgid is group
// g = tgid / chunks (rows g·rowsPer … min(rows, (g+1)·rowsPer)) and chunk
// k = tgid mod chunks (channels k·cw … (k+1)·cw, the last guarded by c);
// thread lid is lane lid mod cw (channel k·cw + lane) and row-lane
// lid / cw, which takes rows rl, rl + rlanes, … of the group.
type bnTile struct {
	outer, c, inner    int
	rows               int // outer·inner
	groups, rowsPer    int
	chunks, cw, rlanes int
}

func newBNTile(outer, c, inner, groups int) bnTile {
	if groups < 1 {
		panic(fmt.Sprintf("gpu: NHWC batch norm of [%d,%d,%d] with %d groups", outer, c, inner, groups))
	}
	rows := outer * inner
	chunks := ceilDiv(c, nhwcLanes)
	cw := ceilDiv(c, chunks)
	return bnTile{outer: outer, c: c, inner: inner, rows: rows, groups: groups, rowsPer: ceilDiv(rows, groups),
		chunks: chunks, cw: cw, rlanes: max(1, tgReduce/cw)}
}

func (t bnTile) threadgroup() int { return t.cw * t.rlanes }
func (t bnTile) grid() int        { return t.groups * t.chunks }

// prologue declares the shared array sh, the thread's lane, rl, g, ch,
// chs (ch, or 0 past the channels: safe to index with), r0 and rend (its
// group's rows).
func (t bnTile) prologue() []Stmt {
	return []Stmt{
		Shared{"sh", t.threadgroup()},
		let("lane", Int, rem(lidE, i32(t.cw))),
		let("rl", Int, div(lidE, i32(t.cw))),
		let("g", Int, div(tgidE, i32(t.chunks))),
		let("ch", Int, add(mul(rem(tgidE, i32(t.chunks)), i32(t.cw)), vr("lane"))),
		let("chs", Int, t.safeChannel()),
		let("r0", Int, mul(vr("g"), i32(t.rowsPer))),
		let("rend", Int, t.groupEnd(vr("r0"))),
	}
}

// safeChannel is ch, or 0 past the channels.
func (t bnTile) safeChannel() Expr {
	if live := t.live(); live != nil {
		return sel(live, vr("ch"), i32(0))
	}
	return vr("ch")
}

// live is whether the thread's channel is one of the tensor's.
func (t bnTile) live() Expr {
	if t.cw*t.chunks == t.c {
		return nil
	}
	return lt(vr("ch"), i32(t.c))
}

// groupEnd is the end of the rows of the group that starts at row r0.
func (t bnTile) groupEnd(r0 Expr) Expr {
	e := add(r0, i32(t.rowsPer))
	return sel(lt(e, i32(t.rows)), e, i32(t.rows))
}

// groupRows is the float count of the rows of group g (0 for a group past
// the rows, which only a caller's groups > rows makes).
func (t bnTile) groupRows(g Expr) Expr {
	r0 := mul(g, i32(t.rowsPer))
	n := sub(t.groupEnd(r0), r0)
	return toFloat(sel(gt(n, i32(0)), n, i32(0)))
}

// index is element (row r, channel ch) of a tensor in NHWC (nhwc) or
// NCHW layout.
func (t bnTile) index(nhwc bool, r Expr) Expr {
	if nhwc {
		return add(mul(r, i32(t.c)), vr("ch"))
	}
	return add(mul(add(mul(div(r, i32(t.inner)), i32(t.c)), vr("ch")), i32(t.inner)), rem(r, i32(t.inner)))
}

// layoutBuf is a buffer of a sweep and its layout.
type layoutBuf struct {
	buf  string
	nhwc bool
}

// sweep walks the thread's rows of its group, nhwcWays at a time: for each
// way w it loads the operands' values into locals buf + w (0 where the
// row or channel is not there: the load is not made), then runs use(w)
// and stores store's buffer and value at its row where the row is there.
// A value is read and written only by the thread of its row and channel,
// and each read of a row comes before its store, so a stored buffer may
// be a read one of the same layout.
func (t bnTile) sweep(reads []layoutBuf, use func(w int) []Stmt, store func(w int) (layoutBuf, Expr)) Stmt {
	var loads, uses []Stmt
	for w := 0; w < nhwcWays; w++ {
		j := add(vr("j"), i32(w*t.rlanes))
		rw := fmt.Sprint("row", w)
		loads = append(loads, let(rw, Int, add(vr("r0"), j)))
		// rend ≤ r0 + rowsPer, so a row before it is one of the group's
		ok := and(lt(vr(rw), vr("rend")), t.live())
		okw := fmt.Sprint("ok", w)
		loads = append(loads, let(okw, Int, sel(ok, i32(1), i32(0))))
		for _, o := range reads {
			loads = append(loads, let(fmt.Sprint(o.buf, w), Float, sel(ne(vr(okw), i32(0)), load(o.buf, t.index(o.nhwc, vr(rw))), flt(0))))
		}
		if use != nil {
			uses = append(uses, use(w)...)
		}
		if store != nil {
			o, v := store(w)
			uses = append(uses, when(ne(vr(okw), i32(0)), Store{o.buf, t.index(o.nhwc, vr(rw)), v}))
		}
	}
	return For{"j", vr("rl"), i32(t.rowsPer), i32(t.rlanes * nhwcWays), append(loads, uses...)}
}

// laneSum stores the thread's partial in sh[lid], adds up the row-lanes of
// each lane in a tree (rlanes need not be a power of two), and declares
// name = the lane's total in every thread, with a barrier after the read
// so that sh can be reused. Every thread must run it.
func (t bnTile) laneSum(name, partial string) []Stmt {
	s := []Stmt{store("sh", lidE, vr(partial)), Barrier{}}
	for _, rd := range laneTree(t.rlanes) {
		s = append(s, when(lt(vr("rl"), i32(rd.active)),
			store("sh", lidE, add(load("sh", lidE), load("sh", add(lidE, i32(rd.stride*t.cw)))))), Barrier{})
	}
	return append(s, let(name, Float, load("sh", vr("lane"))), Barrier{})
}

// laneRound is a round of a tree sum over row-lanes: each row-lane
// rl < active adds in the partial of row-lane rl + stride.
type laneRound struct{ stride, active int }

// laneTree is the rounds that sum n partials into the first: the strides
// halve from the largest power of two below n, and a round's active
// row-lanes are those whose partner still holds a partial not yet added
// in. No row-lane a round reads is one it writes (the rounds sit between
// barriers), whatever n is.
func laneTree(n int) []laneRound {
	h := 1
	for h < n {
		h *= 2
	}
	var rounds []laneRound
	for h /= 2; h > 0; h /= 2 {
		// partials 0 … n-1 are left: rl < n-h takes rl+h, leaving 0 … h-1
		rounds = append(rounds, laneRound{h, n - h})
		n = h
	}
	return rounds
}

// mergeSums declares, for each i, name[i] = Σ over groups of
// part[offset[i]·groups·c + g·c + ch]: the row-lanes take the groups in
// turn and laneSum adds them up.
func (t bnTile) mergeSums(names []string, offsets []int) []Stmt {
	var s, acc []Stmt
	for i := range names {
		s = append(s, let(fmt.Sprint("part", i), Float, flt(0)))
		acc = append(acc, set(fmt.Sprint("part", i), add(vr(fmt.Sprint("part", i)),
			load("part", add(add(i32(offsets[i]*t.groups*t.c), mul(vr("gg"), i32(t.c))), vr("chs"))))))
	}
	s = append(s, For{"gg", vr("rl"), i32(t.groups), i32(t.rlanes), whenSome(t.live(), acc...)})
	for i, n := range names {
		s = append(s, t.laneSum(n, fmt.Sprint("part", i))...)
	}
	return s
}

// whenRoot runs then in the one thread of the grid that owns the
// thread's channel: group 0's row-lane 0.
func (t bnTile) whenRoot(then ...Stmt) Stmt {
	return when(and(eq(vr("g"), i32(0)), eq(vr("rl"), i32(0)), t.live()), then...)
}

// partIndex is the index in part of half h (0: sums, 1: second
// quantities) of the thread's group and channel.
func (t bnTile) partIndex(h int) Expr {
	return add(add(i32(h*t.groups*t.c), mul(vr("g"), i32(t.c))), vr("ch"))
}

// layoutName is how a doc line names a layout.
func layoutName(nhwc bool) string {
	if nhwc {
		return "NHWC"
	}
	return "NCHW"
}

// kernel is a kernel of the tile's grid; its doc line is what, the shape,
// the operands' layouts and the split.
func (t bnTile) kernel(what, layouts string, params []Param, body []Stmt) *Kernel {
	return &Kernel{Doc: fmt.Sprintf("%s of [%d,%d,%d] (%s), %d row groups × %d channel chunks", what, t.outer, t.c, t.inner, layouts, t.groups, t.chunks),
		Params: params, Threadgroup: t.threadgroup(), Groups: t.grid(), Body: body}
}

// batchNormStatsNHWCKernel is a training batch norm's first kernel: per
// group g and channel ch, part[g·c + ch] = the group's Σx and
// part[(groups + g)·c + ch] = its Σ(x − mean_g)², the group's own mean
// (Chan et al.'s pairwise pieces). A thread sums x − K, K the channel's
// value in the group's first row, and its square (the shifted-data sums:
// K is a sample, so the two stay close to the group's spread and
// Σ(x−K)² − (Σ(x−K))²/n cancels little), and the group turns them into
// the pair.
func batchNormStatsNHWCKernel(outer, c, inner int, xNHWC bool, groups int) *Kernel {
	t := newBNTile(outer, c, inner, groups)
	n := outer * c * inner
	body := t.prologue()
	body = append(body,
		let("k", Float, sel(and(lt(vr("r0"), i32(t.rows)), t.live()), load("x", t.index(xNHWC, vr("r0"))), flt(0))),
		let("a1", Float, flt(0)),
		let("a2", Float, flt(0)),
		t.sweep([]layoutBuf{{"x", xNHWC}}, func(w int) []Stmt {
			d := fmt.Sprint("d", w)
			return []Stmt{
				let(d, Float, sel(ne(vr(fmt.Sprint("ok", w)), i32(0)), sub(vr(fmt.Sprint("x", w)), vr("k")), flt(0))),
				set("a1", add(vr("a1"), vr(d))),
				set("a2", add(vr("a2"), mul(vr(d), vr(d)))),
			}
		}, nil))
	body = append(body, t.laneSum("t1", "a1")...)
	body = append(body, t.laneSum("t2", "a2")...)
	body = append(body,
		let("ng", Float, toFloat(sel(gt(vr("rend"), vr("r0")), sub(vr("rend"), vr("r0")), i32(0)))),
		when(and(eq(vr("rl"), i32(0)), t.live()),
			store("part", t.partIndex(0), add(vr("t1"), mul(vr("ng"), vr("k")))),
			store("part", t.partIndex(1), sel(gt(vr("ng"), flt(0)),
				call(FnMax, sub(vr("t2"), div(mul(vr("t1"), vr("t1")), vr("ng"))), flt(0)), flt(0)))))
	return t.kernel("batch norm (training) statistics", "x "+layoutName(xNHWC),
		[]Param{in("x", n), out("part", 2*groups*c)}, body)
}

// batchNormApplyNHWCKernel is a training batch norm's second kernel: each
// threadgroup merges every group's pair for its channels (the mean from
// the sums, then Chan's M2 = Σ M2_g + n_g·(mean_g − mean)²), normalises its
// block, y = gamma·x̂ + beta, and group 0 saves the mean and
// 1/sqrt(var+eps) and moves the running statistics as batchNormKernel
// does. With relu, y is the fused ReLU's output (reluKeeps). y may be x
// when their layouts agree.
func batchNormApplyNHWCKernel(outer, c, inner int, xNHWC, yNHWC bool, groups int, eps, momentum float32, relu bool) *Kernel {
	t := newBNTile(outer, c, inner, groups)
	n := outer * c * inner
	m := t.rows
	unbiased := float32(1) / float32(max(m-1, 1))
	body := t.prologue()
	// The mean is group 0's plus the mean of every group's sum less its
	// rows at group 0's mean: small terms, where a plain Σ sum_g of values
	// far from 0 rounds at the size of the whole channel's sum.
	body = append(body,
		let("ref", Float, div(load("part", vr("chs")), t.groupRows(i32(0)))),
		let("off", Float, flt(0)),
		For{"gg", vr("rl"), i32(t.groups), i32(t.rlanes), whenSome(t.live(),
			set("off", add(vr("off"), sub(load("part", add(mul(vr("gg"), i32(c)), vr("chs"))), mul(t.groupRows(vr("gg")), vr("ref"))))))})
	body = append(body, t.laneSum("offs", "off")...)
	body = append(body,
		let("mean", Float, add(vr("ref"), mul(vr("offs"), flt(1/float32(m))))),
		let("q", Float, flt(0)),
		For{"gg", vr("rl"), i32(t.groups), i32(t.rlanes), []Stmt{
			let("ng", Float, t.groupRows(vr("gg"))),
			when(and(gt(vr("ng"), flt(0)), t.live()),
				let("d", Float, sub(div(load("part", add(mul(vr("gg"), i32(c)), vr("chs"))), vr("ng")), vr("mean"))),
				set("q", add(vr("q"), add(load("part", add(add(i32(t.groups*c), mul(vr("gg"), i32(c))), vr("chs"))),
					mul(vr("ng"), mul(vr("d"), vr("d"))))))),
		}})
	body = append(body, t.laneSum("ss", "q")...)
	body = append(body,
		let("var", Float, mul(vr("ss"), flt(1/float32(m)))),
		let("inv", Float, call(FnRsqrt, add(vr("var"), flt(eps)))),
		let("scale", Float, mul(load("gamma", vr("chs")), vr("inv"))),
		let("shift", Float, load("beta", vr("chs"))),
		// (x − mean)·scale + beta, as rt/cpu: far from 0, x·scale +
		// (beta − mean·scale) would round two large terms
		t.sweep([]layoutBuf{{"x", xNHWC}}, nil, func(w int) (layoutBuf, Expr) {
			x := vr(fmt.Sprint("x", w))
			y := add(mul(sub(x, vr("mean")), vr("scale")), vr("shift"))
			if relu {
				y = sel(reluKeeps(x, vr("mean"), vr("scale"), vr("shift")), y, flt(0))
			}
			return layoutBuf{"y", yNHWC}, y
		}),
		t.whenRoot(
			store("smean", vr("ch"), vr("mean")),
			store("sinv", vr("ch"), vr("inv")),
			store("rmean", vr("ch"), add(mul(flt(1-momentum), load("rmean", vr("ch"))), mul(flt(momentum), vr("mean")))),
			store("rvar", vr("ch"), add(mul(flt(1-momentum), load("rvar", vr("ch"))), mul(flt(momentum), mul(vr("ss"), flt(unbiased)))))))
	return t.kernel("batch norm (training)"+reluName(relu), fmt.Sprintf("x %s, y %s", layoutName(xNHWC), layoutName(yNHWC)),
		[]Param{in("x", n), in("gamma", c), in("beta", c), out("rmean", c), out("rvar", c),
			out("y", n), out("smean", c), out("sinv", c), in("part", 2*groups*c)}, body)
}

// batchNormEvalNHWCKernel normalises with the running statistics, one
// thread an element of y in y's layout (x read in its own); with relu,
// y = max(y, 0).
func batchNormEvalNHWCKernel(outer, c, inner int, xNHWC, yNHWC bool, eps float32, relu bool) *Kernel {
	n := outer * c * inner
	t := bnTile{outer: outer, c: c, inner: inner}
	return elementwise(fmt.Sprintf("batch norm (evaluation)%s of [%d,%d,%d] (x %s, y %s)", reluName(relu), outer, c, inner, layoutName(xNHWC), layoutName(yNHWC)), n,
		[]Param{in("x", n), in("gamma", c), in("beta", c), in("rmean", c), in("rvar", c), out("y", n)},
		func(i Expr) []Stmt {
			var s []Stmt
			if yNHWC {
				s = []Stmt{let("ch", Int, rem(i, i32(c))), let("r", Int, div(i, i32(c)))}
			} else {
				s = []Stmt{let("ch", Int, rem(div(i, i32(inner)), i32(c))),
					let("r", Int, add(mul(div(i, i32(c*inner)), i32(inner)), rem(i, i32(inner))))}
			}
			return append(s, store("y", i, evalReLU(relu, add(mul(mul(load("gamma", vr("ch")), sub(load("x", t.index(xNHWC, vr("r"))), load("rmean", vr("ch")))),
				call(FnRsqrt, add(load("rvar", vr("ch")), flt(eps)))), load("beta", vr("ch"))))))
		})
}

// batchNormBwdSumsNHWCKernel is a batch norm backward's first kernel: per
// group g and channel ch, part[g·c + ch] = the group's Σdy and
// part[(groups + g)·c + ch] = its Σdy·x̂, x̂ = (x − smean)·sinv. With
// relu, dy is the fused ReLU's, masked by reluKeeps (gamma and beta then
// come after dy).
func batchNormBwdSumsNHWCKernel(outer, c, inner int, xNHWC, dyNHWC bool, groups int, relu bool) *Kernel {
	t := newBNTile(outer, c, inner, groups)
	n := outer * c * inner
	body := t.prologue()
	body = append(body,
		let("mean", Float, load("smean", vr("chs"))),
		let("inv", Float, load("sinv", vr("chs"))),
		let("a1", Float, flt(0)),
		let("a2", Float, flt(0)))
	if relu {
		body = append(body, let("k", Float, mul(load("gamma", vr("chs")), vr("inv"))), let("b", Float, load("beta", vr("chs"))))
	}
	body = append(body,
		t.sweep([]layoutBuf{{"x", xNHWC}, {"dy", dyNHWC}}, func(w int) []Stmt {
			// a missing row has dy 0 and adds nothing
			x, dy := vr(fmt.Sprint("x", w)), bnDy(relu, fmt.Sprint("x", w), fmt.Sprint("dy", w))
			return []Stmt{
				set("a1", add(vr("a1"), dy)),
				set("a2", add(vr("a2"), mul(dy, mul(sub(x, vr("mean")), vr("inv"))))),
			}
		}, nil))
	body = append(body, t.laneSum("t1", "a1")...)
	body = append(body, t.laneSum("t2", "a2")...)
	body = append(body, when(and(eq(vr("rl"), i32(0)), t.live()),
		store("part", t.partIndex(0), vr("t1")),
		store("part", t.partIndex(1), vr("t2"))))
	params := []Param{in("x", n), in("smean", c), in("sinv", c), in("dy", n), out("part", 2*groups*c)}
	if relu {
		params = append(params, in("gamma", c), in("beta", c))
	}
	return t.kernel("batch norm backward's sums"+reluName(relu), fmt.Sprintf("x %s, dy %s", layoutName(xNHWC), layoutName(dyNHWC)), params, body)
}

// batchNormBwdApplyNHWCKernel is a batch norm backward's second kernel:
// each threadgroup adds up every group's Σdy and Σdy·x̂ for its channels,
// dx = gamma·inv·(dy − dbeta/M − x̂·dgamma/M) over its block, and group 0
// writes dgamma and dbeta. With relu, dy is the fused ReLU's, masked by
// reluKeeps (beta comes last). dx may be dy when their layouts agree.
func batchNormBwdApplyNHWCKernel(outer, c, inner int, xNHWC, dyNHWC, dxNHWC bool, groups int, relu bool) *Kernel {
	t := newBNTile(outer, c, inner, groups)
	n := outer * c * inner
	m := t.rows
	body := t.prologue()
	body = append(body, t.mergeSums([]string{"sdy", "sdyx"}, []int{0, 1})...)
	body = append(body,
		let("mean", Float, load("smean", vr("chs"))),
		let("inv", Float, load("sinv", vr("chs"))),
		let("k", Float, mul(load("gamma", vr("chs")), vr("inv"))),
		let("m1", Float, mul(vr("sdy"), flt(1/float32(m)))),
		let("m2", Float, mul(vr("sdyx"), flt(1/float32(m)))))
	if relu {
		body = append(body, let("b", Float, load("beta", vr("chs"))))
	}
	body = append(body,
		t.sweep([]layoutBuf{{"x", xNHWC}, {"dy", dyNHWC}}, nil, func(w int) (layoutBuf, Expr) {
			x, dy := vr(fmt.Sprint("x", w)), bnDy(relu, fmt.Sprint("x", w), fmt.Sprint("dy", w))
			xhat := mul(sub(x, vr("mean")), vr("inv"))
			return layoutBuf{"dx", dxNHWC}, mul(vr("k"), sub(sub(dy, vr("m1")), mul(xhat, vr("m2"))))
		}),
		t.whenRoot(store("dgamma", vr("ch"), vr("sdyx")), store("dbeta", vr("ch"), vr("sdy"))))
	params := []Param{in("x", n), in("gamma", c), in("smean", c), in("sinv", c), in("dy", n),
		out("dx", n), out("dgamma", c), out("dbeta", c), in("part", 2*groups*c)}
	if relu {
		params = append(params, in("beta", c))
	}
	return t.kernel("batch norm backward"+reluName(relu), fmt.Sprintf("x %s, dy %s, dx %s", layoutName(xNHWC), layoutName(dyNHWC), layoutName(dxNHWC)), params, body)
}

// globalAvgPoolNHWCKernel is y[n·c + ch] = the mean over s of an NHWC
// [outer, c, inner] tensor's element (n, ch, s): one thread an output,
// consecutive threads on consecutive channels (coalesced reads).
func globalAvgPoolNHWCKernel(outer, c, inner int) *Kernel {
	return elementwise(fmt.Sprintf("global average pool of NHWC [%d,%d,%d]", outer, c, inner), outer*c,
		[]Param{in("x", outer*c*inner), out("y", outer*c)}, func(i Expr) []Stmt {
			// (n·inner + s)·c + ch = n·inner·c + ch + s·c
			return []Stmt{
				let("base", Int, add(mul(div(i, i32(c)), i32(inner*c)), rem(i, i32(c)))),
				let("acc", Float, flt(0)),
				loop("s", 0, inner, 1, set("acc", add(vr("acc"), load("x", add(vr("base"), mul(vr("s"), i32(c))))))),
				store("y", i, mul(vr("acc"), flt(1/float32(inner)))),
			}
		})
}

// globalAvgPoolBwdNHWCKernel is dx = dy[n·c + ch]/inner at every element
// (n, ch, s) of an NHWC [outer, c, inner] tensor, one thread an element.
func globalAvgPoolBwdNHWCKernel(outer, c, inner int) *Kernel {
	n := outer * c * inner
	return elementwise(fmt.Sprintf("global average pool backward of NHWC [%d,%d,%d]", outer, c, inner), n,
		[]Param{in("dy", outer*c), out("dx", n)}, func(i Expr) []Stmt {
			return []Stmt{store("dx", i, mul(load("dy", add(mul(div(i, i32(inner*c)), i32(c)), rem(i, i32(c)))), flt(1/float32(inner))))}
		})
}
