package planner

import "github.com/mlbuild/mlbuild/spec"

// The lowering of convolutions and the pools, which share their window, and
// the global average pool (lowerNode and declareParams in lower.go dispatch
// to it).

// convParams declares a convolution's weight [OC, C/groups, KH, KW] and bias.
func (l *lowering) convParams(n *spec.Node) error {
	in, err := l.inShape(n, 0)
	if err != nil {
		return err
	}
	if len(in) != 3 || len(n.OutShape) != 3 {
		return fail(n, "conv2d needs a [channels, height, width] input, got %s", shapeString(in))
	}
	groups := n.Window().Groups
	if in[0]%groups != 0 {
		return fail(n, "%d input channels do not split into %d groups", in[0], groups)
	}
	oc := n.OutShape[0]
	fanIn := in[0] / groups * n.Kernel[0] * n.Kernel[1]
	l.addParam(n, "weight", []int{oc, in[0] / groups, n.Kernel[0], n.Kernel[1]}, true, "uniform", fanIn)
	if n.Bias {
		l.addParam(n, "bias", []int{oc}, true, "uniform", fanIn)
	}
	return nil
}

// window returns the geometry of a conv2d or pooling node.
func (l *lowering) window(n *spec.Node) (ConvGeom, error) {
	in := n.InShapes[0]
	if len(in) != 3 || len(n.OutShape) != 3 {
		return ConvGeom{}, fail(n, "%s needs a [channels, height, width] input, got %s", n.Op, shapeString(in))
	}
	w := n.Window()
	g := ConvGeom{
		N: l.batch, C: in[0], H: in[1], W: in[2],
		OC: n.OutShape[0], OH: n.OutShape[1], OW: n.OutShape[2],
		KH: w.Kernel[0], KW: w.Kernel[1],
		SH: w.Stride[0], SW: w.Stride[1],
		PH: w.Padding[0], PW: w.Padding[1],
		DH: w.Dilation[0], DW: w.Dilation[1],
		Groups: w.Groups,
		Ceil:   n.Rounding == "ceil",
		// only an avgpool2d decodes countIncludePad
		ExcludePad: n.ExcludePad,
	}
	if g.KH < 1 || g.KW < 1 {
		return g, fail(n, "%s needs a kernel size, got %dx%d", n.Op, g.KH, g.KW)
	}
	return g, nil
}

// lowerWindow lowers conv2d, maxpool2d and avgpool2d.
func (l *lowering) lowerWindow(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	g, err := l.window(n)
	if err != nil {
		return err
	}
	y := l.output(n)
	switch n.Op {
	case spec.OpConv2D:
		// The workspace (Out[1]) is the backend's to size: chooseMethods.
		l.emit(n, KConv2D, []BufID{x, l.param(n, "weight"), l.param(n, "bias")}, []BufID{y, NoBuf}, Attr{Conv: &g})
	case spec.OpMaxPool2D:
		l.emit(n, KMaxPool2D, []BufID{x}, []BufID{y}, Attr{Conv: &g})
	case spec.OpAvgPool2D:
		l.emit(n, KAvgPool2D, []BufID{x}, []BufID{y}, Attr{Conv: &g})
	}
	return nil
}

// lowerGlobalAvgPool lowers a mean over every spatial axis.
func (l *lowering) lowerGlobalAvgPool(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	l.emit(n, KGlobalAvgPool, []BufID{x}, []BufID{l.output(n)}, Attr{})
	return nil
}
