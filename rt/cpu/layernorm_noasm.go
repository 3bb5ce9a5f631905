//go:build !amd64 || purego

package cpu

// lnGammaVector reports false: this GOARCH (or a purego build) sums
// layerNormBwd's dgamma and dbeta in the Go loop.
func lnGammaVector(path string, x, dy []float32, ld, rows int, mean, inv []float32, sg, sb *[64]float64) bool {
	return false
}

// lnDxVector returns 0: the Go loop writes every dx here.
func lnDxVector(path string, x, dy, gamma, dx []float32, mean, inv, s1, s2 float64, add bool) int {
	return 0
}

// lnYVector returns 0: the Go loop writes every y here.
func lnYVector(path string, x, gamma, beta, y []float32, mean, inv float64) int {
	return 0
}
