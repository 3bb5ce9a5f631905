//go:build !purego

package cpu

import "unsafe"

// archGemmPaths reports the arm64 path: NEON is part of every arm64 CPU.
func archGemmPaths() []*gemmPath {
	return []*gemmPath{{name: "neon", mr: 8, nr: 8, kc: 256, mc: 128, nc: 1024, kernel: sgemmKernel8x8}}
}

// sgemmKernel8x8 runs the NEON tile into a local buffer and applies alpha
// and beta in Go, which keeps the assembly to loads and VFMLA.
func sgemmKernel8x8(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	var tile [64]float32
	sgemmKernel8x8NEON(k, a, b, &tile[0], 8)
	mergeTile(tile[:], 8, 8, 8, unsafe.Slice(c, 7*ldc+8), ldc, alpha, beta)
}

//go:noescape
func sgemmKernel8x8NEON(k int, a, b, c *float32, ldc int)
