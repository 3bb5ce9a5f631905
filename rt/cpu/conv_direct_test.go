package cpu

import "testing"

// BenchmarkLeNetConvLayers times LeNet-5's two convolutions at batch 250
// (conv1 1->6 5x5 pad 2 on 28x28, conv2 6->16 5x5 on 14x14), forward and
// backward as the training step calls them (conv1 without dx), by the
// direct method the planner chooses for them.
func BenchmarkLeNetConvLayers(b *testing.B) {
	const batch = 250
	r := newTestRand(5)
	for _, tc := range []struct {
		name string
		g    Conv
		dx   bool
	}{
		{"conv1", convCase(batch, 1, 28, 28, 6, 5, 5, 1, 2, 1, 1), false},
		{"conv2", convCase(batch, 6, 14, 14, 16, 5, 5, 1, 0, 1, 1), true},
	} {
		g := tc.g
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		w := randSlice(r, g.OC*g.C*g.KH*g.KW, 0.2)
		bias := randSlice(r, g.OC, 0.1)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		dy := randSlice(r, len(y), 1)
		dw, db := make([]float32, len(w)), make([]float32, g.OC)
		var dx []float32
		if tc.dx {
			dx = make([]float32, len(x))
		}
		b.Run(tc.name+" fwd", func(b *testing.B) {
			for b.Loop() {
				Conv2DDirectFwd(x, w, bias, y, g, ActReLU, 0)
			}
		})
		b.Run(tc.name+" bwd", func(b *testing.B) {
			for b.Loop() {
				Conv2DDirectBwd(x, w, y, dy, dx, dw, db, g, ActReLU, 0)
			}
		})
	}
}
