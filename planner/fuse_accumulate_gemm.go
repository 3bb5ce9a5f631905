package planner

import (
	"fmt"
	"slices"
)

// fuseAccumulateGemm folds an accumulate step into the dense layer's
// backward that computes one of its two contributions: the gemm_bwd adds
// its input gradient to the running sum (dx += dy·W, a GEMM with beta 1)
// instead of writing it to a buffer of its own that the accumulate then
// reads with the sum and writes again. A value read by several dense
// layers (a transformer block's layer-norm output feeding q, k and v)
// then has its gradient summed by the GEMMs themselves, and each fold
// saves a pass over the value that reads two copies and writes a third.
//
// Before: the backward is derived (differentiate.go: each accumulate
// adds two contributions to a value's gradient into a new buffer, and
// no other step reads a partial sum or a contribution); no buffer is
// placed. After, for a Target with GemmAccumulate: every accumulate step
// one of whose operands' storage is written only by a gemm_bwd's dx and
// read only by that accumulate, whose other operand's storage (the sum so
// far) is read only by it too, and all of whose operands are gradients of
// activations, is gone. The accumulate's output owns the sum's storage;
// the storage of both operands becomes views of it (with every view of
// them), so the step that wrote the sum so far (beta 0 for the first
// writer) and the gemm_bwd write one buffer, and the gemm_bwd has
// Attr.AccumulateDx. The gemm_bwd runs after every writer of the sum so
// far: where it came first (the value's later reader is the dense layer),
// it moves down to the accumulate's place, if no step between shares a
// buffer with it but one that both only read and that is no gradient.
// Nothing reads the sum before its last contribution is in (Verify
// checks that no step adds into a storage already read). A fold adds a
// line to Fusions.
//
// Why only where the Target says so: the backend's GEMM must take beta 1
// for the cost of reading C once, which the accumulate step read anyway,
// so that it gains a pass over the value for nothing: cuBLAS and MPS do,
// and so do the CPU's Sgemm and its bf16 products (AMX tiles load C's
// blocks before adding; rt/cpu's Precision.GemmBwdAdd).
func fuseAccumulateGemm(p *Plan, t Target) {
	if t.GemmAccumulate {
		foldAccumulates(p, KGemmBwd)
	}
}

// foldAccumulates folds every accumulate step it can into the producer
// kernel's step that wrote one of its terms (foldAccumulate), then drops
// the buffers no step uses any more.
func foldAccumulates(p *Plan, producer Kernel) {
	folded := false
	for j := 0; j < len(p.Backward); {
		if p.Backward[j].Kernel == KAccumulate && (foldAccumulate(p, j, 1, producer) || foldAccumulate(p, j, 0, producer)) {
			folded = true
			continue // the step after the accumulate is at j now
		}
		j++
	}
	if folded {
		p.removeUnused()
	}
}

// storageUse is how the steps of a plan use one storage owner: the
// backward steps that write it and those that read it, and whether a step
// of another phase touches it.
type storageUse struct {
	writers, readers []int
	elsewhere        bool
}

// usesOf returns the use of each of roots (storage owners).
func usesOf(p *Plan, roots ...BufID) map[BufID]*storageUse {
	use := map[BufID]*storageUse{}
	for _, r := range roots {
		use[r] = &storageUse{}
	}
	note := func(ids []BufID, backward bool, i int, write bool) {
		for _, id := range ids {
			if id == NoBuf {
				continue
			}
			u, ok := use[p.root(id)]
			switch {
			case !ok:
			case !backward:
				u.elsewhere = true
			case write && !slices.Contains(u.writers, i):
				u.writers = append(u.writers, i)
			case !write && !slices.Contains(u.readers, i):
				u.readers = append(u.readers, i)
			}
		}
	}
	for _, ph := range []struct {
		steps    Phase
		backward bool
	}{{p.Forward, false}, {p.Backward, true}, {p.Update, false}} {
		for i, s := range ph.steps {
			note(s.In, ph.backward, i, false)
			note(s.Out, ph.backward, i, true)
		}
	}
	return use
}

// foldAccumulate folds the accumulate step p.Backward[j] into the step
// of kernel into (a gemm_bwd, or a layernorm_bwd) that writes its operand
// k as its dx, where fuseAccumulateGemm's conditions hold (with that
// step for the gemm_bwd: fuse_accumulate_norm.go), and reports whether
// it did.
func foldAccumulate(p *Plan, j, k int, into Kernel) bool {
	acc := p.Backward[j]
	sum := acc.Out[0]
	c, so := p.root(acc.In[k]), p.root(acc.In[1-k]) // the step's contribution, the sum so far
	if sum != p.root(sum) || c == so || c == sum || so == sum {
		return false
	}
	for _, id := range []BufID{sum, c, so} {
		if p.Buffers[id].Kind != KindGrad {
			return false
		}
	}
	use := usesOf(p, sum, c, so)
	uc, us, uo := use[c], use[so], use[sum]
	if uc.elsewhere || us.elsewhere || uo.elsewhere ||
		len(uc.writers) != 1 || !slices.Equal(uc.readers, []int{j}) ||
		!slices.Equal(us.readers, []int{j}) || len(us.writers) == 0 ||
		!slices.Equal(uo.writers, []int{j}) {
		return false
	}
	i := uc.writers[0]
	g := &p.Backward[i]
	if i >= j || g.Kernel != into || g.Attr.AccumulateDx || len(g.Out) == 0 || g.Out[0] == NoBuf || p.root(g.Out[0]) != c {
		return false
	}
	for n, id := range append(slices.Clone(g.In), g.Out...) {
		if n != len(g.In) && id != NoBuf && (p.root(id) == c || p.root(id) == so || p.root(id) == sum) {
			return false // the step reads the sum, or writes it twice
		}
	}
	moved := ""
	if last := slices.Max(us.writers); last > i {
		if !movable(p, i, j) {
			return false
		}
		moved = fmt.Sprintf(", moved after %s's contribution", p.Backward[last].Layer)
		step := p.Backward[i]
		p.Backward = slices.Delete(p.Backward, i, i+1)
		p.Backward = slices.Insert(p.Backward, j-1, step)
		i = j - 1
	}
	g = &p.Backward[i]
	g.Attr.AccumulateDx = true
	// The sum's storage is the accumulate's output: the sum so far and
	// the step's contribution, and every view of them, view it.
	roots := make([]BufID, len(p.Buffers))
	for b := range p.Buffers {
		roots[b] = p.root(BufID(b))
	}
	for b := range p.Buffers {
		if r := roots[b]; BufID(b) != sum && (r == c || r == so) {
			p.Buffers[b].AliasOf = sum
		}
	}
	p.Backward = slices.Delete(p.Backward, j, j+1)
	p.Fusions = append(p.Fusions, fmt.Sprintf("%s + accumulate -> %s (dx += into the gradient of %s%s)", g.Layer, into, acc.Layer, moved))
	return true
}

// movable reports whether the step at p.Backward[i] may run at the
// place of step j instead (after the steps between): no step between may
// share a storage with it but one that neither writes and that is no
// gradient (a backward step may overwrite its dy in place).
func movable(p *Plan, i, j int) bool {
	g := &p.Backward[i]
	roots := func(ids []BufID) map[BufID]bool {
		m := map[BufID]bool{}
		for _, id := range ids {
			if id != NoBuf {
				m[p.root(id)] = true
			}
		}
		return m
	}
	gIn, gOut := roots(g.In), roots(g.Out)
	for _, s := range p.Backward[i+1 : j] {
		sIn, sOut := roots(s.In), roots(s.Out)
		for r := range sOut {
			if gIn[r] || gOut[r] {
				return false
			}
		}
		for r := range sIn {
			if gOut[r] || gIn[r] && p.Buffers[r].Kind == KindGrad {
				return false
			}
		}
	}
	return true
}
