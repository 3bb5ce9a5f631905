//go:build !purego

package cpu

// dropoutAVX512 is dropoutMask's loop over n elements:
//
//	for i := range n {
//		m := keep
//		if DropoutUniform(seed, step, base+uint32(i)) < rate { m = 0 }
//		mask[i], y[i] = m, x[i]*m
//	}
//
//go:noescape
func dropoutAVX512(x, y, mask *float32, n int, base, seed, step uint32, rate, keep float32)
