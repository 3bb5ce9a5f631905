package cpu

import "math"

// SGD takes one step of torch.optim.SGD (no dampening, no Nesterov): the
// gradient gets weightDecay·param added (L2), then with momentum the
// velocity becomes momentum·vel + grad and the step follows the velocity.
// vel may be nil when momentum is 0. The velocity starting at zero gives
// exactly torch's first step, which sets it to the gradient.
func SGD(param, grad, vel []float32, lr, momentum, weightDecay float32) {
	n := len(param)
	grad = grad[:n]
	ParallelFor(n, 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := grad[i] + weightDecay*param[i]
			if momentum != 0 {
				g += momentum * vel[i]
				vel[i] = g
			}
			param[i] -= lr * g
		}
	})
}

// Adam takes one step of torch.optim.Adam, or of AdamW when decoupled (the
// weight decay shrinks the param by lr·weightDecay instead of being added to
// the gradient). The moments m and v are bias-corrected by step, which
// starts at 1; the arithmetic follows torch's order so results agree to
// rounding.
func Adam(param, grad, m, v []float32, lr, beta1, beta2, eps, weightDecay float32, step int, decoupled bool) {
	n := len(param)
	grad, m, v = grad[:n], m[:n], v[:n]
	bc1 := 1 - math.Pow(float64(beta1), float64(step))
	bc2 := 1 - math.Pow(float64(beta2), float64(step))
	stepSize := float32(float64(lr) / bc1)
	bc2Sqrt := float32(math.Sqrt(bc2))
	shrink := 1 - lr*weightDecay
	ParallelFor(n, 1<<13, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := grad[i]
			p := param[i]
			if decoupled {
				p *= shrink
			} else {
				g += weightDecay * p
			}
			mi := beta1*m[i] + (1-beta1)*g
			vi := beta2*v[i] + (1-beta2)*g*g
			m[i], v[i] = mi, vi
			denom := float32(math.Sqrt(float64(vi)))/bc2Sqrt + eps
			param[i] = p - stepSize*mi/denom
		}
	})
}

// Argmax returns the index of the first largest value of row (the
// predicted class), or -1 for an empty row.
func Argmax(row []float32) int {
	if len(row) == 0 {
		return -1
	}
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return best
}

// NonFinite returns the index of the first NaN or ±Inf in x, or -1, so a
// program can name the step where training diverged.
func NonFinite(x []float32) int {
	for i, v := range x {
		if v != v || v > math.MaxFloat32 || v < -math.MaxFloat32 {
			return i
		}
	}
	return -1
}
