//go:build !linux && !darwin

package cpu

import "testing"

// guardedFloats returns an ordinary slice where no guard page is set up.
func guardedFloats(_ *testing.T, n int) []float32 { return make([]float32, n) }

const guardedFloatsWork = false
