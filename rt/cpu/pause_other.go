//go:build !amd64 || purego

package cpu

// spinPause does nothing where PAUSE is not at hand: the polling loops
// that call it then poll back to back.
func spinPause() {}
