package gpu

import "github.com/mlbuild/mlbuild/rt/gpuhost"

// hashUniformStmts declares float variable name = gpuhost.DropoutUniform(seed,
// step, index) in the IR, reading seed and step from the args buffer (the
// StepArgs layout of rt/gpuhost): a GPU thread per element and the CPU
// reference draw the same dropout mask.
func hashUniformStmts(name string, index Expr) []Stmt {
	h := "h_" + name
	mix := func() []Stmt {
		return []Stmt{
			set(h, Binary{OpBitXor, vr(h), Binary{OpShr, vr(h), u32(16)}}),
			set(h, mul(vr(h), u32(0x7FEB352D))),
			set(h, Binary{OpBitXor, vr(h), Binary{OpShr, vr(h), u32(15)}}),
			set(h, mul(vr(h), u32(0x846CA68B))),
			set(h, Binary{OpBitXor, vr(h), Binary{OpShr, vr(h), u32(16)}}),
		}
	}
	s := []Stmt{let(h, Uint, Binary{OpBitXor, mul(Cast{Uint, index}, u32(0x9E3779B9)), load("args", i32(gpuhost.ArgSeed))})}
	s = append(s, mix()...)
	s = append(s, set(h, Binary{OpBitXor, vr(h), mul(load("args", i32(gpuhost.ArgStep)), u32(0x85EBCA6B))}))
	s = append(s, mix()...)
	s = append(s, let(name, Float, mul(toFloat(Binary{OpShr, vr(h), u32(8)}), flt(1.0/16777216.0))))
	return s
}
