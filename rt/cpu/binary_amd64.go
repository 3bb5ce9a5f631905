//go:build !purego

package cpu

// archBinary returns the assembly element-wise binary rows that go with
// the amd64 GEMM path of that name, or nil for the Go loops.
func archBinary(path string) *binaryKernels {
	if path == "avx512" {
		return binaryAVX512
	}
	return nil
}

var binaryAVX512 = &binaryKernels{row: binaryRowAVX512, rowScalar: rowScalarAVX512}

// binaryRowAVX512 is binaryKernels.row: y[i] = a[i] ∘ b[i] for i < n.
//
//go:noescape
func binaryRowAVX512(op int, a, b, y *float32, n int)

// rowScalarAVX512 is binaryKernels.rowScalar: y[i] = a[i] ∘ s for i < n.
//
//go:noescape
func rowScalarAVX512(op int, a *float32, s float32, y *float32, n int)
