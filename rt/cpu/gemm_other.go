//go:build (!amd64 && !arm64) || purego

package cpu

// archGemmPaths reports no SIMD path: this GOARCH (or a purego build) runs
// the pure-Go kernel.
func archGemmPaths() []*gemmPath { return nil }
