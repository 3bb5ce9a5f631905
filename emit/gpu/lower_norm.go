package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The normalisation family's lowerings: batch and layer normalisation,
// forward and backward.

// batchNorm lowers batch normalisation: with the running statistics
// outside training, else with the batch's (which update the running ones).
func (l *lowering) batchNorm(st *planner.Step, training bool) error {
	a := st.Attr
	if err := l.operands(st, 5, 3); err != nil {
		return err
	}
	outer, c, inner, err := l.channels(st.In[0])
	if err != nil {
		return err
	}
	in := st.In
	if training && l.syncBN && l.shares() > 1 {
		total := outer * inner * l.shares()
		if err := l.launch("syncbn_stats", syncBatchNormStatsKernel(outer, c, inner), nil, whole(in[0]), whole(st.Out[1]), whole(st.Out[2])); err != nil {
			return err
		}
		if err := l.sum(st.Out[1], st.Out[2]); err != nil {
			return err
		}
		return l.launch("syncbn", syncBatchNormApplyKernel(outer, c, inner, total, float32(a.Eps), float32(a.Momentum)), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
	}
	if !training {
		return l.launch("batchnorm_eval", batchNormEvalKernel(outer, c, inner, float32(a.Eps)), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]))
	}
	return l.launch("batchnorm", batchNormKernel(outer, c, inner, float32(a.Eps), float32(a.Momentum)), nil,
		whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
}

// batchNormBwd lowers batch normalisation's backward, which computes dx,
// dgamma and dbeta in one kernel.
func (l *lowering) batchNormBwd(st *planner.Step) error {
	if err := l.operands(st, 5, 3); err != nil {
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
	if l.syncBN && l.shares() > 1 {
		// x, gamma, saveMean, saveInvStd, dy → dx, dgamma, dbeta: the
		// share's sums are the parameters' gradients, which the sum makes
		// the global batch's (so the gradients' buckets leave them out).
		total := outer * inner * l.shares()
		if err := l.launch("syncbn_bwd_sums", syncBatchNormBwdSumsKernel(outer, c, inner), nil,
			whole(in[0]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[1]), whole(st.Out[2])); err != nil {
			return err
		}
		if err := l.sum(st.Out[1], st.Out[2]); err != nil {
			return err
		}
		return l.launch("syncbn_bwd_dx", syncBatchNormBwdDxKernel(outer, c, inner, total), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[1]), whole(st.Out[2]), whole(st.Out[0]))
	}
	return l.launch("batchnorm_bwd", batchNormBwdKernel(outer, c, inner), nil,
		whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
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
