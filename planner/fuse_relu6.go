package planner

// fuseReLU6 folds a relu6 (ONNX's Clip to [0, 6] after import, MobileNet's
// activation) into the gemm or conv2d step before it, as fuseEpilogue does
// for relu: the step clamps its output while the tile is in cache, where
// the unary step read and wrote the whole tensor again. It is a pass of
// its own because only some backends clamp in their epilogues
// (Target.ReLU6Epilogue); the others keep the unary step.
//
// Before: Forward is lowered and fuseEpilogue has run (no backward steps
// exist yet, so the backward kernels derived later take the fused step's
// Act). After, on a target with ReLU6Epilogue: every gemm or conv2d step
// without a fused activation whose output is read by exactly one step, a
// single-op unary relu6, and by nothing else (not the loss, not a view),
// writes the relu6's output itself with Attr.Act "relu6", and the unary
// step and the intermediate buffer are gone. A 1-D convolution read
// through its view keeps its relu6 step. Params keep their buffers and
// IDs. Elsewhere, and on other targets, the plan is unchanged.
func fuseReLU6(p *Plan, t Target) {
	if t.ReLU6Epilogue {
		foldActs(p, false, func(act UnaryOp) bool { return act.Op == "relu6" })
	}
}
