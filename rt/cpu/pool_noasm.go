//go:build !amd64 || purego

package cpu

// archMaxPool2x2 returns nil: this GOARCH (or a purego build) runs the Go
// loops of the 2×2 max pool.
func archMaxPool2x2(path string) *maxPool2x2Kernels { return nil }
