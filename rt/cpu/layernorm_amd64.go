//go:build !purego

package cpu

// archLayerNorm returns the assembly layer-norm backward kernels that go
// with the amd64 GEMM path of that name (AVX-512 only), or nil for the Go
// loops.
func archLayerNorm(path string) *layerNormKernels {
	if path == "avx512" {
		return layerNormAVX512
	}
	return nil
}

var layerNormAVX512 = &layerNormKernels{gamma64: lnGamma64AVX512, dx: lnDxAVX512}

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
// 8) of a row, k holding mean, inv, mean(g) and mean(g·x̂), in the same
// float64 operations and order:
//
//	for j := range n {
//		g := float64(dy[j]) * float64(gamma[j])
//		xh := (float64(x[j]) - k[0]) * k[1]
//		v := k[1] * (g - k[2] - xh*k[3])
//		if add != 0 { v = float64(dx[j]) + v }
//		dx[j] = float32(v)
//	}
//
//go:noescape
func lnDxAVX512(x, dy, gamma, dx *float32, n int, k *[4]float64, add int)
