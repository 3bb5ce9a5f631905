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

// ColsSize is the number of float32s of scratch that Conv2DFwd and
// Conv2DBwd need from the caller: none. The direct kernels
// (conv_direct.go) gather nothing, and the packed path gathers its columns
// into per-goroutine panels of its own (conv_packed.go), so the plan's
// cols buffer is empty; the method stays so that plans and emitted code
// keep one place to ask.
func (g Conv) ColsSize() int { return 0 }

// col2im adds an image's column gradient [C·KH·KW, OH·OW] (rows ld apart,
// laid out as packConvPanel gathers them) back into dx [C,H,W]: each entry
// is summed into the pixel its column entry was read from.
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

// Conv2DFwd computes y = act(conv(x, w) + b): x is [N,C,H,W], w
// [OC,C/G,KH,KW], b [OC] or nil, y [N,OC,OH,OW]. Stride-1 convolutions run
// the direct kernels (conv_direct.go), strided ones the packed im2col GEMM
// (conv_packed.go). cols is the plan's scratch of g.ColsSize() (zero)
// float32s, left untouched; the signature keeps it for the emitter's sake.
func Conv2DFwd(x, w, b, y, cols []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if convDirectOK(g) {
		convDirectForward(x, w, b, y, g, act, alpha, convDirectFor(activeGemmPath.Load()))
		return
	}
	convForward(x, w, b, y, g, act, alpha)
}

// Conv2DBwd is the backward pass of Conv2DFwd. It writes dw, db (Σ over
// images and positions) and dx; dx and db may be nil. It may overwrite dy
// with the gradient of the pre-activation (the packed path does, the
// direct one may not). cols is unused, as in Conv2DFwd.
func Conv2DBwd(x, w, y, dy, cols, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if dx == nil && convDirectOK(g) || convDirectDxOK(g) {
		convDirectBackward(x, w, y, dy, dx, dw, db, g, act, alpha, convDirectFor(activeGemmPath.Load()))
		return
	}
	convBackward(x, w, y, dy, dx, dw, db, g, act, alpha)
}
