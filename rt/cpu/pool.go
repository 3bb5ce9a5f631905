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
	poolPlanes(g, func(p int) {
		xp, yp := x[p*hw:(p+1)*hw], y[p*ohw:(p+1)*ohw]
		if g.pool2x2() {
			for oh := 0; oh < g.OH; oh++ {
				r0, r1 := xp[2*oh*g.W:(2*oh+1)*g.W], xp[(2*oh+1)*g.W:(2*oh+2)*g.W]
				out := yp[oh*g.OW : (oh+1)*g.OW]
				for ow := range out {
					out[ow] = max2x2(r0, r1, 2*ow)
				}
			}
			return
		}
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				yp[oh*g.OW+ow] = xp[maxPoolArg(xp, g, oh, ow)]
			}
		}
	})
}

// pool2x2 reports whether the window is the common 2×2, stride 2,
// unpadded, undilated one, which has a fast path.
func (g Conv) pool2x2() bool {
	return g.KH == 2 && g.KW == 2 && g.SH == 2 && g.SW == 2 && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1
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

// max2x2 is the maximum of the 2×2 window at column j of rows r0 and r1.
func max2x2(r0, r1 []float32, j int) float32 {
	switch argmax2x2(r0, r1, j) {
	case 0:
		return r0[j]
	case 1:
		return r0[j+1]
	case 2:
		return r1[j]
	}
	return r1[j+1]
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
// It recomputes the winners from x.
func MaxPool2DBwd(x, y, dy, dx []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	poolPlanes(g, func(p int) {
		xp, dyp, dxp := x[p*hw:(p+1)*hw], dy[p*ohw:(p+1)*ohw], dx[p*hw:(p+1)*hw]
		clear(dxp)
		if g.pool2x2() {
			for oh := 0; oh < g.OH; oh++ {
				r0, r1 := xp[2*oh*g.W:(2*oh+1)*g.W], xp[(2*oh+1)*g.W:(2*oh+2)*g.W]
				for ow, d := range dyp[oh*g.OW : (oh+1)*g.OW] {
					a := argmax2x2(r0, r1, 2*ow)
					dxp[(2*oh+a>>1)*g.W+2*ow+a&1] = d
				}
			}
			return
		}
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				if a := maxPoolArg(xp, g, oh, ow); a >= 0 {
					dxp[a] += dyp[oh*g.OW+ow]
				}
			}
		}
	})
}

// AvgPool2DFwd writes y = the mean of each window of x, the padding counted
// as zeros in a divisor of KH·KW (PyTorch's count_include_pad default).
func AvgPool2DFwd(x, y []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	scale := 1 / float32(g.KH*g.KW)
	poolPlanes(g, func(p int) {
		xp, yp := x[p*hw:(p+1)*hw], y[p*ohw:(p+1)*ohw]
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
				yp[oh*g.OW+ow] = s * scale
			}
		}
	})
}

// AvgPool2DBwd writes dx: each window's gradient dy/(KH·KW) is spread over
// the input pixels of the window.
func AvgPool2DBwd(dy, dx []float32, g Conv) {
	g = g.norm()
	hw, ohw := g.H*g.W, g.OH*g.OW
	scale := 1 / float32(g.KH*g.KW)
	poolPlanes(g, func(p int) {
		dyp, dxp := dy[p*ohw:(p+1)*ohw], dx[p*hw:(p+1)*hw]
		clear(dxp)
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				d := dyp[oh*g.OW+ow] * scale
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
	ParallelFor(n*c, rowGrain(spatial), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			var s float32
			for _, v := range x[p*spatial : (p+1)*spatial] {
				s += v
			}
			y[p] = s * scale
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
