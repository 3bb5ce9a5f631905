package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The normalisation family's lowerings: batch and layer normalisation,
// forward and backward.

// batchNorm lowers batch normalisation: with the running statistics
// outside training, else with the batch's (which update the running ones).
// A batch norm of a training plan with a residual z (In[5], the
// planner's fuse_norm_sum.go) adds it before the activation: in training
// in its apply kernel where the NHWC kernels take it (normSumFused), else
// (and in the evaluation a training plan's forward also runs) by the
// sum's own kernel after it (addResidual).
func (l *lowering) batchNorm(st *planner.Step, training bool) error {
	a := st.Attr
	if err := l.operands(st, 5, 3); err != nil {
		return err
	}
	outer, c, inner, err := l.channels(st.In[0])
	if err != nil {
		return err
	}
	in, relu := st.In, st.Attr.Act == "relu"
	if len(in) > 5 {
		if !present(in[5]) {
			return fmt.Errorf("a batch norm's residual is no buffer (a bug in mlbuild's planner, fuse_norm_sum.go)")
		}
		if training && l.normSumFused(st, c) {
			return l.batchNormNHWC(st, training, outer, c, inner, []bool{true, true, true})
		}
		plain := *st
		plain.In, plain.Attr.Act = st.In[:5], ""
		if err := l.batchNorm(&plain, training); err != nil {
			return err
		}
		return l.addResidual(st)
	}
	if last := l.channelsLast(in[0], st.Out[0]); last[0] || last[1] {
		return l.batchNormNHWC(st, training, outer, c, inner, last)
	}
	if training && l.syncBN && l.shares() > 1 {
		total := outer * inner * l.shares()
		if err := l.launch("syncbn_stats", syncBatchNormStatsKernel(outer, c, inner), nil, whole(in[0]), whole(st.Out[1]), whole(st.Out[2])); err != nil {
			return err
		}
		if err := l.sum(st.Out[1], st.Out[2]); err != nil {
			return err
		}
		return l.launch("syncbn", syncBatchNormApplyKernel(outer, c, inner, total, float32(a.Eps), float32(a.Momentum), relu), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
	}
	if !training {
		return l.launch("batchnorm_eval", batchNormEvalKernel(outer, c, inner, float32(a.Eps), relu), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]))
	}
	return l.launch("batchnorm", batchNormKernel(outer, c, inner, float32(a.Eps), float32(a.Momentum), relu), nil,
		whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
}

// foldBatchNorm lowers a fold step (planner.KFoldBatchNorm, run only when
// the weights change): the layer's weight scaled per output channel by
// s = gamma/sqrt(var + eps), and its bias (b − mean)·s + beta, with b 0
// where the layer has none. The folded weight is written in the layout
// and element type its convolution reads: KRSC order where the plan
// stores it channels last (store_channels_last.go, a cuDNN filter), and
// bfloat16 where it is stored so (launch rounds the stores).
func (l *lowering) foldBatchNorm(st *planner.Step) error {
	if err := l.operands(st, 6, 2); err != nil {
		return err
	}
	shape, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	wf, err := l.buf(st.Out[0])
	if err != nil {
		return err
	}
	oc, n := shape[0], prod(shape)
	cg, rs := n/max(oc, 1), 1
	krsc := wf.Layout == planner.LayoutNHWC && len(shape) == 4
	if krsc {
		cg, rs = shape[1], shape[2]*shape[3]
	}
	ops := []operand{whole(st.In[0])}
	if present(st.In[1]) {
		ops = append(ops, whole(st.In[1]))
	}
	for _, id := range append(st.In[2:6:6], st.Out...) {
		ops = append(ops, whole(id))
	}
	return l.launch("fold_batchnorm", foldBatchNormKernel(oc, cg, rs, krsc, present(st.In[1]), float32(st.Attr.Eps)), nil, ops...)
}

// batchNormBwd lowers batch normalisation's backward, which computes dx,
// dgamma and dbeta in one kernel. With a fused ReLU (Attr.Act), beta is a
// sixth input, which the kernels take last with the mask's other operands.
func (l *lowering) batchNormBwd(st *planner.Step) error {
	want, relu := 5, st.Attr.Act == "relu"
	if relu {
		want = 6
	}
	if err := l.operands(st, want, 3); err != nil {
		return err
	}
	outer, c, inner, err := l.channels(st.In[0])
	if err != nil {
		return err
	}
	if !present(st.Out[0]) || !present(st.Out[1]) || !present(st.Out[2]) {
		return fmt.Errorf("batch norm backward computes dx, dgamma and dbeta together; an absent one is not supported yet")
	}
	in := st.In
	if last := l.channelsLast(in[0], in[4], st.Out[0]); last[0] || last[1] || last[2] {
		return l.batchNormBwdNHWC(st, outer, c, inner, last)
	}
	if l.syncBN && l.shares() > 1 {
		// x, gamma, saveMean, saveInvStd, dy → dx, dgamma, dbeta: the
		// share's sums are the parameters' gradients, which the sum makes
		// the global batch's (so the gradients' buckets leave them out).
		total := outer * inner * l.shares()
		if err := l.launch("syncbn_bwd_sums", syncBatchNormBwdSumsKernel(outer, c, inner, relu), nil,
			append([]operand{whole(in[0]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[1]), whole(st.Out[2])}, reluOperands(st, 1, 5)...)...); err != nil {
			return err
		}
		if err := l.sum(st.Out[1], st.Out[2]); err != nil {
			return err
		}
		return l.launch("syncbn_bwd_dx", syncBatchNormBwdDxKernel(outer, c, inner, total, relu), nil,
			append([]operand{whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[1]), whole(st.Out[2]), whole(st.Out[0])}, reluOperands(st, 5)...)...)
	}
	return l.launch("batchnorm_bwd", batchNormBwdKernel(outer, c, inner, relu), nil,
		append([]operand{whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2])}, reluOperands(st, 5)...)...)
}

// channels views a tensor [N, C, rest...] as [N, C, prod(rest)].
func (l *lowering) channels(id planner.BufID) (outer, c, inner int, err error) {
	s, err := l.shape(id)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(s) < 2 {
		return 0, 0, 0, fmt.Errorf("shape %v has no channel axis", s)
	}
	return s[0], s[1], prod(s[2:]), nil
}

// layerNorm lowers layer normalisation: forward and dx a SIMD group or
// more a row (rowSplit); the parameter gradients (a threadgroup per block
// of columns, summing the rows) before dx, which may overwrite dy. Every
// buffer is bound whole, so the kernels' 16-byte accesses are aligned.
func (l *lowering) layerNorm(st *planner.Step) error {
	xs, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	ax := st.Attr.Axis
	if ax < 1 || ax >= len(xs) {
		return fmt.Errorf("layer norm axis %d out of range for %v", ax, xs)
	}
	rows, cols := prod(xs[:ax]), prod(xs[ax:])
	in := st.In
	if st.Kernel == planner.KLayerNorm {
		if err := l.operands(st, 3, 3); err != nil {
			return err
		}
		ops := []operand{whole(in[0]), whole(in[1])}
		if present(in[2]) {
			ops = append(ops, whole(in[2]))
		}
		ops = append(ops, whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
		k := layerNormKernel(rows, cols, float32(st.Attr.Eps), present(in[2]))
		if tw := l.twin(st.Out[0]); present(tw) {
			k = layerNormTwinKernel(rows, cols, float32(st.Attr.Eps), present(in[2]))
			ops = append(ops, whole(tw))
		}
		return l.launch("layernorm", k, nil, ops...)
	}
	if err := l.operands(st, 5, 3); err != nil {
		return err
	}
	dgamma, dbeta := st.Out[1], st.Out[2]
	if present(dgamma) || present(dbeta) {
		ops := []operand{whole(in[0]), whole(in[2]), whole(in[3]), whole(in[4])}
		for _, g := range []planner.BufID{dgamma, dbeta} {
			if present(g) {
				ops = append(ops, whole(g))
			}
		}
		k := layerNormParamGradKernel(rows, cols, present(dgamma), present(dbeta))
		if err := l.launch("layernorm_bwd_params", k, nil, ops...); err != nil {
			return err
		}
	}
	if !present(st.Out[0]) {
		return nil
	}
	k := layerNormBwdKernel(rows, cols)
	if st.Attr.AccumulateDx {
		// dx adds into the gradient sum its storage holds
		// (planner/fuse_accumulate_norm.go; Verify: no input shares it)
		k = addingInto(k, "dx")
	}
	return l.launch("layernorm_bwd", k, nil,
		whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]))
}

// normSumFused reports whether the NHWC batch norm kernels add a
// training batch norm's residual z themselves: where x, y and z are all
// channels last and the channels are whole chunks, the apply kernel's
// four-channel form (bnTile.vectorised), and no synchronised batch norm
// splits the batch.
func (l *lowering) normSumFused(st *planner.Step, c int) bool {
	last := l.channelsLast(st.In[0], st.Out[0], st.In[5])
	return last[0] && last[1] && last[2] && c%nhwcLanes == 0 && !(l.syncBN && l.shares() > 1)
}

// addResidual adds a training batch norm's residual z (In[5]) into its
// output y in place, with the step's activation: the sum's own kernel,
// after batch norm kernels that do not take z.
func (l *lowering) addResidual(st *planner.Step) error {
	y, z := st.Out[0], st.In[5]
	if last := l.channelsLast(y, z); last[0] != last[1] {
		return fmt.Errorf("a batch norm's output and residual in two layouts (channels last: %v and %v; a bug in mlbuild: the planner's store_channels_last.go keeps them in one)", last[0], last[1])
	}
	ys, err := l.shape(y)
	if err != nil {
		return err
	}
	k, err := binaryKernel("add", ys, ys, ys, st.Attr.Act == "relu")
	return l.launch("binary_add", k, err, whole(y), whole(z), whole(y))
}

// batchNormNHWC lowers a batch norm some of whose tensors (last: x, y,
// and z where the step has a residual) the plan stores channels last: in
// training two kernels over row groups, partial sums into the step's
// scratch (Out[3]) and the normalisation that merges them; else one
// element-wise kernel.
func (l *lowering) batchNormNHWC(st *planner.Step, training bool, outer, c, inner int, last []bool) error {
	a, in := st.Attr, st.In
	if !training {
		return l.launch("batchnorm_eval_nhwc", batchNormEvalNHWCKernel(outer, c, inner, last[0], last[1], float32(a.Eps), a.Act == "relu"), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]))
	}
	if l.syncBN && l.shares() > 1 {
		return fmt.Errorf("synchronised batch norm of a tensor stored channels last is not supported (a bug in mlbuild: the emitter lowers none for such plans, channelsLastNorms)")
	}
	part, groups, err := l.normPartials(st, outer, c, inner)
	if err != nil {
		return err
	}
	if err := l.launch("batchnorm_stats_nhwc", batchNormStatsNHWCKernel(outer, c, inner, last[0], groups), nil, whole(in[0]), whole(part)); err != nil {
		return err
	}
	ops := []operand{whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]), whole(part)}
	k := batchNormApplyNHWCKernel(outer, c, inner, last[0], last[1], groups, float32(a.Eps), float32(a.Momentum), a.Act == "relu")
	if len(in) > 5 {
		ops = append(ops, whole(in[5]))
		k = batchNormSumNHWCKernel(outer, c, inner, groups, float32(a.Eps), float32(a.Momentum), a.Act == "relu")
	}
	return l.launch("batchnorm_nhwc", k, nil, ops...)
}

// batchNormBwdNHWC lowers a batch norm's backward some of whose tensors
// (last: x, dy, dx) the plan stores channels last: the partial sums of
// dy and dy·x̂ into the step's scratch (Out[3]), then dx, dgamma and
// dbeta from them.
func (l *lowering) batchNormBwdNHWC(st *planner.Step, outer, c, inner int, last []bool) error {
	if l.syncBN && l.shares() > 1 {
		return fmt.Errorf("synchronised batch norm of a tensor stored channels last is not supported (a bug in mlbuild: the emitter lowers none for such plans, channelsLastNorms)")
	}
	part, groups, err := l.normPartials(st, outer, c, inner)
	if err != nil {
		return err
	}
	in, relu := st.In, st.Attr.Act == "relu"
	if err := l.launch("batchnorm_bwd_sums_nhwc", batchNormBwdSumsNHWCKernel(outer, c, inner, last[0], last[1], groups, relu), nil,
		append([]operand{whole(in[0]), whole(in[2]), whole(in[3]), whole(in[4]), whole(part)}, reluOperands(st, 1, 5)...)...); err != nil {
		return err
	}
	return l.launch("batchnorm_bwd_nhwc", batchNormBwdApplyNHWCKernel(outer, c, inner, last[0], last[1], last[2], groups, relu), nil,
		append([]operand{whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]), whole(part)}, reluOperands(st, 5)...)...)
}

// normPartials is a channels-last batch norm step's scratch for its
// partial sums (Out[3]) and the row groups they are over, after checking
// that the scratch holds BatchNormScratch floats.
func (l *lowering) normPartials(st *planner.Step, outer, c, inner int) (planner.BufID, int, error) {
	if len(st.Out) < 4 || !present(st.Out[3]) {
		return planner.NoBuf, 0, fmt.Errorf("a training batch norm of a tensor stored channels last has no scratch for its partial sums (a bug in mlbuild: the planner's store_channels_last.go gives it one)")
	}
	b, err := l.buf(st.Out[3])
	if err != nil {
		return planner.NoBuf, 0, err
	}
	if need := BatchNormScratch(outer, c, inner); b.Size < need || b.Elem != "" {
		return planner.NoBuf, 0, fmt.Errorf("batch norm partial sums: buffer %q holds %d %q elements, want %d float32s", b.Name, b.Size, b.Elem, need)
	}
	return st.Out[3], BatchNormGroups(outer, c, inner), nil
}

// reluOperands are the operands a batch norm backward kernel takes last
// for a fused ReLU's mask (Attr.Act): the step's inputs ids (gamma and
// beta, or beta alone, as the kernel lacks them); none without one.
func reluOperands(st *planner.Step, ids ...int) []operand {
	if st.Attr.Act != "relu" {
		return nil
	}
	var ops []operand
	for _, i := range ids {
		ops = append(ops, whole(st.In[i]))
	}
	return ops
}
