package planner

// measureCosts sets every step's FLOPs and Bytes.
//
// Before: all phases are final. After: each step's FLOPs counts a
// multiply-add as 2 and any other arithmetic op as 1 (transcendental
// functions too), and Bytes counts 4 bytes per element of every operand
// read or written (an in-place optimizer update reads and writes its
// param). These are model-level estimates for comparing plans (fused
// against unfused, one model against another), not hardware counters.
func measureCosts(p *Plan) {
	for _, s := range p.allSteps() {
		s.FLOPs = stepFLOPs(p, s)
		s.Bytes = stepBytes(p, s)
	}
}

// size returns the number of elements of operand id (0 for NoBuf).
func (p *Plan) size(id BufID) int64 {
	if id == NoBuf {
		return 0
	}
	return int64(p.Buffers[id].Size)
}

// stepBytes is 4 bytes per element of each operand read and each written.
func stepBytes(p *Plan, s *Step) int64 {
	var n int64
	for _, id := range s.In {
		n += p.size(id)
	}
	for _, id := range s.Out {
		n += p.size(id)
	}
	if s.Kernel == KSGD || s.Kernel == KAdam {
		n += p.size(s.Out[0]) // the param is read as well as written
	}
	return 4 * n
}

// stepFLOPs estimates the arithmetic of one step.
func stepFLOPs(p *Plan, s *Step) int64 {
	in0 := func() int64 { return p.size(s.In[0]) }
	out0 := func() int64 { return p.size(s.Out[0]) }
	act := func() int64 {
		if s.Attr.Act != "" {
			return 1
		}
		return 0
	}
	has := func(id BufID) int64 {
		if id != NoBuf {
			return 1
		}
		return 0
	}
	switch s.Kernel {
	case KGemm:
		// y [B,N] = x [B,K] · Wᵀ: 2·B·N·K, plus bias and activation per output.
		k := int64(p.shapeOf(s.In[1])[1])
		return out0() * (2*k + has(s.In[2]) + act())
	case KGemmBwd:
		k := int64(p.shapeOf(s.In[1])[1])
		y := p.size(s.In[2])
		return y*2*k*(has(s.Out[0])+1) + y*(has(s.Out[2])+act())
	case KConv2D:
		g := s.Attr.Conv
		taps := int64(g.C / max(g.Groups, 1) * g.KH * g.KW)
		return out0() * (2*taps + has(s.In[2]) + act())
	case KConv2DBwd:
		g := s.Attr.Conv
		taps := int64(g.C / max(g.Groups, 1) * g.KH * g.KW)
		y := p.size(s.In[2])
		return y*2*taps*(has(s.Out[0])+1) + y*(has(s.Out[2])+act())
	case KMaxPool2D, KAvgPool2D:
		return out0() * int64(s.Attr.Conv.KH*s.Attr.Conv.KW)
	case KMaxPool2DBwd:
		return p.size(s.In[1]) * int64(s.Attr.Conv.KH*s.Attr.Conv.KW)
	case KAvgPool2DBwd:
		return p.size(s.In[0]) * int64(s.Attr.Conv.KH*s.Attr.Conv.KW)
	case KGlobalAvgPool:
		return in0()
	case KGlobalAvgPoolBwd:
		return out0()
	case KUnary:
		return out0() * int64(len(s.Attr.Chain))
	case KUnaryBwd:
		// Recompute the chain forward, then multiply by each derivative.
		return out0() * int64(3*len(s.Attr.Chain))
	case KBinary, KAccumulate, KDropout, KDropoutBwd:
		return out0()
	case KBinaryBwd:
		n := p.size(s.In[2])
		return n * (has(s.Out[0]) + has(s.Out[1]))
	case KSoftmax, KLogSoftmax:
		return 4 * out0() // max, exp, sum, divide
	case KSoftmaxBwd, KLogSoftmaxBwd:
		return 3 * out0()
	case KBatchNorm:
		return 6 * out0() // mean, variance, normalise, scale and shift
	case KBatchNormBwd:
		return 8 * p.size(s.In[0])
	case KMatMul:
		a := p.shapeOf(s.In[0])
		return out0() * 2 * int64(a[len(a)-1])
	case KMatMulBwd:
		a := p.shapeOf(s.In[0])
		y := p.size(s.In[2])
		return y * 2 * int64(a[len(a)-1]) * (has(s.Out[0]) + has(s.Out[1]))
	case KSoftmaxXent:
		return 5 * in0()
	case KMSE, KMAE:
		return 4 * in0()
	case KHuber:
		return 6 * in0()
	case KSGD:
		return 4 * out0()
	case KAdam:
		return 12 * out0()
	}
	return 0 // transpose, concat and their gradients move data only
}
