package cpu

import "unsafe"

// BF16's products on CPUs with AVX512-BF16 but no AMX tiles (AMD Zen 4 and
// 5, Intel Cooper Lake, a Sapphire Rapids that withholds the tiles): Sgemm's
// blocking, parallel splits and arenas (gemm.go, gemm_parallel.go) run a
// path whose packers round A's and B's panels to bfloat16 pairs along k
// (the layout VDPBF16PS reads) and whose register tile multiplies them with
// VDPBF16PS, 32 bfloat16 products into 16 float32 sums an instruction.
//
// The numbers are the AMX path's: every operand is rounded to the nearest
// bfloat16, ties to even, exactly as RoundBF16 (a NaN stays a quiet NaN, a
// finite value too large becomes an infinity); a bfloat16 below the
// smallest normal (a subnormal) is read as a zero, and each sum below the
// smallest normal float32 is flushed to a zero of its sign, as VDPBF16PS
// and TDPBF16PS do. Each C[i][j] is one float32 chain from +0: for each
// pair of k, p = 0, 2, 4, …, s += A[i][p+1]·B[p+1][j] then s += A[i][p]·B[p][j]
// (a missing k+1 of an odd k reads as zero), every product exact (unless
// it falls below float32's normals, which random tests do not reach) and
// every sum rounded to nearest even. A tile whose chain crosses a cache block of
// k carries on from the sums stored in C, so the result is the same bits
// for any blocking, any number of threads, and the pure-Go kernel
// (pairKernelGo) as for the assembly.

// pairPackers are a bfloat16 path's conversions of float32 operands into
// pairs (pair packs two float32 as rounded bfloat16, the first in the low
// half): rows for a source that holds k in its rows (A transposed, B not),
// columns8 for one that holds k along its rows (A not transposed, B
// transposed).
type pairPackers struct {
	// packA and packB pack a block of A and of B (packPairsA, packPairsB,
	// or a test's packers), reached only through the path, so a program
	// without a bf16 product links none of them.
	packA func(p *gemmPath, trans bool, a []float32, lda, row0, col0, mb, kb int, dst []float32)
	packB func(p *gemmPath, trans bool, b []float32, ldb, row0, col0, kb, nb int, dst []float32)
	// rows writes dst[s·ldd+j] = pair(src[2s·lds+j], src[(2s+1)·lds+j])
	// for j < lanes ≤ 48 and s < steps (pairRowsGo).
	rows func(dst []uint32, ldd int, src []float32, lds, lanes, steps int)
	// panels8, when set, is rows for 16 lanes of two 8-lane panels (a
	// tile of 8 rows): lane j < 8 of step s at dst[s·8+j], lane j ≥ 8 at
	// dst[panel+s·8+j-8] (pairPanels8Go).
	panels8 func(dst []uint32, panel int, src []float32, lds, steps int)
	// columns8 writes dst[s·ldd+j] = pair(src[j·lds+2s], src[j·lds+2s+1])
	// for the 8 lanes j < 8 and s < steps, a multiple of 8
	// (pairColumnsGo).
	columns8 func(dst []uint32, ldd int, src []float32, lds, steps int)
}

// gemmBF16 is C = A·B (alpha 1, beta 0, Sgemm's argument convention) on the
// bfloat16 path; false, with C untouched, where the CPU has none.
func gemmBF16(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	return gemmBF16Beta(transA, transB, m, n, k, a, lda, b, ldb, 0, c, ldc)
}

// gemmBF16Beta is gemmBF16 with Sgemm's beta.
func gemmBF16Beta(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	p := bf16Path()
	if p == nil {
		return false
	}
	gemmOn(p, Threads(), transA, transB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
	return true
}

// pair is lo and hi rounded to bfloat16 (RoundBF16) in one word, lo in the
// low half.
func pair(lo, hi float32) uint32 { return uint32(bf16Bits(lo)) | uint32(bf16Bits(hi))<<16 }

// pairsOf is a packed panel's float32 slots as the uint32 pairs they hold.
func pairsOf(x []float32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// packPairsA is packA for a bfloat16 path: op(A)[row0:row0+mb,
// col0:col0+kb] as micro-panels of mr rows, each (kb+1)/2 steps of mr
// pairs, an odd kb's last pair padded with zero. The lanes of a last panel
// past mb rows are left as they were: they reach only rows of an edge tile
// that tiles discards.
func packPairsA(path *gemmPath, trans bool, a []float32, lda, row0, col0, mb, kb int, dst []float32) {
	mr, steps := path.mr, (kb+1)/2
	d := pairsOf(dst)
	for ir := 0; ir < mb; ir += mr {
		rows := min(mr, mb-ir)
		panel := d[ir*steps : ir*steps+mr*steps]
		switch {
		case trans && mr == 8 && path.pairs.panels8 != nil && ir+16 <= mb:
			// Two panels at once: 16 lanes a load, not 8.
			pairRowsPanels8(path.pairs, d[ir*steps:ir*steps+16*steps], steps, a[col0*lda+row0+ir:], lda, kb)
			ir += mr
		case trans:
			pairRows(path.pairs, panel, mr, a[col0*lda+row0+ir:], lda, rows, kb)
		default:
			pairColumns(path.pairs, panel, mr, a[(row0+ir)*lda+col0:], lda, rows, kb)
		}
	}
}

// pairRowsPanels8 is pairRows for 16 lanes into two panels of 8 lanes and
// steps steps each, dst holding both.
func pairRowsPanels8(pk *pairPackers, dst []uint32, steps int, src []float32, lds, kb int) {
	full := kb / 2
	if full > 0 {
		_ = src[(2*full-1)*lds+15] // the assembly does no bounds checks
		_ = dst[8*steps+(full-1)*8+7]
		pk.panels8(dst, 8*steps, src, lds, full)
	}
	if kb%2 == 1 {
		last := src[(kb-1)*lds:][:16]
		for j, v := range last {
			dst[j/8*8*steps+full*8+j%8] = pair(v, 0)
		}
	}
}

// packPairsB is packB for a bfloat16 path: op(B)[row0:row0+kb,
// col0:col0+nb] as micro-panels of nr columns, each (kb+1)/2 steps of nr
// pairs, an odd kb's last pair padded with zero; as in packPairsA, the
// lanes of a last panel past nb columns are left as they were.
func packPairsB(path *gemmPath, trans bool, b []float32, ldb, row0, col0, kb, nb int, dst []float32) {
	nr, steps := path.nr, (kb+1)/2
	d := pairsOf(dst)
	for jr := 0; jr < nb; jr += nr {
		cols := min(nr, nb-jr)
		panel := d[jr*steps : jr*steps+nr*steps]
		if trans {
			pairColumns(path.pairs, panel, nr, b[(col0+jr)*ldb+row0:], ldb, cols, kb)
		} else {
			pairRows(path.pairs, panel, nr, b[row0*ldb+col0+jr:], ldb, cols, kb)
		}
	}
}

// pairRows writes the pairs of kb rows of src (row stride lds), lanes
// columns of each, into dst as (kb+1)/2 steps of ldd: rows 2s and 2s+1
// make step s, and an odd last row is paired with zero.
func pairRows(pk *pairPackers, dst []uint32, ldd int, src []float32, lds, lanes, kb int) {
	full := kb / 2
	if full > 0 {
		_ = src[(2*full-1)*lds+lanes-1] // the assembly does no bounds checks
		_ = dst[(full-1)*ldd+lanes-1]
		pk.rows(dst, ldd, src, lds, lanes, full)
	}
	if kb%2 == 1 {
		last, d := src[(kb-1)*lds:][:lanes], dst[full*ldd:][:lanes]
		for j, v := range last {
			d[j] = pair(v, 0)
		}
	}
}

// pairColumns writes the pairs along the rows of src (lanes rows of kb,
// row stride lds) into dst as (kb+1)/2 steps of ldd: row j's elements 2s
// and 2s+1 make lane j of step s, and an odd last one is paired with zero.
// Whole blocks of 8 rows and 8 steps go through pk.columns8.
func pairColumns(pk *pairPackers, dst []uint32, ldd int, src []float32, lds, lanes, kb int) {
	full := kb / 2
	s8 := full &^ 7
	j := 0
	if s8 > 0 {
		for ; j+8 <= lanes; j += 8 {
			_ = src[(j+7)*lds+2*s8-1]
			_ = dst[(s8-1)*ldd+j+7]
			pk.columns8(dst[j:], ldd, src[j*lds:], lds, s8)
		}
	}
	for r := 0; r < lanes; r++ {
		row := src[r*lds : r*lds+kb]
		first := s8
		if r >= j {
			first = 0
		}
		for s := first; s < full; s++ {
			dst[s*ldd+r] = pair(row[2*s], row[2*s+1])
		}
		if kb%2 == 1 {
			dst[full*ldd+r] = pair(row[kb-1], 0)
		}
	}
}

// pairRowsGo is pairPackers.rows in Go.
func pairRowsGo(dst []uint32, ldd int, src []float32, lds, lanes, steps int) {
	for s := 0; s < steps; s++ {
		lo, hi, d := src[2*s*lds:][:lanes], src[(2*s+1)*lds:][:lanes], dst[s*ldd:][:lanes]
		for j := range d {
			d[j] = pair(lo[j], hi[j])
		}
	}
}

// pairPanels8Go is pairPackers.panels8 in Go.
func pairPanels8Go(dst []uint32, panel int, src []float32, lds, steps int) {
	pairRowsGo(dst, 8, src, lds, 8, steps)
	pairRowsGo(dst[panel:], 8, src[8:], lds, 8, steps)
}

// pairColumnsGo is pairPackers.columns8 in Go.
func pairColumnsGo(dst []uint32, ldd int, src []float32, lds, steps int) {
	for j := 0; j < 8; j++ {
		row := src[j*lds:][:2*steps]
		for s := 0; s < steps; s++ {
			dst[s*ldd+j] = pair(row[2*s], row[2*s+1])
		}
	}
}

// pairKernelGo is the register tile of a bfloat16 path in Go, mr×nr: the
// chains of the package comment, from beta·C (C unread when beta is 0),
// each step's pair of products the second first, sums flushed as
// VDPBF16PS's; alpha is ignored. The assembly tiles must give its bits.
func pairKernelGo(mr, nr int) gemmKernel {
	return func(k int, a, b, c *float32, ldc int, _, beta float32) {
		ap := unsafe.Slice((*uint32)(unsafe.Pointer(a)), k*mr)
		bp := unsafe.Slice((*uint32)(unsafe.Pointer(b)), k*nr)
		cs := unsafe.Slice(c, (mr-1)*ldc+nr)
		for i := 0; i < mr; i++ {
			for j := 0; j < nr; j++ {
				var s float32
				if beta != 0 {
					s = beta * cs[i*ldc+j]
				}
				for q := 0; q < k; q++ {
					x, y := ap[q*mr+i], bp[q*nr+j]
					s = flushDenormal(s + bf16Operand(x>>16)*bf16Operand(y>>16))
					s = flushDenormal(s + bf16Operand(x&0xffff)*bf16Operand(y&0xffff))
				}
				cs[i*ldc+j] = s
			}
		}
	}
}

// bf16Operand is the value VDPBF16PS reads for the bfloat16 in h's low
// half: a subnormal reads as a zero of its sign.
func bf16Operand(h uint32) float32 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return bf16Value(uint16(h))
}
