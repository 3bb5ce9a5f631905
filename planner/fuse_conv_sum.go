package planner

import "fmt"

// fuseConvSum folds a residual sum into the convolution before it, for
// the convolution methods of a Target whose forward adds a tensor z before
// its activation (Target.ConvSum: cuDNN's fused call on CUDA). At
// inference a ResNet block ends relu(bn(conv(h)) + shortcut); once the
// batch norm is folded into the convolution (fold_batchnorm.go) and the
// ReLU into the sum (fuse_sum_act.go), the convolution can write
// relu(conv(h) + b + shortcut) itself: the sum's pass over the block's
// output (two reads and a write) and its kernel are gone.
//
// Before: an inference plan; chooseMethods and fuseSumAct have run. After,
// for a Target with ConvSum: every binary add step (with no activation or
// a ReLU) of two operands of one shape, one of them the output of a
// conv2d step whose method ConvSum names, with a bias, no activation and
// no epilogue pool, read by that sum alone and by nothing else (not the
// plan's output, no view), and the other one produced before that
// convolution (a step's output or a buffer no step writes), is gone: the
// convolution takes the other operand as In[3] (z), the sum's activation
// as its own and writes the sum's output; its old output is dropped, and
// each fold adds a line to Fusions. Where both operands qualify the later
// convolution takes the sum, so that the earlier one's output is ready
// for it. Other plans are unchanged.
func fuseConvSum(p *Plan, t Target) {
	if len(t.ConvSum) == 0 || p.Training {
		return
	}
	foldSums(p, func(c *Step) bool {
		return c.Kernel == KConv2D && t.ConvSum[c.Attr.Method] && c.Attr.Act == "" && c.Attr.Pool == nil && len(c.In) == 3 && c.In[2] != NoBuf
	}, "the sum%s in the convolution's epilogue")
}

// foldSums folds each residual sum of the forward into the step before it
// that takes (fuse_conv_sum.go's and fuse_norm_sum.go's rule): every
// binary add step (with no activation or a ReLU) of two operands of its
// output's shape, one of them the output y (Out[0]) of a forward step
// that takes says may take it, read by that sum alone in every phase, and
// the other one, z, produced before that step (a step's output or a
// buffer no step writes), is gone: the step appends z to its inputs,
// takes the sum's activation as its own and writes the sum's output; y is
// dropped, and each fold adds a line to Fusions (how, a format of the
// activation's " and relu"). Where both operands qualify the later step
// takes the sum, so that the earlier one's output is ready for it.
func foldSums(p *Plan, takes func(*Step) bool, how string) {
	written := map[BufID]int{} // buffer → the forward step that writes it
	for i, s := range p.Forward {
		for _, id := range s.Out {
			if id != NoBuf {
				written[p.root(id)] = i
			}
		}
	}
	may := func(i int, y, z BufID) bool {
		if c := &p.Forward[i]; !takes(c) || c.Out[0] != y {
			return false
		}
		zi, ok := written[p.root(z)]
		return !ok || zi < i
	}
	drop := make([]bool, len(p.Forward))
	for j := range p.Forward {
		s := &p.Forward[j]
		if s.Kernel != KBinary || s.Attr.BinOp != "add" || (s.Attr.Act != "" && s.Attr.Act != "relu") || len(s.In) != 2 ||
			!equalShapes(p.Buffers[s.In[0]].Shape, p.Buffers[s.Out[0]].Shape) || !equalShapes(p.Buffers[s.In[1]].Shape, p.Buffers[s.Out[0]].Shape) {
			continue
		}
		into, z := -1, NoBuf
		for k, y := range s.In {
			i, ok := written[p.root(y)]
			if !ok || (into >= 0 && i < into) {
				continue
			}
			if r, ok := soleForwardReader(p, y); !ok || r != j || !may(i, y, s.In[1-k]) {
				continue
			}
			into, z = i, s.In[1-k]
		}
		if into < 0 {
			continue
		}
		c := &p.Forward[into]
		c.In = append(c.In, z)
		c.Attr.Act = s.Attr.Act
		c.Out[0] = s.Out[0]
		written[p.root(s.Out[0])] = into
		c.Fused = append(fusedNames(c), fusedNames(s)...)
		drop[j] = true
		s.In = nil // dead now: later searches must not count its read
		act := ""
		if c.Attr.Act != "" {
			act = " and " + c.Attr.Act
		}
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s + %s -> %s ("+how+")", c.Fused[0], s.Layer, c.Kernel, act))
	}
	p.dropForward(drop)
}
