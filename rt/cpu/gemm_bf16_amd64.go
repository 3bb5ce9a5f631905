//go:build !purego

package cpu

import "sync"

// bf16Path returns the bfloat16 path where the CPU has AVX512-BF16
// (dotBF16DP's check), nil elsewhere, made on first use so that a program
// with no bf16 product links none of it. Its 8×48 tile keeps 24 zmm sums;
// a step loads 48 pairs of B (three registers) and broadcasts 8 pairs of
// A, 11 loads for 24 VDPBF16PS. kc = 512 (256 pairs: a B micro-panel of
// 48 KiB, past L1) and mc = 96 (an A block of 96 KiB) beat kc 256, mc 192
// on a Zen 4 core, in GFLOP per CPU-second: 16384×384×1536 166 → 191,
// 16384×1536×384 167 → 204, 1536×384×16384 156 → 171 (kc 768 no better).
func bf16Path() *gemmPath {
	bf16Once.Do(func() {
		if dotBF16DP {
			bf16Once.path = &gemmPath{name: "avx512bf16", mr: 8, nr: 48, kc: 512, mc: 96, nc: 2016, kernel: gemmKernel8x48BF16,
				pairs: &pairPackers{packA: packPairsA, packB: packPairsB, rows: pairRowsAVX512, panels8: pairPanels8AVX512, columns8: pairColumns8AVX512}}
		}
	})
	return bf16Once.path
}

// bf16Once makes bf16Path's path once. A function, not a package
// variable's initialiser, so that only a program that calls it links it.
var bf16Once struct {
	sync.Once
	path *gemmPath
}

// pairRowsAVX512 is pairRowsGo, 16 lanes at a time under masks.
func pairRowsAVX512(dst []uint32, ldd int, src []float32, lds, lanes, steps int) {
	bf16PairRows(&dst[0], ldd, &src[0], lds, uint64(1)<<lanes-1, steps)
}

// pairPanels8AVX512 is pairPanels8Go: 16 lanes a step, the low 8 pairs
// stored in one panel and the high 8 in the other.
func pairPanels8AVX512(dst []uint32, panel int, src []float32, lds, steps int) {
	bf16PairPanels8(&dst[0], panel, &src[0], lds, steps)
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
func bf16PairPanels8(dst *uint32, panel int, src *float32, lds int, steps int)

//go:noescape
func bf16PairColumns8(dst *uint32, ldd int, src *float32, lds int, steps int)
