//go:build !purego

package cpu

// archGemmPaths reports the amd64 SIMD paths this CPU and OS support,
// fastest first. Detection uses CPUID and XGETBV directly (the standard
// library keeps its own copy internal, and rt/cpu may import nothing else).
func archGemmPaths() []*gemmPath {
	var paths []*gemmPath
	avx2, avx512 := x86Features()
	if avx512 {
		// 12×32 tile: 24 zmm accumulators. A B micro-panel (kc·nr floats,
		// 32 KiB) fills L1 and the packed A block (mc·kc, 192 KiB) sits in
		// L2. On a Zen 4 (1 MiB L2) kc 128 or 384 and mc 96 or 384 measured
		// no better.
		paths = append(paths, &gemmPath{name: "avx512", mr: 12, nr: 32, kc: 256, mc: 192, nc: 2048, kernel: sgemmKernel12x32AVX512, transpose8: transpose8x8AVX, transpose4: transpose4x8AVX,
			direct:     []directTile{{12, sgemmDirect12x32AVX512}, {8, sgemmDirect8x32AVX512}, {4, sgemmDirect4x32AVX512}, {2, sgemmDirect2x32AVX512}, {1, sgemmDirect1x32AVX512}},
			directHalf: []directTile{{12, sgemmDirect12x16AVX512}, {8, sgemmDirect8x16AVX512}, {4, sgemmDirect4x16AVX512}, {2, sgemmDirect2x16AVX512}, {1, sgemmDirect1x16AVX512}}})
	}
	if avx2 {
		// 6×16 tile: 12 ymm accumulators; B micro-panel 16 KiB, A block
		// 144 KiB.
		paths = append(paths, &gemmPath{name: "avx2", mr: 6, nr: 16, kc: 256, mc: 144, nc: 2048, kernel: sgemmKernel6x16AVX2, transpose8: transpose8x8AVX, transpose4: transpose4x8AVX,
			direct: []directTile{{6, sgemmDirect6x16AVX2}, {4, sgemmDirect4x16AVX2}, {2, sgemmDirect2x16AVX2}, {1, sgemmDirect1x16AVX2}}})
	}
	return paths
}

// x86Features reports whether AVX2 with FMA, and AVX-512F, are usable: the
// CPU must have them and the OS must save their registers (XCR0).
func x86Features() (avx2, avx512 bool) {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false, false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx {
		return false, false
	}
	xcr0, _ := xgetbv()
	const ymmState = 0x6      // SSE and AVX state
	const zmmState = 0xe0 | 6 // opmask, upper ZMM0-15, ZMM16-31
	_, ebx7, _, _ := cpuid(7, 0)
	avx2 = xcr0&ymmState == ymmState && ebx7&(1<<5) != 0
	avx512 = avx2 && xcr0&zmmState == zmmState && ebx7&(1<<16) != 0
	return avx2, avx512
}

func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

//go:noescape
func sgemmKernel6x16AVX2(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmKernel12x32AVX512(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func transpose8x8AVX(src *float32, lds int, dst *float32, ldd int)

//go:noescape
func transpose4x8AVX(src *float32, lds int, dst *float32, ldd int)

//go:noescape
func sgemmDirect12x32AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect8x32AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect4x32AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect2x32AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect1x32AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect6x16AVX2(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect4x16AVX2(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect2x16AVX2(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect1x16AVX2(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect12x16AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect8x16AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect4x16AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect2x16AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)

//go:noescape
func sgemmDirect1x16AVX512(k int, a *float32, aRow, aStep int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32)
