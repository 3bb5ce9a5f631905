//go:build !purego

package cpu

// archWinogradF4 returns F(4×4,5×5)'s transforms on the assembly passes
// that go with the amd64 GEMM path of that name, or nil for the Go ones.
func archWinogradF4(path string) *winogradKernels {
	switch path {
	case "avx512":
		return winogradF4AVX512
	case "avx2":
		return winogradF4AVX2
	}
	return nil
}

var (
	winogradF4AVX512 = newWinoF4Kernels(winoPass8AVX512, winoPass4AVX512, winoBT8AVX512, winoAT8AVX512, 16)
	winogradF4AVX2   = newWinoF4Kernels(winoPass8AVX2, winoPass4AVX2, winoBT8AVX2, winoAT8AVX2, 8)
)

//go:noescape
func winoPass8AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoPass4AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoPass8AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoPass4AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoBT8AVX512(consts *float32, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines, n int)

//go:noescape
func winoBT8AVX2(consts *float32, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines, n int)

//go:noescape
func winoAT8AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoAT8AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)
