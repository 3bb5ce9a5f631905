//go:build !amd64 || purego

package cpu

// archConvDirect returns nil: this GOARCH (or a purego build) runs the Go
// direct-convolution kernels.
func archConvDirect(path string) *convDirectKernels { return nil }
