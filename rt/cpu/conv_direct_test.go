package cpu

import (
	"math"
	"testing"
)

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

// TestConvDirectFwdTails runs forwardPlane of every kernel set this machine
// has on planes whose length leaves each possible rest past the last whole
// fwdPos block (so the 2- and 3-block tail kernels run as well as the
// one-block one), against sums in float64.
func TestConvDirectFwdTails(t *testing.T) {
	r := newTestRand(17)
	for _, path := range GemmPaths() {
		k := convDirectFor(&gemmPath{name: path})
		grain := k.fwdPos
		if k.fwdTail != nil {
			grain = k.fwdTailPos
		}
		for _, n := range []int{grain, 2 * grain, 3 * grain, k.fwdPos, k.fwdPos + grain, k.fwdPos + 2*grain, 2*k.fwdPos + 3*grain} {
			if n%grain != 0 {
				continue
			}
			const taps = 7
			offs := []int{0, 1, 5, 17, 31, 40, 63}
			const ldw = taps + 3 // the channels' rows of weights need not touch
			w := randSlice(r, (k.fwdOC-1)*ldw+taps, 1)
			x := randSlice(r, n+64, 1)
			y := make([]float32, k.fwdOC*n)
			k.forwardPlane(taps, offs, w, x, y, ldw, n)
			for oc := 0; oc < k.fwdOC; oc++ {
				for j := 0; j < n; j++ {
					var want float64
					for tp := 0; tp < taps; tp++ {
						want += float64(w[oc*ldw+tp]) * float64(x[offs[tp]+j])
					}
					if got := float64(y[oc*n+j]); math.Abs(got-want) > 1e-5*max(1, math.Abs(want)) {
						t.Fatalf("%s, n = %d: y[%d][%d] = %v, want %v", path, n, oc, j, got, want)
					}
				}
			}
		}
	}
}

// TestConvDirectFwd4Plane runs forwardPlane4, the four-channel kernels,
// against sums in float64 on planes of every length that picks a
// different mix of them: fwd4Plane56 over the first 56 positions of 64
// (leaving the last 8 as they were), fwd4Plane over all 64, and fwd4's
// blocks followed by each two-channel tail.
func TestConvDirectFwd4Plane(t *testing.T) {
	r := newTestRand(19)
	for _, path := range GemmPaths() {
		k := convDirectFor(&gemmPath{name: path})
		for _, c := range []struct{ n, used int }{{64, 56}, {64, 63}, {96, 96}, {128, 128}, {160, 150}, {192, 192}, {224, 210}, {320, 304}} {
			const taps, ldw = 9, 9
			offs := []int{0, 1, 2, 8, 9, 10, 16, 17, 18}
			w := randSlice(r, 4*ldw, 1)
			x := randSlice(r, c.n+32, 1)
			y := make([]float32, 4*c.n)
			for i := range y {
				y[i] = -7
			}
			if !k.forwardPlane4(taps, offs, w, x, y, c.n, c.used) {
				continue
			}
			ran := c.n
			if c.used <= 56 && k.fwd4Plane56 != nil {
				ran = 56
			}
			for oc := 0; oc < 4; oc++ {
				for j := 0; j < c.n; j++ {
					want := -7.0
					if j < ran {
						want = 0
						for tp := 0; tp < taps; tp++ {
							want += float64(w[oc*ldw+tp]) * float64(x[offs[tp]+j])
						}
					}
					if got := float64(y[oc*c.n+j]); math.Abs(got-want) > 1e-5*max(1, math.Abs(want)) {
						t.Fatalf("%s, n %d, used %d: y[%d][%d] = %v, want %v", path, c.n, c.used, oc, j, got, want)
					}
				}
			}
		}
	}
}

// TestConvDirectBwdCompact: the direct backward that folds each image's
// lane-wise dw partial sums at once (layers past convDirectAccBudget, so
// that 16 workers do not keep 151 MB each) gives the gradients of the one
// that keeps them over its images, and of the im2col backward.
func TestConvDirectBwdCompact(t *testing.T) {
	r := newTestRand(23)
	for _, g := range []Conv{
		convCase(3, 24, 6, 6, 20, 3, 3, 1, 1, 1, 1),
		convCase(2, 8, 5, 7, 6, 3, 3, 1, 1, 1, 2),
		convCase(5, 16, 4, 4, 32, 1, 1, 1, 0, 1, 1),
	} {
		if !convDirectOK(g.norm()) {
			t.Fatalf("%+v: not a direct convolution's geometry", g)
		}
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		Conv2DDirectFwd(x, w, nil, y, g, ActReLU, 0)
		dy := randSlice(r, len(y), 1)
		grads := func(bwd func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)) [3][]float32 {
			dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
			bwd(x, w, y, cloneF(dy), dx, dw, db, g, ActReLU, 0)
			return [3][]float32{dx, dw, db}
		}
		kept := grads(Conv2DDirectBwd)
		saved := convDirectAccBudget
		convDirectAccBudget = 0
		folded := grads(Conv2DDirectBwd)
		convDirectAccBudget = saved
		ref := grads(Conv2DIm2colBwd)
		for i, name := range []string{"dx", "dw", "db"} {
			if msg := closeTo(folded[i], kept[i], 1e-5); msg != "" {
				t.Errorf("%+v: %s folded per image against kept: %s", g, name, msg)
			}
			if msg := closeTo(folded[i], ref[i], 1e-5); msg != "" {
				t.Errorf("%+v: %s folded per image against im2col: %s", g, name, msg)
			}
		}
	}
}

// TestConvDirectSplitImagesShareOnePanel: with fewer images than threads
// the direct forward splits each image's blocks of output channels over
// tasks that read one padded copy of the image (per group); the output is
// the reference convolution's on every thread count, planes of 64
// positions (four channels a kernel call) included.
func TestConvDirectSplitImagesShareOnePanel(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(23)
	for _, g := range []Conv{
		convCase(1, 6, 9, 7, 96, 3, 3, 1, 1, 1, 1),
		convCase(2, 8, 6, 6, 128, 3, 3, 1, 1, 1, 2),
		// 7×7 padded by 1: 64 flat positions, the four-channel
		// kernel's planes (fwd4Plane), with channel counts that leave
		// pairs and a last odd channel to the two-channel kernels.
		convCase(1, 5, 7, 7, 7, 3, 3, 1, 1, 1, 1),
		convCase(2, 3, 7, 7, 10, 3, 3, 1, 1, 1, 1),
		convCase(1, 4, 7, 7, 18, 3, 3, 1, 1, 1, 2),
	} {
		if !convDirectOK(g.norm()) {
			t.Fatalf("the direct kernels do not take %+v", g)
		}
		x, w, b := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1), randSlice(r, g.OC, 1)
		want := convRef(x, w, b, g, ActReLU, 0)
		for _, threads := range []int{1, 3, 8} {
			SetThreads(threads)
			y := make([]float32, len(want))
			Conv2DDirectFwd(x, w, b, y, g, ActReLU, 0)
			if msg := closeTo(y, want, 1e-4); msg != "" {
				t.Errorf("%d image(s), %d groups, %d threads: %s", g.N, g.Groups, threads, msg)
			}
		}
	}
}

// TestConvDirectStoreActs: each path's convDirectStore gives the Go
// loop's values (bias added, then applyAct) for every activation its
// kernel takes (none, ReLU, ReLU6) and one it leaves to applyAct, on rows
// narrower than, as wide as and wider than a vector, with NaNs, values
// past 6 and negative zeros among them; nothing past the plane is
// written.
func TestConvDirectStoreActs(t *testing.T) {
	r := newTestRand(12)
	nan := float32(math.NaN())
	for _, path := range gemmPathsSupported {
		k := convDirectFor(path)
		for _, ow := range []int{1, 7, 15, 16, 17, 33} {
			for _, rows := range []int{1, 3} {
				wp := ow + 3
				g := Conv{OH: rows, OW: ow}
				src := randSlice(r, rows*wp, 8)
				for i := 0; i < len(src); i += 5 {
					src[i] = []float32{nan, float32(math.Copysign(0, -1)), 7.5, -0.25}[(i/5)%4]
				}
				for _, act := range []Act{ActNone, ActReLU, ActReLU6, ActTanh} {
					for _, bias := range []float32{0, 0.5} {
						got := make([]float32, rows*ow+1)
						got[rows*ow] = 42
						k.convDirectStore(src, got[:rows*ow], g, wp, bias, act, 0)
						want := make([]float32, rows*ow)
						for oh := range rows {
							for i := range ow {
								want[oh*ow+i] = src[oh*wp+i] + bias
							}
						}
						applyActGo(want, act)
						for i, w := range want {
							if got[i] != w && !(got[i] != got[i] && w != w) {
								t.Fatalf("%s act %d ow %d rows %d bias %v: element %d = %v, want %v", path.name, act, ow, rows, bias, i, got[i], w)
							}
						}
						if got[rows*ow] != 42 {
							t.Fatalf("%s act %d ow %d rows %d: wrote past the plane", path.name, act, ow, rows)
						}
					}
				}
			}
		}
	}
}

// applyActGo applies act as the Go loops do: ReLU and ReLU6 by
// comparisons (NaN kept; a zero of either sign stays a zero), the rest
// through applyAct.
func applyActGo(v []float32, act Act) {
	for i, x := range v {
		switch act {
		case ActReLU:
			if x < 0 {
				v[i] = 0
			}
		case ActReLU6:
			if x < 0 {
				v[i] = 0
			} else if x > 6 {
				v[i] = 6
			}
		}
	}
	if act != ActReLU && act != ActReLU6 {
		applyAct(v, act, 0)
	}
}
