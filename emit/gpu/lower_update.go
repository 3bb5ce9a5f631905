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
	k := sgdKernel(pb.Size, float32(a.Momentum), float32(a.WeightDecay))
	if tw := l.twin(st.Out[0]); present(tw) {
		k = withTwins(k, []string{"p"})
		ops = append(ops, whole(tw))
	}
	return l.launch("sgd", k, nil, ops...)
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
	if tw := l.twin(st.Out[0]); present(tw) {
		k = withTwins(k, []string{"p"})
		ops = append(ops, whole(tw))
	}
	return l.launch(kind, k, nil, ops...)
}

// adamMulti lowers a multi-tensor Adam update: one kernel over several
// params (fuse_update.go).
func (l *lowering) adamMulti(st *planner.Step) error {
	a := st.Attr
	if len(st.In)%3 != 0 || len(st.Out) != len(st.In) {
		return fmt.Errorf("multi-tensor Adam with %d inputs and %d outputs", len(st.In), len(st.Out))
	}
	if a.Decays != nil && len(a.Decays) != len(st.In)/3 {
		return fmt.Errorf("multi-tensor Adam with %d weight decays for %d params", len(a.Decays), len(st.In)/3)
	}
	var sizes []int
	var decays []float32
	ops := []operand{stepArgs}
	for i := 0; i < len(st.In); i += 3 {
		pb, err := l.buf(st.Out[i])
		if err != nil {
			return err
		}
		sizes = append(sizes, pb.Size)
		wd := a.WeightDecay
		if a.Decays != nil {
			wd = a.Decays[i/3]
		}
		decays = append(decays, float32(wd))
		ops = append(ops, whole(st.In[i]), whole(st.In[i+1]), whole(st.In[i+2]), whole(st.Out[i]))
	}
	kind := "adam_multi"
	if a.Decoupled {
		kind = "adamw_multi"
	}
	k := adamMultiKernel(sizes, decays, float32(a.Beta1), float32(a.Beta2), float32(a.Eps), a.Decoupled)
	// The params with bfloat16 twins get them written beside them.
	var twinned []string
	for i := 0; i < len(st.Out); i += 3 {
		if tw := l.twin(st.Out[i]); present(tw) {
			twinned = append(twinned, fmt.Sprint("p_", i/3))
			ops = append(ops, whole(tw))
		}
	}
	if len(twinned) > 0 {
		k = withTwins(k, twinned)
	}
	return l.launch(kind, k, nil, ops...)
}

// sgdMulti lowers a multi-tensor SGD update: one kernel over several
// params (fuse_update.go), binding each param's velocity when the step
// has momentum and its bfloat16 twin when it has one, as sgd does.
func (l *lowering) sgdMulti(st *planner.Step) error {
	a := st.Attr
	if len(st.In)%2 != 0 || len(st.Out) != len(st.In) {
		return fmt.Errorf("multi-tensor SGD with %d inputs and %d outputs", len(st.In), len(st.Out))
	}
	if a.Decays != nil && len(a.Decays) != len(st.In)/2 {
		return fmt.Errorf("multi-tensor SGD with %d weight decays for %d params", len(a.Decays), len(st.In)/2)
	}
	var sizes []int
	var decays []float32
	ops := []operand{stepArgs}
	for i := 0; i < len(st.In); i += 2 {
		pb, err := l.buf(st.Out[i])
		if err != nil {
			return err
		}
		sizes = append(sizes, pb.Size)
		wd := a.WeightDecay
		if a.Decays != nil {
			wd = a.Decays[i/2]
		}
		decays = append(decays, float32(wd))
		ops = append(ops, whole(st.In[i]))
		if a.Momentum != 0 {
			if !present(st.In[i+1]) {
				return fmt.Errorf("sgd with momentum %g needs a velocity buffer for param %d", a.Momentum, i/2+1)
			}
			ops = append(ops, whole(st.In[i+1]))
		}
		ops = append(ops, whole(st.Out[i]))
	}
	k := sgdMultiKernel(sizes, decays, float32(a.Momentum))
	// The params with bfloat16 twins get them written beside them.
	var twinned []string
	for i := 0; i < len(st.Out); i += 2 {
		if tw := l.twin(st.Out[i]); present(tw) {
			twinned = append(twinned, fmt.Sprint("p_", i/2))
			ops = append(ops, whole(tw))
		}
	}
	if len(twinned) > 0 {
		k = withTwins(k, twinned)
	}
	return l.launch("sgd_multi", k, nil, ops...)
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
