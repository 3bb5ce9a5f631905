package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// choosePrecisions asks the target, for every gemm and gemm_bwd step, in
// which precision the backend multiplies the step's matrices, and records
// the answer in Attr.Precision, so that the emitter calls that precision's
// kernels, `mlbuild plan` shows it and the cache key covers it (the
// generated program differs). A step left at f32 although the plan asks
// for another precision gets a line in Plan.Precisions saying why: the
// target's reason (too few rows for a bf16 tile), or that the target has
// no other precision than f32 (the GPU backends today).
//
// Before: the plan is lowered and, when training, differentiated, with
// Plan.Precision the spec's (empty means f32); no step has a Precision.
// After: Plan.Precision is PrecisionF32 or PrecisionBF16; every gemm and
// gemm_bwd step has Attr.Precision: f32 when the plan asks for f32, else
// the target's choice for its rows, or f32 when the target has no Dense
// rule. Plan.Precisions lists the steps whose precision differs from the
// plan's, in phase order. Nothing else changed.
func choosePrecisions(p *Plan, t Target) error {
	if p.Precision == "" {
		p.Precision = PrecisionF32
	}
	if p.Precision != PrecisionF32 && p.Precision != PrecisionBF16 {
		return &spec.Error{Message: fmt.Sprintf("the planner knows no precision %q (f32 or bf16)", p.Precision)}
	}
	for _, ph := range []Phase{p.Forward, p.Backward} {
		for i := range ph {
			s := &ph[i]
			if s.Kernel != KGemm && s.Kernel != KGemmBwd {
				continue
			}
			c := DenseChoice{Precision: PrecisionF32}
			switch {
			case p.Precision == PrecisionF32:
			case t.Dense == nil:
				c.Why = fmt.Sprintf("the %s backend has no bf16 products yet", t.Name)
			default:
				w := p.Buffers[s.In[1]].Shape // [out, in]
				c = t.Dense(p.Buffers[s.In[0]].Size/w[1], p.Precision)
			}
			if c.Precision != PrecisionF32 && c.Precision != PrecisionBF16 {
				return &spec.Error{Layer: s.Layer, Message: fmt.Sprintf("the %s backend gives its dense step the precision %q (a bug in mlbuild)", t.Name, c.Precision)}
			}
			s.Attr.Precision = c.Precision
			if c.Precision != p.Precision {
				p.Precisions = append(p.Precisions, fmt.Sprintf("%s %s: %s, not %s: %s", s.Kernel, s.Layer, c.Precision, p.Precision, c.Why))
			}
		}
	}
	return nil
}
