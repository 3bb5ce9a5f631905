package cpu

// amxLocal is one thread's AMX products: C = A·B, or C += A·B, of small
// matrices packed and multiplied on the calling thread (packB, mulPacked),
// with packing buffers of its own, for kernels that already run one task a thread (the
// fused attention's blocks) and whose products are too small to share out.
// The operands are packed as amxGemm packs them (amx_layout.go); C's blocks
// that its edges cut go through a scratch.
type amxLocal struct {
	// kernel multiplies the tiles: amxPanelBlock, or its Go twin in tests.
	kernel amxKernel
	pa     []uint16
	pt     []uint32
	pc     []float32  // C rounded up to 32 rows and columns, where it has edges
	own    amxPackedB // mul's B
}

// amxPackedB is a B operand that amxLocal.packB packed, for any number of
// products of its first rows and columns (amxLocal.mulPacked): k×n, its
// depth rounded up to kp.
type amxPackedB struct {
	pb       []uint32
	k, n, kp int
}

// amxKernel is amxPanelBlock's signature: tests run the blocking and the
// packers with a Go twin of the tiles (amxPanelBlockGo) on any CPU.
type amxKernel func(cfg *byte, a *uint16, b *uint32, c *float32, nBlocks, kTiles, aHalf, bHalf, bNext, ldc, acc int)

func growU16(s []uint16, n int) []uint16 {
	if cap(s) < n {
		return make([]uint16, n)
	}
	return s[:n]
}

func growU32(s []uint32, n int) []uint32 {
	if cap(s) < n {
		return make([]uint32, n)
	}
	return s[:n]
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
