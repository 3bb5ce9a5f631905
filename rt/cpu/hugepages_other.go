//go:build !linux

package cpu

// Floats makes n zeroed float32s (on Linux, large ones ask for huge pages).
func Floats(n int) []float32 { return make([]float32, n) }
