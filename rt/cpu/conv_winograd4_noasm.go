//go:build !amd64 || purego

package cpu

// archWinogradF4 returns nil: this GOARCH (or a purego build) runs the Go
// passes of F(4×4,5×5).
func archWinogradF4(path string) *winogradKernels { return nil }
