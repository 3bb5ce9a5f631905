package cpu

import (
	"fmt"
	"math"
	"testing"
)

func TestBatchNormMatchesReferenceAndFiniteDifferences(t *testing.T) {
	r := newTestRand(30)
	for _, sz := range [][3]int{{4, 3, 5}, {7, 2, 1}, {2, 5, 9}} {
		n, c, sp := sz[0], sz[1], sz[2]
		x := randSlice(r, n*c*sp, 2)
		for i := range x {
			x[i] += 0.5 // a non-zero mean
		}
		gamma, beta := randSlice(r, c, 1), randSlice(r, c, 1)
		runMean, runVar := randSlice(r, c, 1), make([]float32, c)
		Fill(runVar, 1.5)
		rm0, rv0 := cloneF(runMean), cloneF(runVar)
		y := make([]float32, len(x))
		mean, inv := make([]float32, c), make([]float32, c)
		const eps, mom = 1e-5, 0.1
		BatchNormFwd(x, gamma, beta, runMean, runVar, y, mean, inv, n, c, sp, eps, mom, true)
		want := make([]float32, len(x))
		for ch := 0; ch < c; ch++ {
			var s, ss float64
			m := float64(n * sp)
			for i := 0; i < n; i++ {
				for j := 0; j < sp; j++ {
					s += float64(x[(i*c+ch)*sp+j])
				}
			}
			mu := s / m
			for i := 0; i < n; i++ {
				for j := 0; j < sp; j++ {
					d := float64(x[(i*c+ch)*sp+j]) - mu
					ss += d * d
				}
			}
			for i := 0; i < n; i++ {
				for j := 0; j < sp; j++ {
					k := (i*c+ch)*sp + j
					want[k] = float32((float64(x[k])-mu)/math.Sqrt(ss/m+eps)*float64(gamma[ch]) + float64(beta[ch]))
				}
			}
			wantRM := 0.9*float64(rm0[ch]) + 0.1*mu
			wantRV := 0.9*float64(rv0[ch]) + 0.1*ss/(m-1)
			if math.Abs(float64(runMean[ch])-wantRM) > 1e-6 || math.Abs(float64(runVar[ch])-wantRV) > 1e-6 {
				t.Errorf("BatchNormFwd %v channel %d: running mean, var = %v, %v, want %v, %v", sz, ch, runMean[ch], runVar[ch], wantRM, wantRV)
			}
		}
		if msg := closeTo(y, want, 1e-5); msg != "" {
			t.Errorf("BatchNormFwd %v training: %s", sz, msg)
		}

		proj := randSlice(r, len(y), 1)
		dx, dg, db := make([]float32, len(x)), make([]float32, c), make([]float32, c)
		BatchNormBwd(x, gamma, mean, inv, proj, dx, dg, db, n, c, sp)
		fwd := func() []float32 {
			BatchNormFwd(x, gamma, beta, runMean, runVar, y, mean, inv, n, c, sp, eps, mom, true)
			return y
		}
		check := smoothCheck
		check.h = 1e-3 // normalisation amplifies the step by 1/std
		check.run(t, fmt.Sprintf("batchnorm %v", sz), proj, fwd,
			gradInput{"x", x, dx}, gradInput{"gamma", gamma, dg}, gradInput{"beta", beta, db})

		// Evaluation uses the running statistics.
		BatchNormFwd(x, gamma, beta, runMean, runVar, y, mean, inv, n, c, sp, eps, mom, false)
		for k := range x {
			ch := k / sp % c
			want[k] = float32((float64(x[k])-float64(runMean[ch]))/math.Sqrt(float64(runVar[ch])+eps)*float64(gamma[ch]) + float64(beta[ch]))
		}
		if msg := closeTo(y, want, 1e-5); msg != "" {
			t.Errorf("BatchNormFwd %v evaluation: %s", sz, msg)
		}
	}
}

// matmulRef multiplies with explicit broadcasting of the leading axes.
func matmulRef(a, b []float32, aShape, bShape, yShape []int) []float32 {
	r := len(yShape)
	m, k, n := aShape[r-2], aShape[r-1], bShape[r-1]
	batches := size(yShape[:r-2])
	y := make([]float32, size(yShape))
	for t := 0; t < batches; t++ {
		ai, bi, q := 0, 0, t
		idx := make([]int, r-2)
		for d := r - 3; d >= 0; d-- {
			idx[d] = q % yShape[d]
			q /= yShape[d]
		}
		for d := 0; d < r-2; d++ {
			ai = ai*aShape[d] + idx[d]%aShape[d]
			bi = bi*bShape[d] + idx[d]%bShape[d]
		}
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for p := 0; p < k; p++ {
					s += float64(a[ai*m*k+i*k+p]) * float64(b[bi*k*n+p*n+j])
				}
				y[t*m*n+i*n+j] = float32(s)
			}
		}
	}
	return y
}

func TestMatMulMatchesReferenceAndFiniteDifferences(t *testing.T) {
	cases := [][3][]int{
		{{3, 4}, {4, 5}, {3, 5}},
		{{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
		{{2, 1, 3, 4}, {1, 3, 4, 2}, {2, 3, 3, 2}},
		{{2, 3, 1, 5}, {1, 1, 5, 1}, {2, 3, 1, 1}},
	}
	r := newTestRand(31)
	for _, c := range cases {
		aShape, bShape, yShape := c[0], c[1], c[2]
		name := fmt.Sprintf("matmul %v·%v", aShape, bShape)
		a, b := randSlice(r, size(aShape), 1), randSlice(r, size(bShape), 1)
		y := make([]float32, size(yShape))
		MatMulFwd(a, b, y, aShape, bShape, yShape)
		if msg := closeTo(y, matmulRef(a, b, aShape, bShape, yShape), 1e-5); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
		proj := randSlice(r, len(y), 1)
		da, db := randSlice(r, len(a), 9), randSlice(r, len(b), 9)
		MatMulBwd(a, b, proj, da, db, aShape, bShape, yShape)
		smoothCheck.run(t, name, proj, func() []float32 { MatMulFwd(a, b, y, aShape, bShape, yShape); return y },
			gradInput{"a", a, da}, gradInput{"b", b, db})
	}
}

func TestTransposeRank4AndInverse(t *testing.T) {
	r := newTestRand(32)
	shape := []int{2, 3, 4, 5}
	x := randSlice(r, size(shape), 1)
	for _, perm := range [][]int{{0, 2, 3, 1}, {0, 3, 1, 2}, {0, 1, 3, 2}, {0, 1, 2, 3}, {3, 2, 1, 0}} {
		y := make([]float32, len(x))
		Transpose(x, y, shape, perm)
		yShape := make([]int, 4)
		for i, p := range perm {
			yShape[i] = shape[p]
		}
		for i0 := 0; i0 < shape[0]; i0++ {
			for i1 := 0; i1 < shape[1]; i1++ {
				for i2 := 0; i2 < shape[2]; i2++ {
					for i3 := 0; i3 < shape[3]; i3++ {
						xi := [4]int{i0, i1, i2, i3}
						yo := 0
						for d := 0; d < 4; d++ {
							yo = yo*yShape[d] + xi[perm[d]]
						}
						if got, want := y[yo], x[((i0*3+i1)*4+i2)*5+i3]; got != want {
							t.Fatalf("Transpose by %v: y at x index %v = %v, want %v", perm, xi, got, want)
						}
					}
				}
			}
		}
		// The inverse permutation undoes it (the emitter's backward).
		inv := make([]int, 4)
		for i, p := range perm {
			inv[p] = i
		}
		back := make([]float32, len(x))
		Transpose(y, back, yShape, inv)
		if msg := closeTo(back, x, 0); msg != "" {
			t.Errorf("Transpose by %v then %v: %s", perm, inv, msg)
		}
	}
}

func TestConcatForwardAndBackward(t *testing.T) {
	r := newTestRand(33)
	for _, axis := range []int{1, 2, 3} {
		shapes := [][]int{{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}}
		for i := range shapes {
			shapes[i] = append([]int(nil), shapes[i]...)
			shapes[i][axis] = i + 1
		}
		xs := [][]float32{randSlice(r, size(shapes[0]), 1), randSlice(r, size(shapes[1]), 1), randSlice(r, size(shapes[2]), 1)}
		yShape := append([]int(nil), shapes[0]...)
		yShape[axis] = 6
		y := make([]float32, size(yShape))
		ConcatFwd(xs, y, shapes, axis)
		// Reference: walk y's index and find the source.
		idx := make([]int, 4)
		for i := range y {
			q := i
			for d := 3; d >= 0; d-- {
				idx[d] = q % yShape[d]
				q /= yShape[d]
			}
			src, pos := 0, idx[axis]
			for pos >= shapes[src][axis] {
				pos -= shapes[src][axis]
				src++
			}
			off := 0
			for d := 0; d < 4; d++ {
				v := idx[d]
				if d == axis {
					v = pos
				}
				off = off*shapes[src][d] + v
			}
			if y[i] != xs[src][off] {
				t.Fatalf("ConcatFwd axis %d: y[%d] = %v, want %v", axis, i, y[i], xs[src][off])
			}
		}
		dxs := [][]float32{make([]float32, len(xs[0])), nil, make([]float32, len(xs[2]))}
		ConcatBwd(y, dxs, shapes, axis)
		for _, i := range []int{0, 2} {
			if msg := closeTo(dxs[i], xs[i], 0); msg != "" {
				t.Errorf("ConcatBwd axis %d input %d: %s", axis, i, msg)
			}
		}
	}
}

// TestTransposeBlocked: transposes that move x's last axis away from y's
// last take 8×8 blocks (transposeBlocked); on every GEMM path (the vector
// block transpose or the Go loop), with sizes that are not multiples of 8,
// they match the index-walking reference: attention's kᵀ ([T, heads, d] by
// [1, 2, 0]), its inverse, and a rank-4 case with an axis between.
func TestTransposeBlocked(t *testing.T) {
	defer SetGemmPath("")
	r := newTestRand(34)
	for _, c := range []struct{ shape, perm []int }{
		{[]int{37, 3, 19}, []int{1, 2, 0}},
		{[]int{3, 19, 37}, []int{2, 0, 1}},
		{[]int{3, 13, 2, 17}, []int{2, 3, 0, 1}},
		{[]int{16, 8}, []int{1, 0}},
	} {
		x := randSlice(r, size(c.shape), 1)
		yShape := make([]int, len(c.shape))
		for i, p := range c.perm {
			yShape[i] = c.shape[p]
		}
		want := make([]float32, len(x))
		var xStr [maxRank]int
		s := 1
		for d := len(c.shape) - 1; d >= 0; d-- {
			xStr[d] = s
			s *= c.shape[d]
		}
		for yi := range want {
			q, xo := yi, 0
			for d := len(yShape) - 1; d >= 0; d-- {
				xo += q % yShape[d] * xStr[c.perm[d]]
				q /= yShape[d]
			}
			want[yi] = x[xo]
		}
		for _, path := range GemmPaths() {
			if err := SetGemmPath(path); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			Transpose(x, y, c.shape, c.perm)
			if msg := closeTo(y, want, 0); msg != "" {
				t.Errorf("%s: Transpose %v by %v: %s", path, c.shape, c.perm, msg)
			}
		}
	}
}
