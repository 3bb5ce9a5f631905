package planner

// fuseSiLUEpilogue folds a silu step (fuseSiLU's, EfficientNet's
// activation) into the gemm or conv2d step before it in an inference
// plan, so that the product's output is activated while it is in cache
// instead of in a second pass over memory. Training plans keep the silu
// step: its derivative needs the pre-activation, which a fused step does
// not keep.
//
// Before: Forward is lowered, fuseEpilogue and fuseSiLU have run, and the
// plan is an inference plan (no Backward). After, on a target with
// SiLUEpilogue: every gemm or conv2d step without a fused activation
// whose output is read by exactly one step, a unary [silu], and by
// nothing else (not a view, not the plan's output), writes the silu's
// output itself with Attr.Act "silu", and the unary step and the
// intermediate buffer are gone. Params keep their buffers and IDs.
// Elsewhere, and on other targets, the plan is unchanged.
func fuseSiLUEpilogue(p *Plan, t Target) {
	if t.SiLUEpilogue && !p.Training {
		foldActs(p, false, func(act UnaryOp) bool { return act.Op == "silu" })
	}
}
