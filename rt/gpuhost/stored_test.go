package gpuhost

import (
	"math"
	"testing"
)

// TestStoredBF16: NarrowBF16 packs values rounded to bfloat16 two a
// float32 place, the first in the low half, and WidenBF16 gives them
// back exactly; the channels-last pair moves element (i, ch, s) of a
// [n, c, inner] tensor to place (i·inner + s)·c + ch and back.
func TestStoredBF16(t *testing.T) {
	v := []float32{1, -2.5, 1 + 0x1p-8 + 0x1p-12, 3} // the third rounds up to 1 + 2^-7
	packed := make([]float32, 2)
	NarrowBF16(packed, v)
	if lo, hi := math.Float32bits(packed[0])&0xffff, math.Float32bits(packed[0])>>16; lo != 0x3f80 || hi != 0xc020 {
		t.Errorf("first place %#x %#x, want 0x3f80 (1) low and 0xc020 (-2.5) high", lo, hi)
	}
	if got := WidenBF16(packed, 4); got[0] != 1 || got[1] != -2.5 || got[2] != 1+0x1p-7 || got[3] != 3 {
		t.Errorf("widened %v, want [1 -2.5 %v 3]", got, 1+0x1p-7)
	}
	const n, c, inner = 2, 3, 5
	shaped := make([]float32, n*c*inner)
	for i := range shaped {
		shaped[i] = float32(i) // exact in bfloat16 (below 256)
	}
	last := make([]float32, (len(shaped)+1)/2)
	NarrowBF16NHWC(last, shaped, n, c, inner)
	flat := WidenBF16(last, len(shaped))
	for i := range n {
		for ch := range c {
			for s := range inner {
				if got, want := flat[(i*inner+s)*c+ch], shaped[(i*c+ch)*inner+s]; got != want {
					t.Fatalf("channels-last place of (%d, %d, %d) holds %v, want %v", i, ch, s, got, want)
				}
			}
		}
	}
	back := WidenBF16NHWC(last, n, c, inner)
	for i := range shaped {
		if back[i] != shaped[i] {
			t.Fatalf("widened back [%d] = %v, want %v", i, back[i], shaped[i])
		}
	}
}
