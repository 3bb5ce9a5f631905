package planner

import "fmt"

// epilogueActs are the activations a gemm or conv2d step can apply in its
// epilogue: those whose derivative can be computed from the output alone.
// GELU is not one of them (its derivative needs the pre-activation), so it
// stays a step of its own.
var epilogueActs = map[string]bool{"relu": true, "leakyrelu": true, "sigmoid": true, "tanh": true}

// fuseEpilogue folds an activation into the gemm or conv2d step before it,
// so the activation is applied while the output tile is still in cache
// instead of in a second pass over memory.
//
// Before: Forward is lowered (no backward steps exist yet, so the backward
// kernels derived later take the fused step's Act). After: every gemm or
// conv2d step whose output is read by exactly one step, a single-op unary
// relu, leakyrelu (with a positive slope), sigmoid or tanh, and by nothing
// else (not the loss, not a view), writes the activation's output itself
// with Attr.Act set, and the unary step and the intermediate buffer are
// gone. A 1-D convolution's output, which the layers after it read
// through its one [N, OC, OL] view, fuses alike: the step then writes a
// view [N, OC, 1, OL] of the activation's output. Params keep their
// buffers and IDs.
func fuseEpilogue(p *Plan) {
	foldActs(p, true, func(act UnaryOp) bool {
		// leakyrelu's derivative from the output needs the sign of the
		// input: a positive slope keeps it
		return epilogueActs[act.Op] && (act.Op != "leakyrelu" || act.Alpha > 0)
	})
}

// foldActs is the fold of fuseEpilogue, fuseReLU6 and fuseSiLUEpilogue:
// foldAct over the gemm and conv2d steps, each fold listed as
// "... -> gemm (relu epilogue)".
func foldActs(p *Plan, views bool, takes func(UnaryOp) bool) {
	foldAct(p, views, func(s *Step) bool { return s.Kernel == KGemm || s.Kernel == KConv2D }, takes,
		func(_ *Step, act UnaryOp) string { return act.Op + " epilogue" })
}

// foldAct folds an activation into the step that feeds it: every forward
// step that folds accepts, without a fused activation, whose output is
// read by exactly one step, a single-op unary whose op takes accepts, and
// by nothing else (with views, also a 1-D convolution read so through its
// one view), writes the unary's output itself with the unary's op and
// alpha as Attr.Act and Attr.Alpha; the unary steps and the intermediate
// buffers are dropped, and each fold is listed in p.Fusions as "a + b ->
// kernel (note)". fuseEpilogue, fuseReLU6, fuseSiLUEpilogue (through
// foldActs), fuseNormAct and fuseSumAct are its callers.
func foldAct(p *Plan, views bool, folds func(*Step) bool, takes func(UnaryOp) bool, note func(s *Step, act UnaryOp) string) {
	fused := make([]bool, len(p.Forward))
	for i := range p.Forward {
		s := &p.Forward[i]
		if fused[i] || !folds(s) || s.Attr.Act != "" {
			continue
		}
		j, ok := soleForwardReader(p, s.Out[0])
		oneD := false
		if !ok && views && s.Kernel == KConv2D && s.Attr.Conv != nil && s.Attr.Conv.OneD {
			j, ok = soleViewReader(p, s.Out[0])
			oneD = true
		}
		if !ok {
			continue
		}
		r := &p.Forward[j]
		if r.Kernel != KUnary || len(r.Attr.Chain) != 1 || !takes(r.Attr.Chain[0]) {
			continue
		}
		act := r.Attr.Chain[0]
		s.Attr.Act, s.Attr.Alpha = act.Op, act.Alpha
		if oneD {
			s.Out[0] = p.addView(p.Buffers[r.Out[0]].Name+"2d", r.Out[0], p.shapeOf(s.Out[0]))
		} else {
			s.Out[0] = r.Out[0]
		}
		s.Fused = append(fusedNames(s), fusedNames(r)...)
		fused[j] = true
		r.In = nil // dead now: later searches must not count its read
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s + %s -> %s (%s)", s.Fused[0], r.Layer, s.Kernel, note(s, act)))
	}
	p.dropForward(fused)
}

// fusedNames returns the layers a step stands for: its Fused list, or its
// own layer when nothing has been fused into it yet.
func fusedNames(s *Step) []string {
	if len(s.Fused) > 0 {
		return s.Fused
	}
	return []string{s.Layer}
}

// soleViewReader returns the index of the only forward step that reads
// buffer id through its one view, provided that id owns its storage, is
// not the plan's output (nor its view), and no step in any phase reads id
// or the view otherwise: a 1-D convolution's output, seen as
// [N, OC, OL] by the layers after it.
func soleViewReader(p *Plan, id BufID) (int, bool) {
	view := NoBuf
	for _, b := range p.Buffers {
		if b.AliasOf == id {
			if view != NoBuf {
				return 0, false
			}
			view = b.ID
		}
	}
	if view == NoBuf || p.Buffers[id].AliasOf != NoBuf || p.root(p.Output) == id {
		return 0, false
	}
	reader, uses := -1, 0
	for i, s := range p.Forward {
		for _, in := range s.In {
			if in == id {
				return 0, false
			}
			if in == view {
				reader, uses = i, uses+1
			}
		}
	}
	for _, ph := range []Phase{p.Backward, p.Update} {
		for _, s := range ph {
			if reads(&s, id) || reads(&s, view) {
				return 0, false
			}
		}
	}
	return reader, uses == 1
}

// soleForwardReader returns the index of the only forward step that reads
// buffer id, provided that id owns its storage, is not the plan's output,
// no view shares its storage, and no step in any phase reads it otherwise.
func soleForwardReader(p *Plan, id BufID) (int, bool) {
	reader, ok := onlyForwardReader(p, id)
	if !ok {
		return 0, false
	}
	for _, ph := range []Phase{p.Backward, p.Update} {
		for _, s := range ph {
			if reads(&s, id) {
				return 0, false
			}
		}
	}
	return reader, true
}
