package cpu

import "math"

// poolPlanes runs fn over the N·C image planes of a pooling layer, split
// over the threads.
func poolPlanes(g Conv, fn func(p int)) {
	ParallelFor(g.N*g.C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			fn(p)
		}
	})
}

// MaxPool2DFwd writes y [N,C,OH,OW] = the maximum of each window of x
// [N,C,H,W]; padding counts as -inf, so it never wins.
func MaxPool2DFwd(x, y []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	if k := archMaxPool2x2(activeGemmPath.Load().name); k != nil && g.pool2x2() {
		_, _ = x[g.N*g.C*hw-1], y[g.N*g.C*ohw-1] // the assembly does no bounds checks
		maxPool2x2Rows(g, func(x0, y0, rows int) { k.fwd(&x[x0], &y[y0], rows, g.W, g.OW) })
		return
	}
	poolPlanes(g, func(p int) {
		xp, yp := x[p*hw:(p+1)*hw], y[p*ohw:(p+1)*ohw]
		if g.pool2x2() {
			maxPool2x2Plane(xp, yp, g.W, g.OH, g.OW)
			return
		}
		maxPoolPlane(xp, yp, g)
	})
}

// maxPoolPlane writes one plane of MaxPool2DFwd for any window: the
// columns whose windows lie inside the input's width ([lo, hi)) a window
// tap at a time over the whole output row with Go's max, which has no
// branch to mispredict and keeps NaN (a NaN in the window wins, as in
// maxPoolArg, which the columns at the edges still call; a tie of -0 and
// +0 reads +0 where maxPoolArg's first maximum may be -0, the same value).
// On ResNet's 3×3 stride-2 stem pool (BenchmarkMaxPoolStem) this takes
// 1.8 ms for 64 planes of 112² where maxPoolArg at every window took 8.4,
// testing each tap against the edges and branching on each comparison.
//
// A 3×3 window of stride 2 (ResNet's and DenseNet's stem pool) runs the
// interior by maxPool3s2Row's vector kernel where the path has one: 0.45
// ms for that pool at batch 1, against 1.8 (BenchmarkMaxPoolStem).
func maxPoolPlane(xp, yp []float32, g Conv) {
	var k func(r0, r1, r2, y *float32, n int)
	if g.KH == 3 && g.KW == 3 && g.SW == 2 && g.DH == 1 && g.DW == 1 {
		k = archMaxPool3s2Row(activeGemmPath.Load().name)
	}
	lo := min((g.PW+g.SW-1)/g.SW, g.OW)
	hi := lo
	if last := g.W - 1 - (g.KW-1)*g.DW + g.PW; last >= 0 {
		hi = min(max(last/g.SW+1, lo), g.OW)
	}
	for oh := 0; oh < g.OH; oh++ {
		yr := yp[oh*g.OW : (oh+1)*g.OW]
		for ow := 0; ow < lo; ow++ {
			yr[ow] = xp[maxPoolArg(xp, g, oh, ow)]
		}
		for ow := hi; ow < g.OW; ow++ {
			yr[ow] = xp[maxPoolArg(xp, g, oh, ow)]
		}
		if lo == hi {
			continue
		}
		if k != nil && maxPool3s2Interior(k, xp, yr[lo:hi], g, oh, lo*g.SW-g.PW+1) {
			continue
		}
		first := true
		for kh := 0; kh < g.KH; kh++ {
			ih := oh*g.SH - g.PH + kh*g.DH
			if ih < 0 || ih >= g.H {
				continue
			}
			row := xp[ih*g.W : (ih+1)*g.W]
			for kw := 0; kw < g.KW; kw++ {
				c := lo*g.SW - g.PW + kw*g.DW // the tap's column at ow = lo
				if first {
					for ow := lo; ow < hi; ow, c = ow+1, c+g.SW {
						yr[ow] = row[c]
					}
					first = false
					continue
				}
				for ow := lo; ow < hi; ow, c = ow+1, c+g.SW {
					yr[ow] = max(yr[ow], row[c])
				}
			}
		}
		if first { // a window row wholly in the padding: -inf, as the padding
			for ow := lo; ow < hi; ow++ {
				yr[ow] = float32(math.Inf(-1))
			}
		}
	}
}

// maxPool3s2Interior writes yr, the outputs of output row oh whose
// windows (3×3, stride 2 across) lie inside the input's width, by the
// vector kernel k from the window rows inside the input, c0 being the
// centre column of yr's first window; a row missing from the window (in
// the padding) repeats one inside, which changes no maximum. It reports
// false, writing nothing, when no window row is inside.
func maxPool3s2Interior(k func(r0, r1, r2, y *float32, n int), xp, yr []float32, g Conv, oh, c0 int) bool {
	var rows [3]int
	n := 0
	for kh := range 3 {
		if ih := oh*g.SH - g.PH + kh; ih >= 0 && ih < g.H {
			rows[n] = ih*g.W + c0
			n++
		}
	}
	if n == 0 {
		return false
	}
	for i := n; i < 3; i++ {
		rows[i] = rows[0]
	}
	// The kernel reads columns c0−1 to c0+2·len(yr)−1 of each row.
	_, _ = xp[rows[0]-1], xp[rows[0]+2*len(yr)-1]
	_, _ = xp[rows[n-1]-1], xp[rows[n-1]+2*len(yr)-1]
	k(&xp[rows[0]], &xp[rows[1]], &xp[rows[2]], &yr[0], len(yr))
	return true
}

// maxPool3s2RowGo is the vector kernels' loop, their twin in the tests,
// with each row r given from the column before the first window's centre
// (the kernels' r − 1):
//
//	y[i] = max over c in {2i, 2i+1, 2i+2} of max(r0[c], r1[c], r2[c])
//
// NaN winning (Go's max).
func maxPool3s2RowGo(r0, r1, r2, y []float32) {
	for i := range y {
		m := max(r0[2*i], r1[2*i], r2[2*i])
		for c := 2*i + 1; c <= 2*i+2; c++ {
			m = max(m, r0[c], r1[c], r2[c])
		}
		y[i] = m
	}
}

// maxPool2x2Kernels are the vector kernels of the 2×2 stride-2 max pool.
// Each runs over rows row pairs: pair i is rows 2i and 2i+1 of x (row
// stride w, which is 2·ow or 2·ow+1) and row i of y (ow long). The backward
// writes the pairs' rows of dx whole, an odd last column included, with
// the winners of maxPool2x2BwdPlane.
type maxPool2x2Kernels struct {
	fwd func(x, y *float32, rows, w, ow int)
	bwd func(x, y, dy, dx *float32, rows, w, ow int)
}

// maxPool2x2Rows splits the row pairs of a 2×2 stride-2 pool over the
// threads and calls run with the first input and output elements and the
// number of pairs of each piece. With an even H the pairs of all planes
// follow each other in memory and pieces span planes; with an odd one
// pieces are whole planes.
func maxPool2x2Rows(g Conv, run func(x0, y0, rows int)) {
	if g.OH <= 0 || g.OW <= 0 {
		return
	}
	planes := g.N * g.C
	grain := max(1, (16<<10)/(2*g.W))
	if g.H == 2*g.OH {
		ParallelFor(planes*g.OH, grain, func(lo, hi int) { run(lo*2*g.W, lo*g.OW, hi-lo) })
		return
	}
	ParallelFor(planes, max(1, grain/g.OH), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			run(p*g.H*g.W, p*g.OH*g.OW, g.OH)
		}
	})
}

// pool2x2 reports whether the window is the common 2×2, stride 2,
// unpadded, undilated one whose windows lie inside the input, which has a
// fast path. A pool whose output size rounded up (ceil) has a last window
// half past the input: the fast paths would read past the plane.
func (g Conv) pool2x2() bool {
	return g.KH == 2 && g.KW == 2 && g.SH == 2 && g.SW == 2 && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1 &&
		g.H >= 2*g.OH && g.W >= 2*g.OW
}

// beats reports whether v replaces best as a window's maximum: it is larger,
// or a NaN replacing a number (PyTorch propagates NaN).
func beats(v, best float32) bool { return v > best || (v != v && best == best) }

// argmax2x2 returns which of the window's four pixels r0[j], r0[j+1],
// r1[j], r1[j+1] (0 to 3, in scan order) is its first maximum.
func argmax2x2(r0, r1 []float32, j int) int {
	best, arg := r0[j], 0
	if v := r0[j+1]; beats(v, best) {
		best, arg = v, 1
	}
	if v := r1[j]; beats(v, best) {
		best, arg = v, 2
	}
	if v := r1[j+1]; beats(v, best) {
		arg = 3
	}
	return arg
}

// maxPool2x2Plane writes the 2×2 stride-2 maxima of one plane xp (row
// length w) into yp [oh, ow]. The builtin max propagates NaN, as PyTorch
// does, and compiles to branch-free max instructions.
func maxPool2x2Plane(xp, yp []float32, w, oh, ow int) {
	for i := 0; i < oh; i++ {
		r0 := xp[2*i*w : 2*i*w+2*ow]
		r1 := xp[(2*i+1)*w : (2*i+1)*w+2*ow]
		out := yp[i*ow : (i+1)*ow]
		for j := range out {
			out[j] = max(max(r0[2*j], r0[2*j+1]), max(r1[2*j], r1[2*j+1]))
		}
	}
}

// maxPool2x2BwdPlane is MaxPool2DBwd's 2×2 stride-2 path for one plane: each
// window's gradient goes to its first pixel (in scan order) equal to the
// window's output y, and every other pixel of dx gets zero, written once
// (no clearing pass). A NaN output falls back to argmax2x2, which finds the
// first NaN.
func maxPool2x2BwdPlane(xp, yp, dyp, dxp []float32, w, h, oh, ow int) {
	for i := 0; i < oh; i++ {
		r0 := xp[2*i*w : 2*i*w+2*ow]
		r1 := xp[(2*i+1)*w : (2*i+1)*w+2*ow]
		d0 := dxp[2*i*w : (2*i+1)*w]
		d1 := dxp[(2*i+1)*w : (2*i+2)*w]
		ys, dys := yp[i*ow:(i+1)*ow], dyp[i*ow:(i+1)*ow]
		for j, m := range ys {
			d := dys[j]
			a, b, c := r0[2*j], r0[2*j+1], r1[2*j]
			// The winner's index by conditional moves, not branches: which
			// pixel wins is as unpredictable as the data.
			win := 3
			if c == m {
				win = 2
			}
			if b == m {
				win = 1
			}
			if a == m {
				win = 0
			}
			if m != m {
				win = argmax2x2(r0, r1, 2*j)
			}
			var q [4]float32
			q[win&3] = d
			g0, g1, g2, g3 := q[0], q[1], q[2], q[3]
			d0[2*j], d0[2*j+1] = g0, g1
			d1[2*j], d1[2*j+1] = g2, g3
		}
		clear(d0[2*ow:])
		clear(d1[2*ow:])
	}
	clear(dxp[2*oh*w : h*w])
}

// maxPoolArg returns the index within the plane of the first maximum of the
// window at (oh, ow), scanning rows then columns like PyTorch, or -1 when
// the window lies wholly in the padding (which valid geometry rules out).
// A NaN in the window wins, as it does in PyTorch.
func maxPoolArg(xp []float32, g Conv, oh, ow int) int {
	best, arg := float32(math.Inf(-1)), -1
	for kh := 0; kh < g.KH; kh++ {
		ih := oh*g.SH - g.PH + kh*g.DH
		if ih < 0 || ih >= g.H {
			continue
		}
		for kw := 0; kw < g.KW; kw++ {
			iw := ow*g.SW - g.PW + kw*g.DW
			if iw < 0 || iw >= g.W {
				continue
			}
			v := xp[ih*g.W+iw]
			if arg < 0 || beats(v, best) {
				best, arg = v, ih*g.W+iw
			}
		}
	}
	return arg
}

// MaxPool2DBwd writes dx: each window's gradient dy goes to the input pixel
// that won the window (the first maximum on ties); the rest get zero.
// For the common 2×2 stride-2 window the winner is the first pixel equal to
// the forward output y (so y must be MaxPool2DFwd's output for x); other
// windows recompute the winners from x.
func MaxPool2DBwd(x, y, dy, dx []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	if k := archMaxPool2x2(activeGemmPath.Load().name); k != nil && g.pool2x2() {
		_, _ = y[g.N*g.C*ohw-1], dy[g.N*g.C*ohw-1] // the assembly does no bounds checks
		_, _ = x[g.N*g.C*hw-1], dx[g.N*g.C*hw-1]
		maxPool2x2Rows(g, func(x0, y0, rows int) { k.bwd(&x[x0], &y[y0], &dy[y0], &dx[x0], rows, g.W, g.OW) })
		if g.H > 2*g.OH { // an odd last row belongs to no window
			for p := 0; p < g.N*g.C; p++ {
				clear(dx[p*hw+2*g.OH*g.W : (p+1)*hw])
			}
		}
		return
	}
	poolPlanes(g, func(p int) {
		xp, dyp, dxp := x[p*hw:(p+1)*hw], dy[p*ohw:(p+1)*ohw], dx[p*hw:(p+1)*hw]
		if g.pool2x2() {
			maxPool2x2BwdPlane(xp, y[p*ohw:(p+1)*ohw], dyp, dxp, g.W, g.H, g.OH, g.OW)
			return
		}
		clear(dxp)
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				if a := maxPoolArg(xp, g, oh, ow); a >= 0 {
					dxp[a] += dyp[oh*g.OW+ow]
				}
			}
		}
	})
}

// MaxPool2DArgmax writes arg [N,C,OH,OW]: for each window of x [N,C,H,W],
// the position of its first maximum (the pixel MaxPool2DBwd routes the
// window's gradient to, NaN winning) within the window, kh·KW + kw, as a
// float32. It is the argmax a GPU convolution that pools in its epilogue
// writes in a training step (the CPU reference of that step).
func MaxPool2DArgmax(x, arg []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	poolPlanes(g, func(p int) {
		xp, ap := x[p*hw:(p+1)*hw], arg[p*ohw:(p+1)*ohw]
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				a, best := 0, -1
				for kh := 0; kh < g.KH; kh++ {
					ih := oh*g.SH - g.PH + kh*g.DH
					for kw := 0; kw < g.KW; kw++ {
						iw := ow*g.SW - g.PW + kw*g.DW
						if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
							continue
						}
						if v := xp[ih*g.W+iw]; best < 0 || beats(v, xp[best]) {
							best, a = ih*g.W+iw, kh*g.KW+kw
						}
					}
				}
				ap[oh*g.OW+ow] = float32(a)
			}
		}
	})
}

// MaxPool2DArgmaxBwd writes dx [N,C,H,W] of a max pool from each window's
// argmax (MaxPool2DArgmax's, in arg [N,C,OH,OW]): the window's gradient dy
// goes to the pixel at that position of the window, summed where windows
// overlap; every other pixel gets zero.
func MaxPool2DArgmaxBwd(arg, dy, dx []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	poolPlanes(g, func(p int) {
		ap, dyp, dxp := arg[p*ohw:(p+1)*ohw], dy[p*ohw:(p+1)*ohw], dx[p*hw:(p+1)*hw]
		clear(dxp)
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				a := int(ap[oh*g.OW+ow])
				ih := oh*g.SH - g.PH + a/g.KW*g.DH
				iw := ow*g.SW - g.PW + a%g.KW*g.DW
				if a >= 0 && a < g.KH*g.KW && ih >= 0 && ih < g.H && iw >= 0 && iw < g.W {
					dxp[ih*g.W+iw] += dyp[oh*g.OW+ow]
				}
			}
		}
	})
}

// avgPoolScale is 1 over the divisor of window (oh, ow) of an average
// pool, PyTorch's rule: the window's taps inside the padded input (KH·KW
// but for a partial last window of a pool rounded up), or with ExcludePad
// its taps inside the input.
func avgPoolScale(g Conv, oh, ow int) float32 {
	loH, loW, hiH, hiW := -g.PH, -g.PW, g.H+g.PH, g.W+g.PW
	if g.ExcludePad {
		loH, loW, hiH, hiW = 0, 0, g.H, g.W
	}
	taps := func(start, k, d, lo, hi int) int {
		n := 0
		for q := 0; q < k; q++ {
			if i := start + q*d; i >= lo && i < hi {
				n++
			}
		}
		return n
	}
	n := taps(oh*g.SH-g.PH, g.KH, g.DH, loH, hiH) * taps(ow*g.SW-g.PW, g.KW, g.DW, loW, hiW)
	if n == 0 {
		return 0 // a window of padding only (ExcludePad and dilation): no tap to divide
	}
	return 1 / float32(n)
}

// AvgPool2DFwd writes y = the mean of each window of x, the padding counted
// as zeros (avgPoolScale gives the divisor).
func AvgPool2DFwd(x, y []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	poolPlanes(g, func(p int) {
		xp, yp := x[p*hw:(p+1)*hw], y[p*ohw:(p+1)*ohw]
		if avgPoolInside(g) {
			avgPoolPlaneInside(xp, yp, g)
			return
		}
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				var s float32
				for kh := 0; kh < g.KH; kh++ {
					ih := oh*g.SH - g.PH + kh*g.DH
					if ih < 0 || ih >= g.H {
						continue
					}
					for kw := 0; kw < g.KW; kw++ {
						iw := ow*g.SW - g.PW + kw*g.DW
						if iw >= 0 && iw < g.W {
							s += xp[ih*g.W+iw]
						}
					}
				}
				yp[oh*g.OW+ow] = s * avgPoolScale(g, oh, ow)
			}
		}
	})
}

// avgPoolInside reports whether every window of g lies inside the input:
// no padding and no window hanging past the last row or column (ceil
// mode), so that every divisor is KH·KW.
func avgPoolInside(g Conv) bool {
	return g.PH == 0 && g.PW == 0 && g.OH > 0 && g.OW > 0 &&
		(g.OH-1)*g.SH+(g.KH-1)*g.DH < g.H && (g.OW-1)*g.SW+(g.KW-1)*g.DW < g.W
}

// avgPoolPlaneInside is AvgPool2DFwd's loop for one plane where
// avgPoolInside holds: the same sums in the same order (from zero, a row
// of taps at a time) times the one divisor's inverse, without the edge
// tests and the divisor of each window; 2×2 windows of stride 2 with their
// four taps written out. DenseNet-121's first transition (256 planes of
// 56², 2×2 stride 2, one thread; least of 3): 3.3 ms in the general loop,
// 0.29 here.
func avgPoolPlaneInside(xp, yp []float32, g Conv) {
	scale := 1 / float32(g.KH*g.KW)
	if g.KH == 2 && g.KW == 2 && g.SH == 2 && g.SW == 2 && g.DH == 1 && g.DW == 1 {
		for oh := 0; oh < g.OH; oh++ {
			yr := yp[oh*g.OW : (oh+1)*g.OW]
			r0 := xp[2*oh*g.W : 2*oh*g.W+2*len(yr)]
			r1 := xp[(2*oh+1)*g.W : (2*oh+1)*g.W+2*len(yr)]
			for ow := range yr {
				var s float32
				s += r0[2*ow]
				s += r0[2*ow+1]
				s += r1[2*ow]
				s += r1[2*ow+1]
				yr[ow] = s * scale
			}
		}
		return
	}
	for oh := 0; oh < g.OH; oh++ {
		yr := yp[oh*g.OW : (oh+1)*g.OW]
		for ow := range yr {
			var s float32
			for kh := 0; kh < g.KH; kh++ {
				row := xp[(oh*g.SH+kh*g.DH)*g.W+ow*g.SW:]
				for kw := 0; kw < g.KW; kw++ {
					s += row[kw*g.DW]
				}
			}
			yr[ow] = s * scale
		}
	}
}

// AvgPool2DBwd writes dx: each window's gradient dy/divisor is spread over
// the input pixels of the window.
func AvgPool2DBwd(dy, dx []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	poolPlanes(g, func(p int) {
		dyp, dxp := dy[p*ohw:(p+1)*ohw], dx[p*hw:(p+1)*hw]
		clear(dxp)
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				d := dyp[oh*g.OW+ow] * avgPoolScale(g, oh, ow)
				for kh := 0; kh < g.KH; kh++ {
					ih := oh*g.SH - g.PH + kh*g.DH
					if ih < 0 || ih >= g.H {
						continue
					}
					for kw := 0; kw < g.KW; kw++ {
						iw := ow*g.SW - g.PW + kw*g.DW
						if iw >= 0 && iw < g.W {
							dxp[ih*g.W+iw] += d
						}
					}
				}
			}
		}
	})
}

// GlobalAvgPoolFwd writes y [n,c] = the mean of x [n,c,spatial] over the
// spatial positions.
func GlobalAvgPoolFwd(x, y []float32, n, c, spatial int) {
	scale := 1 / float32(spatial)
	if k := archPlaneMeans(activeGemmPath.Load().name); k != nil && spatial > 0 && n*c > 0 {
		// Sixty-four partial sums a plane in vector registers, where
		// sum32 kept eight in Go (regnet_y_400mf's squeeze-and-excitation
		// pools: 2.9% of its batch-1 inference on one thread).
		_, _ = x[n*c*spatial-1], y[n*c-1] // the assembly does no bounds checks
		ParallelFor(n*c, rowGrain(spatial), func(lo, hi int) {
			k(&x[lo*spatial], &y[lo], hi-lo, spatial, scale)
		})
		return
	}
	ParallelFor(n*c, rowGrain(spatial), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			y[p] = sum32(x[p*spatial:(p+1)*spatial]) * scale
		}
	})
}

// GlobalAvgPoolBwd writes dx [n,c,spatial] = dy [n,c] / spatial at every
// position.
func GlobalAvgPoolBwd(dy, dx []float32, n, c, spatial int) {
	scale := 1 / float32(spatial)
	ParallelFor(n*c, rowGrain(spatial), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			d := dy[p] * scale
			row := dx[p*spatial : (p+1)*spatial]
			for i := range row {
				row[i] = d
			}
		}
	})
}

// sum32 returns Σ x in float32 in eight interleaved partial sums (lanes i
// mod 8, added pairwise at the end), the same order for any caller: eight
// chains of additions in flight where one chain waited on each addition's
// latency: efficientnet_b0's last pool (1280 planes of 7²) 31 µs against
// 111 (it was 7% of that model's batch-1 inference).
func sum32(x []float32) float32 {
	var s [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		s[0] += v[0]
		s[1] += v[1]
		s[2] += v[2]
		s[3] += v[3]
		s[4] += v[4]
		s[5] += v[5]
		s[6] += v[6]
		s[7] += v[7]
	}
	for j := 0; i < len(x); i, j = i+1, j+1 {
		s[j] += x[i]
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}
