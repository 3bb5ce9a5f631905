package gpu

import (
	"fmt"
	"math"
)

// The fused attention on register fragments (Dialect.Fragments:
// mma.sync m16n8k16 with bfloat16 operands and float32 sums on CUDA),
// after FlashAttention-2, for plans whose attention steps are bf16.
//
// The forward runs a threadgroup per (matrix, block of up to 64
// queries), a warp per 16 of them. The block's queries are staged once
// in threadgroup memory as bfloat16 pairs, and each warp loads its A
// fragments of q from there and keeps them in registers. Per tile of
// keys the threads stage k (pairs along the head dimension) and vᵀ
// (pairs along the keys) once, rounded; each warp multiplies its q by
// kᵀ into accumulator fragments of scores, and then, in those registers,
// masks and scales them, folds them into its rows' running maximum (the
// four lanes that share a row agree through two xor shuffles) and sum,
// draws the dropout, and packs the probabilities straight into the A
// fragments of p·v: an accumulator's pairs are, lane by lane, an A
// fragment's (accToA). o stays in accumulator fragments to the end.
// Nothing goes through threadgroup memory but the staged operands, and
// the only barriers are the staging's. The scores are kept in units of
// log2(e) (scale2), so a probability is one exp2; a tile whose every
// pair is visible runs without the mask's compares (each kernel's
// compute closure is written twice, masked and not).

// AttentionFragments is whether the fused attention of head dimension
// headDim runs on d's register fragments in a bf16 plan: its forward
// does wherever d has fragments of the shape the kernels are written
// for (the head dimension padded to 16 with zeros); its backward up to
// head dimensions of fragBwdMaxDim, past which the lowering keeps the
// tensor-tile or SIMT kernels.
func AttentionFragments(d *Dialect, headDim int) bool {
	return fragShapeOK(d.Fragments) && headDim <= 128
}

// scale2 is the scores' scale in units of log2(e): the fragment kernels'
// softmax keeps scores, maxima and log-sum-exps (but the one written
// out) so, and makes each probability with one exp2.
func (g attnGeom) scale2() float32 { return float32(float64(g.scale) * math.Log2E) }

// fragShapeOK is whether f has the shape the fragment kernels are
// written for: m16n8k16 over 32 lanes, A and B registers of two
// elements along K, accumulator rows that depend on the lane's group
// only (so the lanes sharing a row differ in the two low bits), and
// accumulator pairs that are A's registers (accToA).
func fragShapeOK(f *FragmentDialect) bool {
	if f == nil || f.M != 16 || f.N != 8 || f.K != 16 || f.Lanes != 32 || f.ElemsPerReg != [3]int{2, 2, 1} ||
		len(f.Layout[FragA]) != 8 || len(f.Layout[FragB]) != 4 || len(f.Layout[FragC]) != 4 {
		return false
	}
	for _, p := range f.Layout[FragC] {
		if p.RowT != 0 || p.RowG != 1 {
			return false
		}
	}
	for r := FragA; r <= FragB; r++ {
		for reg := 0; reg < f.Regs(r); reg++ {
			lo, hi := f.Layout[r][2*reg], f.Layout[r][2*reg+1]
			step := FragPlace{Col: 1}
			if r == FragB {
				step = FragPlace{Row: 1}
			}
			if hi != (FragPlace{lo.RowG + step.RowG, lo.RowT, lo.Row + step.Row, lo.ColG, lo.ColT, lo.Col + step.Col}) {
				return false
			}
			// the pair starts at an even K for every lane
			kg, kt, k := lo.ColG, lo.ColT, lo.Col
			if r == FragB {
				kg, kt, k = lo.RowG, lo.RowT, lo.Row
			}
			if kg%2 != 0 || kt%2 != 0 || k%2 != 0 {
				return false
			}
		}
	}
	_, ok := accToA(f)
	return ok
}

// accSource is where an element of an A fragment comes from in two
// accumulators side by side (columns 0 … N−1 and N … 2N−1): accumulator
// side, element elem, in the same lane.
type accSource struct{ side, elem int }

// accToA maps each element of an A fragment to the element of two
// accumulators side by side that lies at the same row and column in
// the same lane, for every lane; ok false where one has none.
func accToA(f *FragmentDialect) (src []accSource, ok bool) {
	for _, a := range f.Layout[FragA] {
		found := false
		for side := 0; side < 2 && !found; side++ {
			for e, c := range f.Layout[FragC] {
				c.Col += side * f.N
				if c == a {
					src = append(src, accSource{side, e})
					found = true
					break
				}
			}
		}
		if !found {
			return nil, false
		}
	}
	return src, true
}

// laneLin is cg·fg + ct·ft + c, fg and ft the lane's group and place in it.
func laneLin(cg, ct, c int) Expr {
	var e Expr
	term := func(x Expr) {
		if e == nil {
			e = x
		} else {
			e = add(e, x)
		}
	}
	for _, t := range []struct {
		k int
		v string
	}{{cg, "fg"}, {ct, "ft"}} {
		switch t.k {
		case 0:
		case 1:
			term(vr(t.v))
		default:
			term(mul(i32(t.k), vr(t.v)))
		}
	}
	if c != 0 || e == nil {
		term(i32(c))
	}
	return e
}

// fragRow and fragCol are the row and column of element i of this
// lane's fragment of role r.
func fragRow(f *FragmentDialect, r FragRole, i int) Expr {
	p := f.Layout[r][i]
	return laneLin(p.RowG, p.RowT, p.Row)
}

func fragCol(f *FragmentDialect, r FragRole, i int) Expr {
	p := f.Layout[r][i]
	return laneLin(p.ColG, p.ColT, p.Col)
}

// fragPairAt is the word of register reg of an operand fragment (A or
// B) in a SharedPairs array whose lines are the fragment's M (A) or N
// (B) index and whose words are pairs along K: line0 + the register's
// line, times stride, plus kw0 + the register's K / 2.
func fragPairAt(f *FragmentDialect, r FragRole, reg int, line0 Expr, stride int, kw0 Expr) Expr {
	p := f.Layout[r][2*reg]
	line, k := laneLin(p.RowG, p.RowT, p.Row), laneLin(p.ColG/2, p.ColT/2, p.Col/2)
	if r == FragB {
		line, k = laneLin(p.ColG, p.ColT, p.Col), laneLin(p.RowG/2, p.RowT/2, p.Row/2)
	}
	return add(mul(add(line0, line), i32(stride)), add(kw0, k))
}

// fragRowSlot is which of this lane's accumulator rows element i of an
// accumulator lies in: its distinct row offsets, in order.
func fragRowSlots(f *FragmentDialect) (slot []int, rows []int) {
	for _, p := range f.Layout[FragC] {
		s := -1
		for j, r := range rows {
			if r == p.Row {
				s = j
			}
		}
		if s < 0 {
			s = len(rows)
			rows = append(rows, p.Row)
		}
		slot = append(slot, s)
	}
	return slot, rows
}

// fragBlock is a fragment kernel's block: warps of 16 rows each,
// columns streamed cols at a time, the head dimension padded to dp (a
// multiple of K).
type fragBlock struct{ warps, rows, cols, dp int }

// pairStride is the words of a staged line of n elements in pairs: n/2
// and 4 more, so that the 8 lines and 4 words a warp's fragment load
// reads fall in 32 distinct banks (n/2 + 4 is 4 mod 8 for the n used).
func pairStride(n int) int { return n/2 + 4 }

// fragFwdWords is the threadgroup words of the fragment forward with
// block b: q [rows, dp] and k [cols, dp] in pairs along dp, vᵀ [dp,
// cols] in pairs along the keys.
func (b fragBlock) fragFwdWords() int {
	return b.rows*pairStride(b.dp) + b.cols*pairStride(b.dp) + b.dp*pairStride(b.cols)
}

// fragFwdBlock is the fragment forward's block: a warp per 16 queries
// up to 4, tiles of 64, 32 or 16 keys (not past the keys, in whole
// fragments), the largest that fits; ok false where none does or f
// is not the shape the kernel is written for.
func (g attnGeom) fragFwdBlock(f *FragmentDialect) (b fragBlock, ok bool) {
	if !fragShapeOK(f) || g.d > 128 {
		return b, false
	}
	warps := min(4, ceilDiv(g.tq, 16))
	dp := ceilDiv(g.d, 16) * 16
	for cols := min(64, max(16, pow2AtLeast(g.tk))); cols >= 16; cols /= 2 {
		b = fragBlock{warps: warps, rows: 16 * warps, cols: cols, dp: dp}
		if 4*b.fragFwdWords() <= g.tiling.shared {
			return b, true
		}
	}
	return b, false
}

// stagePairs stores into SharedPairs array sh, every thread of tg
// taking words (line, w) for line < lines, w < words, the fastest of the
// two first where lineFast: sh[line·stride + w] = PackBF16(lo, hi) of
// the values src gives.
func stagePairs(sh string, lines, words, stride, tg int, lineFast bool, src func(line, w Expr) (lo, hi Expr)) Stmt {
	e := vr("e_" + sh)
	line, w := div(e, i32(words)), rem(e, i32(words))
	if lineFast {
		line, w = rem(e, i32(lines)), div(e, i32(lines))
	}
	lo, hi := src(line, w)
	return For{"e_" + sh, lidE, i32(lines * words), i32(tg), []Stmt{store(sh, add(mul(line, i32(stride)), w), PackBF16{lo, hi})}}
}

// stageRowPairs stages rows r0+r, r < lines, of operand buf (rows a matrix,
// token-major or not; q, do, v, and k where it is token-major) into
// SharedPairs array sh, a line a row with pairs along the dimensions,
// zero past d and past the matrix's last row: where d is a multiple of 4
// four dimensions a thread at a time, read as one 16-byte access
// (Load4), else pairs of scalar loads.
func (g attnGeom) stageRowPairs(sh, buf string, r0 Expr, lines, rows, limit, dp, stride, tg int) Stmt {
	rowOK := func(r Expr) Expr { return below(add(r0, r), rows, limit) }
	at := func(r, dd Expr) Expr { return add(g.rowAt(vr("mat"), add(r0, r), rows), dd) }
	if g.d%4 != 0 {
		return stagePairs(sh, lines, dp/2, stride, tg, false, func(r, w Expr) (Expr, Expr) {
			v := func(dd Expr) Expr { return masked(all(rowOK(r), below(dd, g.d, dp)), load(buf, at(r, dd)), flt(0)) }
			return v(mul(w, i32(2))), v(add(mul(w, i32(2)), i32(1)))
		})
	}
	e := vr("e_" + sh)
	q := dp / 4
	r, d4 := div(e, i32(q)), mul(rem(e, i32(q)), i32(4))
	w := add(mul(r, i32(stride)), mul(rem(e, i32(q)), i32(2)))
	x := [4]string{sh + "_x0", sh + "_x1", sh + "_x2", sh + "_x3"}
	body := []Stmt{
		Load4{buf, at(r, d4), x},
		store(sh, w, PackBF16{vr(x[0]), vr(x[1])}),
		store(sh, add(w, i32(1)), PackBF16{vr(x[2]), vr(x[3])}),
	}
	if c := all(rowOK(r), below(d4, g.d, dp)); c != nil {
		body = []Stmt{If{Cond: c, Then: body, Else: []Stmt{store(sh, w, u32(0)), store(sh, add(w, i32(1)), u32(0))}}}
	}
	return For{"e_" + sh, lidE, i32(lines * q), i32(tg), body}
}

// stageKeys stages keys k0+j, j < lines, of k (or kᵀ) into SharedPairs
// array sh as stageRowPairs does (kᵀ by pairs of scalar loads, the threads
// taking the keys fastest, along kᵀ's rows).
func (g attnGeom) stageKeys(sh string, lines, limit, dp, stride, tg int) Stmt {
	if g.heads > 0 {
		return g.stageRowPairs(sh, g.kName(), vr("k0"), lines, g.tk, limit, dp, stride, tg)
	}
	kv := func(j, dd Expr) Expr {
		return masked(all(below(add(vr("k0"), j), g.tk, limit), below(dd, g.d, dp)), load(g.kName(), g.keyAt(vr("mat"), add(vr("k0"), j), dd)), flt(0))
	}
	return stagePairs(sh, lines, dp/2, stride, tg, true, func(j, w Expr) (Expr, Expr) {
		return kv(j, mul(w, i32(2))), kv(j, add(mul(w, i32(2)), i32(1)))
	})
}

// attentionFwdFragKernel is the fused forward on register fragments
// (the comment at the top of this file says how).
func attentionFwdFragKernel(g attnGeom, f *FragmentDialect) *Kernel {
	b, _ := g.fragFwdBlock(f)
	R, C, D, dp := b.rows, b.cols, g.d, b.dp
	qs, ks, vs := pairStride(dp), pairStride(dp), pairStride(C)
	tg := 32 * b.warps
	blocks, tiles := ceilDiv(g.tq, R), ceilDiv(g.tk, C)
	src, _ := accToA(f)
	slot, rowOffs := fragRowSlots(f)
	nC := len(f.Layout[FragC])
	body := []Stmt{
		SharedPairs{"sq", R * qs}, SharedPairs{"sk", C * ks}, SharedPairs{"sv", dp * vs},
		let("mat", Int, div(tgidE, i32(blocks))),
		let("q0", Int, mul(rem(tgidE, i32(blocks)), i32(R))),
		let("warp", Int, div(lidE, i32(32))),
		let("lane", Int, rem(lidE, i32(32))),
		let("fg", Int, div(vr("lane"), i32(4))),
		let("ft", Int, rem(vr("lane"), i32(4))),
	}
	// elem is x[at] where ok holds (nil: always), else 0
	elem := func(ok Expr, x Expr) Expr { return masked(ok, x, flt(0)) }
	body = append(body, g.stageRowPairs("sq", "q", vr("q0"), R, g.tq, blocks*R, dp, qs, tg), Barrier{})
	// the warp's queries as A fragments, dp/16 of them, for every tile
	for kk := 0; kk < dp/16; kk++ {
		qa := nm("qa", kk)
		body = append(body, FragDecl{qa, FragA})
		for reg := 0; reg < f.Regs(FragA); reg++ {
			body = append(body, FragSet{qa, reg, load("sq", fragPairAt(f, FragA, reg, mul(vr("warp"), i32(16)), qs, i32(kk*8)))})
		}
	}
	for h := range rowOffs {
		body = append(body, let(nm("m", h), Float, flt(negHuge)), let(nm("l", h), Float, flt(0)))
	}
	for n := 0; n < dp/8; n++ {
		body = append(body, FragDecl{nm("o", n), FragC})
		for i := 0; i < nC; i++ {
			body = append(body, FragSet{nm("o", n), i, flt(0)})
		}
	}
	qi := func(i int) Expr { return add(vr("q0"), add(mul(vr("warp"), i32(16)), fragRow(f, FragC, i))) }
	kj := func(n, i int) Expr { return add(vr("k0"), add(i32(n*8), fragCol(f, FragC, i))) }
	vis := func(n, i int) Expr { return g.visible(qi(i), kj(n, i), blocks*R, tiles*C) }
	vv := func(j, dd Expr) Expr {
		return elem(all(below(add(vr("k0"), j), g.tk, tiles*C), below(dd, g.d, dp)), load("v", add(g.rowAt(vr("mat"), add(vr("k0"), j), g.tk), dd)))
	}
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{}, // the previous tile's readers are done
		// k: a line a key, pairs along the head dimension (kᵀ read along
		// its rows, the keys, where it is kᵀ)
		g.stageKeys("sk", C, tiles*C, dp, ks, tg),
		// vᵀ: a line a dimension, pairs along the keys
		stagePairs("sv", dp, C/2, vs, tg, true, func(dd, w Expr) (Expr, Expr) {
			return vv(mul(w, i32(2)), dd), vv(add(mul(w, i32(2)), i32(1)), dd)
		}),
		Barrier{},
		FragDecl{"kb", FragB}, FragDecl{"pa", FragA}, FragDecl{"vb", FragB},
	}
	// compute is the tile's products and softmax, with the mask vis
	// (nil: every pair of the tile visible)
	compute := func(vis func(n, i int) Expr) []Stmt {
		var tile []Stmt
		// the warp's 16×C scores q·kᵀ
		for n := 0; n < C/8; n++ {
			tile = append(tile, FragDecl{nm("s", n), FragC})
			for i := 0; i < nC; i++ {
				tile = append(tile, FragSet{nm("s", n), i, flt(0)})
			}
		}
		for kk := 0; kk < dp/16; kk++ {
			for n := 0; n < C/8; n++ {
				for reg := 0; reg < f.Regs(FragB); reg++ {
					tile = append(tile, FragSet{"kb", reg, load("sk", fragPairAt(f, FragB, reg, i32(n*8), ks, i32(kk*8)))})
				}
				tile = append(tile, FragMMA{nm("s", n), nm("qa", kk), "kb"})
			}
		}
		// masked and scaled; each row's maximum over its four lanes
		for h := range rowOffs {
			tile = append(tile, let(nm("mx", h), Float, flt(negHuge)))
		}
		for n := 0; n < C/8; n++ {
			for i := 0; i < nC; i++ {
				sc := nm("sc", n, i)
				tile = append(tile,
					let(sc, Float, masked(vis(n, i), mul(FragGet{nm("s", n), i}, flt(g.scale2())), flt(negHuge))),
					set(nm("mx", slot[i]), call(FnMax, vr(nm("mx", slot[i])), vr(sc))))
			}
		}
		for h := range rowOffs {
			mx := nm("mx", h)
			tile = append(tile,
				set(mx, call(FnMax, vr(mx), ShuffleXor{vr(mx), 1})),
				set(mx, call(FnMax, vr(mx), ShuffleXor{vr(mx), 2})),
				let(nm("mt", h), Float, call(FnMax, vr(nm("m", h)), vr(mx))),
				let(nm("ls", h), Float, flt(0)))
		}
		// the probabilities, their partial sums, and p·keep
		for n := 0; n < C/8; n++ {
			for i := 0; i < nC; i++ {
				p, keep := nm("p", n, i), nm("keep", n, i)
				tile = append(tile,
					let(p, Float, masked(vis(n, i), call(FnExp2, sub(vr(nm("sc", n, i)), vr(nm("mt", slot[i])))), flt(0))),
					set(nm("ls", slot[i]), add(vr(nm("ls", slot[i])), vr(p))))
				tile = append(tile, g.keep(keep, qi(i), kj(n, i))...)
			}
		}
		// the online softmax's correction
		for h := range rowOffs {
			corr := nm("corr", h)
			tile = append(tile,
				let(corr, Float, call(FnExp2, sub(vr(nm("m", h)), vr(nm("mt", h))))),
				set(nm("l", h), add(mul(vr(nm("l", h)), vr(corr)), vr(nm("ls", h)))),
				set(nm("m", h), vr(nm("mt", h))))
		}
		for n := 0; n < dp/8; n++ {
			for i := 0; i < nC; i++ {
				tile = append(tile, FragSet{nm("o", n), i, mul(FragGet{nm("o", n), i}, vr(nm("corr", slot[i])))})
			}
		}
		// o += (p·keep)·v: the scores' accumulators, two side by side, are
		// the A fragment of 16 keys
		pk := func(n, i int) Expr { return mul(vr(nm("p", n, i)), vr(nm("keep", n, i))) }
		for kk := 0; kk < C/16; kk++ {
			for reg := 0; reg < f.Regs(FragA); reg++ {
				lo, hi := src[2*reg], src[2*reg+1]
				tile = append(tile, FragSet{"pa", reg, PackBF16{pk(2*kk+lo.side, lo.elem), pk(2*kk+hi.side, hi.elem)}})
			}
			for n := 0; n < dp/8; n++ {
				for reg := 0; reg < f.Regs(FragB); reg++ {
					tile = append(tile, FragSet{"vb", reg, load("sv", fragPairAt(f, FragB, reg, i32(n*8), vs, i32(kk*8)))})
				}
				tile = append(tile, FragMMA{nm("o", n), "pa", "vb"})
			}
		}
		return tile
	}
	body = append(body, g.keyTiles(tile, compute(func(n, i int) Expr { return g.unpadded(kj(n, i), tiles*C) }), compute(vis), R, C, tiles))
	// each row's sum over its four lanes; o and the log-sum-exp
	var lses []Expr // each row slot's log-sum-exp
	for h := range rowOffs {
		l := nm("l", h)
		body = append(body,
			set(l, add(vr(l), ShuffleXor{vr(l), 1})),
			set(l, add(vr(l), ShuffleXor{vr(l), 2})))
		norm, lse := g.rowEnd(nm("inv", h), vr(l), func() Expr { return add(mul(vr(nm("m", h)), flt(math.Ln2)), call(FnLog, vr(l))) })
		body = append(body, norm)
		lses = append(lses, lse)
	}
	for n := 0; n < dp/8; n++ {
		for i := 0; i < nC; i++ {
			dim := add(i32(n*8), fragCol(f, FragC, i))
			st := store("o", add(g.rowAt(vr("mat"), qi(i), g.tq), dim), mul(FragGet{nm("o", n), i}, vr(nm("inv", slot[i]))))
			if c := all(below(qi(i), g.tq, blocks*R), below(dim, D, dp)); c != nil {
				st = when(c, st)
			}
			body = append(body, st)
		}
	}
	for h, off := range rowOffs {
		row := add(vr("q0"), add(mul(vr("warp"), i32(16)), laneLin(1, 0, off)))
		body = append(body, when(all(eq(vr("ft"), i32(0)), below(row, g.tq, blocks*R)),
			store("lse", add(mul(vr("mat"), i32(g.tq)), row), lses[h])))
	}
	n := g.mats * g.tq * D
	return &Kernel{
		Doc: fmt.Sprintf("fused attention on register fragments, %s: %d queries × %d keys a tile, a warp per 16 queries",
			g, R, C),
		Params:      g.params(in("q", n), in(g.kName(), g.mats*D*g.tk), in("v", g.mats*g.tk*D), out("o", n), out("lse", g.mats*g.tq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// The backward on register fragments recomputes the probabilities from
// q, kᵀ and the forward's log-sum-exp, as the other kernels do, in two
// kernels after attention_delta's delta = rowsum(do∘o): dk and dv by a
// threadgroup per (matrix, block of keys), a warp per 16 keys, over
// tiles of queries; dq by a threadgroup per (matrix, block of queries),
// a warp per 16 queries, over tiles of keys. Each warp keeps its rows'
// operands (k and v, or q and do) as A fragments and its gradients as
// accumulators for the whole kernel; per tile the threads stage the
// other side once as bfloat16 pairs, in both orientations where a
// product reads it along each axis; the probabilities, the dropout and
// ds = p·(keep·dp − delta) are computed in the accumulators' registers,
// which then are the A fragments of the next products (accToA). Every
// sum is one warp's, in a fixed order: no atomics.

// fragAFrags declares A fragments name0 … name{dp/16−1} of the warp's 16
// lines (warp·16 …) of SharedPairs array sh (stride words a line,
// pairs along K), K 16 at a time.
func fragAFrags(f *FragmentDialect, name, sh string, stride, dp int) []Stmt {
	var s []Stmt
	for kk := 0; kk < dp/16; kk++ {
		a := nm(name, kk)
		s = append(s, FragDecl{a, FragA})
		for reg := 0; reg < f.Regs(FragA); reg++ {
			s = append(s, FragSet{a, reg, load(sh, fragPairAt(f, FragA, reg, mul(vr("warp"), i32(16)), stride, i32(kk*8)))})
		}
	}
	return s
}

// fragZeros declares accumulators name0 … name{n−1}, zero.
func fragZeros(f *FragmentDialect, name string, n int) []Stmt {
	var s []Stmt
	for j := 0; j < n; j++ {
		s = append(s, FragDecl{nm(name, j), FragC})
		for i := range f.Layout[FragC] {
			s = append(s, FragSet{nm(name, j), i, flt(0)})
		}
	}
	return s
}

// fragProduct adds to accumulators acc0 … acc{nOut−1} (8 columns each)
// the product of the A fragments a(kk), kk < nK, by B fragments read
// from SharedPairs array sh (stride words a line; line n·8 + the
// register's column, word kk·8 + the register's K/2), through the B
// fragment b.
func fragProduct(f *FragmentDialect, acc string, nOut, nK int, a func(kk int) string, b, sh string, stride int) []Stmt {
	var s []Stmt
	for kk := 0; kk < nK; kk++ {
		for n := 0; n < nOut; n++ {
			for reg := 0; reg < f.Regs(FragB); reg++ {
				s = append(s, FragSet{b, reg, load(sh, fragPairAt(f, FragB, reg, i32(n*8), stride, i32(kk*8)))})
			}
			s = append(s, FragMMA{nm(acc, n), a(kk), b})
		}
	}
	return s
}

// fragPackA sets A fragment a, for kk, from the accumulators' values
// v(n, i) of columns kk·16 … kk·16+15 (accumulators 2kk and 2kk+1).
func fragPackA(f *FragmentDialect, a string, kk int, v func(n, i int) Expr) []Stmt {
	src, _ := accToA(f)
	var s []Stmt
	for reg := 0; reg < f.Regs(FragA); reg++ {
		lo, hi := src[2*reg], src[2*reg+1]
		s = append(s, FragSet{a, reg, PackBF16{v(2*kk+lo.side, lo.elem), v(2*kk+hi.side, hi.elem)}})
	}
	return s
}

// fragBwdMaxDim is the largest head dimension the fragment backward
// takes: past it a warp's operands and gradients (four dp-wide rows of
// fragments) would not stay in registers; the lowering keeps the other
// kernels.
const fragBwdMaxDim = 64

// fragKeysWords is the threadgroup words of the fragment key kernel
// with block b (rows keys, cols queries a tile): k and v of the block
// (lines of keys), q and do of the tile as lines of queries and as lines
// of dimensions, and the tile's lse and delta.
func (b fragBlock) fragKeysWords() int {
	return 2*b.rows*pairStride(b.dp) + 2*b.cols*pairStride(b.dp) + 2*b.dp*pairStride(b.cols) + 2*b.cols
}

// fragKeysBlock is the fragment key kernel's block: a warp per 16 keys
// up to 4, tiles of 32 or 16 queries, the largest that fits.
func (g attnGeom) fragKeysBlock(f *FragmentDialect) (b fragBlock, ok bool) {
	if !fragShapeOK(f) || g.d > fragBwdMaxDim {
		return b, false
	}
	warps := min(4, ceilDiv(g.tk, 16))
	dp := ceilDiv(g.d, 16) * 16
	for cols := min(32, max(16, pow2AtLeast(g.tq))); cols >= 16; cols /= 2 {
		b = fragBlock{warps: warps, rows: 16 * warps, cols: cols, dp: dp}
		if 4*b.fragKeysWords() <= g.tiling.shared {
			return b, true
		}
	}
	return b, false
}

// fragIDs declares mat, the block's first row r0, the warp, the lane and
// its group fg and place ft in it.
func fragIDs(r0 string, blocks, rows int) []Stmt {
	return []Stmt{
		let("mat", Int, div(tgidE, i32(blocks))),
		let(r0, Int, mul(rem(tgidE, i32(blocks)), i32(rows))),
		let("warp", Int, div(lidE, i32(32))),
		let("lane", Int, rem(lidE, i32(32))),
		let("fg", Int, div(vr("lane"), i32(4))),
		let("ft", Int, rem(vr("lane"), i32(4))),
	}
}

// stageBoth stages rows q0 … q0+n−1 of operand buf (the queries' q or
// do) twice: into lines, a line a row with pairs along the dimensions
// (stageRowPairs), and into cols, a line a dimension with pairs along
// the rows; zero past d and past the last query (limit bounds the rows
// the kernel walks).
func (g attnGeom) stageBoth(lines, cols, buf string, n, limit, dp, tg int) []Stmt {
	x := func(r, dd Expr) Expr {
		return masked(all(below(add(vr("q0"), r), g.tq, limit), below(dd, g.d, dp)), load(buf, add(g.rowAt(vr("mat"), add(vr("q0"), r), g.tq), dd)), flt(0))
	}
	two := func(w Expr) (Expr, Expr) { return mul(w, i32(2)), add(mul(w, i32(2)), i32(1)) }
	return []Stmt{
		g.stageRowPairs(lines, buf, vr("q0"), n, g.tq, limit, dp, pairStride(dp), tg),
		stagePairs(cols, dp, n/2, pairStride(n), tg, true, func(dd, w Expr) (Expr, Expr) {
			lo, hi := two(w)
			return x(lo, dd), x(hi, dd)
		}),
	}
}

// attentionBwdKeysFragKernel writes dkᵀ (or dk) and dv, either may be
// left out, on register fragments: per tile of queries, the warp's
// scores sᵀ = k·qᵀ and dpᵀ = v·doᵀ (16 keys × cols queries) in
// accumulators, p·keep and ds in their registers, then dv += (p·keep)ᵀ·do
// and dk += dsᵀ·q.
func attentionBwdKeysFragKernel(g attnGeom, f *FragmentDialect, wantDK, wantDV bool) *Kernel {
	b, _ := g.fragKeysBlock(f)
	KB, QB, D, dp := b.rows, b.cols, g.d, b.dp
	ds := pairStride(dp)
	tg := 32 * b.warps
	blocks, tiles := ceilDiv(g.tk, KB), ceilDiv(g.tq, QB)
	nC := len(f.Layout[FragC])
	body := []Stmt{
		SharedPairs{"sk", KB * ds}, SharedPairs{"sv", KB * ds},
		SharedPairs{"sq", QB * ds}, SharedPairs{"sqt", dp * pairStride(QB)},
		SharedPairs{"sdo", QB * ds}, SharedPairs{"sdot", dp * pairStride(QB)},
		Shared{"slse", QB}, Shared{"sdelta", QB},
	}
	body = append(body, fragIDs("k0", blocks, KB)...)
	body = append(body,
		g.stageKeys("sk", KB, blocks*KB, dp, ds, tg),
		g.stageRowPairs("sv", "v", vr("k0"), KB, g.tk, blocks*KB, dp, ds, tg),
		Barrier{})
	body = append(body, fragAFrags(f, "ka", "sk", ds, dp)...)
	if wantDK {
		body = append(body, fragAFrags(f, "va", "sv", ds, dp)...)
		body = append(body, fragZeros(f, "dk", dp/8)...)
	}
	if wantDV {
		body = append(body, fragZeros(f, "dv", dp/8)...)
	}
	qOK := func(i Expr) Expr { return below(add(vr("q0"), i), g.tq, tiles*QB) }
	qrow := add(mul(vr("mat"), i32(g.tq)), add(vr("q0"), vr("e_row")))
	tile := []Stmt{
		let("q0", Int, mul(vr("t"), i32(QB))),
		Barrier{}, // the previous tile's readers are done
	}
	tile = append(tile, g.stageBoth("sq", "sqt", "q", QB, tiles*QB, dp, tg)...)
	tile = append(tile, g.stageBoth("sdo", "sdot", "dout", QB, tiles*QB, dp, tg)...)
	tile = append(tile,
		For{"e_row", lidE, i32(QB), i32(tg), []Stmt{
			store("slse", vr("e_row"), masked(qOK(vr("e_row")), mul(load("lse", qrow), flt(math.Log2E)), flt(0))),
			store("sdelta", vr("e_row"), masked(qOK(vr("e_row")), load("delta", qrow), flt(0))),
		}},
		Barrier{},
		FragDecl{"bq", FragB}, FragDecl{"pa", FragA})
	// sᵀ = k·qᵀ and dpᵀ = v·doᵀ: 16 keys × QB queries
	tile = append(tile, fragZeros(f, "s", QB/8)...)
	tile = append(tile, fragProduct(f, "s", QB/8, dp/16, func(kk int) string { return nm("ka", kk) }, "bq", "sq", ds)...)
	if wantDK {
		tile = append(tile, fragZeros(f, "dp", QB/8)...)
		tile = append(tile, fragProduct(f, "dp", QB/8, dp/16, func(kk int) string { return nm("va", kk) }, "bq", "sdo", ds)...)
	}
	kj := func(i int) Expr { return add(vr("k0"), add(mul(vr("warp"), i32(16)), fragRow(f, FragC, i))) }
	qcol := func(n, i int) Expr { return add(i32(n*8), fragCol(f, FragC, i)) }
	// compute is the tile's probabilities, ds and products, with the
	// mask vis (nil: every pair visible)
	compute := func(vis func(qi, kj Expr) Expr) []Stmt {
		var tile []Stmt
		for n := 0; n < QB/8; n++ {
			for i := 0; i < nC; i++ {
				qi := add(vr("q0"), qcol(n, i))
				p, keep := nm("p", n, i), nm("keep", n, i)
				tile = append(tile, let(p, Float, masked(vis(qi, kj(i)),
					call(FnExp2, sub(mul(FragGet{nm("s", n), i}, flt(g.scale2())), load("slse", qcol(n, i)))), flt(0))))
				tile = append(tile, g.keep(keep, qi, kj(i))...)
				if wantDK {
					tile = append(tile, let(nm("ds", n, i), Float,
						mul(vr(p), sub(mul(FragGet{nm("dp", n), i}, vr(keep)), load("sdelta", qcol(n, i))))))
				}
			}
		}
		// dv += (p·keep)ᵀ·do and dk += dsᵀ·q, 16 queries at a time
		for kk := 0; kk < QB/16; kk++ {
			if wantDV {
				tile = append(tile, fragPackA(f, "pa", kk, func(n, i int) Expr { return mul(vr(nm("p", n, i)), vr(nm("keep", n, i))) })...)
				tile = append(tile, fragProductAt(f, "dv", dp/8, "pa", "bq", "sdot", pairStride(QB), kk)...)
			}
			if wantDK {
				tile = append(tile, fragPackA(f, "pa", kk, func(n, i int) Expr { return vr(nm("ds", n, i)) })...)
				tile = append(tile, fragProductAt(f, "dk", dp/8, "pa", "bq", "sqt", pairStride(QB), kk)...)
			}
		}
		return tile
	}
	// (a padding mask masks every tile: unpadded)
	unmasked := func(qi, kj Expr) Expr { return g.unpadded(kj, blocks*KB) }
	if g.causal {
		// the queries past tq and the keys past tk need no mask here: their
		// do (and so dp, delta, and their terms) are zero, and the keys'
		// gradients are not written; so a tile of queries all at or after
		// the block's last key needs none
		tile = append(tile, If{Cond: ge(vr("q0"), add(vr("k0"), i32(KB-1))),
			Then: compute(unmasked),
			Else: compute(func(qi, kj Expr) Expr { return g.visible(qi, kj, tiles*QB, blocks*KB) })})
	} else {
		tile = append(tile, compute(unmasked)...)
	}
	loopBody := tile
	if g.causal {
		// a tile of queries all before the block's first key sees none of it
		loopBody = []Stmt{If{Cond: ge(add(mul(vr("t"), i32(QB)), i32(QB-1)), vr("k0")), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	write := func(acc string, at func(j, dim Expr) Expr, scale bool) {
		for n := 0; n < dp/8; n++ {
			for i := 0; i < nC; i++ {
				dim := add(i32(n*8), fragCol(f, FragC, i))
				v := Expr(FragGet{nm(acc, n), i})
				if scale {
					v = mul(v, flt(g.scale))
				}
				st := store(acc2param(g, acc), at(kj(i), dim), v)
				if c := all(below(kj(i), g.tk, blocks*KB), below(dim, D, dp)); c != nil {
					st = when(c, st)
				}
				body = append(body, st)
			}
		}
	}
	if wantDV {
		write("dv", func(j, dim Expr) Expr { return add(g.rowAt(vr("mat"), j, g.tk), dim) }, false)
	}
	if wantDK {
		write("dk", func(j, dim Expr) Expr { return g.keyAt(vr("mat"), j, dim) }, true)
	}
	return &Kernel{
		Doc: fmt.Sprintf("fused attention backward on register fragments, dk and dv, %s: %d keys × %d queries a tile, a warp per 16 keys",
			g, KB, QB),
		Params: g.kvBwdParams(wantDK, wantDV), Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// acc2param is the parameter an accumulator of the key kernel writes.
func acc2param(g attnGeom, acc string) string {
	if acc == "dk" {
		return g.dkName()
	}
	return acc
}

// fragProductAt adds to accumulators acc0 … acc{nOut−1} the product of
// A fragment a (K step kk) by B fragments read from SharedPairs array
// sh (line n·8 + the register's column, word kk·8 + its K/2).
func fragProductAt(f *FragmentDialect, acc string, nOut int, a, b, sh string, stride, kk int) []Stmt {
	var s []Stmt
	for n := 0; n < nOut; n++ {
		for reg := 0; reg < f.Regs(FragB); reg++ {
			s = append(s, FragSet{b, reg, load(sh, fragPairAt(f, FragB, reg, i32(n*8), stride, i32(kk*8)))})
		}
		s = append(s, FragMMA{nm(acc, n), a, b})
	}
	return s
}

// fragQueriesWords is the threadgroup words of the fragment query kernel
// with block b (rows queries, cols keys a tile): q and do of the block
// (lines of queries), k and v of the tile as lines of keys, and k as
// lines of dimensions.
func (b fragBlock) fragQueriesWords() int {
	return 2*b.rows*pairStride(b.dp) + 2*b.cols*pairStride(b.dp) + b.dp*pairStride(b.cols)
}

// fragQueriesBlock is the fragment query kernel's block: a warp per 16
// queries up to 4, tiles of 64, 32 or 16 keys, the largest that fits.
func (g attnGeom) fragQueriesBlock(f *FragmentDialect) (b fragBlock, ok bool) {
	if !fragShapeOK(f) || g.d > fragBwdMaxDim {
		return b, false
	}
	warps := min(4, ceilDiv(g.tq, 16))
	dp := ceilDiv(g.d, 16) * 16
	for cols := min(64, max(16, pow2AtLeast(g.tk))); cols >= 16; cols /= 2 {
		b = fragBlock{warps: warps, rows: 16 * warps, cols: cols, dp: dp}
		if 4*b.fragQueriesWords() <= g.tiling.shared {
			return b, true
		}
	}
	return b, false
}

// attentionBwdQueriesFragKernel writes dq on register fragments: per
// tile of keys, the warp's scores s = q·kᵀ and dp = do·vᵀ (16 queries ×
// cols keys) in accumulators, ds in their registers, then dq += ds·k;
// dq is scaled as it is written.
func attentionBwdQueriesFragKernel(g attnGeom, f *FragmentDialect) *Kernel {
	b, _ := g.fragQueriesBlock(f)
	R, C, D, dp := b.rows, b.cols, g.d, b.dp
	ds := pairStride(dp)
	tg := 32 * b.warps
	blocks, tiles := ceilDiv(g.tq, R), ceilDiv(g.tk, C)
	slot, rowOffs := fragRowSlots(f)
	nC := len(f.Layout[FragC])
	two := func(w Expr) (Expr, Expr) { return mul(w, i32(2)), add(mul(w, i32(2)), i32(1)) }
	body := []Stmt{
		SharedPairs{"sq", R * ds}, SharedPairs{"sdo", R * ds},
		SharedPairs{"sk", C * ds}, SharedPairs{"sv", C * ds}, SharedPairs{"skt", dp * pairStride(C)},
	}
	body = append(body, fragIDs("q0", blocks, R)...)
	body = append(body,
		g.stageRowPairs("sq", "q", vr("q0"), R, g.tq, blocks*R, dp, ds, tg),
		g.stageRowPairs("sdo", "dout", vr("q0"), R, g.tq, blocks*R, dp, ds, tg))
	body = append(body, Barrier{})
	body = append(body, fragAFrags(f, "qa", "sq", ds, dp)...)
	body = append(body, fragAFrags(f, "doa", "sdo", ds, dp)...)
	qi := func(i int) Expr { return add(vr("q0"), add(mul(vr("warp"), i32(16)), fragRow(f, FragC, i))) }
	for h, off := range rowOffs {
		row := add(vr("q0"), add(mul(vr("warp"), i32(16)), laneLin(1, 0, off)))
		at := add(mul(vr("mat"), i32(g.tq)), row)
		ok := below(row, g.tq, blocks*R)
		body = append(body,
			let(nm("lse", h), Float, masked(ok, mul(load("lse", at), flt(math.Log2E)), flt(0))),
			let(nm("delta", h), Float, masked(ok, load("delta", at), flt(0))))
	}
	body = append(body, fragZeros(f, "dq", dp/8)...)
	keyOK := func(j Expr) Expr { return below(add(vr("k0"), j), g.tk, tiles*C) }
	kv := func(j, dd Expr) Expr {
		return masked(all(keyOK(j), below(dd, D, dp)), load(g.kName(), g.keyAt(vr("mat"), add(vr("k0"), j), dd)), flt(0))
	}
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{}, // the previous tile's readers are done
		g.stageKeys("sk", C, tiles*C, dp, ds, tg),
		g.stageRowPairs("sv", "v", vr("k0"), C, g.tk, tiles*C, dp, ds, tg),
		stagePairs("skt", dp, C/2, pairStride(C), tg, g.heads != 0, func(dd, w Expr) (Expr, Expr) { lo, hi := two(w); return kv(lo, dd), kv(hi, dd) }),
		Barrier{},
		FragDecl{"bk", FragB}, FragDecl{"dsa", FragA},
	}
	tile = append(tile, fragZeros(f, "s", C/8)...)
	tile = append(tile, fragProduct(f, "s", C/8, dp/16, func(kk int) string { return nm("qa", kk) }, "bk", "sk", ds)...)
	tile = append(tile, fragZeros(f, "dp", C/8)...)
	tile = append(tile, fragProduct(f, "dp", C/8, dp/16, func(kk int) string { return nm("doa", kk) }, "bk", "sv", ds)...)
	// compute is the tile's ds and dq's product, with the mask vis (nil:
	// every pair visible)
	compute := func(vis func(qi, kj Expr) Expr) []Stmt {
		var tile []Stmt
		for n := 0; n < C/8; n++ {
			for i := 0; i < nC; i++ {
				kj := add(vr("k0"), add(i32(n*8), fragCol(f, FragC, i)))
				p, keep := nm("p", n, i), nm("keep", n, i)
				tile = append(tile, let(p, Float, masked(vis(qi(i), kj),
					call(FnExp2, sub(mul(FragGet{nm("s", n), i}, flt(g.scale2())), vr(nm("lse", slot[i])))), flt(0))))
				tile = append(tile, g.keep(keep, qi(i), kj)...)
				tile = append(tile, let(nm("ds", n, i), Float,
					mul(vr(p), sub(mul(FragGet{nm("dp", n), i}, vr(keep)), vr(nm("delta", slot[i]))))))
			}
		}
		// dq += ds·k, 16 keys at a time
		for kk := 0; kk < C/16; kk++ {
			tile = append(tile, fragPackA(f, "dsa", kk, func(n, i int) Expr { return vr(nm("ds", n, i)) })...)
			tile = append(tile, fragProductAt(f, "dq", dp/8, "dsa", "bk", "skt", pairStride(C), kk)...)
		}
		return tile
	}
	// masks says which keys a query sees (keyTiles' full tiles need none:
	// the queries past tq are not written)
	masks := func(qi, kj Expr) Expr { return g.visible(qi, kj, blocks*R, tiles*C) }
	body = append(body, g.keyTiles(tile, compute(func(qi, kj Expr) Expr { return g.unpadded(kj, tiles*C) }), compute(masks), R, C, tiles))
	for n := 0; n < dp/8; n++ {
		for i := 0; i < nC; i++ {
			dim := add(i32(n*8), fragCol(f, FragC, i))
			st := store("dq", add(g.rowAt(vr("mat"), qi(i), g.tq), dim), mul(FragGet{nm("dq", n), i}, flt(g.scale)))
			if c := all(below(qi(i), g.tq, blocks*R), below(dim, D, dp)); c != nil {
				st = when(c, st)
			}
			body = append(body, st)
		}
	}
	nq := g.mats * g.tq * D
	return &Kernel{
		Doc: fmt.Sprintf("fused attention backward on register fragments, dq, %s: %d queries × %d keys a tile, a warp per 16 queries",
			g, R, C),
		Params:      g.params(in("q", nq), in(g.kName(), g.mats*D*g.tk), in("v", g.mats*g.tk*D), in("dout", nq), in("lse", g.mats*g.tq), in("delta", g.mats*g.tq), out("dq", nq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// keyTiles is a block's loop over its key tiles, t from 0 to tiles, C
// keys a tile from k0: tile's statements, then plain where every key of
// the tile is in range and, causal, at or before the block's first query
// q0 (no mask needed), else masked; causal, the tiles past the block's
// last query (R queries from q0) hold no visible key and are skipped.
func (g attnGeom) keyTiles(tile, plain, masked []Stmt, R, C, tiles int) Stmt {
	full := all(below(add(vr("k0"), i32(C-1)), g.tk, tiles*C))
	if g.causal {
		full = all(full, le(add(vr("k0"), i32(C-1)), vr("q0")))
	}
	switch {
	case full == nil:
		tile = append(tile, plain...)
	case g.tk < C:
		tile = append(tile, masked...)
	default:
		tile = append(tile, If{Cond: full, Then: plain, Else: masked})
	}
	if g.causal {
		tile = []Stmt{If{Cond: lt(mul(vr("t"), i32(C)), add(vr("q0"), i32(R))), Then: tile}}
	}
	return For{"t", i32(0), i32(tiles), i32(1), tile}
}
