package cpu

import (
	"fmt"
	"testing"
)

// TestConvPhaseFwd: the phase method matches the plain convolution
// (convRef) within 1e-5 of each output's scale on strided geometries:
// ResNet's stem, odd and even sizes and paddings, unequal strides,
// padding wider than a stride, kernels smaller than the stride, batches
// split over threads, an image's output channels split over threads (an
// odd count), 1×1 layers by the pointwise products (unpadded, at any
// stride and width, odd and even, gathered at stride 2 across by the
// row deal) and by the direct kernels (padded), with each
// epilogue activation.
func TestConvPhaseFwd(t *testing.T) {
	r := newTestRand(23)
	cases := []Conv{
		convCase(2, 3, 32, 32, 8, 7, 7, 2, 3, 1, 1), // the stem's shape, smaller
		convCase(1, 2, 9, 11, 3, 3, 3, 2, 1, 1, 1),
		convCase(3, 4, 8, 8, 5, 5, 5, 2, 2, 1, 1),
		convCase(1, 3, 10, 10, 4, 4, 4, 3, 0, 1, 1),
		convCase(2, 2, 7, 7, 3, 1, 1, 2, 0, 1, 1), // a kernel smaller than the stride
		{N: 2, C: 3, H: 9, W: 12, OC: 5, OH: 5, OW: 4, KH: 3, KW: 5, SH: 2, SW: 3, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1},
		convCase(1, 9, 13, 13, 37, 3, 3, 2, 1, 1, 1), // ResNet's 3×3 stride 2 at batch 1, odd sizes
		// planes of 64 positions whose rows end at 63: the four-channel
		// kernel of all 64, not the one of 56
		{N: 1, C: 3, H: 18, W: 12, OC: 8, OH: 9, OW: 6, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1},
		convCase(1, 5, 14, 11, 7, 1, 1, 2, 0, 1, 1), // ResNet's 1×1 stride-2 downsample
		convCase(3, 6, 12, 12, 4, 3, 3, 2, 1, 1, 1),
		convCase(2, 256, 29, 28, 5, 1, 1, 2, 0, 1, 1), // 1×1 stride 2 by the pointwise products (phasePointwise)
		convCase(2, 7, 13, 10, 9, 1, 1, 3, 0, 1, 1),   // 1×1 stride 3, few channels (phasePointwise)
		convCase(1, 5, 9, 9, 6, 1, 1, 2, 1, 1, 1),     // 1×1 stride 2 padded: the direct kernels
		{N: 1, C: 4, H: 11, W: 9, OC: 3, OH: 6, OW: 3, KH: 1, KW: 1, SH: 2, SW: 3, DH: 1, DW: 1, Groups: 1},
		{N: 1, C: 3, H: 10, W: 12, OC: 4, OH: 4, OW: 6, KH: 1, KW: 1, SH: 3, SW: 2, DH: 1, DW: 1, Groups: 1},
		convCase(1, 3, 9, 70, 5, 1, 1, 2, 0, 1, 1), // rows of 35 pairs: whole vectors of the deal and a tail
	}
	forEachPathAndThreads(t, func(t *testing.T) {
		for _, g := range cases {
			name := fmt.Sprintf("%dx%dx%dx%d k%dx%d s%dx%d p%dx%d", g.N, g.C, g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW)
			for _, a := range allActs {
				x := randSlice(r, g.N*g.C*g.H*g.W, 1)
				w := randSlice(r, g.OC*g.C*g.KH*g.KW, 1)
				b := randSlice(r, g.OC, 1)
				y := make([]float32, g.N*g.OC*g.OH*g.OW)
				Conv2DPhaseFwd(x, w, b, y, g, a.act, 0.2)
				if msg := closeTo(y, convRef(x, w, b, g, a.act, 0.2), 1e-5); msg != "" {
					t.Fatalf("%s act %s: %s", name, a.name, msg)
				}
			}
		}
	})
}

// BenchmarkConvPhaseStem: ResNet's stem, 3→64 channels, 7×7, stride 2,
// padding 3, 224² at batch 1 and 8, by the phase method and by im2col.
func BenchmarkConvPhaseStem(b *testing.B) {
	for _, n := range []int{1, 8} {
		g := convCase(n, 3, 224, 224, 64, 7, 7, 2, 3, 1, 1)
		r := newTestRand(1)
		x, w, bias := randSlice(r, n*3*224*224, 1), randSlice(r, 64*3*49, 1), randSlice(r, 64, 1)
		y := make([]float32, n*64*g.OH*g.OW)
		b.Run(fmt.Sprintf("phase/b%d", n), func(b *testing.B) {
			for b.Loop() {
				Conv2DPhaseFwd(x, w, bias, y, g, ActReLU, 0)
			}
		})
		b.Run(fmt.Sprintf("im2col/b%d", n), func(b *testing.B) {
			for b.Loop() {
				Conv2DIm2colFwd(x, w, bias, y, g, ActReLU, 0)
			}
		})
	}
}
