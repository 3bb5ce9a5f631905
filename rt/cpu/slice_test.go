package cpu

import (
	"fmt"
	"math"
	"testing"
)

// TestSliceMatchesNaiveAndFiniteDifferences slices every axis of a
// [3, 5, 4, 7] tensor over awkward ranges (the first position, the last,
// one inside, the whole axis) against index arithmetic on the 4-D shape,
// checks that the backward writes every element of dx (it starts as NaN),
// and checks it against finite differences.
func TestSliceMatchesNaiveAndFiniteDifferences(t *testing.T) {
	shape := []int{3, 5, 4, 7}
	r := newTestRand(21)
	x := randSlice(r, 3*5*4*7, 1)
	for axis := 1; axis < 4; axis++ {
		for _, rg := range [][2]int{{0, 1}, {shape[axis] - 1, shape[axis]}, {1, shape[axis] - 1}, {0, shape[axis]}} {
			start, n := rg[0], rg[1]-rg[0]
			name := fmt.Sprintf("axis %d [%d:%d]", axis, rg[0], rg[1])
			outer, inner := 1, 1
			for _, d := range shape[:axis] {
				outer *= d
			}
			for _, d := range shape[axis+1:] {
				inner *= d
			}
			ys := append([]int(nil), shape...)
			ys[axis] = n
			want := make([]float32, 0, outer*n*inner)
			for a := 0; a < ys[0]; a++ {
				for b := 0; b < ys[1]; b++ {
					for c := 0; c < ys[2]; c++ {
						for d := 0; d < ys[3]; d++ {
							at := []int{a, b, c, d}
							at[axis] += start
							want = append(want, x[((at[0]*shape[1]+at[1])*shape[2]+at[2])*shape[3]+at[3]])
						}
					}
				}
			}
			y := make([]float32, len(want))
			SliceFwd(x, y, outer, shape[axis], inner, start, n)
			if msg := closeTo(y, want, 0); msg != "" {
				t.Fatalf("forward %s: %s", name, msg)
			}
			proj := randSlice(r, len(y), 1)
			dx := make([]float32, len(x))
			for i := range dx {
				dx[i] = float32(math.NaN())
			}
			SliceBwd(cloneF(proj), dx, outer, shape[axis], inner, start, n)
			smoothCheck.run(t, "slice "+name, proj, func() []float32 { SliceFwd(x, y, outer, shape[axis], inner, start, n); return y }, gradInput{"x", x, dx})
		}
	}
}
