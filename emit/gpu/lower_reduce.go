package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The reduction family's lowerings: softmax and log-softmax along an axis,
// and the mean over axes, forward and backward.

// softmax lowers softmax, log-softmax and their backward along the
// step's axis.
func (l *lowering) softmax(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xs, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	outer, n, inner, err := splitAxis(xs, a.Axis)
	if err != nil {
		return err
	}
	if a.Padding {
		return l.softmaxPadded(st, xs, outer, n, inner)
	}
	if a.Causal {
		// scores [..., T, T] over the last axis: outer/n matrices
		if st.Kernel != planner.KSoftmax || inner != 1 || outer%n != 0 {
			return fmt.Errorf("a causal %s over axis %d of %v: not a softmax over the last axis of square scores", st.Kernel, a.Axis, xs)
		}
		return l.launch("softmax_causal", softmaxCausalKernel(outer/n, n), nil, whole(st.In[0]), whole(st.Out[0]))
	}
	log := st.Kernel == planner.KLogSoftmax || st.Kernel == planner.KLogSoftmaxBwd
	if st.Kernel == planner.KSoftmax || st.Kernel == planner.KLogSoftmax {
		return l.launch(string(st.Kernel), softmaxKernel(outer, n, inner, log), nil, whole(st.In[0]), whole(st.Out[0]))
	}
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	return l.launch(string(st.Kernel), softmaxBwdKernel(outer, n, inner, log), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
}

// softmaxPadded lowers a softmax whose keys a padding mask hides:
// scores xs [B, ..., Tk] viewed as [outer, n, inner] over the last axis,
// the token ids [B, Tk] its second input.
func (l *lowering) softmaxPadded(st *planner.Step, xs []int, outer, n, inner int) error {
	a := st.Attr
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	ids, err := l.shape(st.In[1])
	if err != nil {
		return err
	}
	batch := xs[0]
	if st.Kernel != planner.KSoftmax || inner != 1 || outer%batch != 0 || a.Causal && outer%n != 0 || len(ids) != 2 || ids[0] != batch || ids[1] != n {
		return fmt.Errorf("a padded %s over axis %d of %v with token ids %v: not a softmax over the last axis of scores [B, ..., Tk] with ids [B, Tk]", st.Kernel, a.Axis, xs, ids)
	}
	return l.launch("softmax_padded", softmaxPaddedKernel(batch, outer/batch, n, a.Causal, float32(a.PadID)), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
}

// reduceMean lowers a mean over the axes the output keeps at size 1, and
// its backward.
func (l *lowering) reduceMean(st *planner.Step) error {
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xid, yid := st.In[0], st.Out[0]
	if st.Kernel == planner.KReduceMeanBwd {
		xid, yid = yid, xid
	}
	xs, err := l.shape(xid)
	if err != nil {
		return err
	}
	ys, err := l.shape(yid)
	if err != nil {
		return err
	}
	if st.Kernel == planner.KReduceMean {
		k, err := reduceMeanKernel(xs, ys)
		return l.launch("reducemean", k, err, whole(st.In[0]), whole(st.Out[0]))
	}
	k, err := reduceMeanBwdKernel(xs, ys)
	return l.launch("reducemean_bwd", k, err, whole(st.In[0]), whole(st.Out[0]))
}
