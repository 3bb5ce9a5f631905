package gpuhost

import "math"

// A buffer that a plan stores in bfloat16 holds two values a float32
// place of its arena, the first in the low half (little-endian memory),
// as the kernels' StoreBF16 writes them. The CPU references of a plan's
// steps compute in float32: WidenBF16 gives them such a buffer's values,
// and NarrowBF16 stores their results back, rounded as the GPU rounds.

// WidenBF16 returns the n bfloat16 values that packed holds, as float32s
// (exactly: a bfloat16 is a float32's top half).
func WidenBF16(packed []float32, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		w := math.Float32bits(packed[i/2])
		if i%2 == 1 {
			w >>= 16
		}
		out[i] = math.Float32frombits(w << 16)
	}
	return out
}

// NarrowBF16 stores the values v into packed, each rounded to bfloat16
// (BF16Bits), two a float32 place; an odd count leaves the last place's
// high half zero.
func NarrowBF16(packed, v []float32) {
	for i := 0; i < len(v); i += 2 {
		lo := BF16Bits(v[i])
		var hi uint16
		if i+1 < len(v) {
			hi = BF16Bits(v[i+1])
		}
		packed[i/2] = math.Float32frombits(uint32(lo) | uint32(hi)<<16)
	}
}

// WidenBF16NHWC is WidenBF16 of a tensor [n, c, inner] stored channels
// last (element (i, ch, s) at (i·inner + s)·c + ch): its values in the
// order of its shape, as the CPU references take them.
func WidenBF16NHWC(packed []float32, n, c, inner int) []float32 {
	last := WidenBF16(packed, n*c*inner)
	out := make([]float32, len(last))
	for i := range n {
		for s := range inner {
			for ch := range c {
				out[(i*c+ch)*inner+s] = last[(i*inner+s)*c+ch]
			}
		}
	}
	return out
}

// NarrowBF16NHWC is NarrowBF16 of v, a tensor [n, c, inner] in the order
// of its shape, into packed, which stores it channels last.
func NarrowBF16NHWC(packed, v []float32, n, c, inner int) {
	last := make([]float32, len(v))
	for i := range n {
		for s := range inner {
			for ch := range c {
				last[(i*inner+s)*c+ch] = v[(i*c+ch)*inner+s]
			}
		}
	}
	NarrowBF16(packed, last)
}
