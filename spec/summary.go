package spec

// Params is the number of trainable parameters of n (weights and biases;
// batchnorm's running statistics are not counted, as Keras and torchinfo
// count them apart).
func (n *Node) Params() int64 {
	in := 0
	if len(n.InShapes) > 0 && len(n.InShapes[0]) > 0 {
		in = n.InShapes[0][0]
	}
	switch n.Op {
	case OpDense:
		p := int64(in) * int64(n.Units)
		if n.Bias {
			p += int64(n.Units)
		}
		return p
	case OpConv2D:
		g := max(n.Groups, 1)
		p := int64(n.OutChannels) * int64(in/g) * int64(n.Kernel[0]*n.Kernel[1])
		if n.Bias {
			p += int64(n.OutChannels)
		}
		return p
	case OpBatchNorm:
		return 2 * int64(in)
	}
	return 0
}

// ForwardFLOPs estimates the floating-point operations of n's forward pass
// for one sample. A multiply-add counts 2; adding a bias, an element-wise op
// and one element of a pooling window count 1 each; softmax counts 3 per
// element (exponent, sum, divide) and logsoftmax 4; batchnorm 2 per element
// (scale and shift with folded statistics); reshapes, flatten, transpose
// and dropout (at inference) count 0.
func (n *Node) ForwardFLOPs() int64 {
	out := numel(n.OutShape)
	switch n.Op {
	case OpDense:
		f := 2 * int64(n.Units) * numel(n.InShapes[0])
		if n.Bias {
			f += int64(n.Units)
		}
		return f
	case OpConv2D:
		g := max(n.Groups, 1)
		perOut := 2 * int64(n.InShapes[0][0]/g) * int64(n.Kernel[0]*n.Kernel[1])
		if n.Bias {
			perOut++
		}
		return out * perOut
	case OpMaxPool2D, OpAvgPool2D:
		return out * int64(n.Kernel[0]*n.Kernel[1])
	case OpGlobalAvgPool:
		return numel(n.InShapes[0])
	case OpMatMul:
		a := n.InShapes[0]
		return 2 * out * int64(a[len(a)-1])
	case OpSoftmax:
		return 3 * out
	case OpLogSoftmax:
		return 4 * out
	case OpBatchNorm:
		return 2 * out
	case OpInput, OpFlatten, OpReshape, OpTranspose, OpDropout, OpConcat:
		return 0
	}
	return out // element-wise ops: one per output element
}

func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}
