package cpu

import (
	"fmt"
	"testing"
)

// TestResizeMatchesPyTorch resizes x[i] = (i² mod 7) − 3 against
// torch.nn.functional.interpolate(x, size=(OH, OW), mode=...,
// align_corners=...) (torch 1.13, run once): nearest up by 2, up to a size
// no whole factor gives and down; bilinear up by 2 and to 5×7 with and
// without aligned corners, down, and to one pixel. The backward of each
// against finite differences, with dx starting as garbage.
func TestResizeMatchesPyTorch(t *testing.T) {
	for _, tc := range []struct {
		r    Resize
		want []float32
	}{
		{Resize{H: 3, W: 4, OH: 6, OW: 8},
			[]float32{-3, -3, -2, -2, 1, 1, -1, -1, -3, -3, -2, -2, 1, 1, -1, -1, -1, -1, 1, 1, -2, -2, -3, -3, -1, -1, 1, 1, -2, -2, -3, -3, -2, -2, 1, 1, -1, -1, -1, -1, -2, -2, 1, 1, -1, -1, -1, -1}},
		{Resize{H: 3, W: 4, OH: 5, OW: 7},
			[]float32{-3, -3, -2, -2, 1, 1, -1, -3, -3, -2, -2, 1, 1, -1, -1, -1, 1, 1, -2, -2, -3, -1, -1, 1, 1, -2, -2, -3, -2, -2, 1, 1, -1, -1, -1}},
		{Resize{H: 5, W: 7, OH: 2, OW: 3}, []float32{-3, 1, -1, -3, 1, -1}},
		{Resize{H: 3, W: 4, OH: 6, OW: 8, Bilinear: true},
			[]float32{-3, -2.75, -2.25, -1.25, 0.25, 0.5, -0.5, -1, -2.5, -2.1875, -1.5625, -0.875, -0.125, -0.1875, -1.0625, -1.5, -1.5, -1.0625, -0.1875, -0.125, -0.875, -1.5625, -2.1875, -2.5, -1.25, -0.6875, 0.4375, 0.3125, -1.0625, -1.9375, -2.3125, -2.5, -1.75, -1.0625, 0.3125, 0.4375, -0.6875, -1.3125, -1.4375, -1.5, -2, -1.25, 0.25, 0.5, -0.5, -1, -1, -1}},
		{Resize{H: 3, W: 4, OH: 6, OW: 8, Bilinear: true, AlignCorners: true},
			[]float32{-3, -2.5714285, -2.1428571, -1.1428572, 0.14285719, 0.71428561, -0.14285719, -1, -2.2, -1.5999999, -1, -0.62857151, -0.37142855, -0.42857146, -1.1142858, -1.8000001, -1.4, -0.62857133, 0.14285719, -0.11428571, -0.88571435, -1.5714285, -2.0857143, -2.6000001, -1.2, -0.25714281, 0.6857143, 0.19999997, -1, -1.9142855, -2.2571428, -2.5999999, -1.6, -0.4857142, 0.62857145, 0.3142857, -0.71428573, -1.4571427, -1.6285714, -1.8, -2, -0.71428567, 0.5714286, 0.42857143, -0.42857146, -1, -1, -1.0000001}},
		{Resize{H: 3, W: 4, OH: 5, OW: 7, Bilinear: true},
			[]float32{-3, -2.6428571, -2.0714285, -0.49999964, 0.85714269, -0.28571463, -1, -2.1999998, -1.6999998, -0.89999986, -0.49999994, -0.31428599, -1.2285718, -1.8000002, -1, -0.28571421, 0.85714293, -0.5000003, -2.0714288, -2.6428571, -3, -1.6000001, -0.67142844, 0.81428581, -0.20000021, -1.4285713, -1.6571428, -1.8, -2, -0.92857122, 0.78571439, -2.2351742e-07, -1, -1, -1}},
		{Resize{H: 3, W: 4, OH: 5, OW: 7, Bilinear: true, AlignCorners: true},
			[]float32{-3, -2.5, -2, -0.5, 1, 0, -1, -2, -1.25, -0.5, -0.5, -0.5, -1.25, -2, -1, 0, 1, -0.5, -2, -2.5, -3, -1.5, -0.25, 1, -0.25, -1.5, -1.75, -2, -2, -0.5, 1, 0, -1, -1, -1}},
		{Resize{H: 5, W: 7, OH: 3, OW: 4, Bilinear: true}, []float32{-2.625, 0.75, -1, -0.875, -2.625, 0.75, -1, -0.87499994, -2.625, 0.75, -1, -0.875}},
		{Resize{H: 5, W: 7, OH: 1, OW: 1, Bilinear: true, AlignCorners: true}, []float32{-3}},
	} {
		r := tc.r
		name := fmt.Sprintf("%dx%d->%dx%d bilinear %v align %v", r.H, r.W, r.OH, r.OW, r.Bilinear, r.AlignCorners)
		// two planes: the second is the first plus 10, so a plane offset
		// mistake shows
		r.Planes = 2
		hw := r.H * r.W
		x := make([]float32, 2*hw)
		for i := range hw {
			x[i] = float32((i*i)%7) - 3
			x[hw+i] = x[i] + 10
		}
		want := append(cloneF(tc.want), tc.want...)
		for i := len(tc.want); i < len(want); i++ {
			want[i] += 10
		}
		y := make([]float32, 2*r.OH*r.OW)
		ResizeFwd(x, y, r)
		if msg := closeTo(y, want, 2e-6); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
		rnd := newTestRand(7)
		proj := randSlice(rnd, len(y), 1)
		dx := randSlice(rnd, len(x), 9)
		ResizeBwd(cloneF(proj), dx, r)
		smoothCheck.run(t, "resize "+name, proj, func() []float32 { ResizeFwd(x, y, r); return y }, gradInput{"x", x, dx})
	}
}

// TestResizeBwdNearestSums checks nearest's backward exactly: with every
// dy 1, each dx pixel counts the outputs that copy it, which for a whole
// factor s×t is s·t everywhere.
func TestResizeBwdNearestSums(t *testing.T) {
	r := Resize{Planes: 3, H: 4, W: 5, OH: 12, OW: 10}
	dy := make([]float32, r.Planes*r.OH*r.OW)
	for i := range dy {
		dy[i] = 1
	}
	dx := make([]float32, r.Planes*r.H*r.W)
	ResizeBwd(dy, dx, r)
	for i, v := range dx {
		if v != 6 {
			t.Fatalf("dx[%d] = %g, want 6 (3×2 outputs copy each pixel)", i, v)
		}
	}
}
