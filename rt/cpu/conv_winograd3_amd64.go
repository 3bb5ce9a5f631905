//go:build !purego

package cpu

import "sync"

// archWinogradF3 returns F(4×4,3×3)'s transforms on the assembly kernels
// that go with the amd64 GEMM path of that name, or nil for the Go ones.
// The input transform is F(2×2,5×5)'s (the same Bᵀ).
func archWinogradF3(path string) *winogradKernels {
	winogradF3Arch.once.Do(func() {
		winogradF3Arch.avx512 = newWinoF3Kernels(winoInputAVX512, winoTileKernel(winoE6TileAVX512, winoF4EConsts(16)), winoAT6AVX512, 16)
		winogradF3Arch.avx2 = newWinoF3Kernels(winoInputAVX2, winoTileKernel(winoE6TileAVX2, winoF4EConsts(8)), winoAT6AVX2, 8)
	})
	switch path {
	case "avx512":
		return winogradF3Arch.avx512
	case "avx2":
		return winogradF3Arch.avx2
	}
	return nil
}

// winogradF3Arch are the vector sets, built on first use (see
// winogradF4Go).
var winogradF3Arch struct {
	once         sync.Once
	avx512, avx2 *winogradKernels
}

//go:noescape
func winoAT6AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoAT6AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoE6TileAVX512(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)

//go:noescape
func winoE6TileAVX2(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
