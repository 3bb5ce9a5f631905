//go:build !purego

package cpu

// dotVectorSupported reports whether dotAVX2 can run here (AVX2 with FMA).
var dotVectorSupported = func() bool { avx2, _ := x86Features(); return avx2 }()

// dotAVX2 returns Σ x[i]·y[i] over the first n elements, n a multiple of 8.
//
//go:noescape
func dotAVX2(x, y *float32, n int) float32

// dotVector returns the dot product of the longest multiple-of-8 prefix of
// x and y, and its length.
func dotVector(x, y []float32) (float32, int) {
	n := len(x) &^ 7
	if n == 0 {
		return 0, 0
	}
	y = y[:n]
	return dotAVX2(&x[0], &y[0], n), n
}
