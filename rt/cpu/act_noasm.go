//go:build !amd64 || purego

package cpu

// archEpilogue returns nil: this GOARCH (or a purego build) runs the Go
// loops of the epilogues.
func archEpilogue(path string) *epilogueKernels { return nil }
