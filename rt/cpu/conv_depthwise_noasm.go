//go:build !amd64 || purego

package cpu

// archDepthwise returns nil: this GOARCH (or a purego build) runs the Go
// depthwise kernel.
func archDepthwise(path string) *depthwiseKernels { return nil }
