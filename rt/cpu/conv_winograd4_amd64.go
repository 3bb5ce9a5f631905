//go:build !purego

package cpu

import "sync"

// archWinogradF4 returns F(4×4,5×5)'s transforms on the assembly kernels
// that go with the amd64 GEMM path of that name, or nil for the Go ones.
func archWinogradF4(path string) *winogradKernels {
	winogradF4Arch.once.Do(func() {
		winogradF4Arch.avx512 = newWinoF4Kernels(winoTileKernel(winoBTTileAVX512, winoF4BTConsts(16)),
			winoTileKernel(winoETileAVX512, winoF4EConsts(16)), winoAT8AVX512, 16)
		winogradF4Arch.avx2 = newWinoF4Kernels(winoTileKernel(winoBTTileAVX2, winoF4BTConsts(8)),
			winoTileKernel(winoETileAVX2, winoF4EConsts(8)), winoAT8AVX2, 8)
	})
	switch path {
	case "avx512":
		return winogradF4Arch.avx512
	case "avx2":
		return winogradF4Arch.avx2
	}
	return nil
}

// winogradF4Arch are the vector sets, built on first use (see
// winogradF4Go).
var winogradF4Arch struct {
	once         sync.Once
	avx512, avx2 *winogradKernels
}

// winoTileKernel wraps a whole-tile transform kernel (both passes per
// vector of channels, the row pass into a scratch of up to 64 vectors on
// the stack) with its constants. So V and D, which the products read from
// L2, are written once instead of written, read and written again: for
// the input transform (Bᵀ), on one thread, the flagship's second layer,
// median of 3 on a busy machine: forward 19.7 → 18.7 ms, backward 44.0 →
// 42.5 ms against two calls of a line pass.
func winoTileKernel(tile func(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32), consts []float32) winoTileFunc {
	return func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
		var scratch [64 * 16]float32
		tile(&consts[0], src, ldRow, ldCol, dst, ldXi, n, &scratch[0])
	}
}

//go:noescape
func winoAT8AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoAT8AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoBTTileAVX512(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)

//go:noescape
func winoBTTileAVX2(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)

//go:noescape
func winoETileAVX512(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)

//go:noescape
func winoETileAVX2(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
