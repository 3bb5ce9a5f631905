package cpu

import "math"

// MAE returns the mean over all n elements of |pred - target| (the L1
// loss) and writes dpred = sign(pred - target)/n, its gradient (0 where
// the two are equal, as PyTorch's L1Loss); dpred may be nil.
func MAE(pred, target, dpred []float32, n int) float32 {
	var loss float64
	inv := 1 / float32(n)
	for i := 0; i < n; i++ {
		d := pred[i] - target[i]
		loss += math.Abs(float64(d))
		if dpred != nil {
			switch {
			case d > 0:
				dpred[i] = inv
			case d < 0:
				dpred[i] = -inv
			default:
				dpred[i] = 0
			}
		}
	}
	return float32(loss / float64(n))
}

// Huber returns the mean over all n elements of the Huber loss of
// d = pred - target: d²/2 where |d| <= delta, delta·(|d| - delta/2) beyond
// (PyTorch's HuberLoss). It writes dpred = clamp(d, -delta, delta)/n, its
// gradient; dpred may be nil.
func Huber(pred, target, dpred []float32, n int, delta float32) float32 {
	var loss float64
	inv := 1 / float32(n)
	for i := 0; i < n; i++ {
		d := pred[i] - target[i]
		a := float32(math.Abs(float64(d)))
		if a <= delta {
			loss += 0.5 * float64(d) * float64(d)
		} else {
			loss += float64(delta) * (float64(a) - 0.5*float64(delta))
		}
		if dpred != nil {
			dpred[i] = max(-delta, min(delta, d)) * inv
		}
	}
	return float32(loss / float64(n))
}
