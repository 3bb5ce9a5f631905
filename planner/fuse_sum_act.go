package planner

// fuseSumAct folds a ReLU into the sum before it, for a Target whose
// binary kernels apply it (Target.FusedReLU or SumReLU): a residual
// block's sum then writes relu(a + b) in one pass instead of the sum's
// pass and the ReLU's (a read and a write of the block's output saved,
// and a kernel).
//
// Unlike the batch norm's fold (fuse_norm_act.go), this one runs after
// keepLess, on a differentiated plan: there the ReLU's backward reads its
// output y and the sum's backward reads no operand, so the sum's own
// output is read by the ReLU alone and nothing in the backward changes.
//
// Before: keepLess has run (in training). After, for a Target with
// FusedReLU or SumReLU: every binary add step whose output is read by exactly one
// step, a single-op unary relu, and by nothing else in any phase (not the
// plan's output, no view), has Attr.Act "relu" and writes the unary's
// output; the unary step and the sum's output buffer are gone, and each
// fold adds a line to Fusions. The backward steps are unchanged.
func fuseSumAct(p *Plan, t Target) {
	if t.FusedReLU || t.SumReLU {
		foldAct(p, false, func(s *Step) bool { return s.Kernel == KBinary && s.Attr.BinOp == "add" }, isReLU,
			func(s *Step, act UnaryOp) string { return s.Attr.BinOp + ", " + act.Op })
	}
}
