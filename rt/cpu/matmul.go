package cpu

import "fmt"

// matmulDims splits full shapes [..., M, K]·[..., K, N] = [..., M, N] into
// the matrix sizes and the broadcast over the leading (batch) axes, whose
// strides count whole matrices.
func matmulDims(aShape, bShape, yShape []int) (m, k, n int, bc broadcast, batches int) {
	r := len(yShape)
	if r < 2 || len(aShape) != r || len(bShape) != r {
		panic(fmt.Sprintf("cpu: matmul of shapes %v and %v to %v: ranks must be equal and at least 2", aShape, bShape, yShape))
	}
	m, k, n = aShape[r-2], aShape[r-1], bShape[r-1]
	bc = newBroadcast(aShape[:r-2], bShape[:r-2], yShape[:r-2])
	return m, k, n, bc, size(yShape[:r-2])
}

// at returns the offsets in a and b (in the units of the strides) of
// element idx of the broadcast iteration space.
func (bc *broadcast) at(idx int) (aOff, bOff int) {
	inner := bc.inner()
	aOff, bOff = bc.offsets(idx / inner)
	i := idx % inner
	return aOff + i*bc.aStr[bc.rank-1], bOff + i*bc.bStr[bc.rank-1]
}

// MatMulFwd writes y = a·b for each matrix of the leading axes, which
// broadcast numpy-style; shapes are full shapes of equal rank.
func MatMulFwd(a, b, y []float32, aShape, bShape, yShape []int) {
	m, k, n, bc, batches := matmulDims(aShape, bShape, yShape)
	ParallelFor(batches, 1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			ai, bi := bc.at(t)
			Sgemm(false, false, m, n, k, 1, a[ai*m*k:], k, b[bi*k*n:], n, 0, y[t*m*n:], n)
		}
	})
}

// MatMulBwd writes da = dy·bᵀ and db = aᵀ·dy per matrix, summed over the
// leading axes along which the operand was broadcast. da or db may be nil.
func MatMulBwd(a, b, dy, da, db []float32, aShape, bShape, yShape []int) {
	m, k, n, bc, batches := matmulDims(aShape, bShape, yShape)
	if da != nil {
		if size(aShape) == batches*m*k {
			ParallelFor(batches, 1, func(lo, hi int) {
				for t := lo; t < hi; t++ {
					_, bi := bc.at(t)
					Sgemm(false, true, m, k, n, 1, dy[t*m*n:], n, b[bi*k*n:], n, 0, da[t*m*k:], k)
				}
			})
		} else {
			clear(da)
			for t := 0; t < batches; t++ {
				ai, bi := bc.at(t)
				Sgemm(false, true, m, k, n, 1, dy[t*m*n:], n, b[bi*k*n:], n, 1, da[ai*m*k:], k)
			}
		}
	}
	if db != nil {
		if size(bShape) == batches*k*n {
			ParallelFor(batches, 1, func(lo, hi int) {
				for t := lo; t < hi; t++ {
					ai, _ := bc.at(t)
					Sgemm(true, false, k, n, m, 1, a[ai*m*k:], k, dy[t*m*n:], n, 0, db[t*k*n:], n)
				}
			})
		} else {
			clear(db)
			for t := 0; t < batches; t++ {
				ai, bi := bc.at(t)
				Sgemm(true, false, k, n, m, 1, a[ai*m*k:], k, dy[t*m*n:], n, 1, db[bi*k*n:], n)
			}
		}
	}
}

// Transpose writes y = x with its axes permuted: axis i of y is axis
// perm[i] of x, whose full shape is shape.
func Transpose(x, y []float32, shape, perm []int) {
	r := len(shape)
	if r > maxRank || len(perm) != r {
		panic(fmt.Sprintf("cpu: transpose of shape %v by %v: perm must match the rank, at most %d", shape, perm, maxRank))
	}
	var xStr, yDims, yXStr [maxRank]int
	s := 1
	for d := r - 1; d >= 0; d-- {
		xStr[d] = s
		s *= shape[d]
	}
	for i, p := range perm {
		yDims[i], yXStr[i] = shape[p], xStr[p]
	}
	if r == 0 {
		copy(y, x[:1])
		return
	}
	inner := yDims[r-1]
	innerStr := yXStr[r-1]
	if innerStr != 1 && inner >= 8 {
		// x's last axis, contiguous, goes to axis e of y: 2-D transposes.
		for e := 0; e < r-1; e++ {
			if yXStr[e] == 1 && yDims[e] >= 8 {
				transposeBlocked(x, y, yDims[:r], yXStr[:r], e)
				return
			}
		}
	}
	rows := s / max(inner, 1)
	ParallelFor(rows, rowGrain(inner), func(lo, hi int) {
		for row := lo; row < hi; row++ {
			off, q := 0, row
			for d := r - 2; d >= 0; d-- {
				off += q % yDims[d] * yXStr[d]
				q /= yDims[d]
			}
			yr := y[row*inner : (row+1)*inner]
			if innerStr == 1 {
				copy(yr, x[off:off+inner])
				continue
			}
			for i := range yr {
				yr[i] = x[off+i*innerStr]
			}
		}
	})
}

// transposeBlocked is Transpose when x's contiguous last axis becomes axis
// e of y (not its last): for each index of y's other axes but the last, a
// 2-D transpose of yDims[e]×inner elements, in 8×8 blocks (the GEMM path's
// vector transpose where it has one), where the element-by-element loop
// read x with a stride per element (attention's kᵀ of [T, heads, d]).
func transposeBlocked(x, y []float32, yDims, yXStr []int, e int) {
	r := len(yDims)
	var yStr [maxRank]int
	s := 1
	for d := r - 1; d >= 0; d-- {
		yStr[d] = s
		s *= yDims[d]
	}
	ne, inner := yDims[e], yDims[r-1]
	innerStr, eStr := yXStr[r-1], yStr[e]
	t8 := activeGemmPath.Load().transpose8
	ParallelFor(s/(ne*inner), rowGrain(ne*inner), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			xoff, yoff, q := 0, 0, o
			for d := r - 2; d >= 0; d-- {
				if d == e {
					continue
				}
				i := q % yDims[d]
				q /= yDims[d]
				xoff += i * yXStr[d]
				yoff += i * yStr[d]
			}
			for i := 0; i < ne; i += 8 {
				for j := 0; j < inner; j += 8 {
					if t8 != nil && i+8 <= ne && j+8 <= inner {
						// The assembly does no bounds checks.
						_ = x[xoff+(j+7)*innerStr+i+7]
						_ = y[yoff+(i+7)*eStr+j+7]
						t8(&x[xoff+j*innerStr+i], innerStr, &y[yoff+i*eStr+j], eStr)
						continue
					}
					for ii := i; ii < min(i+8, ne); ii++ {
						for jj := j; jj < min(j+8, inner); jj++ {
							y[yoff+ii*eStr+jj] = x[xoff+jj*innerStr+ii]
						}
					}
				}
			}
		}
	})
}

// concatGeom returns the number of outer blocks (the product of the axes
// before axis) and the element count after axis, from the first shape.
func concatGeom(shapes [][]int, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for d, v := range shapes[0] {
		if d < axis {
			outer *= v
		} else if d > axis {
			inner *= v
		}
	}
	return outer, inner
}

// ConcatFwd writes y = the xs joined along axis; shapes are the full
// shapes of the xs, equal except along axis.
func ConcatFwd(xs [][]float32, y []float32, shapes [][]int, axis int) {
	outer, inner := concatGeom(shapes, axis)
	rowLen := 0
	for _, s := range shapes {
		rowLen += s[axis] * inner
	}
	ParallelFor(outer, rowGrain(rowLen), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			off := o * rowLen
			for i, x := range xs {
				l := shapes[i][axis] * inner
				copy(y[off:off+l], x[o*l:(o+1)*l])
				off += l
			}
		}
	})
}

// ConcatBwd splits dy along axis back into the inputs' gradients; a nil
// entry of dxs (an input that needs no gradient) is skipped.
func ConcatBwd(dy []float32, dxs [][]float32, shapes [][]int, axis int) {
	outer, inner := concatGeom(shapes, axis)
	rowLen := 0
	for _, s := range shapes {
		rowLen += s[axis] * inner
	}
	ParallelFor(outer, rowGrain(rowLen), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			off := o * rowLen
			for i, dx := range dxs {
				l := shapes[i][axis] * inner
				if dx != nil {
					copy(dx[o*l:(o+1)*l], dy[off:off+l])
				}
				off += l
			}
		}
	})
}
