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
	if inner == 1 {
		ParallelFor(outer, rowGrain(axis), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				softmaxRow(x[r*axis:(r+1)*axis], y[r*axis:(r+1)*axis])
			}
		})
		return
	}
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

// softmaxRow writes y = softmax(x) for one contiguous row: e^(x−max) in
// float32 (exp.go), summed in float64 (sum64), scaled by the sum's
// inverse. y may alias x. A NaN in x makes the whole row NaN.
func softmaxRow(x, y []float32) {
	y = y[:len(x)]
	m := rowMax(x)
	expShift(x, y, m)
	inv := float32(1 / sum64(y))
	for i := range y {
		y[i] *= inv
	}
}

// rowMax returns the largest of x (at least one element; NaN if any is
// NaN), in four interleaved running maxima: the max builtin compiles
// without branches, which matters on rows whose maximum moves
// unpredictably, but one chain of it waits on each step's latency.
func rowMax(x []float32) float32 {
	m0, m1, m2, m3 := x[0], x[0], x[0], x[0]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		m0 = max(m0, x[i])
		m1 = max(m1, x[i+1])
		m2 = max(m2, x[i+2])
		m3 = max(m3, x[i+3])
	}
	for ; i < len(x); i++ {
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
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
// The rows run in parallel; the loss sums them in blocks of xentBlock rows,
// in order, so it does not depend on the number of threads.
//
// A label row of zeros is an ignored position (a text's padding after the
// end of a document): it adds 0 to the loss and its dlogits row is 0, while
// the divisor stays batch, all the rows. The other rows' loss and gradient
// are computed as if there were no such rows, bit for bit.
func SoftmaxXent(logits, labels, dlogits []float32, batch, classes int) float32 {
	parts := make([]float64, (batch+xentBlock-1)/xentBlock)
	invBatch := float32(1 / float64(batch))
	ParallelFor(len(parts), max(1, rowGrain(classes)/xentBlock), func(lo, hi int) {
		var scratch []float32
		if dlogits == nil {
			scratch = make([]float32, classes)
		}
		for b := lo; b < hi; b++ {
			var loss float64
			for r := b * xentBlock; r < min((b+1)*xentBlock, batch); r++ {
				z := logits[r*classes : (r+1)*classes]
				t := labels[r*classes : (r+1)*classes]
				e := scratch
				if dlogits != nil {
					e = dlogits[r*classes : (r+1)*classes]
				}
				if allZero(t) {
					if dlogits != nil {
						clear(e)
					}
					continue
				}
				m := rowMax(z)
				expShift(z, e, m)
				s := sum64(e)
				lse := float64(m) + math.Log(s)
				for j, v := range t {
					if v != 0 {
						loss -= float64(v) * (float64(z[j]) - lse)
					}
				}
				if dlogits != nil {
					inv := float32(1 / s)
					for j, v := range t {
						e[j] = (e[j]*inv - v) * invBatch
					}
				}
			}
			parts[b] = loss
		}
	})
	var loss float64
	for _, v := range parts {
		loss += v
	}
	return float32(loss / float64(batch))
}

// allZero reports whether every value of v is 0: SoftmaxXent's ignored row.
func allZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// xentBlock is how many rows of SoftmaxXent's loss one partial sum holds.
const xentBlock = 16

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
