package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The fused attention's tensor-core kernels: the products of
// kernels_attention.go's kernels on a dialect's matrix tiles
// (Dialect.Tiles, 16×16×8 with TF32 operands and float32 sums), for plans
// whose attention steps are bf16 or tf32 (planner's Attr.Precision; TF32
// keeps more of each operand than bf16, so it serves both).
//
// The threads keep everything else of the SIMT kernels: the staging of
// operands in threadgroup memory (whose layouts are the tiles' row- or
// column-major operands as they are), the online softmax on each
// thread's micro-tile of scores, dropout and the output registers. A
// product runs in three moves: the warps multiply tiles of threadgroup
// arrays into accumulator tiles and store them to a threadgroup array;
// a barrier; each thread reads its micro-tile from there. A warp owns
// 16 rows of the block (a row tile) in every product.

// AttentionTiles is whether the fused attention of head dimension
// headDim runs its products on d's tiles (in a plan whose attention
// steps are bf16 or tf32): the kernels here are written for 16×16×8
// tiles of 32 lanes, and take the head dimension 8 at a time.
func AttentionTiles(d *Dialect, headDim int) bool {
	t := d.Tiles
	return t != nil && t.M == 16 && t.N == 16 && t.K == 8 && t.Lanes == 32 && headDim%8 == 0 && headDim <= planner.MaxAttentionDim
}

// tcTiles is AttentionTiles for g.
func tcTiles(d *Dialect, g attnGeom) bool { return AttentionTiles(d, g.d) }

// tcFwdBlock is the tensor-core forward's block: 16, 32 or 64 queries (a
// warp per 16), tiles of 32 keys, the micro-tiles of the wide layout (8
// threads across the keys, each owning runs of 4: 2 threads a row, so
// that the block's threads are its row tiles' warps), the largest whose
// threadgroup arrays fit; ok false where none does.
func (g attnGeom) tcFwdBlock() (b attnBlock, ok bool) {
	for rows := min(64, max(16, pow2AtLeast(g.tq))); rows >= 16; rows /= 2 {
		b = newBlock(rows, 32, attnWideCols, 4, g.d)
		if 4*g.tcFwdFloats(b) <= g.tiling.shared {
			return b, true
		}
	}
	return b, false
}

// tcFwdFloats is the threadgroup floats of the tensor-core forward with
// block b: qᵀ, later each tile's scores and p·v ([rows, 32] and [rows,
// dw], row-major); kᵀ, later the probabilities; v; the partial maxima
// and sums.
func (g attnGeom) tcFwdFloats(b attnBlock) int {
	return g.tcFwdSQ(b) + max(g.d*b.cols, b.cols*b.rs()) + b.cols*b.dw() + 2*b.rows*b.ct
}

func (g attnGeom) tcFwdSQ(b attnBlock) int {
	return max(g.d*b.rs(), b.rows*b.dw(), b.rows*b.cols)
}

// warpRows is the first row of the warp's row tile.
func warpRows() Expr { return mul(vr("warp"), i32(16)) }

// attentionFwdTCKernel is the fused forward with its products on tiles:
// each warp loads its 16 queries as A tiles once (qᵀ staged in
// threadgroup memory, column-major), then per tile of keys multiplies
// them by kᵀ's B tiles into 16×32 scores, stored row-major over qᵀ's
// array; the threads fold their micro-tiles of scores into the online
// softmax as attentionFwdKernel's do and write p·keep over kᵀ
// (column-major, as that kernel stores it); each warp multiplies its 16
// rows of p by v into 16×dw outputs, stored row-major over the scores,
// which each thread adds to its output registers after the softmax's
// correction.
func attentionFwdTCKernel(g attnGeom) *Kernel {
	b, _ := g.tcFwdBlock()
	R, C, D, rs, dw := b.rows, b.cols, g.d, b.rs(), b.dw()
	tg := b.threads()
	blocks, tiles := ceilDiv(g.tq, R), ceilDiv(g.tk, C)
	partial := func(a int, x Expr) Expr { return add(mul(row(a), i32(b.ct)), x) }
	fold := func(r, sh string, a int, f func(acc, x Expr) Expr) Stmt {
		pn := [4]string{nm(sh+"_", 0), nm(sh+"_", 1), nm(sh+"_", 2), nm(sh+"_", 3)}
		body := []Stmt{Load4{sh, partial(a, vr("x")), pn}}
		for _, v := range pn {
			body = append(body, set(r, f(vr(r), vr(v))))
		}
		return For{"x", i32(0), i32(b.ct), i32(4), body}
	}
	body := []Stmt{
		Shared{"sq", g.tcFwdSQ(b)}, Shared{"sk", max(D*C, C*rs)}, Shared{"sv", C * dw},
		Shared{"smax", R * b.ct}, Shared{"ssum", R * b.ct},
	}
	body = append(body, b.ids("q0", blocks)...)
	body = append(body, let("warp", Int, div(lidE, i32(32))))
	body = append(body, g.stageT("sq", "q", vr("q0"), R, g.tq, rs, tg), Barrier{})
	// the warp's queries as A tiles: qᵀ column-major, 8 dimensions a tile
	for kk := 0; kk < D/8; kk++ {
		qa := nm("qa", kk)
		body = append(body, TileDecl{qa, TileA, true}, TileLoad{qa, "sq", add(i32(kk*8*rs), warpRows()), rs})
	}
	for a := 0; a < attnRows; a++ {
		body = append(body, let(nm("i", a), Int, add(vr("q0"), row(a))), let(nm("m", a), Float, flt(negHuge)), let(nm("l", a), Float, flt(0)))
	}
	body = append(body, zeros4("o", b.dn)...)
	kj := func(c int) Expr { return add(vr("k0"), b.col(c)) }
	vis := func(a, c int) Expr { return g.visible(vr(nm("i", a)), kj(c), blocks*R, tiles*C) }
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{}, // the previous tile's readers are done
		g.stageKT("sk", vr("k0"), C, D, C, tg),
		g.stageRows("sv", "v", vr("k0"), C, g.tk, dw, dw, tg),
		Barrier{},
	}
	// the warp's 16×C scores: q·kᵀ, kᵀ row-major [D, C]
	for n := 0; n < C/16; n++ {
		tile = append(tile, TileDecl{nm("sacc", n), TileAcc, false}, TileZero{nm("sacc", n)})
	}
	tile = append(tile, TileDecl{"kb", TileB, false})
	for kk := 0; kk < D/8; kk++ {
		for n := 0; n < C/16; n++ {
			tile = append(tile, TileLoad{"kb", "sk", i32(kk*8*C + n*16), C}, TileMMA{nm("sacc", n), nm("qa", kk), "kb"})
		}
	}
	for n := 0; n < C/16; n++ {
		tile = append(tile, TileStore{nm("sacc", n), "sq", add(mul(warpRows(), i32(C)), i32(n*16)), C})
	}
	tile = append(tile, Barrier{})
	// the micro-tile of scores, masked and scaled, and each row's maximum
	for a := 0; a < attnRows; a++ {
		for c := 0; c < b.cn; c += 4 {
			tile = append(tile, Load4{"sq", add(mul(row(a), i32(C)), b.col(c)),
				[4]string{nm("s", a, c), nm("s", a, c+1), nm("s", a, c+2), nm("s", a, c+3)}})
		}
	}
	for a := 0; a < attnRows; a++ {
		mx := nm("mx", a)
		tile = append(tile, let(mx, Float, flt(negHuge)))
		for c := 0; c < b.cn; c++ {
			s := nm("sm", a, c)
			tile = append(tile,
				let(s, Float, masked(vis(a, c), mul(vr(nm("s", a, c)), flt(g.scale)), flt(negHuge))),
				set(mx, call(FnMax, vr(mx), vr(s))))
		}
		tile = append(tile, store("smax", partial(a, vr("tx")), vr(mx)))
	}
	tile = append(tile, Barrier{})
	// the block's new maxima; the probabilities, by dropout, over kᵀ
	for a := 0; a < attnRows; a++ {
		mt := nm("mt", a)
		tile = append(tile,
			let(mt, Float, vr(nm("m", a))),
			fold(mt, "smax", a, func(acc, x Expr) Expr { return call(FnMax, acc, x) }),
			let(nm("ls", a), Float, flt(0)))
	}
	for c := 0; c < b.cn; c++ {
		var ps [4]Expr
		for a := 0; a < attnRows; a++ {
			p, keep := nm("p", a, c), nm("keep", a, c)
			tile = append(tile,
				let(p, Float, masked(vis(a, c), call(FnExp, sub(vr(nm("sm", a, c)), vr(nm("mt", a)))), flt(0))),
				set(nm("ls", a), add(vr(nm("ls", a)), vr(p))))
			tile = append(tile, g.keep(keep, vr(nm("i", a)), kj(c))...)
			ps[a] = mul(vr(p), vr(keep))
		}
		tile = append(tile, Store4{"sk", rowsAt(b.col(c), rs), ps})
	}
	for a := 0; a < attnRows; a++ {
		tile = append(tile, store("ssum", partial(a, vr("tx")), vr(nm("ls", a))))
	}
	tile = append(tile, Barrier{})
	// the online softmax's correction
	for a := 0; a < attnRows; a++ {
		corr, lsum := nm("corr", a), nm("lsum", a)
		tile = append(tile,
			let(corr, Float, call(FnExp, sub(vr(nm("m", a)), vr(nm("mt", a))))),
			let(lsum, Float, flt(0)),
			fold(lsum, "ssum", a, add),
			set(nm("l", a), add(mul(vr(nm("l", a)), vr(corr)), vr(lsum))),
			set(nm("m", a), vr(nm("mt", a))))
		for c := 0; c < b.dn; c++ {
			tile = append(tile, set(nm("o", a, c), mul(vr(nm("o", a, c)), vr(corr))))
		}
	}
	// the warp's 16×dw of p·v: p column-major [C, rs], v row-major [C, dw]
	for n := 0; n < dw/16; n++ {
		tile = append(tile, TileDecl{nm("oacc", n), TileAcc, false}, TileZero{nm("oacc", n)})
	}
	tile = append(tile, TileDecl{"pa", TileA, true}, TileDecl{"vb", TileB, false})
	for kk := 0; kk < C/8; kk++ {
		tile = append(tile, TileLoad{"pa", "sk", add(i32(kk*8*rs), warpRows()), rs})
		for n := 0; n < dw/16; n++ {
			tile = append(tile, TileLoad{"vb", "sv", i32(kk*8*dw + n*16), dw}, TileMMA{nm("oacc", n), "pa", "vb"})
		}
	}
	for n := 0; n < dw/16; n++ {
		tile = append(tile, TileStore{nm("oacc", n), "sq", add(mul(warpRows(), i32(dw)), i32(n*16)), dw})
	}
	tile = append(tile, Barrier{})
	for a := 0; a < attnRows; a++ {
		for c := 0; c < b.dn; c += 4 {
			names := [4]string{nm("pv", a, c), nm("pv", a, c+1), nm("pv", a, c+2), nm("pv", a, c+3)}
			tile = append(tile, Load4{"sq", add(mul(row(a), i32(dw)), b.col(c)), names})
			for i, n := range names {
				o := nm("o", a, c+i)
				tile = append(tile, set(o, add(vr(o), vr(n))))
			}
		}
	}
	loopBody := tile
	if g.causal {
		// the tiles past the block's last query hold no visible key
		loopBody = []Stmt{If{Cond: lt(mul(vr("t"), i32(C)), add(vr("q0"), i32(R))), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	for a := 0; a < attnRows; a++ {
		i, inv := vr(nm("i", a)), nm("inv", a)
		norm, lse := g.rowEnd(inv, vr(nm("l", a)), func() Expr { return add(vr(nm("m", a)), call(FnLog, vr(nm("l", a)))) })
		fin := []Stmt{norm}
		fin = append(fin, b.storeDims(D, "o", func(dim Expr) Expr { return add(g.rowAt(vr("mat"), i, g.tq), dim) },
			func(c int) Expr { return mul(vr(nm("o", a, c)), vr(inv)) })...)
		fin = append(fin, when(eq(vr("tx"), i32(0)), store("lse", add(mul(vr("mat"), i32(g.tq)), i), lse)))
		body = append(body, when(lt(i, i32(g.tq)), fin...))
	}
	n := g.mats * g.tq * D
	return &Kernel{
		Doc: fmt.Sprintf("fused attention on tensor tiles, %s: %d queries × %d keys a tile, a warp per 16 queries, 4×%d scores and 4×%d outputs a thread",
			g, R, C, b.cn, b.dn),
		Params:      g.params(in("q", n), in(g.kName(), g.mats*D*g.tk), in("v", g.mats*g.tk*D), out("o", n), out("lse", g.mats*g.tq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// tcKeysMaxDim is the largest head dimension for which the tensor-core
// key kernel fits CUDA's shared memory (at 16 keys a block); past it the
// lowering keeps the SIMT kernel.
const tcKeysMaxDim = 96

// tcKeysBlock is the tensor-core key kernel's block: 16, 32 or 64 keys
// (a warp per 16), tiles of 32 queries, micro-tiles of 4 keys by a run
// of 4 queries (8 threads across), the largest whose threadgroup arrays
// fit; ok false where none does.
func (g attnGeom) tcKeysBlock() (b attnBlock, ok bool) {
	for rows := min(64, max(16, pow2AtLeast(g.tk))); rows >= 16; rows /= 2 {
		b = newBlock(rows, 32, attnWideCols, 4, g.d)
		if 4*g.tcKeysFloats(b) <= g.tiling.shared {
			return b, true
		}
	}
	return b, false
}

// tcRowStride is the stride of the q and do rows a tensor-core kernel
// stages: dw and 4 more, a multiple of 4 (the tiles' leading dimension)
// that is not one of 32 (rows in distinct banks).
func tcRowStride(b attnBlock) int { return b.dw() + 4 }

// tcKeysFloats is the threadgroup floats of the tensor-core key kernel
// with block b: kᵀ and vᵀ of the keys; q (later dv, then dk, of the
// block: [rows, dw]) and do rows of the tile; the tile's scores, later
// p·keep, and dp, later ds ([cols, rs], query-major); lse and delta.
func (g attnGeom) tcKeysFloats(b attnBlock) int {
	qs := tcRowStride(b)
	return 2*g.d*b.rows + max(b.cols*qs, b.rows*b.dw()) + b.cols*qs + 2*b.cols*b.rs() + 2*b.cols
}

// attentionBwdKeysTCKernel is attentionBwdKeysKernel with its four
// products on tiles: each warp owns 16 keys and keeps their dv and dk
// as accumulator tiles over every tile of queries. Per tile it
// multiplies k (kᵀ staged, column-major) by qᵀ (q rows, column-major)
// into scores and v by doᵀ into dp, both stored query-major; the
// threads turn their micro-tiles into p·keep and ds in place; then the
// warp adds (p·keep)ᵀ·do to dv and dsᵀ·q to dk. At the end the warps
// store dv, then dk, over q's array, and the threads write them out.
func attentionBwdKeysTCKernel(g attnGeom, wantDK, wantDV bool) *Kernel {
	b, _ := g.tcKeysBlock()
	KB, QB, D, rs, dw := b.rows, b.cols, g.d, b.rs(), b.dw()
	qs := tcRowStride(b)
	tg := b.threads()
	blocks, tiles := ceilDiv(g.tk, KB), ceilDiv(g.tq, QB)
	body := []Stmt{
		Shared{"sk", D * KB}, Shared{"sv", D * KB}, Shared{"sq", max(QB*qs, KB*dw)}, Shared{"sdo", QB * qs},
		Shared{"sp", QB * rs}, Shared{"sds", QB * rs}, Shared{"slse", QB}, Shared{"sdelta", QB},
	}
	body = append(body, b.ids("k0", blocks)...)
	body = append(body, let("warp", Int, div(lidE, i32(32))))
	body = append(body,
		g.stageKT("sk", vr("k0"), KB, D, KB, tg),
		g.stageT("sv", "v", vr("k0"), KB, g.tk, KB, tg))
	for a := 0; a < attnRows; a++ {
		body = append(body, let(nm("j", a), Int, add(vr("k0"), row(a))))
	}
	for n := 0; n < dw/16; n++ {
		if wantDK {
			body = append(body, TileDecl{nm("dkacc", n), TileAcc, false}, TileZero{nm("dkacc", n)})
		}
		if wantDV {
			body = append(body, TileDecl{nm("dvacc", n), TileAcc, false}, TileZero{nm("dvacc", n)})
		}
	}
	qrow := add(mul(vr("mat"), i32(g.tq)), add(vr("q0"), vr("e_row")))
	rowIn := below(add(vr("q0"), vr("e_row")), g.tq, tiles*QB)
	guard := func(v Expr) Expr {
		if rowIn == nil {
			return v
		}
		return sel(rowIn, v, flt(0))
	}
	tile := []Stmt{
		let("q0", Int, mul(vr("t"), i32(QB))),
		Barrier{}, // the previous tile's readers are done
		g.stageRows("sq", "q", vr("q0"), QB, g.tq, dw, qs, tg),
		g.stageRows("sdo", "dout", vr("q0"), QB, g.tq, dw, qs, tg),
		For{"e_row", lidE, i32(QB), i32(tg), []Stmt{
			store("slse", vr("e_row"), guard(load("lse", qrow))),
			store("sdelta", vr("e_row"), guard(load("delta", qrow))),
		}},
		Barrier{},
	}
	// the warp's 16 keys × QB queries of scores k·qᵀ (and dp = v·doᵀ),
	// stored query-major: sp[query·rs + key]
	products := []struct {
		acc, a, b, dst string
	}{{"sacc", "sk", "sq", "sp"}}
	if wantDK {
		products = append(products, struct{ acc, a, b, dst string }{"dpacc", "sv", "sdo", "sds"})
	}
	tile = append(tile, TileDecl{"ka", TileA, true}, TileDecl{"qb", TileB, true})
	for _, pr := range products {
		for n := 0; n < QB/16; n++ {
			tile = append(tile, TileDecl{nm(pr.acc, n), TileAcc, true}, TileZero{nm(pr.acc, n)})
		}
		for kk := 0; kk < D/8; kk++ {
			tile = append(tile, TileLoad{"ka", pr.a, add(i32(kk*8*KB), warpRows()), KB})
			for n := 0; n < QB/16; n++ {
				tile = append(tile, TileLoad{"qb", pr.b, i32(n*16*qs + kk*8), qs}, TileMMA{nm(pr.acc, n), "ka", "qb"})
			}
		}
		for n := 0; n < QB/16; n++ {
			tile = append(tile, TileStore{nm(pr.acc, n), pr.dst, add(i32(n*16*rs), warpRows()), rs})
		}
	}
	tile = append(tile, Barrier{})
	// each thread's micro-tile of keys by queries: read, turned into
	// p·keep and ds in place (no other thread reads those elements)
	for c := 0; c < b.cn; c++ {
		tile = append(tile, Load4{"sp", rowsAt(b.col(c), rs), [4]string{nm("s", 0, c), nm("s", 1, c), nm("s", 2, c), nm("s", 3, c)}})
		if wantDK {
			tile = append(tile, Load4{"sds", rowsAt(b.col(c), rs), [4]string{nm("dp", 0, c), nm("dp", 1, c), nm("dp", 2, c), nm("dp", 3, c)}})
		}
	}
	tile = append(tile, g.bwdProbs(b.cn, tiles*QB, blocks*KB,
		func(a, c int) Expr { return add(vr("q0"), b.col(c)) }, func(a, c int) Expr { return vr(nm("j", a)) },
		func(a, c int) Expr { return load("slse", b.col(c)) }, func(a, c int) Expr { return load("sdelta", b.col(c)) }, wantDK)...)
	for c := 0; c < b.cn; c++ {
		var pk, ds [4]Expr
		for a := 0; a < attnRows; a++ {
			pk[a], ds[a] = mul(vr(nm("p", a, c)), vr(nm("keep", a, c))), vr(nm("ds", a, c))
		}
		if wantDV {
			tile = append(tile, Store4{"sp", rowsAt(b.col(c), rs), pk})
		}
		if wantDK {
			tile = append(tile, Store4{"sds", rowsAt(b.col(c), rs), ds})
		}
	}
	tile = append(tile, Barrier{})
	// dv += (p·keep)ᵀ·do and dk += dsᵀ·q: the keys' rows of p·keep and
	// ds (column-major in sp, sds) by the rows of do and q
	tile = append(tile, TileDecl{"pa", TileA, true}, TileDecl{"rb", TileB, false})
	for kk := 0; kk < QB/8; kk++ {
		if wantDV {
			tile = append(tile, TileLoad{"pa", "sp", add(i32(kk*8*rs), warpRows()), rs})
			for n := 0; n < dw/16; n++ {
				tile = append(tile, TileLoad{"rb", "sdo", i32(kk*8*qs + n*16), qs}, TileMMA{nm("dvacc", n), "pa", "rb"})
			}
		}
		if wantDK {
			tile = append(tile, TileLoad{"pa", "sds", add(i32(kk*8*rs), warpRows()), rs})
			for n := 0; n < dw/16; n++ {
				tile = append(tile, TileLoad{"rb", "sq", i32(kk*8*qs + n*16), qs}, TileMMA{nm("dkacc", n), "pa", "rb"})
			}
		}
	}
	loopBody := tile
	if g.causal {
		// a tile of queries all before the block's first key sees none of it
		loopBody = []Stmt{If{Cond: ge(add(mul(vr("t"), i32(QB)), i32(QB-1)), vr("k0")), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	// the block's dv, then dk, through q's array ([key, dw] row-major)
	writeOut := func(acc string, write func(a int, vals func(c int) Expr) []Stmt) []Stmt {
		s := []Stmt{Barrier{}}
		for n := 0; n < dw/16; n++ {
			s = append(s, TileStore{nm(acc, n), "sq", add(mul(warpRows(), i32(dw)), i32(n*16)), dw})
		}
		s = append(s, Barrier{})
		for a := 0; a < attnRows; a++ {
			var fin []Stmt
			for c := 0; c < b.dn; c += 4 {
				fin = append(fin, Load4{"sq", add(mul(row(a), i32(dw)), b.col(c)),
					[4]string{nm(acc+"_", a, c), nm(acc+"_", a, c+1), nm(acc+"_", a, c+2), nm(acc+"_", a, c+3)}})
			}
			fin = append(fin, write(a, func(c int) Expr { return vr(nm(acc+"_", a, c)) })...)
			s = append(s, when(lt(vr(nm("j", a)), i32(g.tk)), fin...))
		}
		return s
	}
	if wantDV {
		body = append(body, writeOut("dvacc", func(a int, vals func(c int) Expr) []Stmt {
			j := vr(nm("j", a))
			return b.storeDims(D, "dv", func(dim Expr) Expr { return add(g.rowAt(vr("mat"), j, g.tk), dim) }, vals)
		})...)
	}
	if wantDK {
		body = append(body, writeOut("dkacc", func(a int, vals func(c int) Expr) []Stmt {
			j := vr(nm("j", a))
			return b.storeDims(D, g.dkName(), func(dim Expr) Expr { return g.keyAt(vr("mat"), j, dim) },
				func(c int) Expr { return mul(vals(c), flt(g.scale)) })
		})...)
	}
	return &Kernel{
		Doc: fmt.Sprintf("fused attention backward on tensor tiles, dk and dv, %s: %d keys × %d queries a tile, a warp per 16 keys, 4×%d scores a thread",
			g, KB, QB, b.cn),
		Params: g.kvBwdParams(wantDK, wantDV), Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// tcQueriesMaxDim is the largest head dimension for which the
// tensor-core query kernel fits CUDA's shared memory (at 16 queries a
// block); past it the lowering keeps the SIMT kernel.
const tcQueriesMaxDim = 96

// tcQueriesBlock is the tensor-core query kernel's block: 16, 32 or 64
// queries (a warp per 16), tiles of 32 keys, micro-tiles of 4 queries by
// a run of 4 keys, the largest whose threadgroup arrays fit; ok false
// where none does.
func (g attnGeom) tcQueriesBlock() (b attnBlock, ok bool) {
	for rows := min(64, max(16, pow2AtLeast(g.tq))); rows >= 16; rows /= 2 {
		b = newBlock(rows, 32, attnWideCols, 4, g.d)
		if 4*g.tcQueriesFloats(b) <= g.tiling.shared {
			return b, true
		}
	}
	return b, false
}

// tcQueriesFloats is the threadgroup floats of the tensor-core query
// kernel with block b: qᵀ (at the end dq, [rows, dw]) and doᵀ of the
// queries; kᵀ and v rows of the tile (at strides cols+4 and d+4); the
// tile's scores, and dp, later ds ([cols, rs], key-major).
func (g attnGeom) tcQueriesFloats(b attnBlock) int {
	return max(g.d*b.rs(), b.rows*b.dw()) + g.d*b.rs() + b.dw()*(b.cols+4) + b.cols*(g.d+4) + 2*b.cols*b.rs()
}

// attentionBwdQueriesTCKernel is attentionBwdQueriesKernel with its
// three products on tiles: each warp owns 16 queries and keeps their dq
// as accumulator tiles over every tile of keys. Per tile it multiplies
// q by kᵀ into scores and do by vᵀ into dp, both stored key-major; the
// threads turn their micro-tiles into ds in place; then the warp adds
// ds·k to dq. At the end the warps store dq over qᵀ's array, and the
// threads write it out, scaled.
func attentionBwdQueriesTCKernel(g attnGeom) *Kernel {
	b, _ := g.tcQueriesBlock()
	R, C, D, rs, dw := b.rows, b.cols, g.d, b.rs(), b.dw()
	ks, vs := C+4, D+4
	tg := b.threads()
	blocks, tiles := ceilDiv(g.tq, R), ceilDiv(g.tk, C)
	body := []Stmt{
		Shared{"sq", max(D*rs, R*dw)}, Shared{"sdo", D * rs}, Shared{"sk", dw * ks}, Shared{"sv", C * vs},
		Shared{"ss", C * rs}, Shared{"sds", C * rs},
	}
	body = append(body, b.ids("q0", blocks)...)
	body = append(body, let("warp", Int, div(lidE, i32(32))))
	body = append(body,
		g.stageT("sq", "q", vr("q0"), R, g.tq, rs, tg),
		g.stageT("sdo", "dout", vr("q0"), R, g.tq, rs, tg))
	for a := 0; a < attnRows; a++ {
		i := nm("i", a)
		body = append(body,
			let(i, Int, add(vr("q0"), row(a))),
			let(nm("lse", a), Float, sel(lt(vr(i), i32(g.tq)), load("lse", add(mul(vr("mat"), i32(g.tq)), vr(i))), flt(0))),
			let(nm("delta", a), Float, sel(lt(vr(i), i32(g.tq)), load("delta", add(mul(vr("mat"), i32(g.tq)), vr(i))), flt(0))))
	}
	for n := 0; n < dw/16; n++ {
		body = append(body, TileDecl{nm("dqacc", n), TileAcc, false}, TileZero{nm("dqacc", n)})
	}
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{}, // the previous tile's readers are done
		g.stageKT("sk", vr("k0"), C, dw, ks, tg),
		g.stageRows("sv", "v", vr("k0"), C, g.tk, D, vs, tg),
		Barrier{},
	}
	// the warp's 16 queries × C keys of scores q·kᵀ (kᵀ row-major) and dp
	// = do·vᵀ (v rows: vᵀ column-major), stored key-major: ss[key·rs + query]
	tile = append(tile, TileDecl{"ra", TileA, true}, TileDecl{"kbr", TileB, false}, TileDecl{"vbc", TileB, true})
	for _, pr := range []struct {
		acc, a, b, bBuf, dst string
		bAt                  func(kk, n int) int
		ld                   int
	}{
		{"sacc", "sq", "kbr", "sk", "ss", func(kk, n int) int { return kk*8*ks + n*16 }, ks},
		{"dpacc", "sdo", "vbc", "sv", "sds", func(kk, n int) int { return n*16*vs + kk*8 }, vs},
	} {
		for n := 0; n < C/16; n++ {
			tile = append(tile, TileDecl{nm(pr.acc, n), TileAcc, true}, TileZero{nm(pr.acc, n)})
		}
		for kk := 0; kk < D/8; kk++ {
			tile = append(tile, TileLoad{"ra", pr.a, add(i32(kk*8*rs), warpRows()), rs})
			for n := 0; n < C/16; n++ {
				tile = append(tile, TileLoad{pr.b, pr.bBuf, i32(pr.bAt(kk, n)), pr.ld}, TileMMA{nm(pr.acc, n), "ra", pr.b})
			}
		}
		for n := 0; n < C/16; n++ {
			tile = append(tile, TileStore{nm(pr.acc, n), pr.dst, add(i32(n*16*rs), warpRows()), rs})
		}
	}
	tile = append(tile, Barrier{})
	// each thread's micro-tile of queries by keys: read, turned into ds
	// in place (no other thread reads those elements)
	for c := 0; c < b.cn; c++ {
		tile = append(tile,
			Load4{"ss", rowsAt(b.col(c), rs), [4]string{nm("s", 0, c), nm("s", 1, c), nm("s", 2, c), nm("s", 3, c)}},
			Load4{"sds", rowsAt(b.col(c), rs), [4]string{nm("dp", 0, c), nm("dp", 1, c), nm("dp", 2, c), nm("dp", 3, c)}})
	}
	tile = append(tile, g.bwdProbs(b.cn, blocks*R, tiles*C,
		func(a, c int) Expr { return vr(nm("i", a)) }, func(a, c int) Expr { return add(vr("k0"), b.col(c)) },
		func(a, c int) Expr { return vr(nm("lse", a)) }, func(a, c int) Expr { return vr(nm("delta", a)) }, true)...)
	for c := 0; c < b.cn; c++ {
		var ds [4]Expr
		for a := 0; a < attnRows; a++ {
			ds[a] = vr(nm("ds", a, c))
		}
		tile = append(tile, Store4{"sds", rowsAt(b.col(c), rs), ds})
	}
	tile = append(tile, Barrier{})
	// dq += ds·k: ds column-major in sds, k (kᵀ staged) column-major
	tile = append(tile, TileDecl{"dsa", TileA, true}, TileDecl{"kbc", TileB, true})
	for kk := 0; kk < C/8; kk++ {
		tile = append(tile, TileLoad{"dsa", "sds", add(i32(kk*8*rs), warpRows()), rs})
		for n := 0; n < dw/16; n++ {
			tile = append(tile, TileLoad{"kbc", "sk", i32(n*16*ks + kk*8), ks}, TileMMA{nm("dqacc", n), "dsa", "kbc"})
		}
	}
	loopBody := tile
	if g.causal {
		loopBody = []Stmt{If{Cond: lt(mul(vr("t"), i32(C)), add(vr("q0"), i32(R))), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody}, Barrier{})
	// the block's dq through qᵀ's array ([query, dw] row-major)
	for n := 0; n < dw/16; n++ {
		body = append(body, TileStore{nm("dqacc", n), "sq", add(mul(warpRows(), i32(dw)), i32(n*16)), dw})
	}
	body = append(body, Barrier{})
	for a := 0; a < attnRows; a++ {
		i := vr(nm("i", a))
		var fin []Stmt
		for c := 0; c < b.dn; c += 4 {
			fin = append(fin, Load4{"sq", add(mul(row(a), i32(dw)), b.col(c)),
				[4]string{nm("dq", a, c), nm("dq", a, c+1), nm("dq", a, c+2), nm("dq", a, c+3)}})
		}
		fin = append(fin, b.storeDims(D, "dq", func(dim Expr) Expr { return add(g.rowAt(vr("mat"), i, g.tq), dim) },
			func(c int) Expr { return mul(vr(nm("dq", a, c)), flt(g.scale)) })...)
		body = append(body, when(lt(i, i32(g.tq)), fin...))
	}
	nq := g.mats * g.tq * D
	return &Kernel{
		Doc: fmt.Sprintf("fused attention backward on tensor tiles, dq, %s: %d queries × %d keys a tile, a warp per 16 queries, 4×%d scores a thread",
			g, R, C, b.cn),
		Params:      g.params(in("q", nq), in(g.kName(), g.mats*D*g.tk), in("v", g.mats*g.tk*D), in("dout", nq), in("lse", g.mats*g.tq), in("delta", g.mats*g.tq), out("dq", nq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}
