package cpu

// Reference packers of BF16's AMX path: plain Go versions of what the
// AVX-512 packers (amx_amd64.go) must write, checked against the rounded
// operands by TestPackBF16 and compared with the vector packers bit for bit
// by TestPackBF16Vec.

// packBF16A writes A (m×k, or k×m read transposed) as bfloat16 rows into pa
// (mp rows of kp), zero beyond m rows and k columns.
func packBF16A(trans bool, a []float32, lda, m, k int, pa []uint16, mp, kp int) {
	ParallelFor(mp/16, 1, func(lo, hi int) {
		for i := lo * 16; i < hi*16; i++ {
			row := pa[i*kp : i*kp+kp]
			if i >= m {
				clear(row)
				continue
			}
			if trans {
				for p := 0; p < k; p++ {
					row[p] = bf16Bits(a[p*lda+i])
				}
			} else {
				for p, v := range a[i*lda : i*lda+k] {
					row[p] = bf16Bits(v)
				}
			}
			clear(row[k:])
		}
	})
}

// packBF16B writes B (k×n, or n×k read transposed) into pb as kp/2 rows of
// np bfloat16 pairs, (B[2q][j], B[2q+1][j]) at pb[q*np+j] with the even k in
// the low half, zero beyond k and n.
func packBF16B(trans bool, b []float32, ldb, k, n int, pb []uint32, kp, np int) {
	at := func(p, j int) uint32 {
		if p >= k {
			return 0
		}
		if trans {
			return uint32(bf16Bits(b[j*ldb+p]))
		}
		return uint32(bf16Bits(b[p*ldb+j]))
	}
	ParallelFor(kp/2, 8, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			row := pb[q*np : q*np+np]
			for j := 0; j < n; j++ {
				row[j] = at(2*q, j) | at(2*q+1, j)<<16
			}
			clear(row[n:])
		}
	})
}
