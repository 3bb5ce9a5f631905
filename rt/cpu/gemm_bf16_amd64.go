//go:build !purego

package cpu

// bf16GemmPath is the bfloat16 path where the CPU has AVX512-BF16
// (dotBF16DP's check), nil elsewhere. Its 8×48 tile keeps 24 zmm sums; a
// step loads 48 pairs of B (three registers) and broadcasts 8 pairs of A,
// 11 loads for 24 VDPBF16PS. kc = 256 (128 pairs) keeps a B micro-panel at
// 24 KiB, in L1, and the A block (mc·kc bfloat16) at 96 KiB.
var bf16GemmPath = func() *gemmPath {
	if !dotBF16DP {
		return nil
	}
	return &gemmPath{name: "avx512bf16", mr: 8, nr: 48, kc: 256, mc: 192, nc: 2016, kernel: gemmKernel8x48BF16,
		pairs: &pairPackers{rows: pairRowsAVX512, columns8: pairColumns8AVX512}}
}()

// pairRowsAVX512 is pairRowsGo, 16 lanes at a time under masks.
func pairRowsAVX512(dst []uint32, ldd int, src []float32, lds, lanes, steps int) {
	bf16PairRows(&dst[0], ldd, &src[0], lds, uint64(1)<<lanes-1, steps)
}

// pairColumns8AVX512 is pairColumnsGo: 8 rows of 16 floats rounded,
// narrowed to 8 pairs each and transposed as an 8×8 block.
func pairColumns8AVX512(dst []uint32, ldd int, src []float32, lds, steps int) {
	bf16PairColumns8(&dst[0], ldd, &src[0], lds, steps)
}

//go:noescape
func gemmKernel8x48BF16(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func bf16PairRows(dst *uint32, ldd int, src *float32, lds int, mask uint64, steps int)

//go:noescape
func bf16PairColumns8(dst *uint32, ldd int, src *float32, lds int, steps int)
