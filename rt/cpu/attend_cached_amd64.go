//go:build !purego

package cpu

// weightedRowsAVX2: see attend_cached_amd64.s.
//
//go:noescape
func weightedRowsAVX2(y, a *float32, n int, v *float32, ldv, m int)

// weightedRowsVector writes y[d] = Σ_j a[j]·v[j·ldv+d] for d below the
// largest multiple of 8 ≤ len(y), as weightedRowsGo would bit for bit, and
// returns that count (0 where AVX2 is missing or vectors are turned off).
func weightedRowsVector(y, a, v []float32, ldv int) int {
	m := len(y) &^ 7
	if m == 0 || len(a) == 0 || !dotVectorSupported || !dotUseVector {
		return 0
	}
	_ = v[(len(a)-1)*ldv+m-1] // the assembly does no bounds checks
	weightedRowsAVX2(&y[0], &a[0], len(a), &v[0], ldv, m)
	return m
}
