package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The loss family's lowerings: each writes the loss and the gradient of
// the mean loss with respect to the prediction in one kernel.

// softmaxXent lowers softmax cross-entropy: the loss and dlogits in one
// kernel, or with the rows' scratch (planner.Target.LossRows) the rows in
// parallel and then their sum.
func (l *lowering) softmaxXent(st *planner.Step) error {
	if err := l.operands(st, 2, 2); err != nil {
		return err
	}
	zs, err := l.shape(st.In[0])
	if err != nil || len(zs) != 2 && len(zs) != 3 {
		return fmt.Errorf("logits shape %v: want [batch, classes] or [batch, tokens, classes] (%v)", zs, err)
	}
	// logits per token: the mean over every token's row, as on the CPU
	rows, classes := zs[0], zs[len(zs)-1]
	if len(zs) == 3 {
		rows *= zs[1]
	}
	over := rows * l.shares()
	// the head's backward GEMMs read dz in bfloat16 (twin_operands.go)
	dz := twinOut{"dz", st.Out[1]}
	if len(st.Out) > 2 && present(st.Out[2]) {
		k, ops, err := l.withOutputTwins(softmaxXentRowsKernel(rows, classes, over), []operand{whole(st.In[0]), whole(st.In[1]), whole(st.Out[2]), whole(st.Out[1])}, dz)
		if err := l.launch("softmax_xent_rows", k, err, ops...); err != nil {
			return err
		}
		return l.launch("loss_sum", sumRowsKernel(rows, 1/float32(over)), nil, whole(st.Out[2]), whole(st.Out[0]))
	}
	k, ops, err := l.withOutputTwins(softmaxXentShareKernel(rows, classes, over), []operand{whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]), whole(st.Out[1])}, dz)
	return l.launch("softmax_xent", k, err, ops...)
}

// mse lowers the mean squared error: the loss and dpred in one kernel.
func (l *lowering) mse(st *planner.Step) error {
	if err := l.operands(st, 2, 2); err != nil {
		return err
	}
	pb, err := l.buf(st.In[0])
	if err != nil {
		return err
	}
	return l.launch("mse", mseShareKernel(pb.Size, pb.Size*l.shares()), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]), whole(st.Out[1]))
}

// maeOrHuber lowers the mean absolute error or the Huber loss: the loss
// and dpred in one kernel.
func (l *lowering) maeOrHuber(st *planner.Step) error {
	if err := l.operands(st, 2, 2); err != nil {
		return err
	}
	pb, err := l.buf(st.In[0])
	if err != nil {
		return err
	}
	name, k := "mae", maeShareKernel(pb.Size, pb.Size*l.shares())
	if st.Kernel == planner.KHuber {
		name, k = "huber", huberShareKernel(pb.Size, float32(st.Attr.Delta), pb.Size*l.shares())
	}
	return l.launch(name, k, nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]), whole(st.Out[1]))
}
