//go:build !purego

package cpu

// archMaxPool2x2 returns the assembly 2×2 stride-2 max-pool kernels that go
// with the amd64 GEMM path of that name, or nil for the Go loops.
func archMaxPool2x2(path string) *maxPool2x2Kernels {
	switch path {
	case "avx512":
		return maxPool2x2AVX512
	case "avx2":
		return maxPool2x2AVX2
	}
	return nil
}

// archMaxPool3s2Row returns the assembly kernel of maxPool3s2Row that goes
// with the amd64 GEMM path of that name, or nil for the Go loops.
func archMaxPool3s2Row(path string) func(r0, r1, r2, y *float32, n int) {
	if path == "avx512" {
		return maxPool3s2RowAVX512
	}
	return nil
}

//go:noescape
func maxPool3s2RowAVX512(r0, r1, r2, y *float32, n int)

// archPlaneMeans returns the assembly kernel of GlobalAvgPoolFwd's plane
// means that goes with the amd64 GEMM path of that name, or nil for sum32.
func archPlaneMeans(path string) func(x, y *float32, planes, n int, scale float32) {
	if path == "avx512" {
		return planeMeansAVX512
	}
	return nil
}

// planeMeansAVX512 sets y[p] = scale·Σ_{i<n} x[p·n+i] for p < planes,
// each sum in four vectors of partial sums, n ≥ 1.
//
//go:noescape
func planeMeansAVX512(x, y *float32, planes, n int, scale float32)

var (
	maxPool2x2AVX512 = &maxPool2x2Kernels{fwd: maxPool2x2FwdAVX512, bwd: maxPool2x2BwdAVX512}
	maxPool2x2AVX2   = &maxPool2x2Kernels{fwd: maxPool2x2FwdAVX2, bwd: maxPool2x2BwdAVX2}
)

//go:noescape
func maxPool2x2FwdAVX512(x, y *float32, rows, w, ow int)

//go:noescape
func maxPool2x2BwdAVX512(x, y, dy, dx *float32, rows, w, ow int)

//go:noescape
func maxPool2x2FwdAVX2(x, y *float32, rows, w, ow int)

//go:noescape
func maxPool2x2BwdAVX2(x, y, dy, dx *float32, rows, w, ow int)
