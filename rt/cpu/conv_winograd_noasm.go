//go:build !amd64 || purego

package cpu

// archWinograd returns nil: this GOARCH (or a purego build) runs the Go
// Winograd transforms.
func archWinograd(path string) *winogradKernels { return nil }
