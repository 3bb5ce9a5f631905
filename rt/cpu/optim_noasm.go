//go:build !amd64 || purego

package cpu

// adamVectorSupported is false: this GOARCH (or a purego build) has no
// vector Adam, and adamStepGo does all the work.
var adamVectorSupported = false

func adamStepVector(param, grad, m, v []float32, k *adamConsts) int { return 0 }
