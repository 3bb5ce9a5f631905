package cpu

// Conv is the static geometry of a 2-D convolution or pooling window; it
// mirrors planner.ConvGeom field for field so the emitter can print one as a
// composite literal. Groups, SH/SW and DH/DW of 0 are read as 1.
type Conv struct {
	N, C, H, W int // input: batch, channels, height, width
	OC, OH, OW int // output channels (= C for pooling), height, width
	KH, KW     int // window
	SH, SW     int // stride
	PH, PW     int // zero padding on both sides
	DH, DW     int // dilation
	Groups     int
}

// convSlots is how many images' im2col columns the scratch buffer holds at
// once. It bounds both the scratch memory and the parallelism of the
// convolution kernels over the batch, and it does not depend on the number
// of threads so that a plan's buffer sizes are the same on every machine.
const convSlots = 16

// norm returns g with zero strides, dilations and groups read as 1.
func (g Conv) norm() Conv {
	one := func(v *int) {
		if *v < 1 {
			*v = 1
		}
	}
	one(&g.SH)
	one(&g.SW)
	one(&g.DH)
	one(&g.DW)
	one(&g.Groups)
	return g
}

// pointwise reports whether the convolution is a 1×1, stride 1, unpadded
// one, whose im2col matrix is the input image itself.
func (g Conv) pointwise() bool {
	g = g.norm()
	return g.KH == 1 && g.KW == 1 && g.SH == 1 && g.SW == 1 && g.PH == 0 && g.PW == 0
}

// colRows is the number of rows of one group's im2col matrix, C/G·KH·KW,
// which is also the length of one output channel's filter.
func (g Conv) colRows() int { return g.C / g.norm().Groups * g.KH * g.KW }

// colsPerImage is the size of one image's im2col matrices, all groups.
func (g Conv) colsPerImage() int { return g.norm().Groups * g.colRows() * g.OH * g.OW }

// slots is the number of images whose columns the scratch holds at once.
func (g Conv) slots() int { return max(1, min(g.N, convSlots)) }

// ColsSize is the number of float32s of im2col scratch that Conv2DFwd and
// Conv2DBwd need: for each of min(N, 16) image slots, per group, a
// [C/G·KH·KW, OH·OW] matrix. A 1×1, stride 1, unpadded convolution needs none.
func (g Conv) ColsSize() int {
	if g.pointwise() {
		return 0
	}
	return g.slots() * g.colsPerImage()
}

// im2col writes the columns of one image x [C,H,W] into cols: for each group
// a [C/G·KH·KW, OH·OW] matrix whose row (c,kh,kw) holds the input pixel each
// output position sees through that filter tap (0 in the padding).
func im2col(x, cols []float32, g Conv) {
	ohw := g.OH * g.OW
	rows := g.C * g.KH * g.KW // all groups, laid out group after group
	for r := 0; r < rows; r++ {
		kw := r % g.KW
		kh := r / g.KW % g.KH
		c := r / (g.KW * g.KH)
		plane := x[c*g.H*g.W : (c+1)*g.H*g.W]
		dst := cols[r*ohw : (r+1)*ohw]
		for oh := 0; oh < g.OH; oh++ {
			out := dst[oh*g.OW : (oh+1)*g.OW]
			ih := oh*g.SH - g.PH + kh*g.DH
			if ih < 0 || ih >= g.H {
				clear(out)
				continue
			}
			src := plane[ih*g.W : (ih+1)*g.W]
			iw0 := kw*g.DW - g.PW
			if g.SW == 1 {
				// Contiguous: zeros, a copy, zeros.
				lo := max(0, -iw0)
				hi := min(g.OW, g.W-iw0)
				if hi <= lo {
					clear(out)
					continue
				}
				clear(out[:lo])
				copy(out[lo:hi], src[lo+iw0:hi+iw0])
				clear(out[hi:])
				continue
			}
			for ow := range out {
				iw := ow*g.SW + iw0
				if iw >= 0 && iw < g.W {
					out[ow] = src[iw]
				} else {
					out[ow] = 0
				}
			}
		}
	}
}

// col2im adds the columns of one image back into dx [C,H,W], the adjoint of
// im2col: each column entry is summed into the pixel it was read from.
func col2im(cols, dx []float32, g Conv) {
	ohw := g.OH * g.OW
	rows := g.C * g.KH * g.KW
	for r := 0; r < rows; r++ {
		kw := r % g.KW
		kh := r / g.KW % g.KH
		c := r / (g.KW * g.KH)
		plane := dx[c*g.H*g.W : (c+1)*g.H*g.W]
		src := cols[r*ohw : (r+1)*ohw]
		for oh := 0; oh < g.OH; oh++ {
			ih := oh*g.SH - g.PH + kh*g.DH
			if ih < 0 || ih >= g.H {
				continue
			}
			in := src[oh*g.OW : (oh+1)*g.OW]
			dst := plane[ih*g.W : (ih+1)*g.W]
			iw0 := kw*g.DW - g.PW
			if g.SW == 1 {
				lo := max(0, -iw0)
				hi := min(g.OW, g.W-iw0)
				if hi > lo {
					d := dst[lo+iw0 : hi+iw0]
					for i, v := range in[lo:hi] {
						d[i] += v
					}
				}
				continue
			}
			for ow, v := range in {
				iw := ow*g.SW + iw0
				if iw >= 0 && iw < g.W {
					dst[iw] += v
				}
			}
		}
	}
}

// forEachSlot runs fn(slot, image) for every image of the batch, images
// spread over the scratch slots (image i uses slot i mod slots) and the
// slots spread over the threads, so no two goroutines share a slot.
func (g Conv) forEachSlot(first, count int, fn func(slot, img int)) {
	slots := g.slots()
	ParallelFor(min(slots, count), 1, func(lo, hi int) {
		for s := lo; s < hi; s++ {
			for i := first + s; i < first+count; i += slots {
				fn(s, i)
			}
		}
	})
}

// Conv2DFwd computes y = act(conv(x, w) + b) by im2col and one GEMM per
// image and group, with the bias and activation applied while the output is
// still in cache. x is [N,C,H,W], w [OC,C/G,KH,KW], b [OC] or nil, y
// [N,OC,OH,OW]; cols is scratch of g.ColsSize() float32s.
func Conv2DFwd(x, w, b, y, cols []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	G, ohw, krows := g.Groups, g.OH*g.OW, g.colRows()
	ocg, chw, per := g.OC/G, g.C*g.H*g.W, g.colsPerImage()
	pw := g.pointwise()
	g.forEachSlot(0, g.N, func(slot, n int) {
		xn := x[n*chw : (n+1)*chw]
		yn := y[n*g.OC*ohw : (n+1)*g.OC*ohw]
		c := xn
		if !pw {
			c = cols[slot*per : (slot+1)*per]
			im2col(xn, c, g)
		}
		for gi := 0; gi < G; gi++ {
			Sgemm(false, false, ocg, ohw, krows, 1, w[gi*ocg*krows:], krows,
				c[gi*krows*ohw:], ohw, 0, yn[gi*ocg*ohw:], ohw)
		}
		for oc := 0; oc < g.OC; oc++ {
			row := yn[oc*ohw : (oc+1)*ohw]
			if b != nil {
				bv := b[oc]
				for i := range row {
					row[i] += bv
				}
			}
			applyAct(row, act, alpha)
		}
	})
}

// Conv2DBwd is the backward pass of Conv2DFwd. It turns dy into the gradient
// of the pre-activation in place, then writes db (Σ over images and
// positions), dw (Σ over images of dy·colsᵀ) and dx (col2im of wᵀ·dy),
// recomputing the columns from x in rounds of as many images as cols has
// slots. dx and db may be nil.
func Conv2DBwd(x, w, y, dy, cols, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	G, ohw, krows := g.Groups, g.OH*g.OW, g.colRows()
	ocg, chw, per := g.OC/G, g.C*g.H*g.W, g.colsPerImage()
	yimg := g.OC * ohw
	if act != ActNone {
		ParallelFor(g.N, 1, func(lo, hi int) {
			actBackward(y[lo*yimg:hi*yimg], dy[lo*yimg:hi*yimg], act, alpha)
		})
	}
	if db != nil {
		ParallelFor(g.OC, 1, func(lo, hi int) {
			for oc := lo; oc < hi; oc++ {
				var s float32
				for n := 0; n < g.N; n++ {
					for _, v := range dy[n*yimg+oc*ohw : n*yimg+(oc+1)*ohw] {
						s += v
					}
				}
				db[oc] = s
			}
		})
	}
	clear(dw[:g.OC*krows])
	pw := g.pointwise()
	// imageCols returns the columns of image n, already computed into slot.
	imageCols := func(slot, n int) []float32 {
		if pw {
			return x[n*chw : (n+1)*chw]
		}
		return cols[slot*per : (slot+1)*per]
	}
	round := g.N
	if !pw {
		round = g.slots()
	}
	for first := 0; first < g.N; first += round {
		count := min(round, g.N-first)
		if !pw {
			g.forEachSlot(first, count, func(slot, n int) {
				im2col(x[n*chw:(n+1)*chw], imageCols(slot, n), g)
			})
		}
		// dw[oc, r] += Σ_n dy_n[oc, :]·cols_n[r, :], split over the filter
		// taps r so that each goroutine owns its own columns of dw.
		for gi := 0; gi < G; gi++ {
			dwg := dw[gi*ocg*krows:]
			ParallelFor(krows, 8, func(lo, hi int) {
				for i := 0; i < count; i++ {
					n := first + i
					c := imageCols(i%g.slots(), n)
					Sgemm(false, true, ocg, hi-lo, ohw, 1, dy[n*yimg+gi*ocg*ohw:], ohw,
						c[(gi*krows+lo)*ohw:], ohw, 1, dwg[lo:], krows)
				}
			})
		}
		if dx == nil {
			continue
		}
		g.forEachSlot(first, count, func(slot, n int) {
			dxn := dx[n*chw : (n+1)*chw]
			if pw {
				for gi := 0; gi < G; gi++ {
					Sgemm(true, false, krows, ohw, ocg, 1, w[gi*ocg*krows:], krows,
						dy[n*yimg+gi*ocg*ohw:], ohw, 0, dxn[gi*krows*ohw:], ohw)
				}
				return
			}
			c := imageCols(slot, n)
			for gi := 0; gi < G; gi++ {
				Sgemm(true, false, krows, ohw, ocg, 1, w[gi*ocg*krows:], krows,
					dy[n*yimg+gi*ocg*ohw:], ohw, 0, c[gi*krows*ohw:], ohw)
			}
			clear(dxn)
			col2im(c, dxn, g)
		})
	}
}
