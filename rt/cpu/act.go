package cpu

import "math"

// Act is the activation fused into the epilogue of a dense or convolution
// kernel. Its derivative is computed from the activation's output y, so the
// backward kernel needs no copy of the pre-activation.
type Act uint8

// Fused activations. ActLeakyReLU uses the kernel's alpha as its negative
// slope and must have alpha > 0 for the derivative from y to be well defined.
const (
	ActNone Act = iota
	ActReLU
	ActLeakyReLU
	ActSigmoid
	ActTanh
)

// applyAct applies act in place to v.
func applyAct(v []float32, act Act, alpha float32) {
	switch act {
	case ActReLU:
		// Branch-free: clear the bits of negative values (sign bit set),
		// since their signs are as unpredictable as the data.
		for i, x := range v {
			b := math.Float32bits(x)
			v[i] = math.Float32frombits(b &^ uint32(int32(b)>>31))
		}
	case ActLeakyReLU:
		for i, x := range v {
			if x < 0 {
				v[i] = alpha * x
			}
		}
	case ActSigmoid:
		for i, x := range v {
			v[i] = sigmoid32(x)
		}
	case ActTanh:
		for i, x := range v {
			v[i] = float32(math.Tanh(float64(x)))
		}
	}
}

// actBackward multiplies dy in place by the derivative of act, taken from
// the activation's output y.
func actBackward(y, dy []float32, act Act, alpha float32) {
	dy = dy[:len(y)]
	switch act {
	case ActReLU:
		// y is +0 or positive: keep dy where y's bits are non-zero, without
		// a branch (b-1 is negative as an int32 only for b = 0).
		for i, v := range y {
			b := math.Float32bits(v)
			dy[i] = math.Float32frombits(math.Float32bits(dy[i]) &^ uint32(int32(b-1)>>31))
		}
	case ActLeakyReLU:
		for i, v := range y {
			if v <= 0 {
				dy[i] *= alpha
			}
		}
	case ActSigmoid:
		for i, v := range y {
			dy[i] *= v * (1 - v)
		}
	case ActTanh:
		for i, v := range y {
			dy[i] *= 1 - v*v
		}
	}
}

// sigmoid32 is the logistic function, computed in float64 so that it
// saturates cleanly to 0 and 1 without overflow.
func sigmoid32(x float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(x))))
}
