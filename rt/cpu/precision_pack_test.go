package cpu

// Reference packers of BF16's AMX path: plain Go versions of what the
// AVX-512 packers (amx_amd64.go) must write in the tiles' order
// (amx_layout.go), checked against the rounded operands by TestPackBF16 and
// compared with the vector packers bit for bit by TestPackBF16Vec.

// packBF16A writes A (m×k, or k×m read transposed) as bfloat16 into pa
// (mp rows of kp, in panels), zero beyond m rows and k columns.
func packBF16A(trans bool, a []float32, lda, m, k int, pa []uint16, mp, kp int) {
	ParallelFor(mp/16, 1, func(lo, hi int) {
		for i := lo * 16; i < hi*16; i++ {
			for p := 0; p < kp; p++ {
				var v uint16
				switch {
				case i >= m || p >= k:
				case trans:
					v = bf16Bits(a[p*lda+i])
				default:
					v = bf16Bits(a[i*lda+p])
				}
				pa[amxAAt(i, p, kp)] = v
			}
		}
	})
}

// packBF16B writes B (k×n, or n×k read transposed) into pb as kp/2 rows of
// np bfloat16 pairs (in panels), (B[2q][j], B[2q+1][j]) with the even k in
// the low half, zero beyond k and n.
func packBF16B(trans bool, b []float32, ldb, k, n int, pb []uint32, kp, np int) {
	at := func(p, j int) uint32 {
		if p >= k || j >= n {
			return 0
		}
		if trans {
			return uint32(bf16Bits(b[j*ldb+p]))
		}
		return uint32(bf16Bits(b[p*ldb+j]))
	}
	ParallelFor(kp/2, 8, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			for j := 0; j < np; j++ {
				pb[amxBAt(q, j, kp)] = at(2*q, j) | at(2*q+1, j)<<16
			}
		}
	})
}
