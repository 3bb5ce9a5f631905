//go:build !purego

package cpu

// geluAVX512 is geluFwd's loop over n elements:
//
//	for i := range n { phi, _ := geluCore(x[i]); y[i] = x[i] * phi }
//
//go:noescape
func geluAVX512(x, y *float32, n int)

// geluBwdAVX512 is geluBwd's loop over n elements:
//
//	for i := range n { phi, e := geluCore(x[i]); dx[i] = dy[i] * (phi + x[i]*(e*geluInvSqrt2π)) }
//
//go:noescape
func geluBwdAVX512(x, dy, dx *float32, n int)
