package gpu

import (
	"fmt"
	"math"
	"slices"
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

// nhwcVec is how many consecutive channels a thread of the NHWC batch
// norm kernels takes where every operand is channels last and the
// channels are whole 32-channel chunks (bnTile.vectorised): one 8-byte
// access a row of a bfloat16 operand (16 of a float32 one) where there
// were four 2-byte ones, its nhwcWays/nhwcVec rows in flight holding as
// many bytes as before. A warp then reads four rows' 64 bytes.
const nhwcVec = 4

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
// lid / cw, which takes rows rl, rl + rlanes, … of the group. A
// vectorised tile's lane takes v = nhwcVec channels, k·cw·v + lane·v …
// + v−1, and its row-lanes are v times as many.
type bnTile struct {
	outer, c, inner    int
	rows               int // outer·inner
	groups, rowsPer    int
	chunks, cw, rlanes int
	v                  int // channels a thread: 1, or nhwcVec
}

func newBNTile(outer, c, inner, groups int) bnTile {
	if groups < 1 {
		panic(fmt.Sprintf("gpu: NHWC batch norm of [%d,%d,%d] with %d groups", outer, c, inner, groups))
	}
	rows := outer * inner
	chunks := ceilDiv(c, nhwcLanes)
	cw := ceilDiv(c, chunks)
	return bnTile{outer: outer, c: c, inner: inner, rows: rows, groups: groups, rowsPer: ceilDiv(rows, groups),
		chunks: chunks, cw: cw, rlanes: max(1, tgReduce/cw), v: 1}
}

// vectorised is t with each thread on nhwcVec consecutive channels
// (one Load4 or Store4 a row and operand) where every operand is
// channels last (nhwc) and the channels are whole chunks, else t. The
// grid, the threadgroups and the groups stay, so the scratch does too.
func (t bnTile) vectorised(nhwc ...bool) bnTile {
	if t.c%nhwcLanes != 0 || slices.Contains(nhwc, false) {
		return t
	}
	t.v = nhwcVec
	t.cw = nhwcLanes / nhwcVec
	t.rlanes = tgReduce / t.cw
	return t
}

// ways is how many rows a thread loads before it uses them.
func (t bnTile) ways() int { return nhwcWays / t.v }

// per is the name of the thread's local name for its channel k: name
// itself when a thread has one channel.
func (t bnTile) per(name string, k int) string {
	if t.v == 1 {
		return name
	}
	return fmt.Sprintf("%s_%d", name, k)
}

// val is the name of the local holding buf's value at way w and channel
// k of the thread.
func (t bnTile) val(buf string, w, k int) string {
	if t.v == 1 {
		return fmt.Sprint(buf, w)
	}
	return fmt.Sprintf("%s%d_%d", buf, w, k)
}

// plus is base + k (base where k is 0).
func plus(base Expr, k int) Expr {
	if k == 0 {
		return base
	}
	return add(base, i32(k))
}

func (t bnTile) threadgroup() int { return t.cw * t.rlanes }
func (t bnTile) grid() int        { return t.groups * t.chunks }

// prologue declares the shared array sh, the thread's lane, rl, g, ch,
// chs (ch, or 0 past the channels: safe to index with), r0 and rend (its
// group's rows).
func (t bnTile) prologue() []Stmt {
	sh, ch := t.threadgroup(), add(mul(rem(tgidE, i32(t.chunks)), i32(t.cw)), vr("lane"))
	if t.v > 1 {
		// two sums a channel at once (laneSums)
		sh, ch = 2*t.v*t.threadgroup(), add(mul(rem(tgidE, i32(t.chunks)), i32(t.cw*t.v)), mul(vr("lane"), i32(t.v)))
	}
	return []Stmt{
		Shared{"sh", sh},
		let("lane", Int, rem(lidE, i32(t.cw))),
		let("rl", Int, div(lidE, i32(t.cw))),
		let("g", Int, div(tgidE, i32(t.chunks))),
		let("ch", Int, ch),
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
	if t.cw*t.chunks*t.v == t.c {
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

// sweep walks the thread's rows of its group, ways() at a time: for each
// way w it loads the operands' values of each of its channels k into
// locals val(buf, w, k) (0 where the row or channel is not there: a
// thread of one channel does not make the load, a vectorised one loads
// row 0 instead), then runs use(w, k) for each k and stores store's
// buffer and values at its row where the row is there. A value is read
// and written only by the thread of its row and channel, and each read
// of a row comes before its store, so a stored buffer may be a read one
// of the same layout.
func (t bnTile) sweep(reads []layoutBuf, use func(w, k int) []Stmt, store func(w, k int) (layoutBuf, Expr)) Stmt {
	var loads, uses []Stmt
	for w := 0; w < t.ways(); w++ {
		j := add(vr("j"), i32(w*t.rlanes))
		rw := fmt.Sprint("row", w)
		loads = append(loads, let(rw, Int, add(vr("r0"), j)))
		// rend ≤ r0 + rowsPer, so a row before it is one of the group's
		ok := and(lt(vr(rw), vr("rend")), t.live())
		okw := fmt.Sprint("ok", w)
		there := ne(vr(okw), i32(0))
		loads = append(loads, let(okw, Int, sel(ok, i32(1), i32(0))))
		if t.v == 1 {
			for _, o := range reads {
				loads = append(loads, let(t.val(o.buf, w, 0), Float, sel(there, load(o.buf, t.index(o.nhwc, vr(rw))), flt(0))))
			}
		} else {
			rc := fmt.Sprint("rowc", w)
			loads = append(loads, let(rc, Int, sel(there, vr(rw), i32(0))))
			for _, o := range reads {
				var names [nhwcVec]string
				for k := range names {
					names[k] = t.val(o.buf, w, k)
				}
				loads = append(loads, Load4{o.buf, t.index(true, vr(rc)), names})
				for _, n := range names {
					loads = append(loads, set(n, sel(there, vr(n), flt(0))))
				}
			}
		}
		for k := 0; k < t.v && use != nil; k++ {
			uses = append(uses, use(w, k)...)
		}
		if store == nil {
			continue
		}
		if t.v == 1 {
			o, v := store(w, 0)
			uses = append(uses, when(there, Store{o.buf, t.index(o.nhwc, vr(rw)), v}))
			continue
		}
		var o layoutBuf
		var vals [nhwcVec]Expr
		for k := range vals {
			o, vals[k] = store(w, k)
		}
		uses = append(uses, when(there, Store4{o.buf, t.index(true, vr(rw)), vals}))
	}
	return For{"j", vr("rl"), i32(t.rowsPer), i32(t.rlanes * t.ways()), append(loads, uses...)}
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

// laneSums is laneSum of each partials[i] into names[i]: one after
// another in a tile of one channel a thread, all in the same rounds
// (partial i in sh[i·threadgroup + lid]) in a vectorised one, whose sh
// holds 2·v partials a thread.
func (t bnTile) laneSums(names, partials []string) []Stmt {
	if t.v == 1 {
		var s []Stmt
		for i, n := range names {
			s = append(s, t.laneSum(n, partials[i])...)
		}
		return s
	}
	if len(partials) > 2*t.v {
		panic(fmt.Sprintf("gpu: %d lane sums at once, sh holds %d", len(partials), 2*t.v))
	}
	tg := t.threadgroup()
	var s, adds []Stmt
	for i, p := range partials {
		s = append(s, store("sh", plus(lidE, i*tg), vr(p)))
	}
	s = append(s, Barrier{})
	for _, rd := range laneTree(t.rlanes) {
		adds = nil
		for i := range partials {
			adds = append(adds, store("sh", plus(lidE, i*tg), add(load("sh", plus(lidE, i*tg)), load("sh", plus(lidE, i*tg+rd.stride*t.cw)))))
		}
		s = append(s, when(lt(vr("rl"), i32(rd.active)), adds...), Barrier{})
	}
	for i, n := range names {
		s = append(s, let(n, Float, load("sh", plus(vr("lane"), i*tg))))
	}
	return append(s, Barrier{})
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

// mergeSums declares, for each i and channel k of the thread,
// per(name[i], k) = Σ over groups of part[offset[i]·groups·c + g·c +
// ch + k]: the row-lanes take the groups in turn and laneSums adds them
// up.
func (t bnTile) mergeSums(names []string, offsets []int) []Stmt {
	var s, acc []Stmt
	var sums, parts []string
	for i := range names {
		for k := 0; k < t.v; k++ {
			p := t.per(fmt.Sprint("part", i), k)
			s = append(s, let(p, Float, flt(0)))
			acc = append(acc, set(p, add(vr(p),
				load("part", add(add(i32(offsets[i]*t.groups*t.c), mul(vr("gg"), i32(t.c))), plus(vr("chs"), k))))))
			sums, parts = append(sums, t.per(names[i], k)), append(parts, p)
		}
	}
	s = append(s, For{"gg", vr("rl"), i32(t.groups), i32(t.rlanes), whenSome(t.live(), acc...)})
	return append(s, t.laneSums(sums, parts)...)
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
	if t.v > 1 {
		layouts += fmt.Sprintf(", %d channels a thread", t.v)
	}
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
	t := newBNTile(outer, c, inner, groups).vectorised(xNHWC)
	n := outer * c * inner
	body := t.prologue()
	var sums, partials []string
	for k := 0; k < t.v; k++ {
		body = append(body,
			let(t.per("k", k), Float, sel(and(lt(vr("r0"), i32(t.rows)), t.live()), load("x", plus(t.index(xNHWC, vr("r0")), k)), flt(0))),
			let(t.per("a1", k), Float, flt(0)),
			let(t.per("a2", k), Float, flt(0)))
	}
	for _, q := range []string{"1", "2"} {
		for k := 0; k < t.v; k++ {
			sums, partials = append(sums, t.per("t"+q, k)), append(partials, t.per("a"+q, k))
		}
	}
	body = append(body,
		t.sweep([]layoutBuf{{"x", xNHWC}}, func(w, k int) []Stmt {
			d, a1, a2 := t.val("d", w, k), t.per("a1", k), t.per("a2", k)
			return []Stmt{
				let(d, Float, sel(ne(vr(fmt.Sprint("ok", w)), i32(0)), sub(vr(t.val("x", w, k)), vr(t.per("k", k))), flt(0))),
				set(a1, add(vr(a1), vr(d))),
				set(a2, add(vr(a2), mul(vr(d), vr(d)))),
			}
		}, nil))
	body = append(body, t.laneSums(sums, partials)...)
	body = append(body, let("ng", Float, toFloat(sel(gt(vr("rend"), vr("r0")), sub(vr("rend"), vr("r0")), i32(0)))))
	var parts []Stmt
	for k := 0; k < t.v; k++ {
		t1, t2 := vr(t.per("t1", k)), vr(t.per("t2", k))
		parts = append(parts,
			store("part", plus(t.partIndex(0), k), add(t1, mul(vr("ng"), vr(t.per("k", k))))),
			store("part", plus(t.partIndex(1), k), sel(gt(vr("ng"), flt(0)),
				call(FnMax, sub(t2, div(mul(t1, t1), vr("ng"))), flt(0)), flt(0))))
	}
	body = append(body, when(and(eq(vr("rl"), i32(0)), t.live()), parts...))
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
	return batchNormApplyNHWC(outer, c, inner, xNHWC, yNHWC, groups, eps, momentum, relu, false)
}

// batchNormSumNHWCKernel is batchNormApplyNHWCKernel with a residual z
// after its other operands, every tensor channels last: y = bn(x) + z,
// or max(bn(x) + z, 0) with relu (the planner's fuse_norm_sum.go). y may
// be x or z.
func batchNormSumNHWCKernel(outer, c, inner int, groups int, eps, momentum float32, relu bool) *Kernel {
	return batchNormApplyNHWC(outer, c, inner, true, true, groups, eps, momentum, relu, true)
}

// batchNormApplyNHWC is the apply kernel, with a residual z where sum.
func batchNormApplyNHWC(outer, c, inner int, xNHWC, yNHWC bool, groups int, eps, momentum float32, relu, sum bool) *Kernel {
	t := newBNTile(outer, c, inner, groups).vectorised(xNHWC, yNHWC)
	n := outer * c * inner
	m := t.rows
	unbiased := float32(1) / float32(max(m-1, 1))
	body := t.prologue()
	// The mean is group 0's plus the mean of every group's sum less its
	// rows at group 0's mean: small terms, where a plain Σ sum_g of values
	// far from 0 rounds at the size of the whole channel's sum.
	var offs, ssq []Stmt
	var offNames, offSums, qNames, qSums []string
	for k := 0; k < t.v; k++ {
		ref, off := t.per("ref", k), t.per("off", k)
		body = append(body, let(ref, Float, div(load("part", plus(vr("chs"), k)), t.groupRows(i32(0)))), let(off, Float, flt(0)))
		offs = append(offs, set(off, add(vr(off), sub(load("part", add(mul(vr("gg"), i32(c)), plus(vr("chs"), k))), mul(t.groupRows(vr("gg")), vr(ref))))))
		offNames, offSums = append(offNames, off), append(offSums, t.per("offs", k))
		d, q := t.per("d", k), t.per("q", k)
		ssq = append(ssq,
			let(d, Float, sub(div(load("part", add(mul(vr("gg"), i32(c)), plus(vr("chs"), k))), vr("ng")), vr(t.per("mean", k)))),
			set(q, add(vr(q), add(load("part", add(add(i32(t.groups*c), mul(vr("gg"), i32(c))), plus(vr("chs"), k))),
				mul(vr("ng"), mul(vr(d), vr(d)))))))
		qNames, qSums = append(qNames, q), append(qSums, t.per("ss", k))
	}
	body = append(body, For{"gg", vr("rl"), i32(t.groups), i32(t.rlanes), whenSome(t.live(), offs...)})
	body = append(body, t.laneSums(offSums, offNames)...)
	for k := 0; k < t.v; k++ {
		body = append(body,
			let(t.per("mean", k), Float, add(vr(t.per("ref", k)), mul(vr(t.per("offs", k)), flt(1/float32(m))))),
			let(t.per("q", k), Float, flt(0)))
	}
	body = append(body, For{"gg", vr("rl"), i32(t.groups), i32(t.rlanes), []Stmt{
		let("ng", Float, t.groupRows(vr("gg"))),
		when(and(gt(vr("ng"), flt(0)), t.live()), ssq...),
	}})
	body = append(body, t.laneSums(qSums, qNames)...)
	reads := []layoutBuf{{"x", xNHWC}}
	if sum {
		reads = append(reads, layoutBuf{"z", true})
	}
	var root []Stmt
	for k := 0; k < t.v; k++ {
		ss, mean, inv := vr(t.per("ss", k)), vr(t.per("mean", k)), vr(t.per("inv", k))
		body = append(body,
			let(t.per("var", k), Float, mul(ss, flt(1/float32(m)))),
			let(t.per("inv", k), Float, call(FnRsqrt, add(vr(t.per("var", k)), flt(eps)))),
			let(t.per("scale", k), Float, mul(load("gamma", plus(vr("chs"), k)), inv)),
			let(t.per("shift", k), Float, load("beta", plus(vr("chs"), k))))
		ch := plus(vr("ch"), k)
		root = append(root,
			store("smean", ch, mean),
			store("sinv", ch, inv),
			store("rmean", ch, add(mul(flt(1-momentum), load("rmean", ch)), mul(flt(momentum), mean))),
			store("rvar", ch, add(mul(flt(1-momentum), load("rvar", ch)), mul(flt(momentum), mul(ss, flt(unbiased))))))
	}
	body = append(body,
		// (x − mean)·scale + beta, as rt/cpu: far from 0, x·scale +
		// (beta − mean·scale) would round two large terms
		t.sweep(reads, nil, func(w, k int) (layoutBuf, Expr) {
			x, mean, scale, shift := vr(t.val("x", w, k)), vr(t.per("mean", k)), vr(t.per("scale", k)), vr(t.per("shift", k))
			y := add(mul(sub(x, mean), scale), shift)
			switch {
			case sum:
				// the sum's kernel's rule: max(a + b, 0)
				if y = add(y, vr(t.val("z", w, k))); relu {
					y = call(FnMax, y, flt(0))
				}
			case relu:
				y = sel(reluKeeps(x, mean, scale, shift), y, flt(0))
			}
			return layoutBuf{"y", yNHWC}, y
		}),
		t.whenRoot(root...))
	what, layouts := "batch norm (training)", fmt.Sprintf("x %s, y %s", layoutName(xNHWC), layoutName(yNHWC))
	params := []Param{in("x", n), in("gamma", c), in("beta", c), out("rmean", c), out("rvar", c),
		out("y", n), out("smean", c), out("sinv", c), in("part", 2*groups*c)}
	if sum {
		what, layouts, params = what+" plus a residual", layouts+", z NHWC", append(params, in("z", n))
	}
	return t.kernel(what+reluName(relu), layouts, params, body)
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
	t := newBNTile(outer, c, inner, groups).vectorised(xNHWC, dyNHWC)
	n := outer * c * inner
	body := t.prologue()
	var sums, partials []string
	for k := 0; k < t.v; k++ {
		body = append(body,
			let(t.per("mean", k), Float, load("smean", plus(vr("chs"), k))),
			let(t.per("inv", k), Float, load("sinv", plus(vr("chs"), k))),
			let(t.per("a1", k), Float, flt(0)),
			let(t.per("a2", k), Float, flt(0)))
		if relu {
			body = append(body, let(t.per("k", k), Float, mul(load("gamma", plus(vr("chs"), k)), vr(t.per("inv", k)))),
				let(t.per("b", k), Float, load("beta", plus(vr("chs"), k))))
		}
	}
	for _, q := range []string{"1", "2"} {
		for k := 0; k < t.v; k++ {
			sums, partials = append(sums, t.per("t"+q, k)), append(partials, t.per("a"+q, k))
		}
	}
	body = append(body,
		t.sweep([]layoutBuf{{"x", xNHWC}, {"dy", dyNHWC}}, func(w, k int) []Stmt {
			// a missing row has dy 0 and adds nothing
			x, dy, a1, a2 := vr(t.val("x", w, k)), t.dy(relu, w, k), t.per("a1", k), t.per("a2", k)
			return []Stmt{
				set(a1, add(vr(a1), dy)),
				set(a2, add(vr(a2), mul(dy, mul(sub(x, vr(t.per("mean", k))), vr(t.per("inv", k)))))),
			}
		}, nil))
	body = append(body, t.laneSums(sums, partials)...)
	var parts []Stmt
	for k := 0; k < t.v; k++ {
		parts = append(parts,
			store("part", plus(t.partIndex(0), k), vr(t.per("t1", k))),
			store("part", plus(t.partIndex(1), k), vr(t.per("t2", k))))
	}
	body = append(body, when(and(eq(vr("rl"), i32(0)), t.live()), parts...))
	params := []Param{in("x", n), in("smean", c), in("sinv", c), in("dy", n), out("part", 2*groups*c)}
	if relu {
		params = append(params, in("gamma", c), in("beta", c))
	}
	return t.kernel("batch norm backward's sums"+reluName(relu), fmt.Sprintf("x %s, dy %s", layoutName(xNHWC), layoutName(dyNHWC)), params, body)
}

// dy is the backward's dy at way w and channel k of the thread, masked
// as bnDy masks it where relu (with the kernel's per-channel "mean",
// "k" = gamma·inv and "b" = beta).
func (t bnTile) dy(relu bool, w, k int) Expr {
	if t.v == 1 {
		return bnDy(relu, t.val("x", w, k), t.val("dy", w, k))
	}
	if !relu {
		return vr(t.val("dy", w, k))
	}
	return sel(reluKeeps(vr(t.val("x", w, k)), vr(t.per("mean", k)), vr(t.per("k", k)), vr(t.per("b", k))), vr(t.val("dy", w, k)), flt(0))
}

// batchNormBwdApplyNHWCKernel is a batch norm backward's second kernel:
// each threadgroup adds up every group's Σdy and Σdy·x̂ for its channels,
// dx = gamma·inv·(dy − dbeta/M − x̂·dgamma/M) over its block, and group 0
// writes dgamma and dbeta. With relu, dy is the fused ReLU's, masked by
// reluKeeps (beta comes last). dx may be dy when their layouts agree.
func batchNormBwdApplyNHWCKernel(outer, c, inner int, xNHWC, dyNHWC, dxNHWC bool, groups int, relu bool) *Kernel {
	t := newBNTile(outer, c, inner, groups).vectorised(xNHWC, dyNHWC, dxNHWC)
	n := outer * c * inner
	m := t.rows
	body := t.prologue()
	body = append(body, t.mergeSums([]string{"sdy", "sdyx"}, []int{0, 1})...)
	var root []Stmt
	for k := 0; k < t.v; k++ {
		ch := plus(vr("chs"), k)
		body = append(body,
			let(t.per("mean", k), Float, load("smean", ch)),
			let(t.per("inv", k), Float, load("sinv", ch)),
			let(t.per("k", k), Float, mul(load("gamma", ch), vr(t.per("inv", k)))),
			let(t.per("m1", k), Float, mul(vr(t.per("sdy", k)), flt(1/float32(m)))),
			let(t.per("m2", k), Float, mul(vr(t.per("sdyx", k)), flt(1/float32(m)))))
		if relu {
			body = append(body, let(t.per("b", k), Float, load("beta", ch)))
		}
		root = append(root, store("dgamma", plus(vr("ch"), k), vr(t.per("sdyx", k))), store("dbeta", plus(vr("ch"), k), vr(t.per("sdy", k))))
	}
	body = append(body,
		t.sweep([]layoutBuf{{"x", xNHWC}, {"dy", dyNHWC}}, nil, func(w, k int) (layoutBuf, Expr) {
			x, dy := vr(t.val("x", w, k)), t.dy(relu, w, k)
			xhat := mul(sub(x, vr(t.per("mean", k))), vr(t.per("inv", k)))
			return layoutBuf{"dx", dxNHWC}, mul(vr(t.per("k", k)), sub(sub(dy, vr(t.per("m1", k))), mul(xhat, vr(t.per("m2", k)))))
		}),
		t.whenRoot(root...))
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
