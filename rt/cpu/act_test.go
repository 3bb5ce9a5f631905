package cpu

import (
	"fmt"
	"math"
	"testing"
)

// TestEpiloguePathsAgree checks the epilogues of every GEMM path (the
// assembly ones where the path has them) against plain loops written here,
// bit for bit: bias and ReLU over rows, ReLU's derivative and column sums,
// on rows shorter than, equal to and longer than a vector, with negative
// zeros, NaNs of both signs and infinities.
func TestEpiloguePathsAgree(t *testing.T) {
	defer SetGemmPath("")
	specials := []float32{float32(math.Copysign(0, -1)), float32(math.NaN()), -float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0}
	r := newTestRand(23)
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, s := range [][2]int{{1, 1}, {3, 15}, {2, 16}, {5, 17}, {4, 33}, {250, 10}, {7, 512}, {0, 5}} {
			rows, cols := s[0], s[1]
			name := fmt.Sprintf("%s %dx%d", path, rows, cols)
			y0 := randSlice(r, rows*cols, 2)
			for i := range y0 {
				if r.IntN(8) == 0 {
					y0[i] = specials[r.IntN(len(specials))]
				}
			}
			bias := randSlice(r, cols, 1)
			for _, b := range [][]float32{nil, bias} {
				for _, act := range []Act{ActNone, ActReLU} {
					got, want := guarded(y0), cloneF(y0)
					biasActRows(got, b, rows, cols, act, 0)
					checkGuard(t, name+" biasActRows", got)
					for i := range want {
						if b != nil {
							want[i] += b[i%cols]
						}
						if act == ActReLU {
							bits := math.Float32bits(want[i])
							want[i] = math.Float32frombits(bits &^ uint32(int32(bits)>>31))
						}
					}
					if msg := sameBits(got, want); msg != "" {
						t.Errorf("%s biasActRows(bias %v, act %d): %s", name, b != nil, act, msg)
					}
				}
			}
			// ReLU's derivative from y = ReLU(y0), as the backward passes see it.
			y := cloneF(y0)
			for i, v := range y {
				bits := math.Float32bits(v)
				y[i] = math.Float32frombits(bits &^ uint32(int32(bits)>>31))
			}
			dy := randSlice(r, len(y), 1)
			got, want := guarded(dy), cloneF(dy)
			actBackward(y, got, ActReLU, 0)
			checkGuard(t, name+" actBackward", got)
			for i, v := range y {
				if math.Float32bits(v) == 0 {
					want[i] = 0
				}
			}
			if msg := sameBits(got, want); msg != "" {
				t.Errorf("%s actBackward: %s", name, msg)
			}
			if rows == 0 {
				continue
			}
			sums := guarded(make([]float32, cols))
			for i := range sums {
				sums[i] = float32(math.NaN()) // must be overwritten
			}
			sumRows(dy, sums, rows, cols)
			checkGuard(t, name+" sumRows", sums)
			wantSums := make([]float32, cols)
			for rr := 0; rr < rows; rr++ {
				for j := range wantSums {
					wantSums[j] += dy[rr*cols+j]
				}
			}
			if msg := sameBits(sums, wantSums); msg != "" {
				t.Errorf("%s sumRows: %s", name, msg)
			}
		}
	}
}

// sameBits reports the first element where got and want differ in their
// bits, as an error message, or "".
func sameBits(got, want []float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i, w := range want {
		if math.Float32bits(got[i]) != math.Float32bits(w) {
			return fmt.Sprintf("element %d = %v (%#x), want %v (%#x)", i, got[i], math.Float32bits(got[i]), w, math.Float32bits(w))
		}
	}
	return ""
}

// epilogueGuard is how many elements guarded puts after a copy, and the
// value they hold.
const (
	epilogueGuard      = 16
	epilogueGuardValue = 12345
)

// guarded returns a copy of s in a buffer with guard elements after it,
// for checkGuard.
func guarded(s []float32) []float32 {
	buf := make([]float32, len(s)+epilogueGuard)
	copy(buf, s)
	for i := len(s); i < len(buf); i++ {
		buf[i] = epilogueGuardValue
	}
	return buf[:len(s)]
}

// checkGuard fails the test when a kernel wrote past the end of s, a
// slice from guarded.
func checkGuard(t *testing.T, what string, s []float32) {
	t.Helper()
	for _, v := range s[len(s) : len(s)+epilogueGuard] {
		if v != epilogueGuardValue {
			t.Fatalf("%s wrote past its output", what)
		}
	}
}

// TestRowBiasActPathsAgree checks rowBiasAct on every path against its Go
// loop (rowBiasActGo, and applyAct for the activations it leaves to
// applyAct) bit for bit, on blocks whose rows are shorter than, equal to
// and longer than a vector, strided and not, with and without bias, and
// with negative zeros, NaNs and infinities among the values; the floats
// between the rows must not change.
func TestRowBiasActPathsAgree(t *testing.T) {
	defer SetGemmPath("")
	specials := []float32{float32(math.Copysign(0, -1)), float32(math.NaN()), -float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, 6}
	r := newTestRand(29)
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		if k := epilogue(); (path == "avx512" || path == "avx2") && (k == nil || k.rowBiasAct == nil) {
			t.Errorf("%s: no vector rowBiasAct; the Go loop would be tested against itself", path)
		}
		for _, s := range [][3]int{{1, 1, 1}, {3, 15, 20}, {2, 16, 16}, {5, 17, 40}, {4, 33, 33}, {13, 49, 3136}} {
			rows, cols, ld := s[0], s[1], s[2]
			y0 := randSlice(r, (rows-1)*ld+cols, 8)
			for i := range y0 {
				if r.IntN(8) == 0 {
					y0[i] = specials[r.IntN(len(specials))]
				}
			}
			bias := randSlice(r, rows, 4)
			for _, b := range [][]float32{nil, bias} {
				for _, act := range []Act{ActNone, ActReLU, ActReLU6, ActTanh} {
					got, want := cloneF(y0), cloneF(y0)
					rowBiasAct(got, b, rows, cols, ld, act, 0)
					flags, lo, hi, ok := rowBiasActFlags(act)
					if b != nil {
						flags |= 1
					}
					rowBiasActGo(want, b, rows, cols, ld, flags, lo, hi)
					if !ok {
						for i := 0; i < rows; i++ {
							applyAct(want[i*ld:i*ld+cols], act, 0)
						}
					}
					if msg := sameBits(got, want); msg != "" {
						t.Errorf("%s %dx%d ld %d bias %v act %d: %s", path, rows, cols, ld, b != nil, act, msg)
					}
				}
			}
		}
	}
}
