package gpu

import "fmt"

// A long-K GEMM with a small output: C[M,N] = Alpha·A·Bᵀ + Beta·C with A
// [M,K] and B [N,K] row-major, M·N at most a few threadgroups' worth and K
// in the tens of thousands. It is the weight gradient of a convolution with
// few channels and a small window (models/mnist.cue's first layer: 32×25
// outputs, each a sum over 196,000 pixels of the batch), where cuBLAS's
// split-K kernels reach about a tenth of the GPU's arithmetic (76 µs on an
// H100 for 0.3 GFLOP). Here it is two kernels and no atomics, so the sums
// come out the same on every run:
//
//	partials: threadgroup g sums its slice of K into part[g, M·N], reading
//	          A and B a tile of longKTile columns at a time through
//	          threadgroup memory (coalesced along K);
//	reduce:   one threadgroup per output element adds the slices' partials
//	          and writes Alpha·sum + Beta·C.
//
// The partials need scratch: LongKPartials floats beside the operands.

const (
	longKThreads = 256 // threads of a partials threadgroup
	longKTile    = 32  // K columns per tile
	longKSlices  = 256 // most threadgroups (slices of K)
	longKMinK    = 1 << 14
	longKMaxOut  = 4 * longKThreads // M·N: at most four outputs a thread
	longKMaxRows = 256              // M+N: the tile is (M+N)·longKTile floats
)

// longKFits reports whether a GEMM of these sizes takes the long-K path.
func longKFits(transA, transB bool, m, n, k int) bool {
	return !transA && transB && m*n <= longKMaxOut && m+n <= longKMaxRows && k >= longKMinK
}

// longKSlicesFor is the number of slices K is cut into: whole tiles, at
// most longKSlices.
func longKSlicesFor(k int) int { return min(ceilDiv(k, longKTile), longKSlices) }

// LongKPartials is the scratch, in float32s, a long-K GEMM of M·N outputs
// and inner dimension K needs for its partial sums, 0 when it does not
// take that path.
func LongKPartials(m, n, k int) int {
	if !longKFits(false, true, m, n, k) {
		return 0
	}
	return longKSlicesFor(k) * m * n
}

// longKPartialKernel sums slices of K: part[g·M·N + m·N + n] = Σ A[m,k]·B[n,k]
// over the slice of threadgroup g.
func longKPartialKernel(m, n, k, lda, ldb int) *Kernel {
	slices := longKSlicesFor(k)
	span := ceilDiv(ceilDiv(k, slices), longKTile) * longKTile // K columns a slice
	rows := m + n
	tileLen := rows * longKTile
	outs := ceilDiv(m*n, longKThreads)
	body := []Stmt{
		Shared{"tile", tileLen},
		let("k0", Int, mul(tgidE, i32(span))),
		let("k1", Int, sel(lt(add(vr("k0"), i32(span)), i32(k)), add(vr("k0"), i32(span)), i32(k))),
	}
	for r := 0; r < outs; r++ {
		body = append(body, let(fmt.Sprintf("acc%d", r), Float, flt(0)))
	}
	// The tile holds A's rows then B's rows, longKTile columns each.
	fill := For{"e", lidE, i32(tileLen), i32(longKThreads), []Stmt{
		let("row", Int, div(vr("e"), i32(longKTile))),
		let("kk", Int, add(vr("kt"), rem(vr("e"), i32(longKTile)))),
		let("v", Float, flt(0)),
		when(lt(vr("kk"), vr("k1")), If{Cond: lt(vr("row"), i32(m)),
			Then: []Stmt{set("v", load("a", add(mul(vr("row"), i32(lda)), vr("kk"))))},
			Else: []Stmt{set("v", load("b", add(mul(sub(vr("row"), i32(m)), i32(ldb)), vr("kk"))))}}),
		store("tile", vr("e"), vr("v")),
	}}
	var dot []Stmt
	for r := 0; r < outs; r++ {
		o := add(lidE, i32(r*longKThreads))
		acc := fmt.Sprintf("acc%d", r)
		dot = append(dot, when(lt(o, i32(m*n)),
			let(fmt.Sprintf("ra%d", r), Int, mul(div(o, i32(n)), i32(longKTile))),
			let(fmt.Sprintf("rb%d", r), Int, mul(add(rem(o, i32(n)), i32(m)), i32(longKTile))),
			loop("t", 0, longKTile, 1, set(acc, add(vr(acc), mul(
				load("tile", add(vr(fmt.Sprintf("ra%d", r)), vr("t"))),
				load("tile", add(vr(fmt.Sprintf("rb%d", r)), vr("t")))))))))
	}
	body = append(body, For{"kt", vr("k0"), vr("k1"), i32(longKTile),
		append(append([]Stmt{fill, Barrier{}}, dot...), Barrier{})})
	for r := 0; r < outs; r++ {
		o := add(lidE, i32(r*longKThreads))
		body = append(body, when(lt(o, i32(m*n)), store("part", add(mul(tgidE, i32(m*n)), o), vr(fmt.Sprintf("acc%d", r)))))
	}
	return &Kernel{
		Doc:         fmt.Sprintf("long-K GEMM partials: %d slices of K=%d for C[%d,%d] = A·Bᵀ", slices, k, m, n),
		Params:      []Param{in("a", (m-1)*lda+k), in("b", (n-1)*ldb+k), out("part", slices*m*n)},
		Threadgroup: longKThreads, Groups: slices, Body: body,
	}
}

// longKReduceKernel is C[m,n] = alpha·Σ_g part[g, m·N + n] + beta·C[m,n],
// one threadgroup per output element.
func longKReduceKernel(m, n, k, ldc int, alpha, beta float32) *Kernel {
	slices := longKSlicesFor(k)
	tg := pow2AtMost(slices, longKSlices)
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("j", slices, tg, set("acc", add(vr("acc"), load("part", add(mul(vr("j"), i32(m*n)), tgidE))))),
	}
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	ci := add(mul(div(tgidE, i32(n)), i32(ldc)), rem(tgidE, i32(n)))
	v := mul(flt(alpha), vr("total"))
	if beta != 0 {
		v = add(v, mul(flt(beta), load("c", ci)))
	}
	body = append(body, when(eq(lidE, i32(0)), store("c", ci, v)))
	return &Kernel{
		Doc:    fmt.Sprintf("long-K GEMM: C[%d,%d] = %g·(sum of %d partials) + %g·C", m, n, alpha, slices, beta),
		Params: []Param{in("part", slices*m*n), out("c", (m-1)*ldc+n)}, Threadgroup: tg, Groups: m * n, Body: body,
	}
}

// longKGemm lowers g, which longKFits, as the two kernels, with the
// partials at part (LongKPartials floats).
func (l *lowering) longKGemm(g Gemm, part operand) error {
	if !longKFits(g.TransA, g.TransB, g.M, g.N, g.K) {
		return fmt.Errorf("a %dx%dx%d GEMM (transA %v, transB %v) does not take the long-K path", g.M, g.N, g.K, g.TransA, g.TransB)
	}
	if err := l.checkGemm(g); err != nil {
		return err
	}
	if err := l.launch("gemm_longk_partials", longKPartialKernel(g.M, g.N, g.K, g.A.LD, g.B.LD), nil,
		at(g.A.Buf, g.A.Offset), at(g.B.Buf, g.B.Offset), part); err != nil {
		return err
	}
	return l.launch("gemm_longk", longKReduceKernel(g.M, g.N, g.K, g.C.LD, g.Alpha, g.Beta), nil, part, at(g.C.Buf, g.C.Offset))
}
