package cpu

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices (see
// SgemmRef for the argument convention). Every kernel of this package that
// multiplies matrices goes through it.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	SgemmRef(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
