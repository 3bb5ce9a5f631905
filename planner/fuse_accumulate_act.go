package planner

import (
	"fmt"
	"slices"
)

// fuseAccumulateAct folds an accumulate step into the activation's
// backward that reads its sum: the unary_bwd adds the two contributions
// itself, dx = f'(y)·(a + b), where the accumulate wrote a + b for it
// alone. In a ResNet's backward the gradient of a block's input is such a
// sum (what the block's shortcut passes on, plus its first convolution's
// dx), which the ReLU before the block then takes back through its
// output. Each fold saves the sum's write and read, and a kernel.
//
// Before: the backward is derived; fuseAccumulateGemm,
// fuseAccumulateNorm and shareSumGrads have run. After, for a Target with
// AccumulateAct: every accumulate step whose output is read by one step
// alone, a unary_bwd from its output (Attr.FromOutput) as its dy, and
// touched by no other step in any phase (no view of it), and neither of
// whose operands' storage a step between the two writes, is gone: the
// unary_bwd reads the accumulate's operands as In[1] and In[2]. A fold
// adds a line to Fusions. Other steps are unchanged.
func fuseAccumulateAct(p *Plan, t Target) {
	if !t.AccumulateAct {
		return
	}
	folded := false
	for j := 0; j < len(p.Backward); {
		if p.Backward[j].Kernel == KAccumulate && foldAccumulateAct(p, j) {
			folded = true
			continue // the step after the accumulate is at j now
		}
		j++
	}
	if folded {
		p.removeUnused()
	}
}

// foldAccumulateAct folds the accumulate step p.Backward[j] into the
// unary_bwd that reads its sum, where fuseAccumulateAct's conditions
// hold, and reports whether it did.
func foldAccumulateAct(p *Plan, j int) bool {
	acc := p.Backward[j]
	if len(acc.In) != 2 || len(acc.Out) != 1 {
		return false
	}
	sum := acc.Out[0]
	if sum != p.root(sum) {
		return false
	}
	for _, b := range p.Buffers {
		if b.AliasOf == sum {
			return false
		}
	}
	us := usesOf(p, sum)[sum]
	if us.elsewhere || !slices.Equal(us.writers, []int{j}) || len(us.readers) != 1 {
		return false
	}
	k := us.readers[0]
	u := &p.Backward[k]
	if k <= j || u.Kernel != KUnaryBwd || !u.Attr.FromOutput || len(u.In) != 2 || u.In[1] != sum || u.In[0] == sum {
		return false
	}
	ops := usesOf(p, p.root(acc.In[0]), p.root(acc.In[1]))
	for _, o := range ops {
		for _, w := range o.writers {
			if w > j && w <= k {
				return false // an operand is written again before the activation's backward reads it
			}
		}
	}
	u.In = []BufID{u.In[0], acc.In[0], acc.In[1]}
	p.Fusions = append(p.Fusions, fmt.Sprintf("accumulate + %s -> %s (the two gradients summed where the activation's derivative is applied)", u.Layer, u.Kernel))
	p.Backward = slices.Delete(p.Backward, j, j+1)
	return true
}
