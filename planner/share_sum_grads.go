package planner

import (
	"fmt"
	"slices"
)

// shareSumGrads lets the operands of a sum share its gradient: the
// backward of y = a + b, with a and b of y's shape, is da = db = dy, which
// binary_bwd writes out as two copies (a residual block's every sum: two
// kernels and a read and two writes of the block's output size). After
// this pass, the steps that read da or db read dy itself.
//
// A shared dy is safe as buffers are assigned: each step writes only its
// own outputs, and assign_buffers.go keeps a buffer's storage to itself
// from its first step to its last reader, which is now the last of the
// steps that read dy.
//
// Before: keepLess has run (binary_bwd of an add reads no operand; its
// Attr.OperandShapes keep their shapes), and so have the accumulate folds,
// which keep a sum's gradient as a view of their sum's storage and so take
// precedence. After, for a Target with ShareSumGrads: every binary_bwd of an
// add whose operand k has dy's shape, and whose gradient Out[k] is a
// gradient buffer (KindGrad) that owns its storage, has no view, and is
// written by this step alone, has Out[k] = NoBuf, and every step that
// read Out[k] reads the step's dy; a binary_bwd left with no output is
// gone, and each such sum adds a line to Fusions. Other steps keep their
// order and arithmetic.
func shareSumGrads(p *Plan, t Target) {
	if !t.ShareSumGrads {
		return
	}
	drop := make([]bool, len(p.Backward))
	for i := range p.Backward {
		s := &p.Backward[i]
		if s.Kernel != KBinaryBwd || s.Attr.BinOp != "add" || len(s.In) != 3 || len(s.Attr.OperandShapes) != 2 {
			continue
		}
		dy := s.In[2]
		shared := 0
		for k := range 2 {
			g := s.Out[k]
			if g == NoBuf || !slices.Equal(s.Attr.OperandShapes[k], p.shapeOf(dy)) || !plainGrad(p, g) {
				continue
			}
			replaceReads(p, g, dy)
			s.Out[k] = NoBuf
			shared++
		}
		if shared == 0 {
			continue
		}
		drop[i] = s.Out[0] == NoBuf && s.Out[1] == NoBuf
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s: %d of the sum's operands take its dy as their gradient (no copy)", s.Layer, shared))
	}
	var kept Phase
	for i, s := range p.Backward {
		if !drop[i] {
			kept = append(kept, s)
		}
	}
	p.Backward = kept
	p.removeUnused()
}

// plainGrad reports whether buffer g is a gradient that owns its storage,
// has no view, and is written by exactly one step (of the backward pass,
// and touched by no other phase: usesOf).
func plainGrad(p *Plan, g BufID) bool {
	b := p.Buffers[g]
	if b.Kind != KindGrad || b.AliasOf != NoBuf {
		return false
	}
	for _, o := range p.Buffers {
		if o.AliasOf == g {
			return false
		}
	}
	u := usesOf(p, g)[g]
	return len(u.writers) == 1 && !u.elsewhere
}

// replaceReads makes every step that reads buffer from read buffer to.
func replaceReads(p *Plan, from, to BufID) {
	for _, ph := range []*Phase{&p.Forward, &p.Backward, &p.Update} {
		for i := range *ph {
			for k, id := range (*ph)[i].In {
				if id == from {
					(*ph)[i].In[k] = to
				}
			}
		}
	}
}
