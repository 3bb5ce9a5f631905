package cpu

// ReduceMeanFwd writes y = the mean of x over the axes along which yShape
// is 1 and xShape is not. Both are full shapes (batch included) of equal
// rank: y keeps the reduced axes with size 1 (a view drops them when the
// spec asks for no kept dimensions).
func ReduceMeanFwd(x, y []float32, xShape, yShape []int) {
	bc := newBroadcast(xShape, yShape, xShape)
	n := bc.inner()
	sx, sy := bc.aStr[bc.rank-1], bc.bStr[bc.rank-1]
	scale := float32(size(yShape)) / float32(size(xShape))
	if sy == 0 {
		// The innermost axis is reduced: rows of x each add into one
		// element of y, in float64, in parallel over the rows only when
		// no two rows share an element (a reduction of the last axes).
		sum := func(r int) float64 {
			xo, _ := bc.offsets(r)
			var s float64
			for i := 0; i < n; i++ {
				s += float64(x[xo+i*sx])
			}
			return s
		}
		if bc.rows() == len(y) {
			ParallelFor(bc.rows(), rowGrain(n), func(lo, hi int) {
				for r := lo; r < hi; r++ {
					_, yo := bc.offsets(r)
					y[yo] = float32(sum(r) * float64(scale))
				}
			})
			return
		}
		clear(y)
		for r := 0; r < bc.rows(); r++ {
			_, yo := bc.offsets(r)
			y[yo] += float32(sum(r))
		}
		scaleBy(y, scale)
		return
	}
	// Reduced axes further out: add rows of x into rows of y (in float32,
	// so that a step allocates nothing), then scale.
	clear(y)
	for r := 0; r < bc.rows(); r++ {
		xo, yo := bc.offsets(r)
		for i := 0; i < n; i++ {
			y[yo+i*sy] += x[xo+i*sx]
		}
	}
	scaleBy(y, scale)
}

func scaleBy(y []float32, s float32) {
	for i := range y {
		y[i] *= s
	}
}

// ReduceMeanBwd writes the gradient of ReduceMeanFwd: every element of x
// gets the gradient of its mean divided by the number of elements averaged.
func ReduceMeanBwd(dy, dx []float32, xShape, yShape []int) {
	bc := newBroadcast(xShape, yShape, xShape)
	n := bc.inner()
	sx, sy := bc.aStr[bc.rank-1], bc.bStr[bc.rank-1]
	scale := float32(size(yShape)) / float32(size(xShape))
	ParallelFor(bc.rows(), rowGrain(n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xo, yo := bc.offsets(r)
			for i := 0; i < n; i++ {
				dx[xo+i*sx] = dy[yo+i*sy] * scale
			}
		}
	})
}
