package cpu

import (
	"fmt"
	"math"
)

// BinOp names an element-wise binary operation with broadcasting.
type BinOp uint8

// Binary operations.
const (
	BAdd BinOp = iota
	BSub
	BMul
	BDiv
)

// maxRank is the largest tensor rank the broadcasting kernels take; the
// iteration state lives in fixed arrays so a call allocates nothing.
const maxRank = 8

// broadcast is the iteration space of y = a ∘ b after merging adjacent axes
// that broadcast alike: dims of y, and the element strides of a and b along
// them (0 along an axis where the operand has size 1).
type broadcast struct {
	rank       int
	dims       [maxRank]int
	aStr, bStr [maxRank]int
}

// newBroadcast builds the iteration space from full shapes of equal rank.
func newBroadcast(aShape, bShape, yShape []int) broadcast {
	r := len(yShape)
	if r > maxRank || len(aShape) != r || len(bShape) != r {
		panic(fmt.Sprintf("cpu: broadcast of shapes %v and %v to %v: ranks must be equal and at most %d", aShape, bShape, yShape, maxRank))
	}
	var bc broadcast
	// Natural strides of a and b.
	var as, bs [maxRank]int
	sa, sb := 1, 1
	for d := r - 1; d >= 0; d-- {
		if aShape[d] != 1 {
			as[d] = sa
		}
		if bShape[d] != 1 {
			bs[d] = sb
		}
		sa *= aShape[d]
		sb *= bShape[d]
	}
	for d := 0; d < r; d++ {
		if yShape[d] == 1 {
			continue
		}
		if k := bc.rank - 1; k >= 0 &&
			(as[d] == 0) == (bc.aStr[k] == 0) && (bs[d] == 0) == (bc.bStr[k] == 0) &&
			(as[d] == 0 || bc.aStr[k] == as[d]*yShape[d]) &&
			(bs[d] == 0 || bc.bStr[k] == bs[d]*yShape[d]) {
			// Axis d continues axis k contiguously in all three: merge.
			bc.dims[k] *= yShape[d]
			bc.aStr[k], bc.bStr[k] = as[d], bs[d]
			continue
		}
		bc.dims[bc.rank], bc.aStr[bc.rank], bc.bStr[bc.rank] = yShape[d], as[d], bs[d]
		bc.rank++
	}
	if bc.rank == 0 {
		bc.rank, bc.dims[0] = 1, 1
	}
	return bc
}

// inner is the length of the innermost (merged) axis.
func (bc *broadcast) inner() int { return bc.dims[bc.rank-1] }

// rows is the number of inner rows.
func (bc *broadcast) rows() int {
	n := 1
	for d := 0; d < bc.rank-1; d++ {
		n *= bc.dims[d]
	}
	return n
}

// offsets returns where inner row number row starts in a and b.
func (bc *broadcast) offsets(row int) (aOff, bOff int) {
	for d := bc.rank - 2; d >= 0; d-- {
		i := row % bc.dims[d]
		row /= bc.dims[d]
		aOff += i * bc.aStr[d]
		bOff += i * bc.bStr[d]
	}
	return aOff, bOff
}

// BinaryFwd writes y = a ∘ b with numpy broadcasting; the shapes are full
// shapes (batch included) of equal rank, the caller padding with 1s.
// Operands of one shape are split among the threads by elements; the rows
// where an operand is one value (a per-channel scale or shift over a plane)
// and those where both run contiguously take loops with no index
// arithmetic.
func BinaryFwd(op BinOp, a, b, y []float32, aShape, bShape, yShape []int) {
	bc := newBroadcast(aShape, bShape, yShape)
	n := bc.inner()
	sa, sb := bc.aStr[bc.rank-1], bc.bStr[bc.rank-1]
	if bc.rank == 1 && sa == 1 && sb == 1 {
		ParallelFor(n, 1<<14, func(lo, hi int) { binaryRow(op, a[lo:hi], b[lo:hi], y[lo:hi]) })
		return
	}
	ParallelFor(bc.rows(), rowGrain(n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			ao, bo := bc.offsets(r)
			yr := y[r*n : (r+1)*n]
			switch {
			case sa == 1 && sb == 1:
				binaryRow(op, a[ao:ao+n], b[bo:bo+n], yr)
			case sa == 0 && sb == 1:
				scalarRow(op, a[ao], b[bo:bo+n], yr)
			case sa == 1 && sb == 0:
				rowScalar(op, a[ao:ao+n], b[bo], yr)
			default:
				for i := range yr {
					yr[i] = binaryOne(op, a[ao+i*sa], b[bo+i*sb])
				}
			}
		}
	})
}

// binaryOne returns a ∘ b.
func binaryOne(op BinOp, a, b float32) float32 {
	switch op {
	case BAdd:
		return a + b
	case BSub:
		return a - b
	case BMul:
		return a * b
	}
	return a / b
}

// binaryKernels are one instruction set's element-wise binary rows, each
// the same IEEE operation a lane as its Go loop (so the same bits).
type binaryKernels struct {
	// row sets y[i] = a[i] ∘ b[i] for i < n, ∘ the BinOp op.
	row func(op int, a, b, y *float32, n int)
	// rowScalar sets y[i] = a[i] ∘ s for i < n.
	rowScalar func(op int, a *float32, s float32, y *float32, n int)
}

// binaryFor returns the binary rows that go with GEMM path p, or nil
// for the Go loops, so that forcing a path in tests forces them.
func binaryFor(p *gemmPath) *binaryKernels { return archBinary(p.name) }

// binaryRow writes y[i] = a[i] ∘ b[i]; a and b are at least as long as y.
// With AVX-512 a vector of 16 a step (residual additions and gating
// products over whole activations: 4% of regnet_y_400mf's batch-1
// inference in the Go loop).
func binaryRow(op BinOp, a, b, y []float32) {
	a, b = a[:len(y)], b[:len(y)]
	if k := binaryFor(activeGemmPath.Load()); k != nil && len(y) > 0 {
		k.row(int(op), &a[0], &b[0], &y[0], len(y))
		return
	}
	binaryRowGo(op, a, b, y)
}

// binaryRowGo is binaryRow in Go.
func binaryRowGo(op BinOp, a, b, y []float32) {
	a, b = a[:len(y)], b[:len(y)]
	switch op {
	case BAdd:
		for i := range y {
			y[i] = a[i] + b[i]
		}
	case BSub:
		for i := range y {
			y[i] = a[i] - b[i]
		}
	case BMul:
		for i := range y {
			y[i] = a[i] * b[i]
		}
	case BDiv:
		for i := range y {
			y[i] = a[i] / b[i]
		}
	}
}

// scalarRow writes y[i] = s ∘ b[i]; b is at least as long as y. Sums and
// products, which commute bit for bit, go to rowScalar's vectors (a
// squeeze-and-excitation gate scales each plane by its channel's value).
func scalarRow(op BinOp, s float32, b, y []float32) {
	b = b[:len(y)]
	if op == BAdd || op == BMul {
		if k := binaryFor(activeGemmPath.Load()); k != nil && len(y) > 0 {
			k.rowScalar(int(op), &b[0], s, &y[0], len(y))
			return
		}
	}
	switch op {
	case BAdd:
		for i := range y {
			y[i] = s + b[i]
		}
	case BSub:
		for i := range y {
			y[i] = s - b[i]
		}
	case BMul:
		for i := range y {
			y[i] = s * b[i]
		}
	case BDiv:
		for i := range y {
			y[i] = s / b[i]
		}
	}
}

// rowScalar writes y[i] = a[i] ∘ s; a is at least as long as y.
func rowScalar(op BinOp, a []float32, s float32, y []float32) {
	a = a[:len(y)]
	if k := binaryFor(activeGemmPath.Load()); k != nil && len(y) > 0 {
		k.rowScalar(int(op), &a[0], s, &y[0], len(y))
		return
	}
	rowScalarGo(op, a, s, y)
}

// rowScalarGo is rowScalar in Go.
func rowScalarGo(op BinOp, a []float32, s float32, y []float32) {
	a = a[:len(y)]
	switch op {
	case BAdd:
		for i := range y {
			y[i] = a[i] + s
		}
	case BSub:
		for i := range y {
			y[i] = a[i] - s
		}
	case BMul:
		for i := range y {
			y[i] = a[i] * s
		}
	case BDiv:
		// Division by s, not a product by 1/s: the same bits as the
		// general loop.
		for i := range y {
			y[i] = a[i] / s
		}
	}
}

// BinaryBwd writes the gradients of y = a ∘ b: da and db are dy times the
// partial derivative, summed over the axes along which the operand was
// broadcast. Either may be nil.
func BinaryBwd(op BinOp, a, b, dy, da, db []float32, aShape, bShape, yShape []int) {
	if op == BAdd && sameShape(aShape, yShape) && sameShape(bShape, yShape) {
		// A residual connection's backward: both gradients are dy.
		n := size(yShape)
		ParallelFor(n, 1<<16, func(lo, hi int) {
			if da != nil {
				copy(da[lo:hi], dy[lo:hi])
			}
			if db != nil {
				copy(db[lo:hi], dy[lo:hi])
			}
		})
		return
	}
	bc := newBroadcast(aShape, bShape, yShape)
	if da != nil {
		binaryGrad(&bc, op, true, a, b, dy, da, size(aShape) != size(yShape))
	}
	if db != nil {
		binaryGrad(&bc, op, false, b, a, dy, db, size(bShape) != size(yShape))
	}
}

// binaryGrad writes the gradient of one operand (the first when first is
// true); self is that operand and other the other one, needed for BMul
// and BDiv (∂(a/b)/∂a = 1/b, ∂(a/b)/∂b = −a/b²). A reduced gradient (the
// operand was broadcast) is accumulated serially, since many rows of dy
// add into each of its elements, unless the operand is broadcast along the
// inner axis alone (a value per row: a per-channel scale of [N,C,1,1] over
// [N,C,H,W]): then each row sums into an element of its own, and the rows
// are split among the threads, each summed as serially.
func binaryGrad(bc *broadcast, op BinOp, first bool, self, other, dy, dz []float32, reduced bool) {
	n := bc.inner()
	sa, sb := bc.aStr[bc.rank-1], bc.bStr[bc.rank-1]
	if !first {
		sa, sb = sb, sa
	}
	sign := float32(1)
	if op == BSub && !first {
		sign = -1
	}
	rowsFn := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			zo, oo := bc.offsets(r)
			if !first {
				zo, oo = oo, zo
			}
			dr := dy[r*n : (r+1)*n]
			if gradRow(op, sign, dr, other, oo, sb, dz, zo, sa, reduced) {
				continue
			}
			for i, g := range dr {
				switch {
				case op == BMul:
					g *= other[oo+i*sb]
				case op == BDiv && first:
					g /= other[oo+i*sb]
				case op == BDiv:
					s := self[zo+i*sa]
					g *= -other[oo+i*sb] / (s * s)
				default:
					g *= sign
				}
				if reduced {
					dz[zo+i*sa] += g
				} else {
					dz[zo+i*sa] = g
				}
			}
		}
	}
	if reduced {
		clear(dz)
		if !ownRows(bc, first) {
			rowsFn(0, bc.rows())
			return
		}
	}
	ParallelFor(bc.rows(), rowGrain(n), rowsFn)
}

// ownRows reports whether each row of bc reads its own element of the
// first operand (the second when not first) and no other: the operand's
// stride is 0 along the inner axis and not 0 along every outer one, so
// the outer axes are all of its axes longer than 1.
func ownRows(bc *broadcast, first bool) bool {
	str := &bc.aStr
	if !first {
		str = &bc.bStr
	}
	if str[bc.rank-1] != 0 {
		return false
	}
	for d := 0; d < bc.rank-1; d++ {
		if str[d] == 0 {
			return false
		}
	}
	return true
}

// gradRow is binaryGrad's work on one row of dy for the rows efficient
// networks' element-wise steps make, in loops with no index arithmetic:
// a product's or a sum's gradient where self runs contiguously and is not
// reduced (dz = dy·other, other contiguous or one value: x·sigmoid(x),
// a per-channel scale), and where self is one value summed over the row
// (the scale's own gradient, Σ dy·other, or a per-channel shift's, Σ ±dy),
// accumulated in the general loop's order so that the bits are its. It
// reports false for the rows it leaves to that loop.
func gradRow(op BinOp, sign float32, dy, other []float32, oo, so int, dz []float32, zo, sz int, reduced bool) bool {
	n := len(dy)
	switch {
	case op == BMul && sz == 1 && !reduced && so == 1:
		o, d := other[oo:oo+n], dz[zo:zo+n]
		for i, g := range dy {
			d[i] = g * o[i]
		}
	case op == BMul && sz == 1 && !reduced && so == 0:
		o, d := other[oo], dz[zo:zo+n]
		for i, g := range dy {
			d[i] = g * o
		}
	case op == BMul && sz == 0 && reduced && so == 1:
		o, acc := other[oo:oo+n], dz[zo]
		for i, g := range dy {
			acc += float32(g * o[i])
		}
		dz[zo] = acc
	case (op == BAdd || op == BSub) && sz == 1 && !reduced:
		d := dz[zo : zo+n]
		for i, g := range dy {
			d[i] = g * sign
		}
	case (op == BAdd || op == BSub) && sz == 0 && reduced:
		acc := dz[zo]
		for _, g := range dy {
			acc += float32(g * sign)
		}
		dz[zo] = acc
	default:
		return false
	}
	return true
}

// size is the number of elements of a shape.
func size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// sameShape reports whether shapes a and b are equal.
func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// BinaryReLUFwd is BinaryFwd followed by a ReLU fused into it (the
// planner's fuse_sum_act.go): y = max(a ∘ b, 0). Operands of one shape
// (a residual sum) go in blocks, each clamped while it is in cache by the
// lone ReLU's clamp (clampFloat32), where the sum's step and the ReLU's
// step each passed over the whole of y.
func BinaryReLUFwd(op BinOp, a, b, y []float32, aShape, bShape, yShape []int) {
	if bc := newBroadcast(aShape, bShape, yShape); bc.rank == 1 && bc.aStr[0] == 1 && bc.bStr[0] == 1 {
		inf := float32(math.Inf(1))
		ParallelFor(bc.inner(), 1<<14, func(lo, hi int) {
			binaryRow(op, a[lo:hi], b[lo:hi], y[lo:hi])
			clampFloat32(y[lo:hi], y[lo:hi], 0, inf)
		})
		return
	}
	BinaryFwd(op, a, b, y, aShape, bShape, yShape)
	ParallelFor(len(y), 1<<14, func(lo, hi int) {
		for i, v := range y[lo:hi] {
			if v < 0 {
				y[lo+i] = 0
			}
		}
	})
}
