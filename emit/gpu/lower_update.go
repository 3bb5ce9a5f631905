package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The optimizer family's lowerings: one update step per param (or, for
// multi-tensor Adam and SGD, per group of params).

// sgd lowers an SGD update, with the velocity buffer when the step has
// momentum.
func (l *lowering) sgd(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	pb, err := l.buf(st.Out[0])
	if err != nil {
		return err
	}
	ops := []operand{stepArgs, whole(st.In[0])}
	if a.Momentum != 0 {
		if len(st.In) < 2 || !present(st.In[1]) {
			return fmt.Errorf("sgd with momentum %g needs a velocity buffer", a.Momentum)
		}
		ops = append(ops, whole(st.In[1]))
	}
	ops = append(ops, whole(st.Out[0]))
	k, ops, err := l.paramTwin(sgdKernel(pb.Size, float32(a.Momentum), float32(a.WeightDecay)), ops, st.Out[0])
	return l.launch("sgd", k, err, ops...)
}

// adam lowers an Adam (or AdamW) update of one param.
func (l *lowering) adam(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 3, 1); err != nil {
		return err
	}
	pb, err := l.buf(st.Out[0])
	if err != nil {
		return err
	}
	kind := "adam"
	if a.Decoupled {
		kind = "adamw"
	}
	k := adamKernel(pb.Size, float32(a.Beta1), float32(a.Beta2), float32(a.Eps), float32(a.WeightDecay), a.Decoupled)
	ops := []operand{stepArgs, whole(st.In[0]), whole(st.In[1]), whole(st.In[2]), whole(st.Out[0])}
	k, ops, err = l.paramTwin(k, ops, st.Out[0])
	return l.launch(kind, k, err, ops...)
}

// paramTwin gives update kernel k, whose param p is the plan's buffer
// param, the param's bfloat16 twin where it has one: written beside p,
// bound after ops (multiTwins for kernels of several params).
func (l *lowering) paramTwin(k *Kernel, ops []operand, param planner.BufID) (*Kernel, []operand, error) {
	tw := l.twin(param)
	if !present(tw) {
		return k, ops, nil
	}
	at := map[string]func(Expr) Expr{}
	if err := l.twinOrder(at, "p", tw); err != nil {
		return nil, nil, err
	}
	return withTwinsAt(k, []string{"p"}, at), append(ops, whole(tw)), nil
}

// twinOrder records in at where a store of index i to kernel parameter
// param writes param's twin tw: nothing for a twin in its param's order;
// for a filter's KRSC twin (Layout LayoutNHWC on a weight's twin
// [OC, C/G, KH, KW], the planner's store_channels_last.go), element i of
// the KCRS weight's KRSC place, krscOfKCRS.
func (l *lowering) twinOrder(at map[string]func(Expr) Expr, param string, tw planner.BufID) error {
	b, err := l.buf(tw)
	if err != nil || b.Layout == "" {
		return err
	}
	if b.Layout != planner.LayoutNHWC || len(b.Shape) != 4 {
		return fmt.Errorf("bfloat16 twin %q of shape %v in layout %q: a twin is in its buffer's order or, for a 4-D filter, KRSC (a bug in mlbuild's planner)", b.Name, b.Shape, b.Layout)
	}
	cg, rs := b.Shape[1], b.Shape[2]*b.Shape[3]
	at[param] = func(i Expr) Expr { return krscOfKCRS(i, cg, rs) }
	return nil
}

// adamMulti lowers a multi-tensor Adam update: one kernel over several
// params (fuse_update.go).
func (l *lowering) adamMulti(st *planner.Step) error {
	a := st.Attr
	sizes, decays, err := l.multiParams(st, 3, "Adam")
	if err != nil {
		return err
	}
	ops := []operand{stepArgs}
	for i := 0; i < len(st.In); i += 3 {
		ops = append(ops, whole(st.In[i]), whole(st.In[i+1]), whole(st.In[i+2]), whole(st.Out[i]))
	}
	kind := "adam_multi"
	if a.Decoupled {
		kind = "adamw_multi"
	}
	k, ops, err := l.multiTwins(st, 3, adamMultiKernel(sizes, decays, float32(a.Beta1), float32(a.Beta2), float32(a.Eps), a.Decoupled), ops)
	return l.launch(kind, k, err, ops...)
}

// sgdMulti lowers a multi-tensor SGD update: one kernel over several
// params (fuse_update.go), binding each param's velocity when the step
// has momentum and its bfloat16 twin when it has one, as sgd does.
func (l *lowering) sgdMulti(st *planner.Step) error {
	a := st.Attr
	sizes, decays, err := l.multiParams(st, 2, "SGD")
	if err != nil {
		return err
	}
	ops := []operand{stepArgs}
	for i := 0; i < len(st.In); i += 2 {
		ops = append(ops, whole(st.In[i]))
		if a.Momentum != 0 {
			if !present(st.In[i+1]) {
				return fmt.Errorf("sgd with momentum %g needs a velocity buffer for param %d", a.Momentum, i/2+1)
			}
			ops = append(ops, whole(st.In[i+1]))
		}
		ops = append(ops, whole(st.Out[i]))
	}
	k, ops, err := l.multiTwins(st, 2, sgdMultiKernel(sizes, decays, float32(a.Momentum)), ops)
	return l.launch("sgd_multi", k, err, ops...)
}

// multiParams checks a multi-tensor update's operands, per of them a
// param in In and Out alike (its param first in Out), and returns each
// param's size and weight decay (Attr.Decays where set, else
// Attr.WeightDecay).
func (l *lowering) multiParams(st *planner.Step, per int, what string) ([]int, []float32, error) {
	a := st.Attr
	if len(st.In)%per != 0 || len(st.Out) != len(st.In) {
		return nil, nil, fmt.Errorf("multi-tensor %s with %d inputs and %d outputs", what, len(st.In), len(st.Out))
	}
	if a.Decays != nil && len(a.Decays) != len(st.In)/per {
		return nil, nil, fmt.Errorf("multi-tensor %s with %d weight decays for %d params", what, len(a.Decays), len(st.In)/per)
	}
	var sizes []int
	var decays []float32
	for i := 0; i < len(st.In); i += per {
		pb, err := l.buf(st.Out[i])
		if err != nil {
			return nil, nil, err
		}
		sizes = append(sizes, pb.Size)
		wd := a.WeightDecay
		if a.Decays != nil {
			wd = a.Decays[i/per]
		}
		decays = append(decays, float32(wd))
	}
	return sizes, decays, nil
}

// multiTwins gives multi-tensor kernel k the bfloat16 twins of the params
// that have one (param j is k's "p_j"), written beside them (each in its
// order: twinOrder), bound after ops.
func (l *lowering) multiTwins(st *planner.Step, per int, k *Kernel, ops []operand) (*Kernel, []operand, error) {
	var twinned []string
	at := map[string]func(Expr) Expr{}
	for i := 0; i < len(st.Out); i += per {
		if tw := l.twin(st.Out[i]); present(tw) {
			p := fmt.Sprint("p_", i/per)
			if err := l.twinOrder(at, p, tw); err != nil {
				return nil, nil, err
			}
			twinned = append(twinned, p)
			ops = append(ops, whole(tw))
		}
	}
	if len(twinned) > 0 {
		k = withTwinsAt(k, twinned, at)
	}
	return k, ops, nil
}

// gradMean lowers accumulation's mean of one param's gradient sum.
func (l *lowering) gradMean(st *planner.Step) error {
	if err := l.operands(st, 1, 2); err != nil {
		return err
	}
	sb, err := l.buf(st.In[0])
	if err != nil {
		return err
	}
	return l.launch("grad_mean", gradMeanKernel(sb.Size, float32(st.Attr.Scale)), nil, whole(st.In[0]), whole(st.Out[0]))
}

// clipGradNorm lowers clipping by the global norm as three kernels: the
// sum of squares of each gradient (one threadgroup a gradient, several
// gradients a launch), the scale from their total, and the scaling of
// every gradient by it. The norms buffer holds the sums, then the scale,
// as the CPU's ClipGradNorm leaves them.
func (l *lowering) clipGradNorm(st *planner.Step) error {
	k := len(st.In)
	if k == 0 || len(st.Out) != k+1 {
		return fmt.Errorf("clip_grad_norm with %d gradients and %d outputs", k, len(st.Out))
	}
	sums := st.Out[k]
	chunk := 64
	if l.d.MaxBuffers > 0 {
		chunk = min(chunk, l.d.MaxBuffers-1)
	}
	sizes := make([]int, k)
	for j, id := range st.In {
		b, err := l.buf(id)
		if err != nil {
			return err
		}
		sizes[j] = b.Size
	}
	for lo := 0; lo < k; lo += chunk {
		hi := min(lo+chunk, k)
		var ops []operand
		for _, id := range st.In[lo:hi] {
			ops = append(ops, whole(id))
		}
		if err := l.launch("grad_sumsq", gradSumSqKernel(sizes[lo:hi]), nil, append(ops, at(sums, lo))...); err != nil {
			return err
		}
	}
	if err := l.launch("clip_scale", clipScaleKernel(k, float32(st.Attr.ClipNorm)), nil, whole(sums)); err != nil {
		return err
	}
	for lo := 0; lo < k; lo += chunk {
		hi := min(lo+chunk, k)
		ops := []operand{at(sums, k)}
		for _, id := range st.In[lo:hi] {
			ops = append(ops, whole(id))
		}
		if err := l.launch("grad_scale", gradScaleKernel(sizes[lo:hi]), nil, ops...); err != nil {
			return err
		}
	}
	return nil
}
