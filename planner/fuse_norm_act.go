package planner

// fuseNormAct folds a ReLU into the batch norm before it, for a Target
// whose batch norm kernels apply it (Target.FusedReLU): the batch norm
// writes the ReLU's output as it normalises, and its backward masks dy as
// it reads it, so neither the ReLU's pass over the tensor (a read and a
// write) nor its backward's (two reads and a write) remains. A ResNet's
// every batch norm but the one before each residual sum is such a pair.
//
// The mask is a rule both directions compute from the same float32
// values, so that forward and backward agree bit for bit: with scale =
// gamma·invStd (the saved 1/sqrt(var+eps) in training), the ReLU keeps a
// value where (x − mean)·scale > −beta. In training both kernels read the
// saved mean and invStd; at evaluation, where no backward follows, the
// batch norm writes max(y, 0).
//
// Before: Forward is lowered, foldBatchNorm and fuseEpilogue have run (a
// ReLU that a convolution took is not a batch norm's), and no backward
// steps exist yet. After, for a Target with FusedReLU: every batchnorm step
// whose output is read by exactly one step, a single-op unary relu, and
// by nothing else (not the plan's output, no view), has Attr.Act "relu"
// and writes the unary's output; the unary step and the batch norm's own
// output buffer are gone, and each fold adds a line to Fusions.
// differentiate then gives the batchnorm_bwd the Act and beta as a sixth
// input. Other steps, and plans for other Targets, are unchanged.
func fuseNormAct(p *Plan, t Target) {
	if t.FusedReLU {
		foldAct(p, false, func(s *Step) bool { return s.Kernel == KBatchNorm }, isReLU,
			func(_ *Step, act UnaryOp) string { return act.Op })
	}
}

// isReLU reports whether a unary op is a plain ReLU.
func isReLU(act UnaryOp) bool { return act.Op == "relu" }
