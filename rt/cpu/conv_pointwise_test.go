package cpu

import (
	"fmt"
	"math"
	"testing"
)

// TestConvPointwiseBlocks runs the pointwise method's blocked products
// (pointwiseBlocked) on every GEMM path and on one and two threads against
// the plain convolution, on geometries that cut its blocks unevenly: more
// than one kc block of the shared dimension (301 channels), row counts
// that are no multiple of a tile (13, 30, 263: the 8-, 4-, 2- and 1-row
// tiles, and a second row block), column counts with a last panel
// narrower than a tile or than half of one (49, 1480: several column
// blocks), groups, and a batch of one and of three. The operands end at
// a guard page, and every output element must be written (y starts as
// NaN).
func TestConvPointwiseBlocks(t *testing.T) {
	defer SetGemmPath("")
	defer SetThreads(Threads())
	r := newTestRand(31)
	geoms := []Conv{
		convCase(1, 16, 7, 7, 13, 1, 1, 1, 0, 1, 1),
		convCase(3, 301, 5, 9, 30, 1, 1, 1, 0, 1, 1),
		convCase(1, 24, 40, 37, 13, 1, 1, 1, 0, 1, 1),
		convCase(1, 40, 7, 7, 263, 1, 1, 1, 0, 1, 1),
		convCase(2, 6, 4, 5, 10, 1, 1, 1, 0, 1, 2),
	}
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, g := range geoms {
			x := guardedFloats(t, g.N*g.C*g.H*g.W)
			copy(x, randSlice(r, len(x), 1))
			w := guardedFloats(t, g.OC*g.C/g.Groups)
			copy(w, randSlice(r, len(w), 0.5))
			b := randSlice(r, g.OC, 1)
			for _, threads := range []int{1, 2} {
				SetThreads(threads)
				for _, bias := range [][]float32{nil, b} {
					for _, act := range []Act{ActNone, ActReLU, ActReLU6, ActTanh} {
						name := fmt.Sprintf("%s %d threads %+v bias %v act %d", path, threads, g, bias != nil, act)
						y := guardedFloats(t, g.N*g.OC*g.H*g.W)
						for i := range y {
							y[i] = float32(math.NaN())
						}
						Conv2DPointwiseFwd(x, w, bias, y, g, act, 0)
						if msg := closeTo(y, convRef(x, w, bias, g, act, 0), 1e-5); msg != "" {
							t.Errorf("%s: %s", name, msg)
						}
					}
				}
			}
		}
	}
}

// TestActReLU6MatchesUnary checks the fused ReLU6 against the unary
// step it replaces, bit for bit on every path: applyAct against UnaryFwd
// and actBackward against UnaryBwdFromOutput, on values around both
// corners (0 and 6, −0, NaN and infinities among them) and lengths that
// leave vector tails.
func TestActReLU6MatchesUnary(t *testing.T) {
	defer SetGemmPath("")
	r := newTestRand(37)
	specials := []float32{0, float32(math.Copysign(0, -1)), 6, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 5.9999995}
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 7, 16, 33, 1000} {
			x := randSlice(r, n, 8)
			for i := range x {
				if r.IntN(4) == 0 {
					x[i] = specials[r.IntN(len(specials))]
				}
			}
			got, want := cloneF(x), make([]float32, n)
			applyAct(got, ActReLU6, 0)
			UnaryFwd(x, want, []Unary{{Kind: UReLU6}})
			if msg := sameBits(got, want); msg != "" {
				t.Errorf("%s n=%d forward: %s", path, n, msg)
			}
			dy := randSlice(r, n, 1)
			gotD, wantD := cloneF(dy), make([]float32, n)
			actBackward(want, gotD, ActReLU6, 0)
			UnaryBwdFromOutput(want, dy, wantD, Unary{Kind: UReLU6})
			if msg := sameBits(gotD, wantD); msg != "" {
				t.Errorf("%s n=%d backward: %s", path, n, msg)
			}
		}
	}
}
