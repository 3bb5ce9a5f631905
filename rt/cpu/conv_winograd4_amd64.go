//go:build !purego

package cpu

import "sync"

// archWinogradF4 returns F(4×4,5×5)'s transforms on the assembly kernels
// that go with the amd64 GEMM path of that name, or nil for the Go ones.
func archWinogradF4(path string) *winogradKernels {
	winogradF4Arch.once.Do(func() {
		winogradF4Arch.avx512 = newWinoF4Kernels(winoInputF4Kernel(winoBTTileAVX512, 16), winoAT8AVX512, winoPass4AVX512, 16)
		winogradF4Arch.avx2 = newWinoF4Kernels(winoInputF4Kernel(winoBTTileAVX2, 8), winoAT8AVX2, winoPass4AVX2, 8)
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

// winoInputF4Kernel wraps a whole-tile input transform kernel (both of
// Bᵀ's passes per vector of channels, the row pass into a scratch of 64
// vectors on the stack, so that V, which the products read from L2, is
// written once instead of written, read and written again; on one thread,
// the flagship's second layer, median of 3 on a busy machine: forward 19.7
// → 18.7 ms, backward 44.0 → 42.5 ms against two calls of a line pass).
func winoInputF4Kernel(tile func(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32), lanes int) func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
	consts := winoF4BTConsts(lanes)
	return func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
		var scratch [64 * 16]float32
		tile(&consts[0], src, ldRow, ldCol, dst, ldXi, n, &scratch[0])
	}
}

//go:noescape
func winoPass4AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoPass4AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoAT8AVX512(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoAT8AVX2(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

//go:noescape
func winoBTTileAVX512(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)

//go:noescape
func winoBTTileAVX2(consts, src *float32, ldRow, ldCol int, dst *float32, ldXi, n int, scratch *float32)
