//go:build !amd64 || purego

package cpu

// amxGemm is the AMX product; there is none off amd64.
func amxGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, keepB bool) bool {
	return false
}

// amxGemmAdd is C += A·B on AMX tiles; there are none off amd64.
func amxGemmAdd(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	return false
}

// amxGemmRows is amxGemm with C's rows handed to rows as they are final;
// there is none off amd64.
func amxGemmRows(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, keepB bool, rows func(i0, i1 int)) bool {
	return false
}

// BF16Native reports whether BF16 products run on Intel AMX tiles here;
// where they don't, they run with VDPBF16PS where the CPU has AVX512-BF16
// (gemm_bf16.go, the same numbers), else in float32 on rounded operands.
func BF16Native() bool { return false }

// newAMXLocal returns nil: there are no tiles off amd64.
func newAMXLocal() *amxLocal { return nil }

// packB and mulPacked are the AMX products of one thread; there are none
// off amd64 (newAMXLocal returns nil there).
func (s *amxLocal) packB(p *amxPackedB, transB bool, b []float32, ldb, k, n int) {
	panic("cpu: AMX products off amd64")
}

func (s *amxLocal) mulPacked(transA bool, m, n, k int, a []float32, lda int, p *amxPackedB, acc bool, c []float32, ldc int) {
	panic("cpu: AMX products off amd64")
}

// roundRow writes RoundBF16 of each of src into dst (as long).
func roundRow(dst, src []float32) {
	for j, v := range src {
		dst[j] = RoundBF16(v)
	}
}
