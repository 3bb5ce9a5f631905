//go:build !amd64 || purego

package cpu

// No bfloat16 kernel on this GOARCH (or in a purego build): dotBF16Go
// does it all.
var dotBF16Supported, dotBF16DP, dotBF16Widen = false, false, false

// dot4BF16 is never called where dotBF16Supported is false.
func dot4BF16(x, w []uint16, ldw, n int, out *[4]float32) {
	panic("cpu: dot4BF16 without a vector kernel")
}
