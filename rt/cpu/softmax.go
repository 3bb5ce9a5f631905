package cpu

import "math"

// softmaxLines runs fn over the outer·inner lines of a tensor viewed as
// [outer, axis, inner], each line being axis elements inner apart.
func softmaxLines(outer, axis, inner int, fn func(base int)) {
	ParallelFor(outer*inner, rowGrain(axis), func(lo, hi int) {
		for l := lo; l < hi; l++ {
			o, i := l/inner, l%inner
			fn(o*axis*inner + i)
		}
	})
}

// SoftmaxFwd writes y = softmax(x) along the middle axis of x viewed as
// [outer, axis, inner], subtracting the maximum first so that it cannot
// overflow.
func SoftmaxFwd(x, y []float32, outer, axis, inner int) {
	softmaxLines(outer, axis, inner, func(base int) {
		m := float32(math.Inf(-1))
		for k := 0; k < axis; k++ {
			m = max(m, x[base+k*inner])
		}
		var s float64
		for k := 0; k < axis; k++ {
			e := float32(math.Exp(float64(x[base+k*inner] - m)))
			y[base+k*inner] = e
			s += float64(e)
		}
		inv := float32(1 / s)
		for k := 0; k < axis; k++ {
			y[base+k*inner] *= inv
		}
	})
}

// SoftmaxBwd writes dx = y·(dy - Σ dy·y) along the axis, from the softmax
// output y. dx may alias dy.
func SoftmaxBwd(y, dy, dx []float32, outer, axis, inner int) {
	softmaxLines(outer, axis, inner, func(base int) {
		var dot float64
		for k := 0; k < axis; k++ {
			dot += float64(dy[base+k*inner]) * float64(y[base+k*inner])
		}
		d := float32(dot)
		for k := 0; k < axis; k++ {
			j := base + k*inner
			dx[j] = y[j] * (dy[j] - d)
		}
	})
}

// LogSoftmaxFwd writes y = x - log Σ exp(x) along the axis, computed
// around the maximum for stability.
func LogSoftmaxFwd(x, y []float32, outer, axis, inner int) {
	softmaxLines(outer, axis, inner, func(base int) {
		m := float32(math.Inf(-1))
		for k := 0; k < axis; k++ {
			m = max(m, x[base+k*inner])
		}
		var s float64
		for k := 0; k < axis; k++ {
			s += math.Exp(float64(x[base+k*inner] - m))
		}
		// (x - m) is exact for the entries that matter, so subtract the
		// small log-sum last rather than forming the large x - (m + log s).
		ls := float32(math.Log(s))
		for k := 0; k < axis; k++ {
			y[base+k*inner] = (x[base+k*inner] - m) - ls
		}
	})
}

// LogSoftmaxBwd writes dx = dy - exp(y)·Σ dy along the axis, from the
// log-softmax output y. dx may alias dy.
func LogSoftmaxBwd(y, dy, dx []float32, outer, axis, inner int) {
	softmaxLines(outer, axis, inner, func(base int) {
		var s float64
		for k := 0; k < axis; k++ {
			s += float64(dy[base+k*inner])
		}
		sum := float32(s)
		for k := 0; k < axis; k++ {
			j := base + k*inner
			dx[j] = dy[j] - float32(math.Exp(float64(y[j])))*sum
		}
	})
}

// SoftmaxXent returns the cross-entropy of softmax(logits) against labels
// (one-hot rows, or any distribution), averaged over the batch, and writes
// dlogits = (softmax(logits) - labels)/batch, the gradient of that mean. It
// works from log-softmax, so large logits neither overflow nor lose the loss.
func SoftmaxXent(logits, labels, dlogits []float32, batch, classes int) float32 {
	var loss float64
	inv := 1 / float64(batch)
	for r := 0; r < batch; r++ {
		z := logits[r*classes : (r+1)*classes]
		t := labels[r*classes : (r+1)*classes]
		m := z[0]
		for _, v := range z[1:] {
			m = max(m, v)
		}
		var s float64
		for _, v := range z {
			s += math.Exp(float64(v - m))
		}
		lse := float64(m) + math.Log(s)
		for j, v := range z {
			logp := float64(v) - lse
			if t[j] != 0 {
				loss -= float64(t[j]) * logp
			}
			if dlogits != nil {
				dlogits[r*classes+j] = float32((math.Exp(logp) - float64(t[j])) * inv)
			}
		}
	}
	return float32(loss * inv)
}

// MSE returns the mean over all n elements of (pred - target)² and writes
// dpred = 2(pred - target)/n, its gradient; dpred may be nil.
func MSE(pred, target, dpred []float32, n int) float32 {
	var loss float64
	scale := 2 / float32(n)
	for i := 0; i < n; i++ {
		d := pred[i] - target[i]
		loss += float64(d) * float64(d)
		if dpred != nil {
			dpred[i] = scale * d
		}
	}
	return float32(loss / float64(n))
}
