package gpu

import "fmt"

// The Winograd forward's products and the first half of its output
// transform as one generated kernel, for dialects with 16-byte loads and
// stores (Dialect.Load4): for each row ξ of the α×α products and chunk s,
//
//	Z[ξ][j][s] = Σ_ν A[ν][j] · (U[ξν]·V[ξν·S+s])    [rows][Tc], j < m
//
// where the library GEMM wrote every product M[ξν] (α² of them: 65 MB for
// models/mnist.cue's second layer at batch 250) for the output kernel to
// read back. One threadgroup takes a row's α products one after another
// for 32 tiles and all rows; each product is held in registers (4 rows × 4
// neighbouring tiles a thread) and folded into the thread's m sums as soon
// as it is done, so M never reaches memory and Z is m/α of its size (half
// for F(4×4)), small enough to stay in the H100's L2 for the output kernel,
// which then applies Aᵀ only (wgOutputKernel's halfDone).
//
//   - The whole of K sits in threadgroup memory: U's k-major [K][rows] (the
//     filter transform writes it so, once instead of once per chunk) and a
//     block of V, both loaded 16 bytes at a time.
//   - Z is written 16 bytes a row of 4 tiles, so a warp writes whole
//     128-byte lines.
//
// Side by side on an H100 (mnist bench, median of 3; the programs of
// b718d1a, ed09b57 and this kernel): batch-250 inference 0.1781 ms with
// cuBLAS's batched GEMM, 0.1750 with a products-only kernel (M written as
// cuBLAS writes it), 0.1647 with this one; the training step 0.536, 0.527,
// 0.515 ms. Alone and with cold caches (ncu) it takes 70 µs against the
// products-only kernel's 57 and the output kernel 18 against 30: the gain
// is Z staying in L2. The products-only kernel's shape came from
// bench/gpu/wg_products.cu (in one CUDA graph: cuBLAS 58.8 µs, 4×4 a thread
// with 16-byte stores 50.3, scalar stores 63.7, 8×8 a thread 105.7).
//
// Rows (OC) must be 64, K a multiple of 4 up to 64, and the chunk's tiles
// Tc a multiple of 4 (wgTiling rounds it up), so every 16-byte access is
// aligned: a product's operands start at multiples of 4 floats. The input
// gradient's products (32 rows for models/mnist.cue) stay on the library
// GEMM: a products-only kernel of 32 rows took 61.8 µs against cuBLAS's
// 49.5.

// Winograd products kernel bounds: the tiles a threadgroup computes (32:
// 128 threads, four threadgroups an SM at 123 registers a thread; on an
// H100, ncu: 64.7 µs against 69.8 with 64 tiles and 69.6 with 16), its
// rows and the longest K.
const (
	wgProductTiles = 32
	wgProductRows  = 64
	wgProductMaxK  = 64
)

// wgRowsMinGroups is the fewest threadgroups for which the products run as
// wgProductRowsKernel: it has α·S·⌈Tc/32⌉ of them, 8 for one 14×14 image
// of F(4×4), and a GPU of 132 SMs then idles where the library's GEMM
// spreads the 64 products (the batch-1 inference of models/mnist.cue on an
// H100, side by side, four runs each: 0.055–0.060 ms with the kernel,
// 0.039–0.043 with cuBLAS; batch 250 unmoved). A variable so that tests
// can run the kernel on small layers.
var wgRowsMinGroups = 128

// wgProductsFit reports whether products of rows × k by k × tc run as
// wgProductRowsKernel.
func wgProductsFit(rows, k, tc int) bool {
	return rows == wgProductRows && k%4 == 0 && k <= wgProductMaxK && tc%4 == 0
}

// wgProductRowsKernel computes, for each row ξ of the products and chunk s,
// Z[ξ][j][s] = Σ_ν A[ν][j]·(u[ξν]ᵀ·v[ξν·S+s]) [rows][tc] for j < m: one
// threadgroup multiplies a row's α products one after another and folds
// each into the m sums of the output transform's right-hand product (·A)
// while it is still in registers. M never reaches memory; Z is m/α of its
// size (half for F(4×4)), and the output kernel applies Aᵀ only
// (wgOutputKernel's halfDone).
func wgProductRowsKernel(wa *Winograd, s, rows, k, tc int) *Kernel {
	al, m := wa.alpha, wa.m
	tb := ceilDiv(tc, wgProductTiles)
	rm := 4 // rows a thread: 2 took 99.8 µs against 70.3 (ncu), 88 registers against 123 but twice the threads
	r4 := rows / rm
	threads := r4 * (wgProductTiles / 4)
	names := func(p string) [4]string { return [4]string{p + "0", p + "1", p + "2", p + "3"} }
	vars := func(n [4]string) [4]Expr { return [4]Expr{vr(n[0]), vr(n[1]), vr(n[2]), vr(n[3])} }
	acc := func(i, j int) string { return fmt.Sprintf("acc%d%d", i, j) }
	z := func(i, jj, j int) string { return fmt.Sprintf("z%d%d_%d", i, jj, j) }
	j4 := mul(vr("j"), i32(4))
	body := []Stmt{
		Shared{"us", k * rows}, Shared{"vs", k * wgProductTiles},
		let("xi", Int, div(tgidE, i32(s*tb))),
		let("sc", Int, rem(div(tgidE, i32(tb)), i32(s))),
		let("t0", Int, mul(rem(tgidE, i32(tb)), i32(wgProductTiles))),
		// rows to + i·rows/4, tiles tt·4 … tt·4+3 of the block
		let("to", Int, div(lidE, i32(wgProductTiles/4))),
		let("tt", Int, rem(lidE, i32(wgProductTiles/4))),
	}
	for i := range rm {
		for jj := range 4 {
			body = append(body, let(acc(i, jj), Float, flt(0)))
			for j := range m {
				body = append(body, let(z(i, jj, j), Float, flt(0)))
			}
		}
	}
	var inner []Stmt
	for i := range rm {
		inner = append(inner, let(fmt.Sprintf("a%d", i), Float, load("us", add(mul(vr("kk"), i32(rows)), add(vr("to"), i32(i*r4))))))
	}
	inner = append(inner, Load4{"vs", add(mul(vr("kk"), i32(wgProductTiles)), mul(vr("tt"), i32(4))), names("c")})
	for i := range rm {
		for jj := range 4 {
			inner = append(inner, set(acc(i, jj), add(vr(acc(i, jj)), mul(vr(fmt.Sprintf("a%d", i)), vr(fmt.Sprintf("c%d", jj))))))
		}
	}
	for nu := range al {
		p := add(mul(vr("xi"), i32(al)), i32(nu)) // the product ξν
		if nu > 0 {
			body = append(body, Barrier{}) // the last product's operands are read
		}
		body = append(body,
			For{"j", lidE, i32(k * rows / 4), i32(threads), []Stmt{
				Load4{"u", add(mul(p, i32(k*rows)), j4), names("w")},
				Store4{"us", j4, vars(names("w"))},
			}},
			For{"j", lidE, i32(k * wgProductTiles / 4), i32(threads), []Stmt{
				let("kk", Int, div(vr("j"), i32(wgProductTiles/4))),
				let("c", Int, mul(rem(vr("j"), i32(wgProductTiles/4)), i32(4))),
				If{Cond: lt(add(vr("t0"), vr("c")), i32(tc)),
					Then: []Stmt{
						Load4{"v", add(add(mul(add(mul(p, i32(s)), vr("sc")), i32(k*tc)), mul(vr("kk"), i32(tc))), add(vr("t0"), vr("c"))), names("x")},
						Store4{"vs", add(mul(vr("kk"), i32(wgProductTiles)), vr("c")), vars(names("x"))},
					},
					Else: []Stmt{Store4{"vs", add(mul(vr("kk"), i32(wgProductTiles)), vr("c")), [4]Expr{flt(0), flt(0), flt(0), flt(0)}}},
				},
			}},
			Barrier{})
		for i := range rm {
			for jj := range 4 {
				body = append(body, set(acc(i, jj), flt(0)))
			}
		}
		body = append(body, loop("kk", 0, k, 1, inner...))
		// Z[j] += A[ν][j]·M = Aᵀ[j][ν]·M
		for j := range m {
			for i := range rm {
				for jj := range 4 {
					if c := wa.at[j][nu]; c != 0 {
						body = append(body, set(z(i, jj, j), lin([]float32{1, c}, []Expr{vr(z(i, jj, j)), vr(acc(i, jj))})))
					}
				}
			}
		}
	}
	body = append(body, let("t", Int, add(vr("t0"), mul(vr("tt"), i32(4)))))
	var stores []Stmt
	for j := range m {
		for i := range rm {
			row := add(mul(add(mul(add(mul(vr("xi"), i32(m)), i32(j)), i32(s)), vr("sc")), i32(rows)), add(vr("to"), i32(i*r4)))
			stores = append(stores, Store4{"m", add(mul(row, i32(tc)), vr("t")),
				[4]Expr{vr(z(i, 0, j)), vr(z(i, 1, j)), vr(z(i, 2, j)), vr(z(i, 3, j))}})
		}
	}
	body = append(body, when(lt(vr("t"), i32(tc)), stores...))
	return &Kernel{
		Doc: fmt.Sprintf("Winograd F(%dx%d,%dx%d) products [%d·%d][%d,%d]·[%d,%d], each row ξ's %d folded into Z = M·A: U k-major, %d tiles a threadgroup, 4x4 a thread",
			wa.m, wa.m, wa.r, wa.r, wa.products(), s, rows, k, k, tc, al, wgProductTiles),
		Params:      []Param{in("u", wa.products()*k*rows), in("v", wa.products()*s*k*tc), out("m", al*m*s*rows*tc)},
		Threadgroup: threads, Groups: al * s * tb, Body: body,
	}
}
