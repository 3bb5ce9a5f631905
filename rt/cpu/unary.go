package cpu

import "math"

// UnaryKind names one element-wise function of a fused chain.
type UnaryKind uint8

// Element-wise functions. ULeakyReLU takes its slope from Unary.Alpha,
// UAddConst and UMulConst their constant, UPowConst its exponent; UGELU is
// the exact erf form (PyTorch's default, not the tanh approximation),
// computed in float32 by UnaryFwd and UnaryBwd (gelu.go: within a few ulps
// of eval's float64), as USigmoid, UTanh (sigmoid.go) and UExp (exp.go)
// are;
// UReLU6 is min(max(x, 0), 6), MobileNet's activation; USiLU is
// x·sigmoid(x) (EfficientNet's activation, ONNX's Sigmoid then Mul), the
// float32 product of x and the float32 sigmoid, so the bits of USigmoid
// and a BinaryFwd product after it.
const (
	UReLU UnaryKind = iota
	ULeakyReLU
	USigmoid
	UTanh
	UGELU
	UExp
	ULog
	UAddConst
	UMulConst
	USqrt
	UPowConst
	UErf
	UReLU6
	USiLU
)

// Unary is one step of an element-wise chain.
type Unary struct {
	Kind  UnaryKind
	Alpha float32
}

// maxStackChain is the chain length whose intermediates UnaryBwd keeps on
// the stack; longer chains (rare: fusion rarely makes them) recompute.
const maxStackChain = 16

// eval applies u to v, in float64 for accuracy of the transcendental ones.
func (u Unary) eval(v float64) float64 {
	switch u.Kind {
	case UReLU:
		if v < 0 {
			return 0
		}
		return v
	case ULeakyReLU:
		if v < 0 {
			return float64(u.Alpha) * v
		}
		return v
	case USigmoid:
		return 1 / (1 + math.Exp(-v))
	case UTanh:
		return math.Tanh(v)
	case UGELU:
		return 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
	case UExp:
		return math.Exp(v)
	case ULog:
		return math.Log(v)
	case UAddConst:
		return v + float64(u.Alpha)
	case UMulConst:
		return v * float64(u.Alpha)
	case USqrt:
		return math.Sqrt(v)
	case UPowConst:
		return math.Pow(v, float64(u.Alpha))
	case UErf:
		return math.Erf(v)
	case UReLU6:
		return math.Min(math.Max(v, 0), 6)
	case USiLU:
		return v / (1 + math.Exp(-v))
	}
	return v
}

// deriv is the derivative of u at input in, whose output is out.
func (u Unary) deriv(in, out float64) float64 {
	switch u.Kind {
	case UReLU:
		if in > 0 {
			return 1
		}
		return 0
	case ULeakyReLU:
		if in > 0 {
			return 1
		}
		return float64(u.Alpha)
	case USigmoid:
		return out * (1 - out)
	case UTanh:
		return 1 - out*out
	case UGELU:
		return 0.5*(1+math.Erf(in/math.Sqrt2)) + in*math.Exp(-0.5*in*in)/math.Sqrt(2*math.Pi)
	case UExp:
		return out
	case ULog:
		return 1 / in
	case UAddConst:
		return 1
	case UMulConst:
		return float64(u.Alpha)
	case USqrt:
		return 0.5 / out
	case UPowConst:
		p := float64(u.Alpha)
		if p == 0 {
			return 0
		}
		return p * math.Pow(in, p-1)
	case UErf:
		return 2 / math.Sqrt(math.Pi) * math.Exp(-in*in)
	case UReLU6:
		if in > 0 && in < 6 {
			return 1
		}
		return 0
	case USiLU:
		// σ·(1 + x·(1−σ)), σ the forward's float32 sigmoid of the float32
		// in and 1−σ its complement from sigmoidPair.
		sg, c := sigmoidPair(float32(in))
		return float64(sg) * (1 + in*float64(c))
	}
	return 1
}

// UnaryFwd writes y = chain(x) element-wise, the functions applied in order
// (chain[0] first). y may alias x.
func UnaryFwd(x, y []float32, chain []Unary) {
	n := len(y)
	x = x[:n]
	if len(chain) == 1 && chain[0].Kind == UReLU {
		// clampFloat32's vectors, where Go's max went an element at a time
		// (4% of regnet_y_400mf's batch-1 inference, the ReLU after each
		// residual addition).
		inf := float32(math.Inf(1))
		ParallelFor(n, 1<<15, func(lo, hi int) { clampFloat32(x[lo:hi], y[lo:hi], 0, inf) })
		return
	}
	// A chain with a transcendental function (a float64 one such as log:
	// tens of ns an element; GELU, sigmoid, tanh or exp in float32: a few
	// in Go, under one in vector registers) is worth a thread from 256
	// elements on: a batch-1 decode's GELU over 1,536 goes to up to 6.
	grain := 1 << 13
	if !allExactInFloat32(chain) {
		grain = 1 << 8
	}
	ParallelFor(n, grain, func(lo, hi int) { unaryRange(x, y, chain, lo, hi) })
}

// unaryRange is UnaryFwd's work on elements lo ≤ i < hi: one op at a time
// over a block that stays in the L1 cache, each pass a loop with no
// switch in it.
func unaryRange(x, y []float32, chain []Unary, lo, hi int) {
	for b := lo; b < hi; b += unaryBlock {
		e := min(b+unaryBlock, hi)
		src := x[b:e]
		for _, u := range chain {
			u.apply(src, y[b:e])
			src = y[b:e]
		}
	}
}

// UnaryDecode is UnaryFwd for a language model's decode: a chain with a
// transcendental function (an op not exactInFloat32: GELU, sigmoid, tanh,
// exp, log…) over 256 elements or more goes to the decode team (team.go),
// in parts of at least 256 elements (teamElemBytes), not to ParallelFor,
// whose workers would wait for processors that the team's members hold;
// the same values.
func UnaryDecode(x, y []float32, chain []Unary) {
	n := len(y)
	if n >= 1<<8 && !allExactInFloat32(chain) && !(len(chain) == 1 && chain[0].Kind == UReLU) {
		if t, ok := teamLock(); ok {
			if parts := teamParts(n, teamElemBytes, t.size); parts > 1 {
				t.unary = unaryJob{x: x[:n], y: y, chain: chain}
				t.run(&t.unary, parts)
				return
			}
			t.alone()
			unaryRange(x[:n], y, chain, 0, n)
			return
		}
	}
	UnaryFwd(x, y, chain)
}

// apply writes y = u(x) for one block, each element rounded to float32 as
// the reference (eval in float64) is, aside from the float32 forms of
// UGELU (gelu.go), USigmoid, UTanh and USiLU (sigmoid.go) and UExp (exp.go),
// within a few ulps of it; y may alias x. Each element's bits are at's.
func (u Unary) apply(x, y []float32) {
	if u.Kind.exactInFloat32() {
		u.applyFloat32(x, y)
		return
	}
	y = y[:len(x)]
	switch u.Kind {
	case UGELU:
		geluFwd(x, y)
	case USigmoid:
		sigmoidFwd(x, y)
	case UExp:
		expShift(x, y, 0)
	case UTanh:
		tanhFwd(x, y)
	case USiLU:
		siluFwd(x, y)
	default:
		for i, v := range x {
			y[i] = float32(u.eval(float64(v)))
		}
	}
}

// at is u of one value, the bits apply writes for it: the float32 forms'
// Go twins, or eval rounded to float32.
func (u Unary) at(v float32) float32 {
	switch u.Kind {
	case UGELU:
		phi, _ := geluCore(v)
		return v * phi
	case USigmoid:
		return sigmoidCore(v)
	case UExp:
		return expCore(v)
	case UTanh:
		return tanhCore(v)
	case USiLU:
		return v * sigmoidCore(v)
	}
	return float32(u.eval(float64(v)))
}

// unaryBlock is how many elements UnaryFwd takes through every op of a
// chain before the next block: 8 KiB of float32.
const unaryBlock = 2048

// exactInFloat32 reports whether k's float32 arithmetic gives eval's
// result rounded to float32 bit for bit: a sum or product of two float32
// values computed in float64 and rounded once is the correctly rounded
// float32 result, and a comparison or clamp rounds nothing. (UReLU is the
// exception for one bit: max(−0, 0) is +0 where eval keeps −0, which no
// later op or comparison can tell apart.)
func (k UnaryKind) exactInFloat32() bool {
	switch k {
	case UReLU, ULeakyReLU, UAddConst, UMulConst, UReLU6:
		return true
	}
	return false
}

// allExactInFloat32 reports whether every op of chain runs as float32
// loops (exactInFloat32).
func allExactInFloat32(chain []Unary) bool {
	for _, u := range chain {
		if !u.Kind.exactInFloat32() {
			return false
		}
	}
	return true
}

// applyFloat32 writes y = u(x) in float32 for the ops exactInFloat32
// takes; y may alias x.
func (u Unary) applyFloat32(x, y []float32) {
	y = y[:len(x)]
	a := u.Alpha
	switch u.Kind {
	case UReLU:
		clampFloat32(x, y, 0, float32(math.Inf(1)))
	case ULeakyReLU:
		for i, v := range x {
			if v < 0 {
				v *= a
			}
			y[i] = v
		}
	case UAddConst:
		for i, v := range x {
			y[i] = v + a
		}
	case UMulConst:
		for i, v := range x {
			y[i] = v * a
		}
	case UReLU6:
		clampFloat32(x, y, 0, 6)
	default:
		panic("cpu: applyFloat32 of an op exactInFloat32 does not take")
	}
}

// clampFloat32 writes y = min(max(x, lo), hi) with x's NaN kept, in vector
// registers where the CPU has them; y may alias x and is as long as x.
func clampFloat32(x, y []float32, lo, hi float32) {
	done := 0
	if ek := epilogue(); ek != nil && ek.clamp != nil && len(x) > 0 {
		done = len(x)
		if ek.clampTail > 0 {
			done -= done % ek.clampTail
		}
		if done > 0 {
			ek.clamp(&x[0], &y[0], done, lo, hi)
		}
	}
	for i, v := range x[done:] {
		y[done+i] = min(max(v, lo), hi)
	}
}

// UnaryBwd writes dx = dy·chain'(x), recomputing each element's
// intermediate values from x (the chain's input) with the forward's bits
// (at), so a fused chain stores nothing between the passes. A lone UGELU
// takes gelu.go's float32 form, the forward's, and a lone USiLU
// sigmoid.go's. dx may alias dy.
func UnaryBwd(x, dy, dx []float32, chain []Unary) {
	n := len(dx)
	x, dy = x[:n], dy[:n]
	if len(chain) == 1 && chain[0].Kind == UGELU {
		ParallelFor(n, 1<<13, func(lo, hi int) { geluBwd(x[lo:hi], dy[lo:hi], dx[lo:hi]) })
		return
	}
	if len(chain) == 1 && chain[0].Kind == USiLU {
		ParallelFor(n, 1<<13, func(lo, hi int) { siluBwd(x[lo:hi], dy[lo:hi], dx[lo:hi]) })
		return
	}
	if constantDerivative(chain) {
		// The same products as below, without evaluating the chain.
		ParallelFor(n, 1<<14, func(lo, hi int) {
			if len(chain) == 1 {
				// One rounding of a product of two float32 values: the
				// float32 product itself.
				a := float32(chain[0].deriv(0, 0))
				for i := lo; i < hi; i++ {
					dx[i] = dy[i] * a
				}
				return
			}
			for i := lo; i < hi; i++ {
				d := float64(dy[i])
				for k := len(chain) - 1; k >= 0; k-- {
					d *= chain[k].deriv(0, 0)
				}
				dx[i] = float32(d)
			}
		})
		return
	}
	ParallelFor(n, 1<<13, func(lo, hi int) {
		var vals [maxStackChain + 1]float64
		for i := lo; i < hi; i++ {
			d := float64(dy[i])
			if len(chain) <= maxStackChain {
				vals[0] = float64(x[i])
				for k, u := range chain {
					vals[k+1] = float64(u.at(float32(vals[k])))
				}
				for k := len(chain) - 1; k >= 0; k-- {
					d *= chain[k].deriv(vals[k], vals[k+1])
				}
			} else {
				// Recompute the input of step k from scratch each time.
				for k := len(chain) - 1; k >= 0; k-- {
					in := x[i]
					for _, u := range chain[:k] {
						in = u.at(in)
					}
					d *= chain[k].deriv(float64(in), float64(chain[k].at(in)))
				}
			}
			dx[i] = float32(d)
		}
	})
}

// constantDerivative reports whether every op of chain has a derivative
// that does not depend on its input (UAddConst, UMulConst).
func constantDerivative(chain []Unary) bool {
	for _, u := range chain {
		if u.Kind != UAddConst && u.Kind != UMulConst {
			return false
		}
	}
	return true
}

// UnaryBwdFromOutput writes dx = dy·u'(x) from the output y = u(x) alone,
// for the ops whose derivative y gives (UReLU, ULeakyReLU with a slope of
// 0 or more, UReLU6, USigmoid, UTanh, UExp), so that the backward need not
// keep x: the planner's keep_less pass chooses it. It equals UnaryBwd on
// x bit for bit. dx may alias dy.
func UnaryBwdFromOutput(y, dy, dx []float32, u Unary) {
	n := len(dx)
	y, dy = y[:n], dy[:n]
	if u.Kind == UReLU6 {
		ParallelFor(n, 1<<14, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				var d float32 // dy·0 keeps the reference's −0 and NaN
				if v := y[i]; v > 0 && v < 6 {
					d = 1
				}
				dx[i] = dy[i] * d
			}
		})
		return
	}
	ParallelFor(n, 1<<13, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dx[i] = float32(float64(dy[i]) * u.derivFromOutput(float64(y[i])))
		}
	})
}

// UnaryBwdFromOutputSum is UnaryBwdFromOutput of the sum of two
// gradients, dy + dy2 (in float32), where the planner folded the
// accumulate step that added them (fuse_accumulate_act.go). dx may be dy
// or dy2.
func UnaryBwdFromOutputSum(y, dy, dy2, dx []float32, u Unary) {
	s := make([]float32, len(dx))
	Add(dy[:len(dx)], dy2[:len(dx)], s)
	UnaryBwdFromOutput(y, s, dx, u)
}

// derivFromOutput is u's derivative at the input whose output is out (see
// UnaryBwdFromOutput for the ops it covers; any other op panics, a bug in
// the plan that chose it).
func (u Unary) derivFromOutput(out float64) float64 {
	switch u.Kind {
	case UReLU, ULeakyReLU:
		if u.Kind == ULeakyReLU && u.Alpha < 0 {
			break
		}
		if out > 0 {
			return 1
		}
		if u.Kind == ULeakyReLU {
			return float64(u.Alpha)
		}
		return 0
	case UReLU6:
		if out > 0 && out < 6 {
			return 1
		}
		return 0
	case USigmoid, UTanh, UExp:
		return u.deriv(0, out)
	}
	panic("cpu: UnaryBwdFromOutput of an op whose derivative its output does not give")
}
