package planner

import (
	"fmt"
	"strings"
)

// fuseElementwise merges chains of element-wise steps into one step, so a
// chain of n ops reads and writes memory once instead of n times.
//
// Before: Forward is lowered (and fuseEpilogue may have run); no backward
// steps exist yet. After: no unary step's output is read only by another
// unary step; each merged step's Chain lists the ops in order and its
// backward (derived later) recomputes the intermediates from the chain's
// input. Intermediate buffers are gone; params keep their buffers and IDs.
func fuseElementwise(p *Plan) {
	removed := make([]bool, len(p.Forward))
	for i := range p.Forward {
		s := &p.Forward[i]
		if removed[i] || s.Kernel != KUnary {
			continue
		}
		merged := false
		for {
			j, ok := soleForwardReader(p, s.Out[0])
			if !ok || p.Forward[j].Kernel != KUnary {
				break
			}
			r := &p.Forward[j]
			s.Attr.Chain = append(s.Attr.Chain, r.Attr.Chain...)
			s.Fused = append(fusedNames(s), r.Layer)
			s.Out[0] = r.Out[0]
			// The reader is now dead; make it read nothing so that the
			// next search does not count it.
			r.In = nil
			removed[j] = true
			merged = true
		}
		if merged {
			ops := make([]string, len(s.Attr.Chain))
			for k, u := range s.Attr.Chain {
				ops[k] = u.Op
			}
			p.Fusions = append(p.Fusions, fmt.Sprintf("%s -> unary (chain %s)", strings.Join(s.Fused, " + "), strings.Join(ops, ", ")))
		}
	}
	p.dropForward(removed)
}
