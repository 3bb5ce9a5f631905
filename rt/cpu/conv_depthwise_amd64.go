//go:build !purego

package cpu

// archDepthwise returns the assembly depthwise kernel that goes with the
// amd64 GEMM path of that name, or nil for the Go one.
func archDepthwise(path string) *depthwiseKernels {
	switch path {
	case "avx512":
		return depthwiseAVX512
	case "avx2":
		return depthwiseAVX2
	}
	return nil
}

var (
	depthwiseAVX512 = &depthwiseKernels{fwd: depthwiseFwdAVX512, lanes: 16}
	depthwiseAVX2   = &depthwiseKernels{fwd: depthwiseFwdAVX2, lanes: 8}
)

// depthwiseFwdAVX512 is depthwiseFwdGo for n a multiple of 16, in blocks
// of up to 8 zmm accumulators, each product fused with its add.
//
//go:noescape
func depthwiseFwdAVX512(taps int, offs *int, w, x, y *float32, n int)

// depthwiseFwdAVX2 is depthwiseFwdGo for n a multiple of 8, in blocks of
// up to 8 ymm accumulators, each product fused with its add.
//
//go:noescape
func depthwiseFwdAVX2(taps int, offs *int, w, x, y *float32, n int)
