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
		fin := []Stmt{let(inv, Float, div(flt(1), vr(nm("l", a))))}
		fin = append(fin, b.storeDims(D, "o", func(dim Expr) Expr { return add(g.rowAt(vr("mat"), i, g.tq), dim) },
			func(c int) Expr { return mul(vr(nm("o", a, c)), vr(inv)) })...)
		fin = append(fin, when(eq(vr("tx"), i32(0)), store("lse", add(mul(vr("mat"), i32(g.tq)), i), add(vr(nm("m", a)), call(FnLog, vr(nm("l", a)))))))
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
