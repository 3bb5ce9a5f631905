//go:build !purego

package cpu

// archWinograd returns the assembly Winograd transforms that go with the
// amd64 GEMM path of that name, or nil for the Go ones.
func archWinograd(path string) *winogradKernels {
	switch path {
	case "avx512":
		return winogradAVX512
	case "avx2":
		return winogradAVX2
	}
	return nil
}

var (
	winogradAVX512 = &winogradKernels{input: winoInputAVX512, output: winoOutputAVX512, dy: winoDyAVX512, lanes: 16}
	winogradAVX2   = &winogradKernels{input: winoInputAVX2, output: winoOutputAVX2, dy: winoDyAVX2, lanes: 8}
)

//go:noescape
func winoInputAVX512(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)

//go:noescape
func winoInputAVX2(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)

//go:noescape
func winoOutputAVX512(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int)

//go:noescape
func winoOutputAVX2(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int)

//go:noescape
func winoDyAVX512(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)

//go:noescape
func winoDyAVX2(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
