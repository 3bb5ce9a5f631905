package gpu

import (
	"math"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// StepArgs is the layout of the small uint32 buffer that carries the values
// that change from one training step to the next, so kernels need not be
// rebuilt: the learning rate (as float32 bits), the 1-based step count and
// the dropout seed. The runtime fills it once per step before encoding.
const (
	ArgLR       = 0 // math.Float32bits(learning rate)
	ArgStep     = 1 // optimizer step, starting at 1 (Adam's bias correction)
	ArgSeed     = 2 // dropout seed of the run
	StepArgsLen = 4 // words in the buffer (one spare)
)

// PackStepArgs returns the StepArgs buffer contents for one step.
func PackStepArgs(lr float32, step, seed uint32) [StepArgsLen]uint32 {
	return [StepArgsLen]uint32{ArgLR: math.Float32bits(lr), ArgStep: step, ArgSeed: seed}
}

// DropoutUniform is the counter-based random number behind dropout masks: a
// uniform float32 in [0, 1) from (seed, step, element index), with no state,
// so that a GPU thread per element and a CPU reference draw the same mask.
// hashUniformStmts generates the same function as kernel code; the host's
// copy is the one in rt/gpuhost.
var DropoutUniform = gpuhost.DropoutUniform

// hashUniformStmts declares float variable name = DropoutUniform(seed, step,
// index) in the IR, reading seed and step from the args buffer.
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
	s := []Stmt{let(h, Uint, Binary{OpBitXor, mul(Cast{Uint, index}, u32(0x9E3779B9)), load("args", i32(ArgSeed))})}
	s = append(s, mix()...)
	s = append(s, set(h, Binary{OpBitXor, vr(h), mul(load("args", i32(ArgStep)), u32(0x85EBCA6B))}))
	s = append(s, mix()...)
	s = append(s, let(name, Float, mul(toFloat(Binary{OpShr, vr(h), u32(8)}), flt(1.0/16777216.0))))
	return s
}
