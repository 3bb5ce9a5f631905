package planner

// fuseNormSum folds a residual sum into the training batch norm before
// it, for a Target whose batch norm kernels add a tensor z to their
// output before its activation (Target.NormSum, by the plan's
// precision). A ResNet block's forward ends act(bn(conv(h)) + shortcut):
// the batch norm then writes act(bn(x) + z) itself, and the sum's pass
// over the block's output (two reads and a write) and its kernel are
// gone. Nothing in the backward changes: a batch norm's backward reads x
// and the saved statistics, not y, and the sum's backward (the ReLU's,
// which reads the sum's output, then dy passed on to both operands) reads
// what it read before.
//
// Before: a training plan, differentiated; fuseSumAct and shareSumGrads
// have run. After, for a Target whose NormSum holds the plan's precision:
// every binary add step (with no activation or a ReLU) of two operands of
// its output's shape, one of them the output y of a batchnorm step with
// no activation and no residual yet, read by that sum alone in every
// phase (not the plan's output, no view), and the other one, z, produced
// before that batch norm (a step's output or a buffer no step writes), is
// gone: the batch norm takes z as In[5], the sum's activation as its own
// (act(bn(x) + z)) and writes the sum's output; y is dropped, and each
// fold adds a line to Fusions. Where both operands qualify the later
// batch norm takes the sum, so that the earlier one's output is ready
// for it. Other plans are unchanged.
func fuseNormSum(p *Plan, t Target) {
	if !p.Training || !t.NormSum[p.Precision] {
		return
	}
	foldSums(p, func(bn *Step) bool { return bn.Kernel == KBatchNorm && bn.Attr.Act == "" && len(bn.In) == 5 },
		"the sum%s after the normalisation, in its kernel")
}
