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
// [OC,C/G,KH,KW], b [OC] or nil, y [N,OC,OH,OW]. cols is the plan's scratch
// of g.ColsSize() float32s; the kernel now keeps per-thread panel buffers of
// its own (see conv_packed.go) and leaves cols untouched, which the
// signature keeps for the emitter's sake.
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
