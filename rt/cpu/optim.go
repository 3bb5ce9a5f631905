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
// starts at 1; the arithmetic is float32 and follows torch's order, so
// results agree to rounding. Where the CPU has AVX2 the bulk runs eight
// parameters per instruction (adamStepAVX2, same operations and roundings).
func Adam(param, grad, m, v []float32, lr, beta1, beta2, eps, weightDecay float32, step int, decoupled bool) {
	n := len(param)
	grad, m, v = grad[:n], m[:n], v[:n]
	bc1 := 1 - math.Pow(float64(beta1), float64(step))
	bc2 := 1 - math.Pow(float64(beta2), float64(step))
	k := adamConsts{beta1: beta1, omb1: 1 - beta1, beta2: beta2, omb2: 1 - beta2,
		bc2Sqrt: float32(math.Sqrt(bc2)), eps: eps, stepSize: float32(float64(lr) / bc1), shrink: 1, wd: weightDecay}
	if decoupled {
		k.shrink, k.wd = 1-lr*weightDecay, 0
	}
	vector := adamVectorSupported && adamUseVector
	ParallelFor(n, 1<<13, func(lo, hi int) {
		done := 0
		if vector {
			done = adamStepVector(param[lo:hi], grad[lo:hi], m[lo:hi], v[lo:hi], &k)
		}
		adamStepGo(param[lo+done:hi], grad[lo+done:hi], m[lo+done:hi], v[lo+done:hi], &k)
	})
}

// adamUseVector lets tests force the pure-Go loop on a machine with AVX2.
var adamUseVector = true

// adamConsts are one Adam step's scalars, laid out as adamStepAVX2 reads
// them. Plain Adam has shrink 1 and wd its L2 decay; AdamW has shrink
// 1 - lr·weightDecay and wd 0.
type adamConsts struct {
	beta1, omb1, beta2, omb2 float32
	bc2Sqrt, eps, stepSize   float32
	shrink, wd               float32
}

// adamStepGo is the scalar Adam update, the reference for the vector one.
func adamStepGo(param, grad, m, v []float32, k *adamConsts) {
	n := len(param)
	grad, m, v = grad[:n], m[:n], v[:n]
	for i, p := range param {
		g := grad[i]
		g += k.wd * p
		p *= k.shrink
		mi := k.beta1*m[i] + k.omb1*g
		vi := k.beta2*v[i] + k.omb2*g*g
		m[i], v[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi)))/k.bc2Sqrt + k.eps
		param[i] = p - k.stepSize*mi/denom
	}
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

// Finite reports whether v is neither NaN nor ±Inf. A generated training
// step skips its update when the loss is not (app.UpdateGuard).
func Finite(v float32) bool { return v == v && v <= math.MaxFloat32 && v >= -math.MaxFloat32 }

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

// ClipGradNorm scales the gradients grads, in place, by
// min(1, maxNorm/(‖g‖+1e-6)), ‖g‖ the L2 norm over all of them together,
// as torch.nn.utils.clip_grad_norm_ does. sums (len(grads)+1 elements)
// receives the sum of squares of each gradient, then the scale applied.
// The sums are taken in float64, so the norm does not depend on how the
// gradients are split into tensors.
func ClipGradNorm(grads [][]float32, maxNorm float32, sums []float32) {
	var total float64
	for j, g := range grads {
		var s float64
		for _, v := range g {
			s += float64(v) * float64(v)
		}
		sums[j] = float32(s)
		total += s
	}
	scale := min(float32(float64(maxNorm)/(math.Sqrt(total)+1e-6)), 1)
	sums[len(grads)] = scale
	if scale == 1 {
		return
	}
	for _, g := range grads {
		ParallelFor(len(g), 1<<14, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				g[i] *= scale
			}
		})
	}
}
