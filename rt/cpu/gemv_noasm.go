//go:build !amd64 || purego

package cpu

// dotVectorSupported and dot4Supported are false: no vector dot products
// on this GOARCH (or in a purego build); dotGo does it all.
var dotVectorSupported, dot4Supported = false, false

func dotVector(x, y []float32) (float32, int) { return 0, 0 }

func dot4Vector(x, w []float32, ldw int, out *[4]float32) int { return 0 }
