package gpu

import "fmt"

// The fused attention kernels (planner.KAttention, KAttentionBwd), after
// FlashAttention-2: no kernel holds the scores of a whole matrix
// [Tq, Tk], only a tile of them in threadgroup memory.
//
// The forward runs a threadgroup per (matrix, block of R queries). It
// stages its queries once and then, a tile of C keys at a time, the
// tile's keys and values in threadgroup memory; the tile's R×C scores
// are computed a pair per thread into threadgroup memory, and each
// query's L threads (its lanes) fold them into a running maximum, sum
// and output (the online softmax), each lane owning D/L of the output's
// dimensions in registers. A causal mask skips the tiles past the
// block's last query. It writes o and each query's log-sum-exp.
//
// The backward recomputes the probabilities from q, kᵀ and the
// log-sum-exp in three kernels: delta = rowsum(do∘o); dk and dv by a
// threadgroup per (matrix, block of C keys) over tiles of R queries; dq
// by a threadgroup per (matrix, block of R queries) over tiles of C keys.
// Each output element is summed by one thread in a fixed order: no
// atomics, and the same bits every run.
//
// Dropout of the probabilities draws the mask of the unfused dropout step
// (the element's index in [mats, Tq, Tk] hashed with the step's seed), so
// fused and unfused programs drop the same elements.

// attnGeom is one fused attention: mats matrices of tq queries and tk
// keys of dimension d.
type attnGeom struct {
	mats, tq, tk, d int
	scale           float32
	causal          bool
	rate            float32 // dropout; 0 for none (and outside training)
}

func (g attnGeom) String() string {
	s := fmt.Sprintf("%d matrices of %d queries and %d keys of %d, scale %g", g.mats, g.tq, g.tk, g.d, g.scale)
	if g.causal {
		s += ", causal"
	}
	if g.rate > 0 {
		s += fmt.Sprintf(", dropout %g", g.rate)
	}
	return s
}

// attnSharedBytes bounds a kernel's threadgroup memory: Metal gives a
// kernel 32 KiB; 2 KiB stay free for what the compiler adds.
const attnSharedBytes = 30 << 10

// attnLaneDims is the most output dimensions one lane keeps in registers
// (two accumulators each in the key kernel of the backward).
const attnLaneDims = 16

// attnTiling is the shape of one kernel's work: rows owned by a
// threadgroup (its threads: rows·lanes), columns streamed through
// threadgroup memory a tile at a time, and the lanes of a row, each
// owning per output dimensions lane, lane+lanes, …; width is d rounded
// up to lanes·per (a row in threadgroup memory, zero past d), and dp the
// stride of those rows, odd so that threads reading a column of rows
// (one key each) hit distinct banks.
type attnTiling struct {
	rows, cols, lanes, per, width, dp int
}

// tiling picks rows and cols, powers of two of at most 32 (and of at
// most the next power of two of ownN and streamN), as large as the
// kernel's threadgroup memory, floats(rows, cols), allows.
func (g attnGeom) tiling(ownN, streamN int, floats func(t attnTiling) int) attnTiling {
	lanes := ceilDiv(g.d, attnLaneDims)
	per := ceilDiv(g.d, lanes)
	t := attnTiling{rows: min(32, pow2AtLeast(ownN)), cols: min(32, pow2AtLeast(streamN)), lanes: lanes, per: per, width: lanes * per, dp: lanes*per | 1}
	for 4*floats(t) > attnSharedBytes {
		switch {
		case t.cols > 16 || (t.cols > 1 && t.rows <= 8):
			t.cols /= 2
		case t.rows > 1:
			t.rows /= 2
		default:
			return t
		}
	}
	return t
}

// pow2AtLeast is the smallest power of two ≥ n (1 for n ≤ 1).
func pow2AtLeast(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// laneDim is output dimension k of this thread's lane.
func (t attnTiling) laneDim(k int) Expr { return add(vr("lane"), i32(k*t.lanes)) }

// stageRows copies rows r0 … r0+n−1 of a [.., rows, d] matrix (the
// matrix's first element at base) into sh as n rows of t.width at stride
// t.dp, zero past d and past the matrix's last row; every thread of tg
// runs it.
func stageRows(sh, buf string, base, r0 Expr, n, rows, d int, t attnTiling, tg int) Stmt {
	e := vr("e_" + sh)
	rr, dd := div(e, i32(t.width)), rem(e, i32(t.width))
	src := add(base, add(mul(add(r0, rr), i32(d)), dd))
	return For{"e_" + sh, lidE, i32(n * t.width), i32(tg), []Stmt{
		store(sh, add(mul(rr, i32(t.dp)), dd), sel(and(lt(dd, i32(d)), lt(add(r0, rr), i32(rows))), load(buf, src), flt(0))),
	}}
}

// stageKeys copies keys k0 … k0+n−1 of one matrix of kᵀ [d, tk] (its first
// element at base) into sh as stageRows does: the threads walk the keys
// fastest, so that they read kᵀ's rows in order.
func stageKeys(sh string, base, k0 Expr, n, tk, d int, t attnTiling, tg int) Stmt {
	e := vr("e_" + sh)
	jj, dd := rem(e, i32(n)), div(e, i32(n))
	src := add(base, add(mul(dd, i32(tk)), add(k0, jj)))
	return For{"e_" + sh, lidE, i32(n * t.width), i32(tg), []Stmt{
		store(sh, add(mul(jj, i32(t.dp)), dd), sel(and(lt(dd, i32(d)), lt(add(k0, jj), i32(tk))), load("kt", src), flt(0))),
	}}
}

// dot is Σ_d a[ra·dp + d]·b[rb·dp + d] over d < n, into variable name.
func dot(name, a string, ra Expr, b string, rb Expr, n, dp int) []Stmt {
	return []Stmt{
		let(name, Float, flt(0)),
		For{"d_" + name, i32(0), i32(n), i32(1), []Stmt{
			set(name, add(vr(name), mul(load(a, add(mul(ra, i32(dp)), vr("d_"+name))), load(b, add(mul(rb, i32(dp)), vr("d_"+name)))))),
		}},
	}
}

// visible is whether query qi sees key kj: both in range and, causal,
// kj ≤ qi.
func (g attnGeom) visible(qi, kj Expr) Expr {
	c := and(lt(qi, i32(g.tq)), lt(kj, i32(g.tk)))
	if g.causal {
		c = and(c, le(kj, qi))
	}
	return c
}

// keep declares float name = the dropout's multiplier (0 or 1/(1−rate))
// of probability (mat, qi, kj), or 1 without dropout.
func (g attnGeom) keep(name string, qi, kj Expr) []Stmt {
	if g.rate <= 0 {
		return []Stmt{let(name, Float, flt(1))}
	}
	idx := add(mul(add(mul(vr("mat"), i32(g.tq)), qi), i32(g.tk)), kj)
	s := hashUniformStmts("u_"+name, idx)
	return append(s, let(name, Float, sel(ge(vr("u_"+name), flt(g.rate)), flt(1/(1-g.rate)), flt(0))))
}

// params are the kernel's parameters with the step arguments first when
// it draws dropout.
func (g attnGeom) params(ps ...Param) []Param {
	if g.rate > 0 {
		return append([]Param{argsParam()}, ps...)
	}
	return ps
}

// fwdTiling is the forward's: queries owned, keys streamed; q, k and v
// rows and the scores tile in threadgroup memory.
func (g attnGeom) fwdTiling() attnTiling {
	return g.tiling(g.tq, g.tk, func(t attnTiling) int { return (t.rows+2*t.cols)*t.dp + t.rows*(t.cols+1) })
}

// attentionFwdKernel is the fused forward: o and lse from q, kᵀ and v
// (the package comment above says how).
func attentionFwdKernel(g attnGeom) *Kernel {
	t := g.fwdTiling()
	R, C, L, D, dp := t.rows, t.cols, t.lanes, g.d, t.dp
	tg := R * L
	blocks := ceilDiv(g.tq, R)
	tiles := ceilDiv(g.tk, C)
	body := []Stmt{
		Shared{"sq", R * dp}, Shared{"sk", C * dp}, Shared{"sv", C * dp}, Shared{"ss", R * (C + 1)},
		let("mat", Int, div(tgidE, i32(blocks))),
		let("q0", Int, mul(rem(tgidE, i32(blocks)), i32(R))),
		let("r", Int, div(lidE, i32(L))),
		let("lane", Int, rem(lidE, i32(L))),
		let("i", Int, add(vr("q0"), vr("r"))),
		stageRows("sq", "q", mul(vr("mat"), i32(g.tq*D)), vr("q0"), R, g.tq, D, t, tg),
		let("m", Float, flt(negHuge)),
		let("l", Float, flt(0)),
	}
	for k := 0; k < t.per; k++ {
		body = append(body, let(fmt.Sprint("o", k), Float, flt(0)))
	}
	// the scores of the tile, a (query, key) pair per thread
	pair := []Stmt{
		let("pr", Int, div(vr("e"), i32(C))),
		let("pj", Int, rem(vr("e"), i32(C))),
	}
	pair = append(pair, dot("acc", "sq", vr("pr"), "sk", vr("pj"), D, dp)...)
	pair = append(pair, store("ss", add(mul(vr("pr"), i32(C+1)), vr("pj")), mul(vr("acc"), flt(g.scale))))
	// the online softmax of row r over the tile
	kj := add(vr("k0"), vr("j"))
	vis := g.visible(vr("i"), kj)
	fold := []Stmt{
		let("mt", Float, vr("m")),
		loop("j", 0, C, 1, set("mt", call(FnMax, vr("mt"), sel(vis, load("ss", add(mul(vr("r"), i32(C+1)), vr("j"))), flt(negHuge))))),
		let("corr", Float, call(FnExp, sub(vr("m"), vr("mt")))),
		set("l", mul(vr("l"), vr("corr"))),
	}
	for k := 0; k < t.per; k++ {
		o := fmt.Sprint("o", k)
		fold = append(fold, set(o, mul(vr(o), vr("corr"))))
	}
	acc := []Stmt{
		let("p", Float, sel(vis, call(FnExp, sub(load("ss", add(mul(vr("r"), i32(C+1)), vr("j"))), vr("mt"))), flt(0))),
		set("l", add(vr("l"), vr("p"))),
	}
	acc = append(acc, g.keep("keep", vr("i"), kj)...)
	acc = append(acc, let("pk", Float, mul(vr("p"), vr("keep"))))
	for k := 0; k < t.per; k++ {
		o := fmt.Sprint("o", k)
		acc = append(acc, set(o, add(vr(o), mul(vr("pk"), load("sv", add(mul(vr("j"), i32(dp)), t.laneDim(k)))))))
	}
	fold = append(fold, For{"j", i32(0), i32(C), i32(1), acc}, set("m", vr("mt")))
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{}, // the previous tile's readers are done
		stageKeys("sk", mul(vr("mat"), i32(D*g.tk)), vr("k0"), C, g.tk, D, t, tg),
		stageRows("sv", "v", mul(vr("mat"), i32(g.tk*D)), vr("k0"), C, g.tk, D, t, tg),
		Barrier{},
		For{"e", lidE, i32(R * C), i32(tg), pair},
		Barrier{},
	}
	tile = append(tile, fold...)
	loopBody := tile
	if g.causal {
		// the tiles past the block's last query hold no visible key
		loopBody = []Stmt{If{Cond: lt(mul(vr("t"), i32(C)), add(vr("q0"), i32(R))), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	fin := []Stmt{let("inv", Float, div(flt(1), vr("l")))}
	for k := 0; k < t.per; k++ {
		d := t.laneDim(k)
		st := store("o", add(mul(add(mul(vr("mat"), i32(g.tq)), vr("i")), i32(D)), d), mul(vr(fmt.Sprint("o", k)), vr("inv")))
		if t.width != D {
			st = when(lt(d, i32(D)), st)
		}
		fin = append(fin, st)
	}
	fin = append(fin, when(eq(vr("lane"), i32(0)), store("lse", add(mul(vr("mat"), i32(g.tq)), vr("i")), add(vr("m"), call(FnLog, vr("l"))))))
	body = append(body, when(lt(vr("i"), i32(g.tq)), fin...))
	n := g.mats * g.tq * D
	return &Kernel{
		Doc:         fmt.Sprintf("fused attention, %s: %d queries × %d keys a tile, %d lanes a query", g, R, C, L),
		Params:      g.params(in("q", n), in("kt", g.mats*D*g.tk), in("v", g.mats*g.tk*D), out("o", n), out("lse", g.mats*g.tq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// attentionDeltaKernel is the backward's first step: delta = rowsum(do∘o),
// a thread per query row.
func attentionDeltaKernel(g attnGeom) *Kernel {
	rows, D := g.mats*g.tq, g.d
	return elementwise(fmt.Sprintf("attention backward's rowsum(do∘o), %d rows of %d", rows, D), rows,
		[]Param{in("o", rows*D), in("dout", rows*D), out("delta", rows)}, func(i Expr) []Stmt {
			return []Stmt{
				let("acc", Float, flt(0)),
				loop("d", 0, D, 1, set("acc", add(vr("acc"), mul(load("dout", add(mul(i, i32(D)), vr("d"))), load("o", add(mul(i, i32(D)), vr("d"))))))),
				store("delta", i, vr("acc")),
			}
		})
}

// bwdPair declares, for pair e of a tile of R queries (from q0) and C keys
// (from k0), pr, pj, the probability p (recomputed from the scores and
// the query's lse in slr) and keep, and ds = p·(keep·do·v − delta), the
// gradient of the scaled score, over threadgroup rows sq, sdo (queries)
// and sk, sv (keys).
func (g attnGeom) bwdPair(t attnTiling, R, C int) []Stmt {
	qi, kj := add(vr("q0"), vr("pr")), add(vr("k0"), vr("pj"))
	s := []Stmt{
		let("pr", Int, div(vr("e"), i32(C))),
		let("pj", Int, rem(vr("e"), i32(C))),
	}
	s = append(s, dot("qk", "sq", vr("pr"), "sk", vr("pj"), g.d, t.dp)...)
	s = append(s, dot("dp", "sdo", vr("pr"), "sv", vr("pj"), g.d, t.dp)...)
	s = append(s, let("p", Float, sel(g.visible(qi, kj), call(FnExp, sub(mul(vr("qk"), flt(g.scale)), load("slse", vr("pr")))), flt(0))))
	s = append(s, g.keep("keep", qi, kj)...)
	return append(s, let("ds", Float, mul(vr("p"), sub(mul(vr("dp"), vr("keep")), load("sdelta", vr("pr"))))))
}

// stageQueryRows stages the backward's query-side rows q0 … q0+R−1: q, do,
// lse and delta.
func (g attnGeom) stageQueryRows(t attnTiling, R, tg int) []Stmt {
	base := mul(vr("mat"), i32(g.tq*g.d))
	rowIn := lt(add(vr("q0"), vr("e_row")), i32(g.tq))
	row := add(mul(vr("mat"), i32(g.tq)), add(vr("q0"), vr("e_row")))
	return []Stmt{
		stageRows("sq", "q", base, vr("q0"), R, g.tq, g.d, t, tg),
		stageRows("sdo", "dout", base, vr("q0"), R, g.tq, g.d, t, tg),
		For{"e_row", lidE, i32(R), i32(tg), []Stmt{
			store("slse", vr("e_row"), sel(rowIn, load("lse", row), flt(0))),
			store("sdelta", vr("e_row"), sel(rowIn, load("delta", row), flt(0))),
		}},
	}
}

// bwdKeysTiling is the key kernel's: keys owned, queries streamed; k, v,
// q and do rows, two R×C tiles and two rows of R in threadgroup memory.
func (g attnGeom) bwdKeysTiling() attnTiling {
	t := g.tiling(g.tk, g.tq, func(t attnTiling) int { return 2*(t.rows+t.cols)*t.dp + 2*t.rows*t.cols + 2*t.cols })
	return t
}

// attentionBwdKeysKernel writes dkᵀ and dv (either may be left out): a
// threadgroup per block of keys, over every tile of queries that sees
// them; each key's lanes sum dv_j = Σ_i p_ij·keep_ij·do_i and
// dk_j = scale·Σ_i ds_ij·q_i.
func attentionBwdKeysKernel(g attnGeom, wantDK, wantDV bool) *Kernel {
	t := g.bwdKeysTiling()
	// t.rows are the keys owned, t.cols the queries of a tile
	KB, QB, L, D, dp := t.rows, t.cols, t.lanes, g.d, t.dp
	tg := KB * L
	blocks := ceilDiv(g.tk, KB)
	tiles := ceilDiv(g.tq, QB)
	body := []Stmt{
		Shared{"sk", KB * dp}, Shared{"sv", KB * dp}, Shared{"sq", QB * dp}, Shared{"sdo", QB * dp},
		Shared{"sp", QB * KB}, Shared{"sds", QB * KB}, Shared{"slse", QB}, Shared{"sdelta", QB},
		let("mat", Int, div(tgidE, i32(blocks))),
		let("k0", Int, mul(rem(tgidE, i32(blocks)), i32(KB))),
		let("r", Int, div(lidE, i32(L))),
		let("lane", Int, rem(lidE, i32(L))),
		let("j", Int, add(vr("k0"), vr("r"))),
		stageKeys("sk", mul(vr("mat"), i32(D*g.tk)), vr("k0"), KB, g.tk, D, t, tg),
		stageRows("sv", "v", mul(vr("mat"), i32(g.tk*D)), vr("k0"), KB, g.tk, D, t, tg),
	}
	for k := 0; k < t.per; k++ {
		body = append(body, let(fmt.Sprint("dk", k), Float, flt(0)), let(fmt.Sprint("dv", k), Float, flt(0)))
	}
	pair := g.bwdPair(t, QB, KB)
	// pair e: query pr of the tile, key pj of the block; stored at pr·KB + pj
	pair = append(pair, store("sp", vr("e"), mul(vr("p"), vr("keep"))), store("sds", vr("e"), vr("ds")))
	var acc []Stmt
	for k := 0; k < t.per; k++ {
		d := t.laneDim(k)
		if wantDV {
			acc = append(acc, set(fmt.Sprint("dv", k), add(vr(fmt.Sprint("dv", k)), mul(load("sp", add(mul(vr("x"), i32(KB)), vr("r"))), load("sdo", add(mul(vr("x"), i32(dp)), d))))))
		}
		if wantDK {
			acc = append(acc, set(fmt.Sprint("dk", k), add(vr(fmt.Sprint("dk", k)), mul(load("sds", add(mul(vr("x"), i32(KB)), vr("r"))), load("sq", add(mul(vr("x"), i32(dp)), d))))))
		}
	}
	tile := []Stmt{
		let("q0", Int, mul(vr("t"), i32(QB))),
		Barrier{},
	}
	tile = append(tile, g.stageQueryRows(t, QB, tg)...)
	tile = append(tile,
		Barrier{},
		For{"e", lidE, i32(QB * KB), i32(tg), pair},
		Barrier{},
		For{"x", i32(0), i32(QB), i32(1), acc},
	)
	loopBody := tile
	if g.causal {
		// a tile of queries all before the block's first key sees none of it
		loopBody = []Stmt{If{Cond: ge(add(mul(vr("t"), i32(QB)), i32(QB-1)), vr("k0")), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	var fin []Stmt
	for k := 0; k < t.per; k++ {
		d := t.laneDim(k)
		var st []Stmt
		if wantDV {
			st = append(st, store("dv", add(mul(add(mul(vr("mat"), i32(g.tk)), vr("j")), i32(D)), d), vr(fmt.Sprint("dv", k))))
		}
		if wantDK {
			st = append(st, store("dkt", add(mul(add(mul(vr("mat"), i32(D)), d), i32(g.tk)), vr("j")), mul(vr(fmt.Sprint("dk", k)), flt(g.scale))))
		}
		if t.width != D {
			st = []Stmt{when(lt(d, i32(D)), st...)}
		}
		fin = append(fin, st...)
	}
	body = append(body, when(lt(vr("j"), i32(g.tk)), fin...))
	nq := g.mats * g.tq * D
	params := []Param{in("q", nq), in("kt", g.mats*D*g.tk), in("v", g.mats*g.tk*D), in("dout", nq), in("lse", g.mats*g.tq), in("delta", g.mats*g.tq)}
	if wantDK {
		params = append(params, out("dkt", g.mats*D*g.tk))
	}
	if wantDV {
		params = append(params, out("dv", g.mats*g.tk*D))
	}
	return &Kernel{
		Doc:    fmt.Sprintf("fused attention backward, dk and dv, %s: %d keys × %d queries a tile, %d lanes a key", g, KB, QB, L),
		Params: g.params(params...), Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// bwdQueriesTiling is the query kernel's: queries owned, keys streamed.
func (g attnGeom) bwdQueriesTiling() attnTiling {
	return g.tiling(g.tq, g.tk, func(t attnTiling) int { return 2*(t.rows+t.cols)*t.dp + t.rows*(t.cols+1) + 2*t.rows })
}

// attentionBwdQueriesKernel writes dq: a threadgroup per block of queries,
// over every tile of keys they see; each query's lanes sum
// dq_i = scale·Σ_j ds_ij·k_j.
func attentionBwdQueriesKernel(g attnGeom) *Kernel {
	t := g.bwdQueriesTiling()
	R, C, L, D, dp := t.rows, t.cols, t.lanes, g.d, t.dp
	tg := R * L
	blocks := ceilDiv(g.tq, R)
	tiles := ceilDiv(g.tk, C)
	body := []Stmt{
		Shared{"sq", R * dp}, Shared{"sdo", R * dp}, Shared{"sk", C * dp}, Shared{"sv", C * dp},
		Shared{"sds", R * (C + 1)}, Shared{"slse", R}, Shared{"sdelta", R},
		let("mat", Int, div(tgidE, i32(blocks))),
		let("q0", Int, mul(rem(tgidE, i32(blocks)), i32(R))),
		let("r", Int, div(lidE, i32(L))),
		let("lane", Int, rem(lidE, i32(L))),
		let("i", Int, add(vr("q0"), vr("r"))),
	}
	body = append(body, g.stageQueryRows(t, R, tg)...)
	for k := 0; k < t.per; k++ {
		body = append(body, let(fmt.Sprint("dq", k), Float, flt(0)))
	}
	pair := g.bwdPair(t, R, C)
	pair = append(pair, store("sds", add(mul(vr("pr"), i32(C+1)), vr("pj")), vr("ds")))
	var acc []Stmt
	for k := 0; k < t.per; k++ {
		acc = append(acc, set(fmt.Sprint("dq", k), add(vr(fmt.Sprint("dq", k)), mul(load("sds", add(mul(vr("r"), i32(C+1)), vr("x"))), load("sk", add(mul(vr("x"), i32(dp)), t.laneDim(k)))))))
	}
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{},
		stageKeys("sk", mul(vr("mat"), i32(D*g.tk)), vr("k0"), C, g.tk, D, t, tg),
		stageRows("sv", "v", mul(vr("mat"), i32(g.tk*D)), vr("k0"), C, g.tk, D, t, tg),
		Barrier{},
		For{"e", lidE, i32(R * C), i32(tg), pair},
		Barrier{},
		For{"x", i32(0), i32(C), i32(1), acc},
	}
	loopBody := tile
	if g.causal {
		loopBody = []Stmt{If{Cond: lt(mul(vr("t"), i32(C)), add(vr("q0"), i32(R))), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	var fin []Stmt
	for k := 0; k < t.per; k++ {
		d := t.laneDim(k)
		st := store("dq", add(mul(add(mul(vr("mat"), i32(g.tq)), vr("i")), i32(D)), d), mul(vr(fmt.Sprint("dq", k)), flt(g.scale)))
		if t.width != D {
			st = when(lt(d, i32(D)), st)
		}
		fin = append(fin, st)
	}
	body = append(body, when(lt(vr("i"), i32(g.tq)), fin...))
	nq := g.mats * g.tq * D
	return &Kernel{
		Doc:         fmt.Sprintf("fused attention backward, dq, %s: %d queries × %d keys a tile, %d lanes a query", g, R, C, L),
		Params:      g.params(in("q", nq), in("kt", g.mats*D*g.tk), in("v", g.mats*g.tk*D), in("dout", nq), in("lse", g.mats*g.tq), in("delta", g.mats*g.tq), out("dq", nq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}
