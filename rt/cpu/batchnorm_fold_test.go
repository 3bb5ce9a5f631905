package cpu

import (
	"fmt"
	"math"
	"testing"
)

// TestFoldBatchNorm checks that a convolution with FoldBatchNorm's
// weights and bias gives what the convolution followed by the
// evaluation-mode BatchNormFwd gives, for a plain convolution with and
// without bias and a depthwise one: within 1e-5 of the output's scale,
// float32 rounding of a sum taken in another order.
func TestFoldBatchNorm(t *testing.T) {
	r := newTestRand(41)
	for _, tc := range []struct {
		g    Conv
		bias bool
		conv func(x, w, b, y []float32, g Conv, act Act, alpha float32)
	}{
		{Conv{N: 2, C: 3, H: 7, W: 6, OC: 5, OH: 7, OW: 6, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}, true, Conv2DIm2colFwd},
		{Conv{N: 1, C: 4, H: 5, W: 5, OC: 7, OH: 3, OW: 3, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}, false, Conv2DIm2colFwd},
		{Conv{N: 2, C: 6, H: 8, W: 8, OC: 6, OH: 8, OW: 8, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 6}, true, Conv2DDepthwiseFwd},
	} {
		g := tc.g
		name := fmt.Sprintf("oc %d groups %d bias %v", g.OC, g.Groups, tc.bias)
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 0.5)
		var b []float32
		if tc.bias {
			b = randSlice(r, g.OC, 0.5)
		}
		gamma, beta, mean := randSlice(r, g.OC, 2), randSlice(r, g.OC, 1), randSlice(r, g.OC, 1)
		variance := randSlice(r, g.OC, 1)
		for i := range variance {
			variance[i] = variance[i]*variance[i] + 0.01
		}
		spatial := g.OH * g.OW
		y := make([]float32, g.N*g.OC*spatial)
		tc.conv(x, w, b, y, g, ActNone, 0)
		want := make([]float32, len(y))
		BatchNormFwd(y, gamma, beta, mean, variance, want, nil, nil, g.N, g.OC, spatial, 1e-3, 0.1, false)

		wf, bf := make([]float32, len(w)), make([]float32, g.OC)
		FoldBatchNorm(w, b, gamma, beta, mean, variance, wf, bf, g.OC, 1e-3)
		got := make([]float32, len(y))
		tc.conv(x, wf, bf, got, g, ActNone, 0)
		scale := 0.0
		for _, v := range want {
			scale = math.Max(scale, math.Abs(float64(v)))
		}
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*scale {
				t.Fatalf("%s: element %d: folded %v, conv then batch norm %v (scale %g)", name, i, got[i], want[i], scale)
			}
		}
	}
}
