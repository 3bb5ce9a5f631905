//go:build !purego

package cpu

// archAttention returns the assembly loops of the fused attention that go
// with the amd64 GEMM path of that name (AVX-512 only), or nil for the Go
// loops.
func archAttention(path string) *attentionKernels {
	if path == "avx512" {
		return attentionAVX512
	}
	return nil
}

var attentionAVX512 = &attentionKernels{ds: attnDsAVX512, rowMax: attnRowMaxAVX512}

// attnDsAVX512 is AttentionBlocksBwd's score-gradient loop over n
// elements (a multiple of 16) of a row, in the same float32 operations
// and order (no FMA):
//
//	for j := range n { ds[j] = scale * p[j] * (mask[j]*ds[j] - dl) }
//
// or, when mask is nil, ds[j] = scale * p[j] * (ds[j] - dl).
//
//go:noescape
func attnDsAVX512(p, ds, mask *float32, n int, scale, dl float32)

// attnRowMaxAVX512 returns the largest of x[0:n] (n a multiple of 16, at
// least 16) by VMAXPS, or a NaN when one of them is a NaN: rowMax's
// answer except perhaps for the sign of a zero one and which NaN it is
// (the caller takes rowMax for those).
//
//go:noescape
func attnRowMaxAVX512(x *float32, n int) float32
