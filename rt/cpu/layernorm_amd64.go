//go:build !purego

package cpu

// lnGammaVector sums one block of 64 columns of layerNormBwd's dgamma and
// dbeta into sg and sb with lnGamma64AVX512 where the GEMM path of that
// name is AVX-512, and reports whether it did (the Go loop runs where it
// did not). x and dy start at the block's first column, rows rows ld
// apart.
func lnGammaVector(path string, x, dy []float32, ld, rows int, mean, inv []float32, sg, sb *[64]float64) bool {
	if path != "avx512" || rows == 0 {
		return false
	}
	_, _, _, _ = x[(rows-1)*ld+63], dy[(rows-1)*ld+63], mean[rows-1], inv[rows-1] // the assembly does no bounds checks
	lnGamma64AVX512(&x[0], &dy[0], ld, rows, &mean[0], &inv[0], &sg[0], &sb[0])
	return true
}

// lnDxVector writes the leading multiple of 8 of a row's dx with
// lnDxAVX512 where the GEMM path of that name is AVX-512, and returns
// how many it wrote (0 elsewhere: the Go loop writes the rest).
func lnDxVector(path string, x, dy, gamma, dx []float32, mean, inv, s1, s2 float64, add bool) int {
	n := len(dx) &^ 7
	if path != "avx512" || n == 0 {
		return 0
	}
	_, _, _ = x[n-1], dy[n-1], gamma[n-1]
	flag := 0
	if add {
		flag = 1
	}
	lnDxAVX512(&x[0], &dy[0], &gamma[0], &dx[0], n, mean, inv, s1, s2, flag)
	return n
}

// lnYVector writes the leading multiple of 8 of a row's y with lnYAVX512
// where the GEMM path of that name is AVX-512, and returns how many it
// wrote (0 elsewhere: the Go loop writes the rest). beta may be nil.
func lnYVector(path string, x, gamma, beta, y []float32, mean, inv float64) int {
	n := len(y) &^ 7
	if path != "avx512" || n == 0 {
		return 0
	}
	_, _ = x[n-1], gamma[n-1] // the assembly does no bounds checks
	var bp *float32
	if beta != nil {
		bp = &beta[:n][0]
	}
	lnYAVX512(&x[0], &gamma[0], bp, &y[0], n, mean, inv)
	return n
}

// lnYAVX512 is LayerNormFwd's output loop over n elements (a multiple of
// 8) of a row, in the same float64 operations and order:
//
//	for j := range n {
//		v := (float64(x[j]) - mean) * inv * float64(gamma[j])
//		if beta != nil { v += float64(beta[j]) }
//		y[j] = float32(v)
//	}
//
//go:noescape
func lnYAVX512(x, gamma, beta, y *float32, n int, mean, inv float64)

// lnGamma64AVX512 is layerNormBwd's parameter-gradient loop over a block
// of 64 columns, in the same float64 operations and order:
//
//	for r := range rows {
//		mean, inv := float64(mean[r]), float64(inv[r])
//		for j := range 64 {
//			g := float64(dy[r*ld+j])
//			sg[j] += g * (float64(x[r*ld+j]) - mean) * inv
//			sb[j] += g
//		}
//	}
//
//go:noescape
func lnGamma64AVX512(x, dy *float32, ld, rows int, mean, inv *float32, sg, sb *float64)

// lnDxAVX512 is layerNormBwd's dx loop over n elements (a multiple of
// 8) of a row, from the row's mean, inv, mean(g) (s1) and mean(g·x̂) (s2),
// in the same float64 operations and order:
//
//	for j := range n {
//		g := float64(dy[j]) * float64(gamma[j])
//		xh := (float64(x[j]) - mean) * inv
//		v := inv * (g - s1 - xh*s2)
//		if add != 0 { v = float64(dx[j]) + v }
//		dx[j] = float32(v)
//	}
//
//go:noescape
func lnDxAVX512(x, dy, gamma, dx *float32, n int, mean, inv, s1, s2 float64, add int)
