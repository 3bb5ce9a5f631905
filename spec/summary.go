package spec

// Params is the number of trainable parameters of n (weights and biases;
// batchnorm's running statistics are not counted, as Keras and torchinfo
// count them apart). A count past 2^63 is math.MaxInt64; a loaded Model
// has none (CheckLimits).
func (n *Node) Params() int64 {
	p, _ := n.paramsChecked()
	return p
}

// paramsChecked is Params and whether the count is exact.
func (n *Node) paramsChecked() (int64, bool) {
	in := int64(0)
	if len(n.InShapes) > 0 && len(n.InShapes[0]) > 0 {
		in = int64(n.InShapes[0][0])
	}
	var c counter
	switch n.Op {
	case OpDense:
		// the weight multiplies the last axis (every row of the others)
		if len(n.InShapes) > 0 && len(n.InShapes[0]) > 0 {
			in = int64(n.InShapes[0][len(n.InShapes[0])-1])
		}
		p := c.mul(in, int64(n.Units))
		if n.Tie != "" {
			p = 0 // the weight is the embedding's, counted there
		}
		if n.Bias {
			p = c.add(p, int64(n.Units))
		}
		return p, c.exact()
	case OpConv2D, OpConv1D:
		g := int64(n.Window().Groups)
		p := c.mul(int64(n.OutChannels), in/g, int64(n.Kernel[0]), int64(n.Kernel[1]))
		if n.Bias {
			p = c.add(p, int64(n.OutChannels))
		}
		return p, c.exact()
	case OpBatchNorm:
		return c.mul(2, in), c.exact()
	case OpEmbedding:
		p := c.mul(int64(n.Vocab), int64(n.Dim))
		if n.Positions {
			p = c.add(p, c.mul(in, int64(n.Dim)))
		}
		return p, c.exact()
	case OpLayerNorm:
		var norm int64 = 1
		if len(n.InShapes) > 0 && n.Axis < len(n.InShapes[0]) {
			norm = c.numel(n.InShapes[0][n.Axis:])
		}
		if n.Bias {
			return c.mul(2, norm), c.exact()
		}
		return norm, c.exact()
	}
	return 0, true
}

// ForwardFLOPs estimates the floating-point operations of n's forward pass
// for one sample. A multiply-add counts 2; adding a bias, an element-wise op
// and one element of a pooling window count 1 each; softmax counts 3 per
// element (exponent, sum, divide) and logsoftmax 4; batchnorm 2 per element
// (scale and shift with folded statistics), layernorm 6 (mean, variance,
// normalise, scale, shift); reducemean 1 per input element; reshapes, flatten, transpose
// and dropout (at inference) count 0. A count past 2^63 is math.MaxInt64;
// a loaded Model has none (CheckLimits).
func (n *Node) ForwardFLOPs() int64 {
	f, _ := n.forwardFLOPsChecked()
	return f
}

// forwardFLOPsChecked is ForwardFLOPs and whether the count is exact.
func (n *Node) forwardFLOPsChecked() (int64, bool) {
	var c counter
	out := c.numel(n.OutShape)
	in0 := func() []int {
		if len(n.InShapes) > 0 {
			return n.InShapes[0]
		}
		return nil
	}
	switch n.Op {
	case OpDense:
		f := c.mul(2, int64(n.Units), c.numel(in0()))
		if n.Bias {
			f = c.add(f, out)
		}
		return f, c.exact()
	case OpConv2D, OpConv1D:
		g := int64(n.Window().Groups)
		ch := int64(0)
		if in := in0(); len(in) > 0 {
			ch = int64(in[0])
		}
		perOut := c.mul(2, ch/g, int64(n.Kernel[0]), int64(n.Kernel[1]))
		if n.Bias {
			perOut = c.add(perOut, 1)
		}
		return c.mul(out, perOut), c.exact()
	case OpMaxPool2D, OpAvgPool2D, OpMaxPool1D, OpAvgPool1D:
		return c.mul(out, int64(n.Kernel[0]), int64(n.Kernel[1])), c.exact()
	case OpGlobalAvgPool:
		return c.numel(in0()), c.exact()
	case OpMatMul:
		k := int64(0)
		if a := in0(); len(a) > 0 {
			k = int64(a[len(a)-1])
		}
		return c.mul(2, out, k), c.exact()
	case OpSoftmax:
		return c.mul(3, out), c.exact()
	case OpLogSoftmax:
		return c.mul(4, out), c.exact()
	case OpBatchNorm:
		return c.mul(2, out), c.exact()
	case OpLayerNorm:
		return c.mul(6, out), c.exact()
	case OpReduceMean:
		return c.numel(in0()), c.exact()
	case OpEmbedding:
		if n.Positions {
			return out, c.exact() // the position add
		}
		return 0, true
	case OpResize:
		if n.Mode == "bilinear" {
			return c.mul(7, out), c.exact() // four products and three sums per output
		}
		return 0, true // nearest copies pixels
	case OpInput, OpFlatten, OpReshape, OpTranspose, OpDropout, OpConcat, OpSlice:
		return 0, true
	}
	return out, c.exact() // element-wise ops: one per output element
}

// counter does checked count arithmetic (MulCount, AddCount), remembering
// whether any step overflowed, so that a formula reads as a formula.
type counter struct{ over bool }

func (c *counter) mul(xs ...int64) int64 {
	p := int64(1)
	for _, x := range xs {
		var ok bool
		p, ok = MulCount(p, x)
		c.over = c.over || !ok
	}
	return p
}

func (c *counter) add(a, b int64) int64 {
	s, ok := AddCount(a, b)
	c.over = c.over || !ok
	return s
}

func (c *counter) numel(shape []int) int64 {
	n, ok := ShapeCount(shape)
	c.over = c.over || !ok
	return n
}

func (c *counter) exact() bool { return !c.over }
