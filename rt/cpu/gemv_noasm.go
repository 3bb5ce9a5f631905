//go:build !amd64 || purego

package cpu

// dotVectorSupported is false: no vector dot product on this GOARCH (or in
// a purego build); dotGo does it all.
var dotVectorSupported = false

func dotVector(x, y []float32) (float32, int) { return 0, 0 }
