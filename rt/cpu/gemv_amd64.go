//go:build !purego

package cpu

// dotVectorSupported reports whether dotAVX2 can run here (AVX2 with FMA).
var dotVectorSupported = func() bool { avx2, _ := x86Features(); return avx2 }()

// dot4Supported reports whether dot4AVX512VL can run here: AVX-512F with
// AVX-512VL (cpuid leaf 7, EBX bit 31), for the EVEX-encoded Y16-Y19.
var dot4Supported = func() bool {
	_, avx512 := x86Features()
	_, ebx7, _, _ := cpuid(7, 0)
	return avx512 && ebx7&(1<<31) != 0
}()

// dotAVX2 returns Σ x[i]·y[i] over the first n elements, n a multiple of 8.
//
//go:noescape
func dotAVX2(x, y *float32, n int) float32

// dot4AVX512VL writes into out[0..3] dotAVX2(x, w[i·ldw:], n) for i < 4,
// bit for bit, loading each piece of x once for the four rows.
//
//go:noescape
func dot4AVX512VL(x, w *float32, n, ldw int, out *float32)

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

// dot4Vector writes into out the dot products of the longest multiple-of-8
// prefix of x with the rows w[i·ldw:], i < 4, as dotVector would, and
// returns that prefix's length; 0 (and out untouched) where the kernel
// cannot run here.
func dot4Vector(x, w []float32, ldw int, out *[4]float32) int {
	n := len(x) &^ 7
	if n == 0 || !dot4Supported {
		return 0
	}
	_ = w[3*ldw+n-1] // the assembly does no bounds checks
	dot4AVX512VL(&x[0], &w[0], n, ldw, &out[0])
	return n
}
