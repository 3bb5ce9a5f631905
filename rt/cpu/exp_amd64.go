//go:build !purego

package cpu

// expShiftAVX512 is expShift's loop over n elements:
//
//	for i := range n { y[i] = expCore(x[i] - m) }
//
//go:noescape
func expShiftAVX512(x, y *float32, n int, m float32)
