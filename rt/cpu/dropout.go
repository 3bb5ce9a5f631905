package cpu

// DropoutFwd writes y = x·mask in training, where mask holds 0 with
// probability rate and 1/(1-rate) otherwise (inverted dropout, as PyTorch,
// so evaluation needs no rescaling); in evaluation y = x and mask is left
// alone. A rate of 1 or more drops everything.
//
// Element i is dropped when DropoutUniform(seed, step, i) < rate, seed
// and step being one draw of rng per call (none at rate 0): a counter-based
// draw, so the elements split over threads and vector lanes with the same
// mask, and rng advances by one whatever the size.
func DropoutFwd(x, y, mask []float32, rate float32, rng *Rand, training bool) {
	n := len(y)
	if !training {
		copy(y, x[:n])
		return
	}
	keep := float32(0)
	if rate < 1 {
		keep = 1 / (1 - rate)
	}
	x, mask = x[:n], mask[:n]
	if rate <= 0 {
		ParallelFor(n, 1<<15, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				mask[i] = keep
				y[i] = x[i] * keep
			}
		})
		return
	}
	bits := rng.Uint64()
	seed, step := uint32(bits), uint32(bits>>32)
	ParallelFor(n, 1<<14, func(lo, hi int) {
		dropoutMask(x[lo:hi], y[lo:hi], mask[lo:hi], uint32(lo), seed, step, rate, keep)
	})
}

// dropoutMask is DropoutFwd's loop over elements base, base+1, … of x.
func dropoutMask(x, y, mask []float32, base, seed, step uint32, rate, keep float32) {
	y, mask = y[:len(x)], mask[:len(x)]
	done := 0
	if ek := epilogue(); ek != nil && ek.dropout != nil && len(x) > 0 {
		done = len(x)
		ek.dropout(&x[0], &y[0], &mask[0], done, base, seed, step, rate, keep)
	}
	for i := done; i < len(x); i++ {
		m := keep
		if DropoutUniform(seed, step, base+uint32(i)) < rate {
			m = 0
		}
		mask[i] = m
		y[i] = x[i] * m
	}
}

// DropoutUniform is the counter-based dropout draw of every program, CPU
// and GPU: a uniform float32 in [0, 1), a multiple of 2⁻²⁴, from (seed,
// step, element index) with no state, so that threads, vector lanes and a
// GPU thread per element draw the same mask. It is two rounds of the
// "lowbias32" integer finaliser (Chris Wellons' hash prospector);
// rt/gpuhost.DropoutUniform is this function, and emit/gpu generates it as
// kernel code (hashUniformStmts).
func DropoutUniform(seed, step, index uint32) float32 {
	h := mix32(index*0x9E3779B9 ^ seed)
	h = mix32(h ^ step*0x85EBCA6B)
	return float32(h>>8) * (1.0 / (1 << 24))
}

// mix32 is the "lowbias32" integer finaliser: xor-shift, multiply,
// xor-shift, multiply, xor-shift.
func mix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x7FEB352D
	h ^= h >> 15
	h *= 0x846CA68B
	h ^= h >> 16
	return h
}

// DropoutBwd writes dx = dy·mask; dx may alias dy.
func DropoutBwd(mask, dy, dx []float32) {
	n := len(dx)
	mask, dy = mask[:n], dy[:n]
	ParallelFor(n, 1<<15, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dx[i] = dy[i] * mask[i]
		}
	})
}
