//go:build !amd64 || purego

package cpu

// archBinary returns nil: this GOARCH (or a purego build) runs binaryRow's
// and rowScalar's Go loops.
func archBinary(path string) *binaryKernels { return nil }
