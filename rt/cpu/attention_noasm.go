//go:build !amd64 || purego

package cpu

// archAttention returns nil: this GOARCH (or a purego build) runs the Go
// loops of the fused attention.
func archAttention(path string) *attentionKernels { return nil }
