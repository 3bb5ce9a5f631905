package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// choosePrecisions asks the target, for every GEMM-backed step (gemm,
// gemm_bwd, and conv2d and conv2d_bwd) and fused attention step, in
// which precision the backend
// multiplies the step's matrices, and records the answer in
// Attr.Precision, so that the emitter calls that precision's kernels,
// `mlbuild plan` shows it and the cache key covers it (the generated
// program differs). A step left at f32 although the plan asks for another
// precision gets a line in Plan.Precisions saying why: the target's
// reason (too few rows for a bf16 tile, a convolution method without a
// GEMM, tf32 on the CPU), or that the target has no rule for that kind
// of step.
//
// Before: the plan is lowered and, when training, differentiated, and
// every convolution has its Attr.Method (chooseMethods), with
// Plan.Precision the spec's (empty means f32); no step has a Precision.
// After: Plan.Precision is PrecisionF32, PrecisionBF16 or PrecisionTF32;
// every gemm and gemm_bwd step has Attr.Precision: f32 when the plan asks
// for f32, else the target's Dense choice for its rows, or f32 when the
// target has no Dense rule. In a plan that asks for another precision
// than f32, every conv2d and conv2d_bwd step has one too: the target's
// ConvPrecision choice for its method (the plan's precision or a finer
// one: tf32 in a bf16 plan where the method has no bf16 products, as
// cuDNN on float32 tensors), or f32 when it has none (an f32
// plan leaves convolutions without one: f32); so does every fused
// attention step, where the target has a rule for them
// (AttentionPrecision; else they keep none: f32). Plan.Precisions lists the
// steps whose precision differs from the plan's, in phase order. Nothing
// else changed.
func choosePrecisions(p *Plan, t Target) error {
	if p.Precision == "" {
		p.Precision = PrecisionF32
	}
	if !knownPrecision(p.Precision) {
		return &spec.Error{Message: fmt.Sprintf("the planner knows no precision %q (f32, bf16 or tf32)", p.Precision)}
	}
	for _, ph := range []Phase{p.Forward, p.Backward} {
		for i := range ph {
			s := &ph[i]
			c := DenseChoice{Precision: PrecisionF32}
			switch {
			case s.Kernel == KGemm || s.Kernel == KGemmBwd:
				switch {
				case p.Precision == PrecisionF32:
				case t.Dense == nil:
					c.Why = t.onlyF32(p.Precision)
				default:
					w := p.Buffers[s.In[1]].Shape // [out, in]
					c = t.Dense(p.Buffers[s.In[0]].Size/w[1], p.Precision)
				}
			case s.Kernel == KConv2D || s.Kernel == KConv2DBwd:
				switch {
				case p.Precision == PrecisionF32:
					continue
				case t.ConvPrecision == nil:
					c.Why = t.onlyF32(p.Precision)
				default:
					c = t.ConvPrecision(s.Attr.Method, p.Precision)
				}
			case s.Kernel == KAttention || s.Kernel == KAttentionBwd:
				if p.Precision == PrecisionF32 || t.AttentionPrecision == nil {
					continue
				}
				q := p.Buffers[s.In[0]].Shape // [..., T, D]
				c = t.AttentionPrecision(q[len(q)-1], p.Precision)
			default:
				continue
			}
			if !knownPrecision(c.Precision) || precisionBits(c.Precision) < precisionBits(p.Precision) {
				return &spec.Error{Layer: s.Layer, Message: fmt.Sprintf("the %s backend gives its %s step the precision %q in a %s plan (a bug in mlbuild)", t.Name, s.Kernel, c.Precision, p.Precision)}
			}
			s.Attr.Precision = c.Precision
			if c.Precision != p.Precision {
				p.Precisions = append(p.Precisions, fmt.Sprintf("%s %s: %s, not %s: %s", s.Kernel, s.Layer, c.Precision, p.Precision, c.Why))
			}
		}
	}
	return nil
}

// gemmBacked reports whether steps of kernel k multiply matrices in a
// precision that choosePrecisions chooses.
func gemmBacked(k Kernel) bool {
	return k == KGemm || k == KGemmBwd || k == KConv2D || k == KConv2DBwd
}

// hasPrecision reports whether steps of kernel k may carry a precision:
// the GEMM-backed ones and the fused attention's.
func hasPrecision(k Kernel) bool {
	return gemmBacked(k) || k == KAttention || k == KAttentionBwd
}

// precisionBits is the bits of precision of p's products' operands
// (float32 24, TF32 11, bfloat16 8); 0 for an unknown one.
func precisionBits(p string) int {
	return map[string]int{PrecisionF32: 24, PrecisionTF32: 11, PrecisionBF16: 8}[p]
}

// knownPrecision reports whether p names one of the planner's precisions.
func knownPrecision(p string) bool {
	return p == PrecisionF32 || p == PrecisionBF16 || p == PrecisionTF32
}

// onlyF32 says why a step of t stays f32 when t has no rule for it.
func (t Target) onlyF32(want string) string {
	if t.F32Why != "" {
		return t.F32Why
	}
	return fmt.Sprintf("the %s backend has no %s products for this step", t.Name, want)
}
