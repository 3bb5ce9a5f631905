package cpu

// Resize is the geometry of a resize step: Planes planes (batch ×
// channels) of H×W pixels resampled to OH×OW, by nearest neighbour or,
// with Bilinear, by bilinear interpolation at half-pixel centres or, with
// AlignCorners, with the corner pixels aligned (PyTorch's
// F.interpolate, whose float32 arithmetic ResizeSource repeats).
type Resize struct {
	Planes, H, W, OH, OW   int
	Bilinear, AlignCorners bool
}

// ResizeSource gives, for output position o of an axis resized from in to
// out positions, the two input positions it reads, i0 ≤ i1, and the
// weight l1 of i1 (i0's is 1 − l1). Nearest: i0 = i1 = ⌊o·in/out⌋ with
// in/out rounded to float32 first, as PyTorch's "nearest", and l1 = 0.
// Bilinear: the source coordinate s = (o + ½)·in/out − ½, at least 0
// (half-pixel centres), or o·(in−1)/(out−1) with alignCorners; i0 = ⌊s⌋,
// i1 the next position inside the input, l1 = s − i0. The GPU kernels
// compute the same float32 expressions.
func ResizeSource(o, in, out int, bilinear, alignCorners bool) (i0, i1 int, l1 float32) {
	if !bilinear {
		i := min(int(float32(float32(o)*float32(float32(in)/float32(out)))), in-1)
		return i, i, 0
	}
	var s float32
	if alignCorners {
		if out > 1 {
			s = float32(float32(in-1)/float32(out-1)) * float32(o)
		}
	} else {
		s = float32(float32(in)/float32(out))*float32(float32(o)+0.5) - 0.5
		s = max(s, 0)
	}
	i0 = min(int(s), in-1)
	i1 = i0
	if i0 < in-1 {
		i1 = i0 + 1
	}
	return i0, i1, s - float32(i0)
}

// resizeTaps is ResizeSource for every output position of an axis.
type resizeTaps struct {
	i0, i1 []int
	l0, l1 []float32
}

func newResizeTaps(in, out int, bilinear, alignCorners bool) resizeTaps {
	t := resizeTaps{make([]int, out), make([]int, out), make([]float32, out), make([]float32, out)}
	for o := range out {
		i0, i1, l1 := ResizeSource(o, in, out, bilinear, alignCorners)
		t.i0[o], t.i1[o], t.l0[o], t.l1[o] = i0, i1, 1-l1, l1
	}
	return t
}

// ResizeFwd writes y [Planes, OH, OW], the resize of x [Planes, H, W].
func ResizeFwd(x, y []float32, r Resize) {
	hw, ohw := r.H*r.W, r.OH*r.OW
	if r.Planes*ohw == 0 {
		return
	}
	_, _ = x[r.Planes*hw-1], y[r.Planes*ohw-1]
	th, tw := newResizeTaps(r.H, r.OH, r.Bilinear, r.AlignCorners), newResizeTaps(r.W, r.OW, r.Bilinear, r.AlignCorners)
	ParallelFor(r.Planes, rowGrain(ohw), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			xp, yp := x[p*hw:(p+1)*hw], y[p*ohw:(p+1)*ohw]
			for oh := range r.OH {
				row := yp[oh*r.OW : (oh+1)*r.OW]
				r0, r1 := xp[th.i0[oh]*r.W:(th.i0[oh]+1)*r.W], xp[th.i1[oh]*r.W:(th.i1[oh]+1)*r.W]
				if !r.Bilinear {
					for ow := range row {
						row[ow] = r0[tw.i0[ow]]
					}
					continue
				}
				h0, h1 := th.l0[oh], th.l1[oh]
				for ow := range row {
					a, b, w0, w1 := tw.i0[ow], tw.i1[ow], tw.l0[ow], tw.l1[ow]
					row[ow] = h0*(w0*r0[a]+w1*r0[b]) + h1*(w0*r1[a]+w1*r1[b])
				}
			}
		}
	})
}

// ResizeBwd writes dx [Planes, H, W] (every element) from dy [Planes, OH,
// OW]: each output's gradient scatter-added to the pixels it read, with
// the weights it read them by (all of it to one pixel for nearest).
func ResizeBwd(dy, dx []float32, r Resize) {
	hw, ohw := r.H*r.W, r.OH*r.OW
	if r.Planes*hw == 0 {
		return
	}
	_, _ = dx[r.Planes*hw-1], dy[max(r.Planes*ohw-1, 0)]
	th, tw := newResizeTaps(r.H, r.OH, r.Bilinear, r.AlignCorners), newResizeTaps(r.W, r.OW, r.Bilinear, r.AlignCorners)
	ParallelFor(r.Planes, rowGrain(ohw), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			dxp, dyp := dx[p*hw:(p+1)*hw], dy[p*ohw:(p+1)*ohw]
			clear(dxp)
			for oh := range r.OH {
				row := dyp[oh*r.OW : (oh+1)*r.OW]
				r0, r1 := dxp[th.i0[oh]*r.W:(th.i0[oh]+1)*r.W], dxp[th.i1[oh]*r.W:(th.i1[oh]+1)*r.W]
				if !r.Bilinear {
					for ow, g := range row {
						r0[tw.i0[ow]] += g
					}
					continue
				}
				h0, h1 := th.l0[oh], th.l1[oh]
				for ow, g := range row {
					a, b, w0, w1 := tw.i0[ow], tw.i1[ow], tw.l0[ow], tw.l1[ow]
					g0, g1 := h0*g, h1*g
					r0[a] += w0 * g0
					r0[b] += w1 * g0
					r1[a] += w0 * g1
					r1[b] += w1 * g1
				}
			}
		}
	})
}
