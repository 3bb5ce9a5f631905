//go:build !amd64 || purego

package cpu

// archWinogradF3 returns nil: this GOARCH (or a purego build) runs the Go
// transforms of F(4×4,3×3).
func archWinogradF3(path string) *winogradKernels { return nil }
