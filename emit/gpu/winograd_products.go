package gpu

import "fmt"

// The Winograd products as one generated kernel, for dialects with 16-byte
// loads and stores (Dialect.Load4): M[b] = U[ξν]·V[b] for every product ξν
// and chunk s of a Winograd convolution (b = ξν·S + s), the forward's
// [OC][C]·[C][Tc] and the input gradient's [C][OC]·[OC][Tc]. The library
// GEMM (cuBLAS) runs these short products (K = 32 or 64) at about half the
// memory bandwidth: 58.8 µs for models/mnist.cue's forward on an H100,
// where this kernel takes 50.3 (bench/gpu/wg_products.cu, both in one CUDA
// graph, bit-identical results). What it does differently:
//
//   - the whole of K sits in threadgroup memory, U's k-major [K][rows]
//     (the filter transform writes it so, once instead of once per chunk)
//     and a 64-tile block of V;
//   - each thread keeps 4 rows × 4 neighbouring tiles of M in registers and
//     writes each row's four as one 16-byte store, so a warp writes whole
//     128-byte lines (scalar stores of the same tiles: 64 µs, 8×8 a thread
//     with strided tiles: 106 µs).
//
// Rows (OC or C) must be 64, K a multiple of 4 up to 64, and the chunk's
// tiles Tc a multiple of 4 (wgTiling rounds it up), so every 16-byte access
// is aligned: a product's operands start at multiples of 4 floats.

// Winograd products kernel bounds: the tiles a threadgroup computes, its
// rows and the longest K. With 32 rows (the input gradient of
// models/mnist.cue's second layer: 128 threads a threadgroup) it took 61.8
// µs on an H100, where cuBLAS took 49.5; with 64 rows, 57.0 against 57.4
// (ncu, cold caches; in one CUDA graph with warm caches 50.3 against 58.8).
const (
	wgProductTiles = 64
	wgProductRows  = 64
	wgProductMaxK  = 64
)

// wgProductsFit reports whether products of rows × k by k × tc run as
// wgProductsKernel.
func wgProductsFit(rows, k, tc int) bool {
	return rows == wgProductRows && k%4 == 0 && k <= wgProductMaxK && tc%4 == 0
}

// wgProductsKernel computes m [np·S][rows][tc] = u [np][k][rows]ᵀ ·
// v [np·S][k][tc]: product b takes the filters of ξν = b / S.
func wgProductsKernel(np, s, rows, k, tc int) *Kernel {
	tb := ceilDiv(tc, wgProductTiles)
	r4 := rows / 4
	threads := r4 * (wgProductTiles / 4)
	names := func(p string) [4]string { return [4]string{p + "0", p + "1", p + "2", p + "3"} }
	vars := func(n [4]string) [4]Expr { return [4]Expr{vr(n[0]), vr(n[1]), vr(n[2]), vr(n[3])} }
	acc := func(i, j int) string { return fmt.Sprintf("acc%d%d", i, j) }
	j4 := mul(vr("j"), i32(4))
	body := []Stmt{
		Shared{"us", k * rows}, Shared{"vs", k * wgProductTiles},
		let("b", Int, div(tgidE, i32(tb))),
		let("t0", Int, mul(rem(tgidE, i32(tb)), i32(wgProductTiles))),
		let("ub", Int, mul(div(vr("b"), i32(s)), i32(k*rows))),
		let("vb", Int, mul(vr("b"), i32(k*tc))),
		let("mb", Int, mul(vr("b"), i32(rows*tc))),
		// U of the product, then V's block: 16 bytes a load
		For{"j", lidE, i32(k * rows / 4), i32(threads), []Stmt{
			Load4{"u", add(vr("ub"), j4), names("w")},
			Store4{"us", j4, vars(names("w"))},
		}},
		For{"j", lidE, i32(k * wgProductTiles / 4), i32(threads), []Stmt{
			let("kk", Int, div(vr("j"), i32(wgProductTiles/4))),
			let("c", Int, mul(rem(vr("j"), i32(wgProductTiles/4)), i32(4))),
			If{Cond: lt(add(vr("t0"), vr("c")), i32(tc)),
				Then: []Stmt{
					Load4{"v", add(add(vr("vb"), mul(vr("kk"), i32(tc))), add(vr("t0"), vr("c"))), names("x")},
					Store4{"vs", add(mul(vr("kk"), i32(wgProductTiles)), vr("c")), vars(names("x"))},
				},
				Else: []Stmt{Store4{"vs", add(mul(vr("kk"), i32(wgProductTiles)), vr("c")), [4]Expr{flt(0), flt(0), flt(0), flt(0)}}},
			},
		}},
		Barrier{},
		// rows to + i·rows/4, tiles tt·4 … tt·4+3 of the block
		let("to", Int, div(lidE, i32(wgProductTiles/4))),
		let("tt", Int, rem(lidE, i32(wgProductTiles/4))),
	}
	var inner []Stmt
	for i := range 4 {
		body = append(body, let(acc(i, 0), Float, flt(0)), let(acc(i, 1), Float, flt(0)), let(acc(i, 2), Float, flt(0)), let(acc(i, 3), Float, flt(0)))
		inner = append(inner, let(fmt.Sprintf("a%d", i), Float, load("us", add(mul(vr("kk"), i32(rows)), add(vr("to"), i32(i*r4))))))
	}
	inner = append(inner, Load4{"vs", add(mul(vr("kk"), i32(wgProductTiles)), mul(vr("tt"), i32(4))), names("c")})
	for i := range 4 {
		for j := range 4 {
			inner = append(inner, set(acc(i, j), add(vr(acc(i, j)), mul(vr(fmt.Sprintf("a%d", i)), vr(fmt.Sprintf("c%d", j))))))
		}
	}
	body = append(body, loop("kk", 0, k, 1, inner...),
		let("t", Int, add(vr("t0"), mul(vr("tt"), i32(4)))))
	var stores []Stmt
	for i := range 4 {
		stores = append(stores, Store4{"m", add(add(vr("mb"), mul(add(vr("to"), i32(i*r4)), i32(tc))), vr("t")),
			[4]Expr{vr(acc(i, 0)), vr(acc(i, 1)), vr(acc(i, 2)), vr(acc(i, 3))}})
	}
	body = append(body, when(lt(vr("t"), i32(tc)), stores...))
	return &Kernel{
		Doc: fmt.Sprintf("Winograd products [%d·%d][%d,%d]·[%d,%d]: U k-major, %d tiles a threadgroup, 4x4 a thread",
			np, s, rows, k, k, tc, wgProductTiles),
		Params:      []Param{in("u", np*k*rows), in("v", np*s*k*tc), out("m", np*s*rows*tc)},
		Threadgroup: threads, Groups: np * s * tb, Body: body,
	}
}
