//go:build !purego

package cpu

// The bfloat16 kernels: dot4BF16DP where the CPU has AVX512-BF16 (cpuid
// leaf 7 subleaf 1, EAX bit 5), dot4BF16Widen where it has AVX-512F only.
var (
	dotBF16DP = func() bool {
		_, avx512 := x86Features()
		max7, _, _, _ := cpuid(7, 0)
		if !avx512 || max7 < 1 {
			return false
		}
		eax71, _, _, _ := cpuid(7, 1)
		return eax71&(1<<5) != 0
	}()
	dotBF16Widen = func() bool { _, avx512 := x86Features(); return avx512 }()
	// dotBF16Supported reports whether one of them runs here.
	dotBF16Supported = dotBF16DP || dotBF16Widen
)

// dot4BF16DP and dot4BF16Widen write into out[0..3] the sums of
// dotBF16Go's lanes over x[:n], folded, before its tail, for the four rows
// w[r·ldw:], r < 4, n a positive multiple of 32.
//
//go:noescape
func dot4BF16DP(x, w *uint16, n, ldw int, out *float32)

//go:noescape
func dot4BF16Widen(x, w *uint16, n, ldw int, out *float32)

// dot4BF16 is the kernel that runs here on slices: w holds four rows of
// ldw.
func dot4BF16(x, w []uint16, ldw, n int, out *[4]float32) {
	_ = x[n-1]
	_ = w[3*ldw+n-1] // the assembly does no bounds checks
	if dotBF16DP {
		dot4BF16DP(&x[0], &w[0], n, ldw, &out[0])
		return
	}
	dot4BF16Widen(&x[0], &w[0], n, ldw, &out[0])
}
