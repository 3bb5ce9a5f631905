package planner

// fuseAccumulateNorm folds an accumulate step into the layer norm's
// backward that computes one of its two contributions: the
// layernorm_bwd adds its dx to the running sum instead of writing it to
// a buffer of its own that the accumulate then reads with the sum and
// writes again. A pre-norm transformer's residual stream is such a sum
// at every layer norm: the gradient that the residual add passes on,
// plus the layer norm's dx. Each fold saves a pass over the value that
// reads two copies and writes a third, for one more read of the sum.
//
// Before: as fuseAccumulateGemm's. After, for a Target with
// LayerNormAccumulate: every accumulate step that fuseAccumulateGemm's
// conditions let fold into a layernorm_bwd that writes one of its
// operands as dx is gone, as that pass leaves a gemm_bwd's: the
// accumulate's output owns the sum's storage, which the sum so far and
// the layer norm's dx view, the layernorm_bwd runs after every writer of
// the sum so far and has Attr.AccumulateDx, and a fold adds a line to
// Fusions. Other steps are unchanged.
//
// Why only where the Target says so: the backend's layer norm backward
// must read the sum and add in the kernel that writes dx, at the cost of
// one read that the accumulate step made anyway, as the GPUs' and the
// CPU's (rt/cpu's LayerNormBwdAdd) do.
func fuseAccumulateNorm(p *Plan, t Target) {
	if t.LayerNormAccumulate {
		foldAccumulates(p, KLayerNormBwd)
	}
}
