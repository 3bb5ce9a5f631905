package cpu

import "fmt"

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
	// ExcludePad: an average pool divides by its taps inside the input
	// (PyTorch's count_include_pad=False) instead of those inside the
	// padded input.
	ExcludePad bool
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

// Convolutions come in several methods, and the planner chooses one per
// step (its CPU rule, planner.CPU) so that the program calls it directly:
// Conv2DDirect* convolve shifted, zero-padded planes (conv_direct.go),
// Conv2DIm2col* gather packed columns straight into the GEMM microkernels
// (conv_packed.go), Conv2DWinograd* transform tiles (conv_winograd*.go)
// Conv2DPointwise* multiply 1×1 filters by the input in place
// (conv_pointwise.go) and Conv2DDepthwiseFwd convolves each plane with its
// own filter (conv_depthwise.go); BF16's methods of the same names run
// im2col and the pointwise method with bfloat16 products (conv_bf16.go).
// None takes scratch from the caller; each keeps its work buffers to
// itself, one per worker. All use the same operand
// conventions: x is [N,C,H,W], w [OC,C/G,KH,KW], b [OC] or nil, y
// [N,OC,OH,OW]; the backward writes dw, db (Σ over images and positions)
// and dx, of which dx and db may be nil, and may overwrite dy with the
// gradient of the pre-activation.

// Conv2DDirectFwd computes y = act(conv(x, w) + b) by the direct method. It
// needs stride 1 and padding within the filter's reach ((KH-1)·DH rows,
// (KW-1)·DW columns), and panics otherwise (the planner chooses it only
// then).
func Conv2DDirectFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !convDirectOK(g) {
		panic(directRefusal("Conv2DDirectFwd", g))
	}
	convDirectForward(x, w, b, y, g, act, alpha, convDirectFor(activeGemmPath.Load()))
}

// Conv2DDirectBwd is the backward pass of Conv2DDirectFwd, for the same
// geometry; dx, when wanted, is the direct convolution of dy with the
// flipped filters.
func Conv2DDirectBwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !convDirectOK(g) {
		panic(directRefusal("Conv2DDirectBwd", g))
	}
	convDirectBackward(x, w, y, dy, dx, dw, db, g, act, alpha, convDirectFor(activeGemmPath.Load()))
}

// directRefusal says why the direct method does not take normalised g.
func directRefusal(fn string, g Conv) string {
	return fmt.Sprintf("cpu.%s: stride %dx%d, padding %dx%d of a %dx%d filter dilated %dx%d; the direct method needs stride 1 and padding within the filter's reach",
		fn, g.SH, g.SW, g.PH, g.PW, g.KH, g.KW, g.DH, g.DW)
}

// Conv2DWinogradFwd computes y = act(conv(x, w) + b) by Winograd
// F(2×2,5×5) (conv_winograd.go): 36 matrix products of transformed tiles
// instead of 100 multiply-adds per 2×2 outputs. It needs a 5×5 filter,
// stride 1, no dilation and one group, and panics otherwise (the planner
// chooses it only then). Its rounding error is larger than the other
// methods' (TestConvWinograd states the bound). Its work buffers hold
// whole images, 36·4 bytes per 2×2 tile and channel (C + OC) per thread.
func Conv2DWinogradFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !winogradOK(g) {
		panic(winogradRefusal(winoF2, "Conv2DWinogradFwd", g))
	}
	convWinogradForward(x, w, b, y, g, act, alpha, winoF2, winoF2.kernels(activeGemmPath.Load()), false, nil)
}

// Conv2DWinogradBwd is the backward pass of a convolution that
// Conv2DWinogradFwd takes, with padding up to 4: dx, when wanted, is
// Winograd's convolution of dy with the flipped filters, dw and db are
// the direct method's. It overwrites dy with the gradient of the
// pre-activation.
func Conv2DWinogradBwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !winogradOK(g) || !convDirectOK(g) {
		panic(winogradRefusal(winoF2, "Conv2DWinogradBwd", g))
	}
	convWinogradBackward(x, w, y, dy, dx, dw, db, g, act, alpha, winoF2, winoF2.kernels(activeGemmPath.Load()))
}

// Conv2DWinogradF4Fwd is Conv2DWinogradFwd by Winograd F(4×4,5×5)
// (conv_winograd4.go): 64 matrix products of transformed 8×8 tiles for
// 4×4 outputs, 2.25 times fewer multiply-adds in the products than
// F(2×2,5×5) for larger transforms and a larger rounding error
// (winogradMethods in conv_winograd_test.go states the bound). Its work buffers hold whole
// images, 64·4 bytes per 4×4 tile and channel (C + OC) per thread.
func Conv2DWinogradF4Fwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !winogradOK(g) {
		panic(winogradRefusal(winoF4, "Conv2DWinogradF4Fwd", g))
	}
	convWinogradForward(x, w, b, y, g, act, alpha, winoF4, winoF4.kernels(activeGemmPath.Load()), false, nil)
}

// Conv2DWinogradF4Bwd is the backward pass of a convolution that
// Conv2DWinogradF4Fwd takes, with padding up to 4: dx is F(4×4,5×5)'s
// convolution of dy with the flipped filters, dw is F(5×5,4×4)'s. It
// overwrites dy with the gradient of the pre-activation.
func Conv2DWinogradF4Bwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !winogradOK(g) || !convDirectOK(g) {
		panic(winogradRefusal(winoF4, "Conv2DWinogradF4Bwd", g))
	}
	convWinogradBackward(x, w, y, dy, dx, dw, db, g, act, alpha, winoF4, winoF4.kernels(activeGemmPath.Load()))
}

// Conv2DIm2colFwd computes y = act(conv(x, w) + b) by im2col + GEMM, for
// any geometry.
func Conv2DIm2colFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	convForward(x, w, b, y, g.norm(), act, alpha)
}

// Conv2DIm2colBwd is the backward pass of Conv2DIm2colFwd, for any
// geometry; it overwrites dy with the gradient of the pre-activation.
func Conv2DIm2colBwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	convBackward(x, w, y, dy, dx, dw, db, g.norm(), act, alpha)
}
