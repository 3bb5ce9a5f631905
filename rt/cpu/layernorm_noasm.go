//go:build !amd64 || purego

package cpu

// archLayerNorm returns nil: this GOARCH (or a purego build) runs the Go
// loops of the layer-norm backward.
func archLayerNorm(path string) *layerNormKernels { return nil }
