//go:build !purego

package cpu

// expShiftSumAVX512 is expShiftSum's loop over n elements:
//
//	for i := range n { y[i] = expCore(x[i] - m) }
//
// returning the sum of y, in 16 lanes added at the end.
//
//go:noescape
func expShiftSumAVX512(x, y *float32, n int, m float32) float32

// expShiftAVX512 is expShift's loop: expShiftSumAVX512's, its sum unused
// (a vector addition a step, beside the exponential's twenty).
func expShiftAVX512(x, y *float32, n int, m float32) { expShiftSumAVX512(x, y, n, m) }

// sigmoidAVX512 is sigmoidFwd's loop over n elements (sigmoid.go):
//
//	for i := range n { y[i] = sigmoidCore(x[i]) }
//
//go:noescape
func sigmoidAVX512(x, y *float32, n int)

// tanhAVX512 is tanhFwd's loop over n elements (sigmoid.go):
//
//	for i := range n { y[i] = tanhCore(x[i]) }
//
//go:noescape
func tanhAVX512(x, y *float32, n int)

// siluAVX512 is siluFwd's loop over n elements (sigmoid.go):
//
//	for i := range n { y[i] = x[i] * sigmoidCore(x[i]) }
//
//go:noescape
func siluAVX512(x, y *float32, n int)

// siluBwdAVX512 is siluBwd's loop over n elements (sigmoid.go):
//
//	for i := range n { s, c := sigmoidPair(x[i]); dx[i] = dy[i] * (s * (1 + x[i]*c)) }
//
//go:noescape
func siluBwdAVX512(x, dy, dx *float32, n int)
