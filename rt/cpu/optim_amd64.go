//go:build !purego

package cpu

// adamVectorSupported reports whether adamStepAVX2 can run here (AVX2 and
// the OS saving the YMM registers, as Sgemm's AVX2 path needs).
var adamVectorSupported = func() bool { avx2, _ := x86Features(); return avx2 }()

// adamStepAVX2 is adamStepGo eight parameters at a time (blocks·8 of them).
//
//go:noescape
func adamStepAVX2(param, grad, m, v *float32, blocks int, k *adamConsts)

// adamStepVector updates as many leading parameters as the vector kernel
// handles (a multiple of 8) and returns how many it did.
func adamStepVector(param, grad, m, v []float32, k *adamConsts) int {
	blocks := len(param) / 8
	if blocks == 0 {
		return 0
	}
	grad, m, v = grad[:blocks*8], m[:blocks*8], v[:blocks*8]
	adamStepAVX2(&param[0], &grad[0], &m[0], &v[0], blocks, k)
	return blocks * 8
}
