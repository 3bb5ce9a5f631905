package planner

import "fmt"

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
		foldUnaryAct(p, "relu6")
	}
}

// foldUnaryAct is the fold of fuseReLU6 and fuseSiLUEpilogue: every gemm
// or conv2d step without a fused activation whose output is read by
// exactly one step, a unary of the single op op, and by nothing else,
// writes the unary's output itself with Attr.Act op; the unary steps are
// dropped and each fold is listed in p.Fusions.
func foldUnaryAct(p *Plan, op string) {
	fused := make([]bool, len(p.Forward))
	for i := range p.Forward {
		s := &p.Forward[i]
		if fused[i] || (s.Kernel != KGemm && s.Kernel != KConv2D) || s.Attr.Act != "" {
			continue
		}
		j, ok := soleForwardReader(p, s.Out[0])
		if !ok {
			continue
		}
		r := &p.Forward[j]
		if r.Kernel != KUnary || len(r.Attr.Chain) != 1 || r.Attr.Chain[0].Op != op {
			continue
		}
		s.Attr.Act, s.Attr.Alpha = op, 0
		s.Out[0] = r.Out[0]
		s.Fused = append(fusedNames(s), fusedNames(r)...)
		fused[j] = true
		r.In = nil // dead now: later searches must not count its read
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s + %s -> %s (%s epilogue)", s.Fused[0], r.Layer, s.Kernel, op))
	}
	p.dropForward(fused)
}
