package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The pooling family's lowerings: max, average and global average pools
// and their backward steps (a pool folded into a convolution is conv_pool.go's).

// pool lowers a max or average pool: one kernel, one thread per output.
func (l *lowering) pool(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil || a.Conv == nil {
		return fmt.Errorf("pooling needs x, y and Attr.Conv (%v)", err)
	}
	return l.launch(string(st.Kernel), poolKernel(*a.Conv, st.Kernel == planner.KMaxPool2D), nil, whole(st.In[0]), whole(st.Out[0]))
}

// maxPoolBwd lowers a max pool's backward, with the activation's
// derivative when the planner folded it in (fuse_act_bwd.go).
func (l *lowering) maxPoolBwd(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 3, 1); err != nil || a.Conv == nil {
		return fmt.Errorf("max pool backward needs x, y, dy, dx and Attr.Conv (%v)", err)
	}
	k, err := maxPoolBwdKernel(*a.Conv, a.Act, float32(a.Alpha))
	return l.launch("maxpool2d_bwd", k, err, whole(st.In[0]), whole(st.In[2]), whole(st.Out[0]))
}

// maxPoolArgmaxBwd lowers the backward of a max pool folded into a
// convolution's epilogue, which routes dy by the recorded argmax
// (conv_pool.go).
func (l *lowering) maxPoolArgmaxBwd(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 3, 1); err != nil || a.Conv == nil {
		return fmt.Errorf("max pool backward from the argmax needs argmax, y, dy, dx and Attr.Conv (%v)", err)
	}
	k, err := maxPoolArgmaxBwdKernel(*a.Conv, a.Act, float32(a.Alpha))
	ops := []operand{whole(st.In[0]), whole(st.In[2])}
	if a.Act != "" {
		ops = append(ops, whole(st.In[1]))
	}
	return l.launch("maxpool2d_argmax_bwd", k, err, append(ops, whole(st.Out[0]))...)
}

// avgPoolBwd lowers an average pool's backward.
func (l *lowering) avgPoolBwd(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil || a.Conv == nil {
		return fmt.Errorf("average pool backward needs dy, dx and Attr.Conv (%v)", err)
	}
	return l.launch("avgpool2d_bwd", poolBwdKernel(*a.Conv, false, nil), nil, whole(st.In[0]), whole(st.Out[0]))
}

// globalAvgPool lowers a global average pool and its backward, over
// [N·C] planes of the spatial size.
func (l *lowering) globalAvgPool(st *planner.Step) error {
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xid := st.In[0]
	if st.Kernel == planner.KGlobalAvgPoolBwd {
		xid = st.Out[0]
	}
	xs, err := l.shape(xid)
	if err != nil || len(xs) < 2 {
		return fmt.Errorf("global average pool input shape %v: want [N, C, ...] (%v)", xs, err)
	}
	planes, spatial := xs[0]*xs[1], prod(xs[2:])
	if l.channelsLast(xid)[0] { // x [N, H, W, C] (the planner's store_channels_last.go)
		if st.Kernel == planner.KGlobalAvgPool {
			return l.launch("globalavgpool_nhwc", globalAvgPoolNHWCKernel(xs[0], xs[1], spatial), nil, whole(st.In[0]), whole(st.Out[0]))
		}
		return l.launch("globalavgpool_bwd_nhwc", globalAvgPoolBwdNHWCKernel(xs[0], xs[1], spatial), nil, whole(st.In[0]), whole(st.Out[0]))
	}
	if st.Kernel == planner.KGlobalAvgPool {
		return l.launch("globalavgpool", globalAvgPoolKernel(planes, spatial), nil, whole(st.In[0]), whole(st.Out[0]))
	}
	return l.launch("globalavgpool_bwd", globalAvgPoolBwdKernel(planes, spatial), nil, whole(st.In[0]), whole(st.Out[0]))
}
