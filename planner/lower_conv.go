package planner

import "github.com/mlbuild/mlbuild/spec"

// The lowering of convolutions and the pools, which share their window, and
// the global average pool (lowerNode and declareParams in lower.go dispatch
// to it).

// convParams declares a convolution's weight [OC, C/groups, KH, KW] and
// bias; a conv1d's weight is [OC, C/groups, K], as PyTorch's Conv1d has it.
func (l *lowering) convParams(n *spec.Node) error {
	in, err := l.inShape(n, 0)
	if err != nil {
		return err
	}
	out := n.OutShape
	if n.OneD() {
		in, out = as2D(in), as2D(out)
	}
	if len(in) != 3 || len(out) != 3 {
		return fail(n, "%s needs a %s input, got %s", n.Op, windowInput(n), shapeString(n.InShapes[0]))
	}
	w := n.Window()
	groups := w.Groups
	if in[0]%groups != 0 {
		return fail(n, "%d input channels do not split into %d groups", in[0], groups)
	}
	oc := out[0]
	fanIn := in[0] / groups * w.Kernel[0] * w.Kernel[1]
	shape := []int{oc, in[0] / groups, w.Kernel[0], w.Kernel[1]}
	if n.OneD() {
		shape = []int{oc, in[0] / groups, w.Kernel[1]}
	}
	l.addParam(n, "weight", shape, true, "uniform", fanIn)
	if n.Bias {
		l.addParam(n, "bias", []int{oc}, true, "uniform", fanIn)
	}
	return nil
}

// as2D is the [channels, 1, length] shape that a 1-D window's
// [channels, length] input or output runs as; other shapes are returned
// as they are.
func as2D(s []int) []int {
	if len(s) != 2 {
		return s
	}
	return []int{s[0], 1, s[1]}
}

// windowInput names the per-sample input a window op needs, for messages.
func windowInput(n *spec.Node) string {
	if n.OneD() {
		return "[channels, length]"
	}
	return "[channels, height, width]"
}

// window returns the geometry of a conv2d or pooling node; a 1-D one's is
// the 2-D window of height 1 over [channels, 1, length] (OneD set).
func (l *lowering) window(n *spec.Node) (ConvGeom, error) {
	in, out := n.InShapes[0], n.OutShape
	if n.OneD() {
		in, out = as2D(in), as2D(out)
	}
	if len(in) != 3 || len(out) != 3 {
		return ConvGeom{}, fail(n, "%s needs a %s input, got %s", n.Op, windowInput(n), shapeString(n.InShapes[0]))
	}
	w := n.Window()
	g := ConvGeom{
		N: l.batch, C: in[0], H: in[1], W: in[2],
		OC: out[0], OH: out[1], OW: out[2],
		KH: w.Kernel[0], KW: w.Kernel[1],
		SH: w.Stride[0], SW: w.Stride[1],
		PH: w.Padding[0], PW: w.Padding[1],
		DH: w.Dilation[0], DW: w.Dilation[1],
		Groups: w.Groups,
		Ceil:   n.Rounding == "ceil",
		OneD:   n.OneD(),
		// only an avgpool2d decodes countIncludePad
		ExcludePad: n.ExcludePad,
	}
	if g.KH < 1 || g.KW < 1 {
		return g, fail(n, "%s needs a kernel size, got %dx%d", n.Op, g.KH, g.KW)
	}
	return g, nil
}

// lowerWindow lowers conv2d, maxpool2d and avgpool2d, and their 1-D
// counterparts as the 2-D step of height 1: the step reads views of the
// input ([N, C, 1, L]) and of a conv1d's weight ([OC, C/groups, 1, K]),
// which cost nothing, and writes the output as [N, OC, 1, OL], which the
// layers after it see as [N, OC, OL]. So every backend runs them, forward
// and backward, with its 2-D kernels.
func (l *lowering) lowerWindow(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	g, err := l.window(n)
	if err != nil {
		return err
	}
	weight := l.param(n, "weight")
	var y BufID
	if g.OneD {
		x = l.p.addView(n.Name+".in2d", x, []int{g.N, g.C, 1, g.W})
		if weight != NoBuf {
			ws := l.p.shapeOf(weight)
			weight = l.p.addView(n.Name+".weight2d", weight, []int{ws[0], ws[1], 1, ws[2]})
		}
		y = l.p.addBuffer(n.Name+".out", KindActivation, []int{g.N, g.OC, 1, g.OW})
		l.value[n.Name] = l.p.addView(n.Name+".out1d", y, withBatch(l.batch, n.OutShape))
	} else {
		y = l.output(n)
	}
	switch n.Op {
	case spec.OpConv2D, spec.OpConv1D:
		// The workspace (Out[1]) is the backend's to size: chooseMethods.
		l.emit(n, KConv2D, []BufID{x, weight, l.param(n, "bias")}, []BufID{y, NoBuf}, Attr{Conv: &g})
	case spec.OpMaxPool2D, spec.OpMaxPool1D:
		l.emit(n, KMaxPool2D, []BufID{x}, []BufID{y}, Attr{Conv: &g})
	case spec.OpAvgPool2D, spec.OpAvgPool1D:
		l.emit(n, KAvgPool2D, []BufID{x}, []BufID{y}, Attr{Conv: &g})
	}
	return nil
}

// lowerResize lowers a resize of the height and width: one step.
func (l *lowering) lowerResize(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	if n.Mode != ResizeNearest && n.Mode != ResizeBilinear {
		return fail(n, "resize mode %q is neither %q nor %q", n.Mode, ResizeNearest, ResizeBilinear)
	}
	l.emit(n, KResize, []BufID{x}, []BufID{l.output(n)}, Attr{Mode: n.Mode, AlignCorners: n.AlignCorners})
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
