package gpu

import (
	"hash/fnv"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// DropoutStream is the stream of dropout draws of the plan step of layer
// layer (its spec node, or the nodes fused into it): a constant the
// step's kernels xor into the step's seed, so that two dropout layers of
// one shape draw different masks in one step (the CPU program's layers
// each draw their own seed from its generator). It is the 32-bit FNV-1a
// hash of the name; a GPU program's CPU reference draws with the same.
func DropoutStream(layer string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(layer))
	return h.Sum32()
}

// hashUniformStmts declares float variable name = gpuhost.DropoutUniform(seed
// ^ stream, step, index) in the IR, reading seed and step from the args
// buffer (the StepArgs layout of rt/gpuhost): a GPU thread per element and
// the CPU reference draw the same dropout mask.
func hashUniformStmts(name string, index Expr, stream uint32) []Stmt {
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
	s := []Stmt{let(h, Uint, Binary{OpBitXor, mul(Cast{Uint, index}, u32(0x9E3779B9)), Binary{OpBitXor, load("args", i32(gpuhost.ArgSeed)), u32(stream)}})}
	s = append(s, mix()...)
	s = append(s, set(h, Binary{OpBitXor, vr(h), mul(load("args", i32(gpuhost.ArgStep)), u32(0x85EBCA6B))}))
	s = append(s, mix()...)
	s = append(s, let(name, Float, mul(toFloat(Binary{OpShr, vr(h), u32(8)}), flt(1.0/16777216.0))))
	return s
}
