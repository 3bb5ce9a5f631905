//go:build !purego

package cpu

// archMaxPool2x2 returns the assembly 2×2 stride-2 max-pool kernels that go
// with the amd64 GEMM path of that name, or nil for the Go loops.
func archMaxPool2x2(path string) *maxPool2x2Kernels {
	if path == "avx512" {
		return maxPool2x2AVX512
	}
	return nil
}

var maxPool2x2AVX512 = &maxPool2x2Kernels{fwd: maxPool2x2FwdAVX512, bwd: maxPool2x2BwdAVX512}

//go:noescape
func maxPool2x2FwdAVX512(x, y *float32, rows, w, ow int)

//go:noescape
func maxPool2x2BwdAVX512(x, y, dy, dx *float32, rows, w, ow int)
