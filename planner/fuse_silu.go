package planner

import (
	"fmt"
	"slices"
)

// fuseSiLU fuses a sigmoid and the product of its input by its output,
// the form ONNX gives SiLU (x·sigmoid(x), EfficientNet's activation), into
// one unary step of op silu, so that the sigmoid's output is never in
// memory and the product is not a pass of its own. The backend's silu
// computes what the two steps did (rt/cpu: the same bits).
//
// Before: Forward is lowered (fuseEpilogue may have run); no backward
// steps exist yet. After, on a target with SiLU: no single-op sigmoid step
// has an output that exactly one step reads, a mul whose other operand is
// the sigmoid's input, and nothing else (not the loss, not a view); each
// such pair is one unary step [silu] at the sigmoid's place, from its
// input to the product's output, and the sigmoid's output buffer is gone.
// Params keep their buffers and IDs. Elsewhere the plan is unchanged.
func fuseSiLU(p *Plan, t Target) {
	if !t.SiLU {
		return
	}
	removed := make([]bool, len(p.Forward))
	for i := range p.Forward {
		s := &p.Forward[i]
		if removed[i] || s.Kernel != KUnary || len(s.Attr.Chain) != 1 || s.Attr.Chain[0].Op != "sigmoid" {
			continue
		}
		j, ok := soleForwardReader(p, s.Out[0])
		if !ok {
			continue
		}
		m := &p.Forward[j]
		if m.Kernel != KBinary || m.Attr.BinOp != "mul" || len(m.In) != 2 {
			continue
		}
		x := s.In[0]
		if !(m.In[0] == x && m.In[1] == s.Out[0]) && !(m.In[1] == x && m.In[0] == s.Out[0]) {
			continue
		}
		if !slices.Equal(p.shapeOf(m.Out[0]), p.shapeOf(x)) {
			continue
		}
		s.Attr.Chain = []UnaryOp{{Op: "silu"}}
		s.Out[0] = m.Out[0]
		s.Fused = append(fusedNames(s), m.Layer)
		m.In = nil // dead now: later searches must not count its reads
		removed[j] = true
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s + %s -> unary (silu)", s.Fused[0], m.Layer))
	}
	p.dropForward(removed)
}
