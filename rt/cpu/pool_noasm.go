//go:build !amd64 || purego

package cpu

// archMaxPool2x2 returns nil: this GOARCH (or a purego build) runs the Go
// loops of the 2×2 max pool.
func archMaxPool2x2(path string) *maxPool2x2Kernels { return nil }

// archMaxPool3s2Row returns nil: this GOARCH (or a purego build) runs the
// Go loops of the 3-column stride-2 max pool.
func archMaxPool3s2Row(path string) func(r0, r1, r2, y *float32, n int) { return nil }

// archPlaneMeans returns nil: this GOARCH (or a purego build) sums planes
// with sum32.
func archPlaneMeans(path string) func(x, y *float32, planes, n int, scale float32) { return nil }
