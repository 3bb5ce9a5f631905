package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The element-wise family's lowerings: unary chains, broadcasting binary
// ops, dropout and the sum of gradient contributions, one kernel each
// (kernels_elementwise.go writes them).

// unary lowers an element-wise chain: one kernel over the elements.
func (l *lowering) unary(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xb, err := l.buf(st.In[0])
	if err != nil {
		return err
	}
	k, err := unaryKernel(xb.Size, a.Chain)
	ops := []operand{whole(st.In[0]), whole(st.Out[0])}
	if tw := l.twin(st.Out[0]); present(tw) && err == nil {
		k = withTwins(k, []string{"y"}) // a GEMM reads y in bfloat16 (twin_operands.go)
		ops = append(ops, whole(tw))
	}
	return l.launch("unary", k, err, ops...)
}

// unaryBwd lowers an element-wise chain's backward, recomputing the
// chain's intermediate values from x, or from the output y when the step
// reads y (Attr.FromOutput), where it may sum a second dy (In[2]: the
// planner's fuse_accumulate_act.go).
func (l *lowering) unaryBwd(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	xb, err := l.buf(st.In[0])
	if err != nil {
		return err
	}
	var k *Kernel
	ops := []operand{whole(st.In[0]), whole(st.In[1])}
	switch {
	case len(st.In) > 2 && a.FromOutput:
		k, err = unaryBwdFromOutputKernel(xb.Size, a.Chain, true)
		ops = append(ops, whole(st.In[2]))
	case len(st.In) > 2:
		return fmt.Errorf("a second dy on an element-wise backward that is not from its output (a bug in mlbuild's planner, fuse_accumulate_act.go)")
	case a.FromOutput:
		k, err = unaryBwdFromOutputKernel(xb.Size, a.Chain, false)
	default:
		k, err = unaryBwdKernel(xb.Size, a.Chain)
	}
	ops = append(ops, whole(st.Out[0]))
	if tw := l.twin(st.Out[0]); present(tw) && err == nil {
		k = withTwins(k, []string{"dx"}) // a GEMM's backward reads dx in bfloat16 (twin_operands.go)
		ops = append(ops, whole(tw))
	}
	return l.launch("unary_bwd", k, err, ops...)
}

// dropout lowers dropout: a copy outside training (or at rate 0), else a
// kernel that draws the mask from the step's seed.
func (l *lowering) dropout(st *planner.Step, training bool) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	yb, err := l.buf(st.Out[0])
	if err != nil {
		return err
	}
	if !training || a.Rate == 0 {
		return l.launch("copy", copyKernel(yb.Size), nil, whole(st.In[0]), whole(st.Out[0]))
	}
	if err := l.operands(st, 1, 2); err != nil {
		return err
	}
	return l.launch("dropout", dropoutKernel(yb.Size, float32(a.Rate), DropoutStream(st.Layer)), nil, stepArgs, whole(st.In[0]), whole(st.Out[0]), whole(st.Out[1]))
}

// dropoutBwd lowers dropout's backward: dy through the mask.
func (l *lowering) dropoutBwd(st *planner.Step) error {
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	xb, err := l.buf(st.Out[0])
	if err != nil {
		return err
	}
	k := dropoutBwdKernel(xb.Size)
	ops := []operand{whole(st.In[0]), whole(st.In[1]), whole(st.Out[0])}
	if tw := l.twin(st.Out[0]); present(tw) {
		k = withTwins(k, []string{"dx"}) // a GEMM's backward reads dx in bfloat16 (twin_operands.go)
		ops = append(ops, whole(tw))
	}
	return l.launch("dropout_bwd", k, nil, ops...)
}

// accumulate lowers the sum of two gradient contributions.
func (l *lowering) accumulate(st *planner.Step) error {
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	yb, err := l.buf(st.Out[0])
	if err != nil {
		return err
	}
	return l.launch("accumulate", accumulateKernel(yb.Size), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
}

// binary lowers broadcasting add/sub/mul and their gradients (one gather
// kernel per wanted operand gradient).
func (l *lowering) binary(st *planner.Step) error {
	op := st.Attr.BinOp
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	var shapes [2][]int
	for k, id := range st.In[:2] {
		if present(id) {
			s, err := l.shape(id)
			if err != nil {
				return err
			}
			shapes[k] = s
		}
	}
	as, bs, err := planner.BinaryShapes(st, shapes[0], shapes[1])
	if err != nil {
		return err
	}
	if st.Kernel == planner.KBinary {
		ys, err := l.shape(st.Out[0])
		if err != nil {
			return err
		}
		k, err := binaryKernel(op, as, bs, ys, st.Attr.Act == "relu")
		return l.launch("binary_"+op, k, err, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
	}
	if err := l.operands(st, 3, 2); err != nil {
		return err
	}
	ys, err := l.shape(st.In[2])
	if err != nil {
		return err
	}
	for side, out := range st.Out[:2] {
		if !present(out) {
			continue
		}
		k, err := binaryBwdKernel(op, side == 1, as, bs, ys)
		ops := []operand{whole(st.In[2])}
		if op == "mul" || op == "div" {
			ops = append(ops, whole(st.In[1-side]))
		}
		if op == "div" && side == 1 {
			ops = append(ops, whole(st.In[1]))
		}
		if err := l.launch("binary_bwd_"+op, k, err, append(ops, whole(out))...); err != nil {
			return err
		}
	}
	return nil
}
