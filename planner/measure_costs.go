package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// measureCosts sets every step's FLOPs and Bytes.
//
// Before: all phases are final, and the spec's sizes are within
// spec.CheckLimitsAt at the plan's batch (Build checks that first). After:
// each step's FLOPs counts a multiply-add as 2 and any other arithmetic op
// as 1 (transcendental functions too), and Bytes counts 4 bytes per element
// (2 for a tensor stored in bfloat16) of every operand read or written (an
// in-place optimizer update reads and writes its param). These are model-level estimates for comparing plans
// (fused against unfused, one model against another), not hardware
// counters. Every product and sum is checked (spec.MulCount, AddCount): a
// count that would pass 2^63 fails the pass with an error naming the
// step's layer, never a wrapped-around, negative figure.
func measureCosts(p *Plan) error {
	for _, s := range p.allSteps() {
		var c costCounter
		s.FLOPs = stepFLOPs(p, s, &c)
		s.Bytes = stepBytes(p, s, &c)
		if c.over {
			return &spec.Error{Layer: s.Layer, Message: fmt.Sprintf(
				"the %s step's FLOPs or bytes at batch %d pass 2^63, more than mlbuild counts; lower the batch size or shrink this layer", s.Kernel, p.Batch)}
		}
	}
	return nil
}

// costCounter does the checked arithmetic of one step's costs, remembering
// whether any product or sum overflowed.
type costCounter struct{ over bool }

// mul multiplies counts.
func (c *costCounter) mul(xs ...int64) int64 {
	n := int64(1)
	for _, x := range xs {
		var ok bool
		n, ok = spec.MulCount(n, x)
		c.over = c.over || !ok
	}
	return n
}

// sum adds counts.
func (c *costCounter) sum(xs ...int64) int64 {
	n := int64(0)
	for _, x := range xs {
		var ok bool
		n, ok = spec.AddCount(n, x)
		c.over = c.over || !ok
	}
	return n
}

// size returns the number of elements of operand id (0 for NoBuf).
func (p *Plan) size(id BufID) int64 {
	if id == NoBuf {
		return 0
	}
	return int64(p.Buffers[id].Size)
}

// stepBytes is the bytes of each operand read and each written: 4 an
// element, 2 for a tensor stored in bfloat16 (store_bf16.go).
func stepBytes(p *Plan, s *Step, c *costCounter) int64 {
	bytes := func(id BufID) int64 {
		if id != NoBuf && p.Buffers[p.root(id)].Elem == ElemBF16 {
			return c.mul(2, p.size(id))
		}
		return c.mul(spec.BytesPerElement, p.size(id))
	}
	var n int64
	for _, id := range s.In {
		n = c.sum(n, bytes(id))
	}
	for _, id := range s.Out {
		n = c.sum(n, bytes(id))
	}
	if s.Kernel == KSGD || s.Kernel == KAdam {
		n = c.sum(n, bytes(s.Out[0])) // the param is read as well as written
	}
	if s.Attr.AccumulateDx {
		n = c.sum(n, bytes(s.Out[0])) // dx is read as well as written
	}
	if s.Kernel == KClipGradNorm {
		n = 0
		for _, id := range s.In {
			n = c.sum(n, c.mul(3, bytes(id))) // read for the norm, read and written to scale
		}
	}
	if s.Kernel == KAdamMulti || s.Kernel == KSGDMulti {
		for _, k := range updateParamOutputs(*s) {
			n = c.sum(n, bytes(s.Out[k])) // each param is read as well as written
		}
	}
	return n
}

// stepFLOPs estimates the arithmetic of one step.
func stepFLOPs(p *Plan, s *Step, c *costCounter) int64 {
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
	window := func() int64 { return c.mul(int64(s.Attr.Conv.KH), int64(s.Attr.Conv.KW)) }
	taps := func() int64 {
		g := s.Attr.Conv
		return c.mul(int64(g.C/g.Groups), int64(g.KH), int64(g.KW)) // Verify: Groups ≥ 1
	}
	switch s.Kernel {
	case KGemm:
		// y [B,N] = x [B,K] · Wᵀ: 2·B·N·K, plus bias and activation per output.
		k := int64(p.shapeOf(s.In[1])[1])
		return c.mul(out0(), c.sum(c.mul(2, k), has(s.In[2]), act()))
	case KGemmBwd:
		k := int64(p.shapeOf(s.In[1])[1])
		y := p.size(s.In[2])
		adds := int64(0) // dx += dy·W adds each product to the sum
		if s.Attr.AccumulateDx {
			adds = p.size(s.Out[0])
		}
		return c.sum(c.mul(y, 2, k, has(s.Out[0])+1), c.mul(y, has(s.Out[2])+act()), adds)
	case KConv2D:
		if pg := s.Attr.Pool; pg != nil {
			// every convolution output, then one comparison per window
			// value, and one more for the argmax of a training plan's step
			g := s.Attr.Conv
			conv := c.mul(int64(g.N), int64(g.OC), int64(g.OH), int64(g.OW))
			compares := int64(1)
			if len(s.Out) > 2 {
				compares += has(s.Out[2])
			}
			return c.sum(c.mul(conv, c.sum(c.mul(2, taps()), has(s.In[2]), act())), c.mul(out0(), int64(pg.KH), int64(pg.KW), compares))
		}
		return c.mul(out0(), c.sum(c.mul(2, taps()), has(s.In[2]), act()))
	case KConv2DBwd:
		y := p.size(s.In[3]) // dy: y may be absent
		return c.sum(c.mul(y, 2, taps(), has(s.Out[0])+1), c.mul(y, has(s.Out[2])+act()))
	case KMaxPool2D, KAvgPool2D:
		return c.mul(out0(), window())
	case KMaxPool2DBwd, KMaxPool2DArgmaxBwd:
		return c.mul(p.size(s.In[1]), window())
	case KAvgPool2DBwd:
		return c.mul(p.size(s.In[0]), window())
	case KGlobalAvgPool:
		return in0()
	case KCast:
		return 0 // a copy
	case KGlobalAvgPoolBwd:
		return out0()
	case KUnary:
		return c.mul(out0(), int64(len(s.Attr.Chain)))
	case KUnaryBwd:
		// Recompute the chain forward, then multiply by each derivative.
		return c.mul(out0(), 3, int64(len(s.Attr.Chain)))
	case KBinary, KAccumulate, KDropout, KDropoutBwd, KGradMean:
		return out0()
	case KBinaryBwd:
		return c.mul(p.size(s.In[2]), has(s.Out[0])+has(s.Out[1]))
	case KSoftmax, KLogSoftmax:
		return c.mul(4, out0()) // max, exp, sum, divide
	case KSoftmaxBwd, KLogSoftmaxBwd:
		return c.mul(3, out0())
	case KBatchNorm:
		return c.mul(6, out0()) // mean, variance, normalise, scale and shift
	case KBatchNormBwd:
		return c.mul(8, p.size(s.In[0]))
	case KFoldBatchNorm:
		// a multiply per weight, and per channel the scale (add, square
		// root, divide, multiply) and the bias (subtract, multiply, add)
		return c.sum(out0(), c.mul(7, p.size(s.Out[1])))
	case KLayerNorm:
		return c.mul(6, out0()) // mean, variance, normalise, scale and shift
	case KLayerNormBwd:
		if s.Attr.AccumulateDx {
			return c.mul(11, p.size(s.In[0])) // and the add into dx
		}
		return c.mul(10, p.size(s.In[0]))
	case KEmbedding:
		return c.mul(out0(), has(s.In[2])) // the position add; the rows are copies
	case KEmbeddingBwd:
		return c.mul(p.size(s.In[1]), has(s.Out[0])+has(s.Out[1]))
	case KResize, KResizeBwd:
		if s.Attr.Mode != ResizeBilinear {
			return 0 // nearest copies (or sums) pixels
		}
		if s.Kernel == KResize {
			return c.mul(7, out0()) // four products and three sums per output
		}
		return c.mul(8, in0()) // four products and four sums per dy element
	case KReduceMean:
		return in0()
	case KReduceMeanBwd:
		return out0()
	case KMatMul:
		a := p.shapeOf(s.In[0])
		return c.mul(out0(), 2, int64(a[len(a)-1]))
	case KMatMulBwd:
		a := p.shapeOf(s.In[0])
		return c.mul(p.size(s.In[2]), 2, int64(a[len(a)-1]), has(s.Out[0])+has(s.Out[1]))
	case KAttention, KAttentionBwd:
		// per (query, key) pair seen: q·k and p·v (2·D each) and the
		// softmax's few; the backward recomputes q·k and adds do·v, dv,
		// dk and dq
		q, kt, _, _ := AttentionHeadShapes(p.shapeOf(s.In[0]), p.shapeOf(s.In[1]), p.shapeOf(s.In[2]), s.Attr.Perm) // Verify: ok
		n := len(q)
		d, tq, tk := int64(q[n-1]), int64(q[n-2]), int64(kt[n-1])
		rows := p.size(s.In[0]) / d // Verify: D ≥ 1
		pairs := c.mul(rows, tk)
		if s.Attr.Causal {
			pairs = c.mul(rows/tq, tq*(tq+1)/2)
		}
		if s.Kernel == KAttention {
			return c.mul(pairs, c.sum(c.mul(4, d), 5))
		}
		return c.mul(pairs, c.sum(c.mul(10, d), 6))
	case KSoftmaxXent:
		return c.mul(5, in0())
	case KMSE, KMAE:
		return c.mul(4, in0())
	case KHuber:
		return c.mul(6, in0())
	case KSGD:
		return c.mul(4, out0())
	case KAdam:
		return c.mul(12, out0())
	case KClipGradNorm:
		var n int64
		for _, id := range s.In {
			n = c.sum(n, p.size(id))
		}
		return c.mul(3, n)
	case KAdamMulti:
		var n int64
		for i := 0; i < len(s.Out); i += 3 {
			n = c.sum(n, p.size(s.Out[i]))
		}
		return c.mul(12, n)
	case KSGDMulti:
		var n int64
		for i := 0; i < len(s.Out); i += 2 {
			n = c.sum(n, p.size(s.Out[i]))
		}
		return c.mul(4, n)
	}
	return 0 // transpose, concat, slice and their gradients move data only
}
