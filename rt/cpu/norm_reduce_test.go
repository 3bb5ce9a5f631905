package cpu

import (
	"fmt"
	"math"
	"testing"
)

// layerNormRef normalises each row of x the plain way, in float64.
func layerNormRef(x, gamma, beta []float32, rows, cols int, eps float64) []float32 {
	y := make([]float32, len(x))
	for r := 0; r < rows; r++ {
		var mean, v float64
		for j := 0; j < cols; j++ {
			mean += float64(x[r*cols+j])
		}
		mean /= float64(cols)
		for j := 0; j < cols; j++ {
			d := float64(x[r*cols+j]) - mean
			v += d * d
		}
		v /= float64(cols)
		for j := 0; j < cols; j++ {
			o := (float64(x[r*cols+j]) - mean) / math.Sqrt(v+eps) * float64(gamma[j])
			if beta != nil {
				o += float64(beta[j])
			}
			y[r*cols+j] = float32(o)
		}
	}
	return y
}

func TestLayerNormMatchesReferenceAndFiniteDifferences(t *testing.T) {
	r := newTestRand(30)
	for _, sz := range []struct {
		rows, cols int
		bias       bool
	}{{4, 7, true}, {1, 5, true}, {6, 1, true}, {3, 16, false}, {37, 33, true}, {5, 131, false}} {
		name := fmt.Sprintf("layernorm %dx%d bias=%v", sz.rows, sz.cols, sz.bias)
		n := sz.rows * sz.cols
		x := randSlice(r, n, 2)
		for i := range x {
			x[i] += 0.5 // a mean away from 0
		}
		gamma := randSlice(r, sz.cols, 1)
		var beta, dbeta []float32
		if sz.bias {
			beta, dbeta = randSlice(r, sz.cols, 1), make([]float32, sz.cols)
		}
		const eps = 1e-5
		y := make([]float32, n)
		mean, inv := make([]float32, sz.rows), make([]float32, sz.rows)
		LayerNormFwd(x, gamma, beta, y, mean, inv, sz.rows, sz.cols, eps)
		if msg := closeTo(y, layerNormRef(x, gamma, beta, sz.rows, sz.cols, eps), 1e-5); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
		proj := randSlice(r, n, 1)
		dx, dg := make([]float32, n), make([]float32, sz.cols)
		LayerNormBwd(x, gamma, mean, inv, proj, dx, dg, dbeta, sz.rows, sz.cols)
		fwd := func() []float32 { LayerNormFwd(x, gamma, beta, y, mean, inv, sz.rows, sz.cols, eps); return y }
		inputs := []gradInput{{"x", x, dx}, {"gamma", gamma, dg}}
		if sz.bias {
			inputs = append(inputs, gradInput{"beta", beta, dbeta})
		}
		check := smoothCheck
		if sz.cols == 1 {
			// A row of one element normalises to 0 whatever x is: dx is 0,
			// and so are the differences (up to eps's curvature).
			check.atol = 1e-2
		}
		check.run(t, name, proj, fwd, inputs...)
		// dx may alias dy: the parameter gradients are read first.
		alias := cloneF(proj)
		dg2 := make([]float32, sz.cols)
		LayerNormBwd(x, gamma, mean, inv, alias, alias, dg2, nil, sz.rows, sz.cols)
		if msg := closeTo(alias, dx, 1e-6); msg != "" {
			t.Errorf("%s: dx written over dy: %s", name, msg)
		}
		if msg := closeTo(dg2, dg, 1e-6); msg != "" {
			t.Errorf("%s: dgamma with dx over dy: %s", name, msg)
		}
		// LayerNormBwdAdd adds dx to a sum, each element the float32 of
		// the float64 sum, and leaves the parameter gradients as they are.
		sum := randSlice(r, n, 1)
		added, dg3 := cloneF(sum), make([]float32, sz.cols)
		LayerNormBwdAdd(x, gamma, mean, inv, proj, added, dg3, nil, sz.rows, sz.cols)
		want := make([]float32, n)
		for i := range want {
			want[i] = sum[i] + dx[i]
		}
		if msg := closeTo(added, want, 1e-6); msg != "" {
			t.Errorf("%s: dx added into a sum: %s", name, msg)
		}
		if msg := closeTo(dg3, dg, 1e-6); msg != "" {
			t.Errorf("%s: dgamma with dx added: %s", name, msg)
		}
	}
}

// reduceMeanRef averages x over the axes where yShape is 1, walking x's
// multi-index.
func reduceMeanRef(x []float32, xShape, yShape []int) []float32 {
	sum := make([]float64, size(yShape))
	idx := make([]int, len(xShape))
	for i, v := range x {
		q := i
		for d := len(xShape) - 1; d >= 0; d-- {
			idx[d] = q % xShape[d]
			q /= xShape[d]
		}
		off := 0
		for d, n := range yShape {
			off = off*n + idx[d]%n
		}
		sum[off] += float64(v)
	}
	y := make([]float32, len(sum))
	k := float64(size(xShape)) / float64(size(yShape))
	for i, s := range sum {
		y[i] = float32(s / k)
	}
	return y
}

func TestReduceMeanMatchesReferenceAndFiniteDifferences(t *testing.T) {
	r := newTestRand(31)
	for _, c := range [][2][]int{
		{{3, 4, 5}, {3, 4, 1}},       // the last axis (layer norm's statistics)
		{{3, 4, 5}, {3, 1, 5}},       // a middle axis
		{{3, 4, 5}, {3, 1, 1}},       // all per-sample axes
		{{2, 3, 4, 5}, {2, 3, 1, 1}}, // spatial mean
		{{2, 3, 4, 5}, {2, 1, 4, 1}}, // two axes apart
		{{5, 1, 7}, {5, 1, 1}},
		{{4, 6}, {4, 6}}, // nothing reduced
	} {
		xShape, yShape := c[0], c[1]
		name := fmt.Sprintf("reducemean %v to %v", xShape, yShape)
		x := randSlice(r, size(xShape), 2)
		y := make([]float32, size(yShape))
		ReduceMeanFwd(x, y, xShape, yShape)
		if msg := closeTo(y, reduceMeanRef(x, xShape, yShape), 1e-6); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
		proj := randSlice(r, len(y), 1)
		dx := randSlice(r, len(x), 9)
		ReduceMeanBwd(proj, dx, xShape, yShape)
		smoothCheck.run(t, name, proj, func() []float32 { ReduceMeanFwd(x, y, xShape, yShape); return y }, gradInput{"x", x, dx})
	}
}
