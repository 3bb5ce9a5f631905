package cpu

import "math"

// The CPU's fused attention (planner.KAttention, KAttentionBwd in a CPU
// program): a matrix (batch, head) at a time on each thread, its queries
// in blocks of attnBlock rows, so the scores of a block ([attnBlock, Tk],
// 64 KB at Tk 256) stay in cache and those of the whole matrix are never
// in memory. The products run on the calling thread (attnProducts: Sgemm's
// sgemmOn1, or AMX tiles in a bf16 attention), reading and writing the
// operands in place (a token-major matrix is rows Heads·D apart), a causal
// block stops at its last query's key, and the softmax and dropout are the
// unfused steps' vector kernels (expShiftSum, dropoutMask): the same
// arithmetic as AttentionFwd and AttentionBwd, the references, with float32
// sums in another order (and, in bf16, rounded operands in the products).
//
// Dropout draws DropoutUniform(Seed, Step, (m·Tq + i)·Tk + j) for element
// (m, i, j), as the references' Uniform does when it is that function.

// attnBlock is the queries of a block.
const attnBlock = 64

// attnScratch is one thread's block scores and their kin, [attnBlock, Tk]
// each, and its products.
type attnScratch struct {
	s, p, ds, mask []float32
	attnProducts
}

func (a Attention) newScratch(backward bool) *attnScratch {
	x := &attnScratch{s: make([]float32, attnBlock*a.Tk), mask: make([]float32, attnBlock*a.Tk)}
	if backward {
		x.p, x.ds = make([]float32, attnBlock*a.Tk), make([]float32, attnBlock*a.Tk)
	}
	if x.bf16 = a.BF16; x.bf16 {
		x.tiles = attnTiles()
	}
	return x
}

// attnTiles returns a thread's AMX products for a bf16 attention (nil where
// the CPU has none); tests give the tiles' Go twin.
var attnTiles = newAMXLocal

// attnProducts multiplies a thread's blocks, C = alpha·op(A)·op(B) +
// beta·C with Sgemm's argument convention (beta 0 or 1), in the
// attention's precision: float32 (sgemmOn1), or with bf16 bfloat16-rounded
// operands accumulated in float32, on the thread's AMX tiles where it has
// them (alpha then scales C after the product, and only with beta 0), else
// by sgemmOn1 on rounded copies. A matrix's keys and values are B operands
// of every block: setB prepares one once (packs or rounds it) for the
// products of its blocks (mulB), which read its first rows and columns.
type attnProducts struct {
	bf16  bool
	tiles *amxLocal
	ra    []float32 // A rounded, without tiles
	b     [attnOperands]attnB
}

// The B operands of a thread: a matrix's keys and values in the forms its
// products read, and one block's.
const (
	bKeysT       = iota // kᵀ: the scores q·kᵀ
	bValues             // v: the output p·v
	bValuesT            // vᵀ: the dropped probabilities' gradient do·vᵀ
	bKeys               // k: dq = ds·k
	bBlock              // a block's operand (mul)
	attnOperands        // their count
)

// attnB is a B operand as setB prepared it: as given (float32), as a
// rounded copy, or packed for the tiles.
type attnB struct {
	trans   bool
	b       []float32
	ldb     int
	rounded []float32
	packed  amxPackedB
}

// setB prepares B operand i: b (k×n, read transposed with transB).
func (x *attnProducts) setB(i int, transB bool, b []float32, ldb, k, n int) {
	o := &x.b[i]
	o.trans, o.b, o.ldb = transB, b, ldb
	switch {
	case !x.bf16:
	case x.tiles != nil:
		x.tiles.packB(&o.packed, transB, b, ldb, k, n)
	default:
		o.rounded, o.ldb = roundedOperand(o.rounded, "b", transB, b, ldb, k, n)
		o.b = o.rounded
	}
}

// roundedOperand copies the operand x (r×c as a product reads it, stored
// transposed with trans, row stride ld) rounded to bfloat16 into dst,
// grown if it must be, and returns the copy and its row stride.
func roundedOperand(dst []float32, name string, trans bool, x []float32, ld, r, c int) ([]float32, int) {
	rows, cols := r, c
	if trans {
		rows, cols = c, r
	}
	checkGemmOperand(name, x, rows, cols, ld)
	dst = growF32(dst, rows*cols)
	roundRows(dst, x, ld, cols, 0, rows)
	return dst, cols
}

// mulB multiplies by the first k rows and n columns of B operand i.
func (x *attnProducts) mulB(i int, transA bool, m, n, k int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) {
	o := &x.b[i]
	switch {
	case x.bf16 && x.tiles != nil:
		if (beta != 0 && beta != 1) || (alpha != 1 && beta != 0) {
			panic("cpu: the attention's tiles take beta 0 or 1, and alpha only with beta 0")
		}
		x.tiles.mulPacked(transA, m, n, k, a, lda, &o.packed, beta == 1, c, ldc)
		if alpha != 1 {
			for r := range m {
				row := c[r*ldc : r*ldc+n]
				rowScalar(BMul, row, alpha, row)
			}
		}
	case x.bf16:
		x.ra, lda = roundedOperand(x.ra, "a", transA, a, lda, m, k)
		sgemmOn1(transA, o.trans, m, n, k, alpha, x.ra, lda, o.b, o.ldb, beta, c, ldc)
	default:
		sgemmOn1(transA, o.trans, m, n, k, alpha, a, lda, o.b, o.ldb, beta, c, ldc)
	}
}

// mul multiplies by a block's B operand, prepared for this product only.
func (x *attnProducts) mul(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	x.setB(bBlock, transB, b, ldb, k, n)
	x.mulB(bBlock, transA, m, n, k, alpha, a, lda, beta, c, ldc)
}

// view is matrix m of x in the layout of q, v and o (and their
// gradients): [Mats, rows, D], or token-major [B, rows, Heads, D]; the
// slice from its first row and the stride between rows, as Sgemm reads
// and writes matrices in place.
func (a Attention) view(x []float32, m, rows int) ([]float32, int) {
	if x == nil {
		return nil, 0
	}
	if a.Heads > 0 {
		return x[(m/a.Heads*rows*a.Heads+m%a.Heads)*a.D:], a.Heads * a.D
	}
	return x[m*rows*a.D:], a.D
}

// keysView is matrix m of kt: its keys as rows [Tk, D] (token-major, in
// place of q's layout, transposed: false) or kᵀ [D, Tk] (transposed:
// true); the slice and its row stride.
func (a Attention) keysView(kt []float32, m int) (x []float32, ld int, transposed bool) {
	if kt == nil {
		return nil, 0, false
	}
	if a.Heads > 0 {
		x, ld = a.view(kt, m, a.Tk)
		return x, ld, false
	}
	return kt[m*a.D*a.Tk:], a.Tk, true
}

// clearRows zeroes rows [D] of view x (row stride ld).
func (a Attention) clearRows(x []float32, ld, rows int) {
	for t := range rows {
		clear(x[t*ld : t*ld+a.D])
	}
}

// attentionKernels are vector loops of the fused attention, where the
// machine has them (archAttention); each gives the bits of the Go code it
// replaces.
type attentionKernels struct {
	// ds writes the score gradients of a row, n of them (a multiple of
	// 16): ds[j] = scale·p[j]·(mask[j]·ds[j] − dl), or without mask[j]
	// when mask is nil.
	ds func(p, ds, mask *float32, n int, scale, dl float32)
	// rowMax is rowMax of n elements (a multiple of 16, at least 16),
	// except where that is a zero or a NaN: it returns some zero or NaN
	// then.
	rowMax func(x *float32, n int) float32
}

// rowMaxOf is rowMax(x) with k's vector loop where there is one.
func (k *attentionKernels) rowMaxOf(x []float32) float32 {
	n := len(x) &^ 15
	if k == nil || n == 0 {
		return rowMax(x)
	}
	m := k.rowMax(&x[0], n)
	if m == 0 || m != m {
		return rowMax(x)
	}
	for _, v := range x[n:] {
		m = max(m, v)
	}
	return m
}

// scoreGrads writes a row's score gradients from its probabilities p
// and the gradient of its dropped probabilities in ds:
// ds = Scale·p·(mask·ds − dl), without the mask when Rate is 0.
func (a Attention) scoreGrads(k *attentionKernels, p, ds, mask []float32, dl float32) {
	done := 0
	if k != nil && len(ds) >= 16 {
		done = len(ds) &^ 15
		var mp *float32
		if a.Rate > 0 {
			mp = &mask[0]
			_ = mask[done-1] // the assembly does no bounds checks
		}
		_, _ = p[done-1], ds[done-1]
		k.ds(&p[0], &ds[0], mp, done, a.Scale, dl)
	}
	if a.Rate > 0 {
		for j := done; j < len(ds); j++ {
			ds[j] = a.Scale * p[j] * (mask[j]*ds[j] - dl)
		}
		return
	}
	for j := done; j < len(ds); j++ {
		ds[j] = a.Scale * p[j] * (ds[j] - dl)
	}
}

// rowDots writes delta[i] = Σ_d do[i][d]·o[i][d] for the Tq rows of a
// matrix (row strides lddo and ldo): each row's float32 sum in d's order,
// one chain, as the references compute it; four rows at a time, whose
// chains are independent, so that each addition need not wait for the
// one before (one chain a row took a sixth of AttentionBlocksBwd).
func (a Attention) rowDots(do []float32, lddo int, o []float32, ldo int, delta []float32) {
	i := 0
	for ; i+4 <= len(delta); i += 4 {
		g0, g1, g2, g3 := do[i*lddo:][:a.D], do[(i+1)*lddo:][:a.D], do[(i+2)*lddo:][:a.D], do[(i+3)*lddo:][:a.D]
		o0, o1, o2, o3 := o[i*ldo:][:a.D], o[(i+1)*ldo:][:a.D], o[(i+2)*ldo:][:a.D], o[(i+3)*ldo:][:a.D]
		var s0, s1, s2, s3 float32
		for d := range g0 {
			s0 += g0[d] * o0[d]
			s1 += g1[d] * o1[d]
			s2 += g2[d] * o2[d]
			s3 += g3[d] * o3[d]
		}
		delta[i], delta[i+1], delta[i+2], delta[i+3] = s0, s1, s2, s3
	}
	for ; i < len(delta); i++ {
		var dd float32
		for d, g := range do[i*lddo : i*lddo+a.D] {
			dd += g * o[i*ldo+d]
		}
		delta[i] = dd
	}
}

// keepRate is the dropout's multiplier of a kept element, 1/(1−Rate).
func (a Attention) keepRate() float32 { return 1 / (1 - a.Rate) }

// blockScores writes x.s [rows, n] = Scale·q[i0:i0+rows]·k[:n]ᵀ, n the
// keys the block's last query sees, and returns n; x's bKeysT is the
// matrix's kᵀ.
func (a Attention) blockScores(x *attnScratch, q []float32, ldq int, i0, rows int) int {
	n := a.seen(i0 + rows - 1)
	x.mulB(bKeysT, false, rows, n, a.D, a.Scale, q[i0*ldq:], ldq, 0, x.s, n)
	return n
}

// AttentionBlocksFwd is the CPU's fused attention forward: AttentionFwd's
// o and lse (see the file's comment for the method and the draws).
func AttentionBlocksFwd(q, kt, v, o, lse []float32, a Attention) {
	k := archAttention(activeGemmPath.Load().name)
	ParallelFor(a.Mats, 1, func(lo, hi int) {
		x := a.newScratch(false)
		for m := lo; m < hi; m++ {
			qm, ldq := a.view(q, m, a.Tq)
			km, ldk, kT := a.keysView(kt, m)
			vm, ldv := a.view(v, m, a.Tk)
			om, ldo := a.view(o, m, a.Tq)
			x.setB(bKeysT, !kT, km, ldk, a.D, a.Tk)
			x.setB(bValues, false, vm, ldv, a.Tk, a.D)
			ids := a.padKeys(m)
			for i0 := 0; i0 < a.Tq; i0 += attnBlock {
				rows := min(attnBlock, a.Tq-i0)
				n := a.blockScores(x, qm, ldq, i0, rows)
				for r := range rows {
					i := i0 + r
					row := x.s[r*n : (r+1)*n]
					seen := a.seen(i)
					if ids != nil && !maskKeys(row[:seen], ids, a.PadID) {
						lse[m*a.Tq+i] = float32(math.Inf(1))
						clear(row)
						continue
					}
					mx := k.rowMaxOf(row[:seen])
					sum := expShiftSum(row[:seen], row[:seen], mx)
					lse[m*a.Tq+i] = mx + float32(math.Log(float64(sum)))
					rowScalar(BMul, row[:seen], float32(1/sum), row[:seen])
					if a.Rate > 0 {
						dropoutMask(row[:seen], row[:seen], x.mask[:seen], uint32((m*a.Tq+i)*a.Tk), a.Seed, a.Step, a.Rate, a.keepRate())
					}
					clear(row[seen:])
				}
				x.mulB(bValues, false, rows, a.D, n, 1, x.s, n, 0, om[i0*ldo:], ldo)
			}
		}
	})
}

// AttentionBlocksBwd is the CPU's fused attention backward: AttentionBwd's
// delta, dq, dkt and dv (each of the last three may be nil), the
// probabilities and the dropout's mask recomputed block by block.
func AttentionBlocksBwd(q, kt, v, o, lse, do, dq, dkt, dv, delta []float32, a Attention) {
	k := archAttention(activeGemmPath.Load().name)
	ParallelFor(a.Mats, 1, func(lo, hi int) {
		x := a.newScratch(true)
		for m := lo; m < hi; m++ {
			qm, ldq := a.view(q, m, a.Tq)
			km, ldk, kT := a.keysView(kt, m)
			vm, ldv := a.view(v, m, a.Tk)
			om, ldo := a.view(o, m, a.Tq)
			dom, lddo := a.view(do, m, a.Tq)
			dqm, lddq := a.view(dq, m, a.Tq)
			dkm, lddk, _ := a.keysView(dkt, m)
			dvm, lddv := a.view(dv, m, a.Tk)
			a.rowDots(dom, lddo, om, ldo, delta[m*a.Tq:(m+1)*a.Tq])
			x.setB(bKeysT, !kT, km, ldk, a.D, a.Tk)
			if dq != nil || dkt != nil {
				x.setB(bValuesT, true, vm, ldv, a.D, a.Tk)
			}
			if dq != nil {
				x.setB(bKeys, kT, km, ldk, a.Tk, a.D)
			}
			// The blocks go last to first: the last one sees every key
			// (where Tq > 0), so it writes dk and dv (beta 0) and the
			// others add to them; else they are cleared first.
			add := float32(0)
			if a.Tq == 0 || a.seen(a.Tq-1) < a.Tk {
				add = 1
				switch {
				case dkt == nil:
				case kT:
					for d := range a.D {
						clear(dkm[d*lddk : d*lddk+a.Tk])
					}
				default:
					a.clearRows(dkm, lddk, a.Tk)
				}
				if dv != nil {
					a.clearRows(dvm, lddv, a.Tk)
				}
			}
			ids := a.padKeys(m)
			last := (a.Tq+attnBlock-1)/attnBlock*attnBlock - attnBlock
			for i0 := last; i0 >= 0; i0, add = i0-attnBlock, 1 {
				rows := min(attnBlock, a.Tq-i0)
				n := a.blockScores(x, qm, ldq, i0, rows)
				// p = e^(s − lse), and pd = p·keep, the dropped
				// probabilities the forward multiplied v by
				for r := range rows {
					i := i0 + r
					row, pd, mask := x.s[r*n:(r+1)*n], x.p[r*n:(r+1)*n], x.mask[r*n:(r+1)*n]
					seen := a.seen(i)
					if ids != nil {
						maskKeys(row[:seen], ids, a.PadID)
					}
					expShift(row[:seen], row[:seen], lse[m*a.Tq+i])
					clear(row[seen:])
					if a.Rate > 0 {
						dropoutMask(row[:seen], pd[:seen], mask[:seen], uint32((m*a.Tq+i)*a.Tk), a.Seed, a.Step, a.Rate, a.keepRate())
					} else {
						copy(pd[:seen], row[:seen])
					}
					clear(pd[seen:])
				}
				if dv != nil { // dv[:n] += pdᵀ·do
					x.mul(true, false, n, a.D, rows, 1, x.p, n, dom[i0*lddo:], lddo, add, dvm, lddv)
				}
				if dq == nil && dkt == nil {
					continue
				}
				// dp = do·v[:n]ᵀ, then ds = Scale·p·(keep·dp − delta)
				x.mulB(bValuesT, false, rows, n, a.D, 1, dom[i0*lddo:], lddo, 0, x.ds, n)
				for r := range rows {
					i := i0 + r
					p, ds := x.s[r*n:(r+1)*n], x.ds[r*n:(r+1)*n]
					seen := a.seen(i)
					a.scoreGrads(k, p[:seen], ds[:seen], x.mask[r*n:r*n+seen], delta[m*a.Tq+i])
					clear(ds[seen:])
				}
				if dq != nil { // dq[block] = ds·k[:n]
					x.mulB(bKeys, false, rows, a.D, n, 1, x.ds, n, 0, dqm[i0*lddq:], lddq)
				}
				switch {
				case dkt == nil:
				case kT: // dkᵀ[:, :n] += q[block]ᵀ·ds
					x.mul(true, false, a.D, n, rows, 1, qm[i0*ldq:], ldq, x.ds, n, add, dkm, lddk)
				default: // dk[:n] += dsᵀ·q[block]
					x.mul(true, false, n, a.D, rows, 1, x.ds, n, qm[i0*ldq:], ldq, add, dkm, lddk)
				}
			}
		}
	})
}
