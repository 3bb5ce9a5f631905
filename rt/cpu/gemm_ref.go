package cpu

// SgemmRef computes C = alpha·op(A)·op(B) + beta·C on row-major matrices,
// where op(X) is X or its transpose. op(A) is m×k, op(B) is k×n, C is m×n;
// lda, ldb and ldc are the row strides of A, B and C as stored.
//
// It is the plain reference every fast GEMM is tested against.
func SgemmRef(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var sum float32
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				sum += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * sum
			} else {
				c[i*ldc+j] = alpha*sum + beta*c[i*ldc+j]
			}
		}
	}
}
