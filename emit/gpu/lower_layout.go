package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The layout family's lowerings: steps that move values without
// arithmetic (transpose, concat and its backward, the split).

// transpose lowers a permutation of the axes to one kernel
// (transposeKernel) on whole buffers, which are 16-byte aligned, so runs
// of x's last axis move four elements at a time.
func (l *lowering) transpose(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xs, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	k, err := transposeKernelVec(xs, a.Perm, true)
	return l.launch("transpose", k, err, whole(st.In[0]), whole(st.Out[0]))
}

// concat lowers concatenation and its backward to one slice copy per
// operand.
func (l *lowering) concat(st *planner.Step) error {
	axis := st.Attr.Axis
	parts, wide := st.In, st.Out[0]
	if st.Kernel == planner.KConcatBwd {
		parts, wide = st.Out, st.In[0]
	}
	ws, err := l.shape(wide)
	if err != nil {
		return err
	}
	outer, total, inner, err := splitAxis(ws, axis)
	if err != nil {
		return err
	}
	off := 0
	for _, part := range parts {
		if !present(part) {
			return fmt.Errorf("concat operands must all be present (their lengths place the slices)")
		}
		ps, err := l.shape(part)
		if err != nil {
			return err
		}
		n := ps[axis]
		if st.Kernel == planner.KConcat {
			err = l.launch("concat", sliceCopyKernel(outer, n, inner, total, off, true), nil, whole(part), whole(wide))
		} else {
			err = l.launch("split", sliceCopyKernel(outer, n, inner, total, off, false), nil, whole(wide), whole(part))
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}
