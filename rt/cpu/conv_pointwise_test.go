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
// blocks), columns past the last half panel computed as dot products
// (pointwiseDotCols: 49, 196, 18, and 2 with no tile at all, over one and
// two kc blocks), groups, and a batch of one and of three. The operands end at
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
		convCase(1, 301, 7, 7, 30, 1, 1, 1, 0, 1, 1),
		convCase(1, 20, 14, 14, 27, 1, 1, 1, 0, 1, 1),
		convCase(1, 12, 3, 6, 25, 1, 1, 1, 0, 1, 1),
		convCase(2, 9, 1, 2, 5, 1, 1, 1, 0, 1, 1),
		convCase(2, 8, 7, 7, 12, 1, 1, 1, 0, 1, 2),
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

// TestFusedSiLUForward runs the forward kernels that an inference plan
// may give a silu epilogue (every convolution method on the geometries it
// takes, the grouped one, and the dense layer) with ActSiLU against the
// plain convolution and product followed by x·sigmoid(x), and checks that
// actBackward refuses ActSiLU, whose derivative its output does not give.
func TestFusedSiLUForward(t *testing.T) {
	r := newTestRand(43)
	fwds := []struct {
		name string
		fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
		ok   func(g Conv) bool
	}{{"grouped", Conv2DGroupedFwd, func(g Conv) bool { return groupedOK(g.norm()) }}}
	for _, m := range convMethods {
		fwds = append(fwds, struct {
			name string
			fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
			ok   func(g Conv) bool
		}{m.name, m.fwd, m.ok})
	}
	geoms := []Conv{convCase(1, 12, 9, 9, 12, 3, 3, 2, 1, 1, 3), convCase(2, 40, 7, 7, 24, 1, 1, 1, 0, 1, 1), convCase(3, 8, 1, 1, 5, 1, 1, 1, 0, 1, 1)}
	for _, tc := range convGeoms {
		geoms = append(geoms, tc.g)
	}
	for _, m := range fwds {
		for _, g := range geoms {
			if !m.ok(g) {
				continue
			}
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
			b := randSlice(r, g.OC, 1)
			y := make([]float32, g.N*g.OC*g.OH*g.OW)
			m.fwd(x, w, b, y, g, ActSiLU, 0)
			if msg := closeTo(y, convRef(x, w, b, g, ActSiLU, 0), 1e-5); msg != "" {
				t.Errorf("%s %+v: %s", m.name, g, msg)
			}
		}
	}
	x, w, b := randSlice(r, 5*7, 1), randSlice(r, 3*7, 1), randSlice(r, 3, 1)
	y := make([]float32, 5*3)
	GemmFwd(x, w, b, y, 5, 7, 3, ActSiLU, 0)
	g := Conv{N: 5, C: 7, H: 1, W: 1, OC: 3, OH: 1, OW: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1}
	if msg := closeTo(y, convRef(x, w, b, g, ActSiLU, 0), 1e-5); msg != "" {
		t.Errorf("GemmFwd: %s", msg)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("actBackward(ActSiLU) did not panic")
		}
	}()
	actBackward(y, make([]float32, len(y)), ActSiLU, 0)
}
