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

// convMaxSlots and convSlotBudget bound how many images' im2col columns
// the scratch buffer holds at once: at most 16 images and about 4M float32s
// (16 MiB), though never less than one image. The slot count depends only on
// the geometry, never on the thread count, so that a plan's buffer sizes are
// the same on every machine.
const (
	convMaxSlots   = 16
	convSlotBudget = 1 << 22
)

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

// colRows is the number of rows of one group's im2col matrix, C/G·KH·KW,
// which is also the length of one output channel's filter.
func (g Conv) colRows() int { return g.C / g.norm().Groups * g.KH * g.KW }

// slotSize is the scratch one image needs: its im2col columns for every
// group (C·KH·KW rows of OH·OW) and a copy of its output or output gradient
// (OC rows of OH·OW).
func (g Conv) slotSize() int { return (g.C*g.KH*g.KW + g.OC) * g.OH * g.OW }

// slots is the number of images processed per round.
func (g Conv) slots() int {
	return max(1, min(g.N, convMaxSlots, convSlotBudget/max(1, g.slotSize())))
}

// ColsSize is the number of float32s of scratch that Conv2DFwd and
// Conv2DBwd need. They work in rounds of up to 16 images; for a round of n
// images the scratch holds, per group, the [C/G·KH·KW, n·OH·OW] im2col
// matrix of the round (image i in columns i·OH·OW onwards), followed by the
// round's [OC, n·OH·OW] output (or output gradient), so that each group is
// one large GEMM per round rather than one small GEMM per image.
func (g Conv) ColsSize() int { return g.slots() * g.slotSize() }

// im2col writes the columns of one image x [C,H,W] into cols, whose rows
// are ld apart: row (c,kh,kw) holds, for each output position, the input
// pixel it sees through that filter tap (0 in the padding). Rows of all
// groups follow each other, so group g's rows start at g·C/G·KH·KW.
func im2col(x, cols []float32, ld int, g Conv) {
	rows := g.C * g.KH * g.KW
	for r := 0; r < rows; r++ {
		kw := r % g.KW
		kh := r / g.KW % g.KH
		c := r / (g.KW * g.KH)
		plane := x[c*g.H*g.W : (c+1)*g.H*g.W]
		dst := cols[r*ld : r*ld+g.OH*g.OW]
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
				// Rows are short (often under 32): plain loops beat the
				// call overhead of clear and copy.
				for j := range out[:lo] {
					out[j] = 0
				}
				s := src[lo+iw0 : hi+iw0]
				for j, v := range s {
					out[lo+j] = v
				}
				for j := hi; j < len(out); j++ {
					out[j] = 0
				}
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

// col2im adds columns laid out as im2col writes them (rows ld apart) back
// into dx [C,H,W], the adjoint of im2col: each entry is summed into the
// pixel it was read from.
func col2im(cols []float32, ld int, dx []float32, g Conv) {
	rows := g.C * g.KH * g.KW
	for r := 0; r < rows; r++ {
		kw := r % g.KW
		kh := r / g.KW % g.KH
		c := r / (g.KW * g.KH)
		plane := dx[c*g.H*g.W : (c+1)*g.H*g.W]
		src := cols[r*ld : r*ld+g.OH*g.OW]
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

// convRound is the scratch of one round of count images starting at image
// first: the round's im2col matrices (row stride ld = count·OH·OW) and its
// [OC, ld] output block.
type convRound struct {
	first, count, ld int
	cols, out        []float32
}

// forEachRound splits the batch into rounds of up to g.slots() images and
// lays out the scratch for each.
func (g Conv) forEachRound(scratch []float32, fn func(r convRound)) {
	ohw, slots := g.OH*g.OW, g.slots()
	for first := 0; first < g.N; first += slots {
		count := min(slots, g.N-first)
		ld := count * ohw
		colsLen := g.C * g.KH * g.KW * ld
		fn(convRound{first: first, count: count, ld: ld,
			cols: scratch[:colsLen], out: scratch[colsLen : colsLen+g.OC*ld]})
	}
}

// Conv2DFwd computes y = act(conv(x, w) + b) by im2col and, per round of
// images and per group, one GEMM, with the bias and activation applied as
// the output is copied into place. x is [N,C,H,W], w [OC,C/G,KH,KW], b
// [OC] or nil, y [N,OC,OH,OW]; cols is scratch of g.ColsSize() float32s.
func Conv2DFwd(x, w, b, y, cols []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	G, ohw, krows := g.Groups, g.OH*g.OW, g.colRows()
	ocg, chw := g.OC/G, g.C*g.H*g.W
	g.forEachRound(cols, func(r convRound) {
		ParallelFor(r.count, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				n := r.first + i
				im2col(x[n*chw:(n+1)*chw], r.cols[i*ohw:], r.ld, g)
			}
		})
		for gi := 0; gi < G; gi++ {
			Sgemm(false, false, ocg, r.ld, krows, 1, w[gi*ocg*krows:], krows,
				r.cols[gi*krows*r.ld:], r.ld, 0, r.out[gi*ocg*r.ld:], r.ld)
		}
		ParallelFor(r.count, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				yn := y[(r.first+i)*g.OC*ohw:]
				for oc := 0; oc < g.OC; oc++ {
					row := yn[oc*ohw : (oc+1)*ohw]
					copy(row, r.out[oc*r.ld+i*ohw:])
					if b != nil {
						bv := b[oc]
						for j := range row {
							row[j] += bv
						}
					}
					applyAct(row, act, alpha)
				}
			}
		})
	})
}

// Conv2DBwd is the backward pass of Conv2DFwd. It turns dy into the gradient
// of the pre-activation in place, writes db (Σ over images and positions),
// and then per round of images recomputes the columns from x, gathers the
// round's dy, and adds dy·colsᵀ into dw and col2im(wᵀ·dy) into dx, one GEMM
// per group each. dx and db may be nil.
func Conv2DBwd(x, w, y, dy, cols, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	G, ohw, krows := g.Groups, g.OH*g.OW, g.colRows()
	ocg, chw := g.OC/G, g.C*g.H*g.W
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
	g.forEachRound(cols, func(r convRound) {
		ParallelFor(r.count, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				n := r.first + i
				im2col(x[n*chw:(n+1)*chw], r.cols[i*ohw:], r.ld, g)
				for oc := 0; oc < g.OC; oc++ {
					copy(r.out[oc*r.ld+i*ohw:oc*r.ld+(i+1)*ohw], dy[n*yimg+oc*ohw:])
				}
			}
		})
		for gi := 0; gi < G; gi++ {
			Sgemm(false, true, ocg, krows, r.ld, 1, r.out[gi*ocg*r.ld:], r.ld,
				r.cols[gi*krows*r.ld:], r.ld, 1, dw[gi*ocg*krows:], krows)
		}
		if dx == nil {
			return
		}
		for gi := 0; gi < G; gi++ {
			Sgemm(true, false, krows, r.ld, ocg, 1, w[gi*ocg*krows:], krows,
				r.out[gi*ocg*r.ld:], r.ld, 0, r.cols[gi*krows*r.ld:], r.ld)
		}
		ParallelFor(r.count, 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dxn := dx[(r.first+i)*chw : (r.first+i+1)*chw]
				clear(dxn)
				col2im(r.cols[i*ohw:], r.ld, dxn, g)
			}
		})
	})
}
