package planner

import "fmt"

// fuseNormSum folds a residual sum into the training batch norm before
// it, for a Target whose batch norm kernels add a tensor z to their
// output before its activation (Target.NormSum, by the plan's
// precision). A ResNet block's forward ends act(bn(conv(h)) + shortcut):
// the batch norm then writes act(bn(x) + z) itself, and the sum's pass
// over the block's output (two reads and a write) and its kernel are
// gone. Nothing in the backward changes: a batch norm's backward reads x
// and the saved statistics, not y, and the sum's backward (the ReLU's,
// which reads the sum's output, then dy passed on to both operands) reads
// what it read before.
//
// Before: a training plan, differentiated; fuseSumAct and shareSumGrads
// have run. After, for a Target whose NormSum holds the plan's precision:
// every binary add step (with no activation or a ReLU) of two operands of
// its output's shape, one of them the output y of a batchnorm step with
// no activation and no residual yet, read by that sum alone in every
// phase (not the plan's output, no view), and the other one, z, produced
// before that batch norm (a step's output or a buffer no step writes), is
// gone: the batch norm takes z as In[5], the sum's activation as its own
// (act(bn(x) + z)) and writes the sum's output; y is dropped, and each
// fold adds a line to Fusions. Where both operands qualify the later
// batch norm takes the sum, so that the earlier one's output is ready
// for it. Other plans are unchanged.
func fuseNormSum(p *Plan, t Target) {
	if !p.Training || !t.NormSum[p.Precision] {
		return
	}
	written := map[BufID]int{} // buffer → the forward step that writes it
	for i, s := range p.Forward {
		for _, id := range s.Out {
			if id != NoBuf {
				written[p.root(id)] = i
			}
		}
	}
	// takes reports whether forward step i is a batch norm that may take
	// a sum reading its output y beside z.
	takes := func(i int, y, z BufID) bool {
		bn := &p.Forward[i]
		if bn.Kernel != KBatchNorm || bn.Attr.Act != "" || len(bn.In) != 5 || bn.Out[0] != y {
			return false
		}
		if zi, ok := written[p.root(z)]; ok && zi >= i {
			return false
		}
		return true
	}
	drop := make([]bool, len(p.Forward))
	for j := range p.Forward {
		s := &p.Forward[j]
		if s.Kernel != KBinary || s.Attr.BinOp != "add" || (s.Attr.Act != "" && s.Attr.Act != "relu") || len(s.In) != 2 ||
			!equalShapes(p.Buffers[s.In[0]].Shape, p.Buffers[s.Out[0]].Shape) || !equalShapes(p.Buffers[s.In[1]].Shape, p.Buffers[s.Out[0]].Shape) {
			continue
		}
		bn, z := -1, NoBuf
		for k, y := range s.In {
			i, ok := written[p.root(y)]
			if !ok || (bn >= 0 && i < bn) {
				continue
			}
			if r, ok := soleForwardReader(p, y); !ok || r != j || !takes(i, y, s.In[1-k]) {
				continue
			}
			bn, z = i, s.In[1-k]
		}
		if bn < 0 {
			continue
		}
		b := &p.Forward[bn]
		b.In = append(b.In, z)
		b.Attr.Act = s.Attr.Act
		b.Out[0] = s.Out[0]
		written[p.root(s.Out[0])] = bn
		b.Fused = append(fusedNames(b), fusedNames(s)...)
		drop[j] = true
		s.In = nil // dead now: later searches must not count its read
		act := ""
		if b.Attr.Act != "" {
			act = " and " + b.Attr.Act
		}
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s + %s -> %s (the sum%s after the normalisation, in its kernel)", b.Fused[0], s.Layer, b.Kernel, act))
	}
	p.dropForward(drop)
}
