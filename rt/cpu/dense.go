package cpu

// GemmFwd is the dense layer y = act(x·wᵀ + b) in float32: x is [batch,in],
// w is [out,in] (PyTorch's Linear layout, so exported weights load
// unchanged), b is [out] or nil, y is [batch,out]. A batch of one or two
// rows runs as dot products over w's rows (gemv.go) instead of packing w
// for Sgemm. BF16.GemmFwd is the same layer with bfloat16 products.
func GemmFwd(x, w, b, y []float32, batch, in, out int, act Act, alpha float32) {
	FP32.GemmFwd(x, w, b, y, batch, in, out, act, alpha)
}

// GemmBwd is the backward pass of GemmFwd (Precision.GemmBwd).
func GemmBwd(x, w, y, dy, dx, dw, db []float32, batch, in, out int, act Act, alpha float32) {
	FP32.GemmBwd(x, w, y, dy, dx, dw, db, batch, in, out, act, alpha)
}

// sumRows writes into dst[j] the sum over the rows of the [rows,cols]
// matrix m of column j.
func sumRows(m, dst []float32, rows, cols int) {
	k := epilogue()
	if k != nil && rows > 0 {
		_ = m[rows*cols-1] // the assembly does no bounds checks
	}
	ParallelFor(cols, 64, func(lo, hi int) {
		d := dst[lo:hi]
		if k != nil && rows > 0 {
			k.sumRows(&m[lo], &d[0], rows, hi-lo, cols)
			return
		}
		for j := range d {
			d[j] = 0
		}
		for r := 0; r < rows; r++ {
			row := m[r*cols+lo : r*cols+hi]
			for j, v := range row {
				d[j] += v
			}
		}
	})
}

// rowGrain is how many rows of the given length make a piece of work worth a
// goroutine (about 16k elements).
func rowGrain(rowLen int) int {
	if rowLen <= 0 {
		return 1
	}
	return max(1, (16<<10)/rowLen)
}

// Add writes y = a + b element-wise; y may alias a or b. It sums the
// gradient contributions of a value read by several steps.
func Add(a, b, y []float32) {
	n := len(y)
	a, b = a[:n], b[:n]
	ParallelFor(n, 1<<15, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y[i] = a[i] + b[i]
		}
	})
}
