package cpu

// SliceFwd writes y [outer, n, inner] = positions start to start+n−1 of
// the middle axis of x [outer, total, inner]: a slice of one axis of a
// tensor viewed with the axes before it merged into outer and those after
// it into inner.
func SliceFwd(x, y []float32, outer, total, inner, start, n int) {
	row, part := total*inner, n*inner
	if outer*part == 0 {
		return
	}
	_, _ = x[outer*row-1], y[outer*part-1]
	ParallelFor(outer, rowGrain(part), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			copy(y[o*part:(o+1)*part], x[o*row+start*inner:o*row+start*inner+part])
		}
	})
}

// SliceBwd writes dx [outer, total, inner]: dy [outer, n, inner] at
// positions start to start+n−1 of the middle axis, zero elsewhere (every
// element is written).
func SliceBwd(dy, dx []float32, outer, total, inner, start, n int) {
	row, part := total*inner, n*inner
	if outer*row == 0 {
		return
	}
	_, _ = dx[outer*row-1], dy[max(outer*part-1, 0)]
	ParallelFor(outer, rowGrain(row), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			r := dx[o*row : (o+1)*row]
			clear(r[:start*inner])
			copy(r[start*inner:start*inner+part], dy[o*part:(o+1)*part])
			clear(r[start*inner+part:])
		}
	})
}
