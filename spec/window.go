package spec

// Window is the sliding window of a conv2d, maxpool2d or avgpool2d node
// (or of a conv1d, maxpool1d or avgpool1d node, as the 2-D window of
// height 1 it runs as), every field set: the one place in Go that knows
// the schema's window defaults (schema/model.cue's conv and pool ops), for
// code that reads a Node built in Go rather than decoded, whose unset
// fields are zero.
type Window struct {
	Kernel   [2]int
	Stride   [2]int // default 1 for a convolution, the kernel for a pool (PyTorch's)
	Padding  [2]int // default 0
	Dilation [2]int // default 1
	Groups   int    // default 1; always 1 for a pool
}

// Window returns n's window with the schema's defaults in place of unset
// fields: a stride, dilation or group count below 1 is unset (the schema
// rejects such values in a spec, so a decoded Node has none).
func (n *Node) Window() Window {
	w := Window{Kernel: n.Kernel, Stride: n.Stride, Padding: n.Padding, Dilation: n.Dilation, Groups: 1}
	conv := n.Op == OpConv2D || n.Op == OpConv1D
	for i := range 2 {
		if w.Stride[i] < 1 {
			w.Stride[i] = 1
			if !conv {
				w.Stride[i] = w.Kernel[i]
			}
		}
		w.Dilation[i] = max(w.Dilation[i], 1)
	}
	if n.OneD() {
		w.Kernel[0] = 1
		w.Stride[0], w.Padding[0], w.Dilation[0] = 1, 0, 1
	}
	if conv {
		w.Groups = max(n.Groups, 1)
	}
	return w
}

// OneD reports whether n is a conv1d, maxpool1d or avgpool1d: a window
// along the length of [channels, length] samples, which the planner runs
// as its 2-D counterpart over [channels, 1, length].
func (n *Node) OneD() bool {
	return n.Op == OpConv1D || n.Op == OpMaxPool1D || n.Op == OpAvgPool1D
}

// WindowOutSize is the number of windows along one axis of size in: the
// schema's #Extent rule, for Go code that checks a geometry. Rounding down
// (ceil false) it is (in + 2·pad − dil·(k−1) − 1) / stride + 1; rounding up
// (PyTorch's ceil_mode) it keeps a partial last window unless that window
// would start in the trailing padding or beyond. It is below 1 when the
// window is larger than the padded input.
func WindowOutSize(in, k, stride, pad, dil int, ceil bool) int {
	num := in + 2*pad - dil*(k-1) - 1
	if num < 0 || stride < 1 {
		return 0
	}
	if !ceil {
		return num/stride + 1
	}
	out := (num+stride-1)/stride + 1
	if (out-1)*stride >= in+pad {
		out--
	}
	return out
}
