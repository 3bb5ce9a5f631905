package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// depthwiseGeoms are the geometries depthwise layers have and the edges
// they meet: strides 1, 2 and 3 (and 2 across only), paddings from none
// to past the filter's reach, dilation, rows shorter than a vector and
// longer than eight, planes whose flat outputs end inside a block of 8
// vectors, 3×3, 5×5 and 1×7 filters.
var depthwiseGeoms = []Conv{
	convCase(2, 5, 9, 9, 5, 3, 3, 1, 1, 1, 5),
	convCase(1, 3, 14, 14, 3, 3, 3, 2, 1, 1, 3),
	convCase(2, 4, 7, 37, 4, 5, 5, 1, 2, 1, 4),
	convCase(1, 2, 11, 10, 2, 5, 5, 2, 2, 1, 2),
	convCase(1, 3, 8, 8, 3, 3, 3, 1, 0, 1, 3),
	convCase(1, 3, 9, 20, 3, 3, 3, 1, 2, 2, 3),
	convCase(3, 1, 4, 3, 1, 3, 3, 3, 1, 1, 1),
	convCase(1, 2, 40, 41, 2, 3, 3, 1, 1, 1, 2),
	convCase(1, 3, 7, 7, 3, 5, 5, 1, 3, 1, 3),
	convCase(2, 3, 5, 4, 3, 1, 1, 1, 1, 1, 3),
	convCase(1, 2, 3, 16, 2, 3, 3, 1, 1, 1, 2),
	convCase(2, 2, 4, 150, 2, 3, 3, 1, 1, 1, 2),
	convCase(1, 2, 6, 290, 2, 5, 5, 2, 2, 1, 2),
	{N: 1, C: 2, H: 5, W: 6, OC: 2, OH: 5, OW: 4, KH: 1, KW: 7, SH: 1, SW: 2, PH: 0, PW: 4, DH: 1, DW: 1, Groups: 2},
	{N: 2, C: 3, H: 9, W: 8, OC: 3, OH: 4, OW: 8, KH: 3, KW: 3, SH: 2, SW: 1, PH: 0, PW: 1, DH: 1, DW: 1, Groups: 3},
}

// TestConvDepthwiseFwd: the depthwise method against the plain
// convolution on every GEMM path (each runs its own kernel: AVX-512,
// AVX2 or Go) over depthwiseGeoms, with and without bias, with each
// fused activation. The assembly fuses each multiply with its add and the
// Go twin does not, so the paths agree within float32 rounding of sums
// of 25 products (1e-5 relative to max(1, |y|)), not bit for bit.
func TestConvDepthwiseFwd(t *testing.T) {
	defer SetGemmPath("")
	r := newTestRand(31)
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for i, g := range depthwiseGeoms {
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			w := randSlice(r, g.C*g.KH*g.KW, 1)
			b := randSlice(r, g.C, 1)
			for k, a := range allActs {
				bias := b
				if k == 1 {
					bias = nil
				}
				got := make([]float32, g.N*g.C*g.OH*g.OW)
				for j := range got {
					got[j] = 1e9 // every element must be written
				}
				Conv2DDepthwiseFwd(x, w, bias, got, g, a.act, 0.1)
				if msg := closeTo(got, convRef(x, w, bias, g, a.act, 0.1), 1e-5); msg != "" {
					t.Errorf("%s geometry %d %+v act %s: %s", path, i, g, a.name, msg)
				}
			}
		}
	}
}

// TestDepthwiseKernelsMatchGo: each assembly kernel against its Go twin
// on flat lengths that end in every kind of block (8, 4 and 1 vectors),
// with shifts that are not multiples of a vector.
func TestDepthwiseKernelsMatchGo(t *testing.T) {
	defer SetGemmPath("")
	r := newTestRand(32)
	offs := []int{0, 1, 7, 33, 50, 64, 65, 99, 130}
	w := randSlice(r, len(offs), 1)
	x := randSlice(r, 2048, 1)
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		k := depthwiseFor(activeGemmPath.Load())
		for _, vecs := range []int{1, 3, 4, 7, 8, 13, 21, 24, 25} {
			n := vecs * k.lanes
			want, got := make([]float32, n), make([]float32, n)
			depthwiseFwdGo(len(offs), &offs[0], &w[0], &x[0], &want[0], n)
			k.fwd(len(offs), &offs[0], &w[0], &x[0], &got[0], n)
			if msg := closeTo(got, want, 1e-6); msg != "" {
				t.Errorf("%s, %d vectors: %s", path, vecs, msg)
			}
		}
		if k.rows == nil {
			continue
		}
		// The rows kernel: rows of ow outputs wq apart in x, bias and
		// ReLU or ReLU6 (a bias of 5 for ReLU6, so that the sums reach
		// past both corners), against the Go kernel on each row and the
		// same epilogue.
		const wq, nrows = 40, 11
		for _, ow := range []int{9, 16, 17, 33, 40, 129, 150} {
			for relu := 0; relu < 3; relu++ {
				bias := []float32{0.25, 0.25, 5}[relu]
				got := make([]float32, nrows*ow+1)
				got[nrows*ow] = 7 // past the last row: must stay
				k.rows(len(offs), &offs[0], &w[0], &x[0], wq, &got[0], ow, nrows, bias, relu)
				want := make([]float32, gemmRoundUp(ow, 16))
				for r := 0; r < nrows; r++ {
					depthwiseFwdGo(len(offs), &offs[0], &w[0], &x[r*wq], &want[0], len(want))
					for j, v := range want[:ow] {
						v += bias
						switch relu {
						case 1:
							v = max(v, 0)
						case 2:
							v = min(max(v, 0), 6)
						}
						want[j] = v
					}
					if msg := closeTo(got[r*ow:(r+1)*ow], want[:ow], 1e-6); msg != "" {
						t.Errorf("%s rows, ow %d relu %d, row %d: %s", path, ow, relu, r, msg)
					}
				}
				if got[nrows*ow] != 7 {
					t.Errorf("%s rows, ow %d: wrote past the last row", path, ow)
				}
			}
		}
	}
}

// TestConvDepthwiseRefusesOtherGeometry: the depthwise kernel panics,
// naming the geometry, on a convolution with several channels a group.
func TestConvDepthwiseRefusesOtherGeometry(t *testing.T) {
	g := convCase(1, 4, 5, 5, 4, 3, 3, 1, 1, 1, 2)
	x, w, y := make([]float32, 100), make([]float32, 4*2*9), make([]float32, 100)
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "2 groups of 4 input and 4 output channels") {
			t.Errorf("recovered %v, want a panic naming the groups", r)
		}
	}()
	Conv2DDepthwiseFwd(x, w, nil, y, g, ActNone, 0)
	t.Error(fmt.Sprintf("%+v: no panic", g))
}

// TestConvDepthwiseBwd: the depthwise backward against the plain loops
// (convBwdRef) on every GEMM path over depthwiseGeoms, with dx and db and
// without them, the weight and bias gradients within one float32
// rounding per term summed; and against finite differences of the
// forward with tanh and ReLU on a stride-1 and a stride-2 geometry.
func TestConvDepthwiseBwd(t *testing.T) {
	defer SetGemmPath("")
	r := newTestRand(33)
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for i, g := range depthwiseGeoms {
			name := fmt.Sprintf("%s geometry %d %+v", path, i, g)
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			w := randSlice(r, g.C*g.KH*g.KW, 1)
			y := make([]float32, g.N*g.C*g.OH*g.OW)
			dy := randSlice(r, len(y), 1)
			wantDx, wantDw, wantDb := convBwdRef(x, w, dy, g)
			sumTol := max(1e-5, float64(g.N*g.OH*g.OW)*0x1p-24)
			dx, dw, db := randSlice(r, len(x), 9), randSlice(r, len(w), 9), randSlice(r, g.C, 9)
			Conv2DDepthwiseBwd(x, w, y, cloneF(dy), dx, dw, db, g, ActNone, 0)
			for _, c := range []struct {
				name      string
				got, want []float32
				tol       float64
			}{{"dx", dx, wantDx, 1e-5}, {"dw", dw, wantDw, sumTol}, {"db", db, wantDb, sumTol}} {
				if msg := closeTo(c.got, c.want, c.tol); msg != "" {
					t.Errorf("%s: %s: %s", name, c.name, msg)
				}
			}
			dw2 := randSlice(r, len(w), 9)
			Conv2DDepthwiseBwd(x, w, y, cloneF(dy), nil, dw2, nil, g, ActNone, 0)
			if msg := closeTo(dw2, wantDw, sumTol); msg != "" {
				t.Errorf("%s: dw without dx and db: %s", name, msg)
			}
		}
	}
	for _, g := range []Conv{depthwiseGeoms[0], depthwiseGeoms[3]} {
		convBwdFiniteDifferences(t, r, "depthwise", fmt.Sprintf("%+v", g), g, Conv2DDepthwiseFwd, Conv2DDepthwiseBwd)
	}
}

// TestDepthwiseSplit2MatchesAny: the stride-2 split (split2, a row's
// pixels dealt in pairs to the two column phases) writes the phase planes
// that the general split writes, element for element and nothing else:
// even and odd widths and paddings (so the first and the last column can
// each go alone), rows of fewer pairs than a vector and of more (the
// vector deal and its tail: 33, 66, 67), row strides 1 and 2, kernels of
// 3 and 5, dilation; on every path's depthwise kernel.
func TestDepthwiseSplit2MatchesAny(t *testing.T) {
	r := newTestRand(3)
	for _, path := range gemmPathsSupported {
		testDepthwiseSplit2(t, r, depthwiseFor(path))
	}
}

func testDepthwiseSplit2(t *testing.T, r *rand.Rand, dk *depthwiseKernels) {
	for _, h := range []int{1, 6, 7} {
		for _, w := range []int{1, 2, 7, 8, 15, 33, 66, 67} {
			for _, p := range []int{0, 1, 2, 3} {
				for _, sh := range []int{1, 2} {
					for _, k := range []int{3, 5} {
						for _, dil := range []int{1, 2} {
							g := Conv{N: 1, C: 1, H: h, W: w, OC: 1, KH: k, KW: k, SH: sh, SW: 2, PH: p, PW: p, DH: dil, DW: dil, Groups: 1}
							g.OH = (h+2*p-dil*(k-1)-1)/sh + 1
							g.OW = (w+2*p-dil*(k-1)-1)/2 + 1
							if g.OH < 1 || g.OW < 1 {
								continue
							}
							offs := make([]int, k*k)
							d := newDepthwiseGeom(g, dk, offs)
							plane := randSlice(r, h*w, 1)
							got, want := make([]float32, d.xlen), make([]float32, d.xlen)
							for i := range got {
								got[i], want[i] = -7, -7 // what neither writes must stay
							}
							d.split2(plane, got, g)
							d.splitAny(plane, want, g)
							for i := range want {
								if got[i] != want[i] {
									t.Fatalf("%dx%d pad %d stride (%d,2) kernel %d dilation %d: phase element %d = %v, want %v", h, w, p, sh, k, dil, i, got[i], want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestDepthwiseRowKernels: each path's dealRows and copyRows write what
// the Go loops write, over 0 to 3 rows, 0 to 40 pairs or floats a row
// (every remainder of a vector, with and without whole vectors before
// it) and strides wider than a row, and nothing else: every element they
// do not write keeps its marker, and the source ends at a guard page.
func TestDepthwiseRowKernels(t *testing.T) {
	r := newTestRand(5)
	for _, path := range gemmPathsSupported {
		dk := depthwiseFor(path)
		if dk.dealRows == nil && dk.copyRows == nil {
			continue
		}
		for rows := 0; rows <= 3; rows++ {
			for n := 0; n <= 40; n++ {
				srcStride, dstStride := 2*n+3, n+5
				src := guardedFloats(t, max(0, (rows-1)*srcStride+2*n))
				copy(src, randSlice(r, len(src), 1))
				mark := func() []float32 {
					v := make([]float32, rows*dstStride+8)
					for i := range v {
						v[i] = -7
					}
					return v
				}
				if dk.dealRows != nil {
					ge, go1, we, wo := mark(), mark(), mark(), mark()
					dk.dealRows(src, ge, go1, rows, n, srcStride, dstStride)
					if rows > 0 && n > 0 {
						dealRowsGo(dealPairsGo, src, we, wo, rows, n, srcStride, dstStride)
					}
					for i := range we {
						if ge[i] != we[i] || go1[i] != wo[i] {
							t.Fatalf("%s dealRows, %d rows of %d pairs: element %d = %v, %v; want %v, %v", path.name, rows, n, i, ge[i], go1[i], we[i], wo[i])
						}
					}
				}
				if dk.copyRows != nil {
					got, want := mark(), mark()
					dk.copyRows(src, got, rows, n, srcStride, dstStride)
					if rows > 0 && n > 0 {
						copyRowsGo(src, want, rows, n, srcStride, dstStride)
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s copyRows, %d rows of %d: element %d = %v, want %v", path.name, rows, n, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestDepthwise3x3RowsMatchRows: on every path that has it, rows3x3
// gives the bits of the row kernel with the taps at kh·wq + kw, for rows
// of 1 to 8 vectors (ow a whole number of vectors and not), 1 to 11 rows
// (whole blocks of rows and the rest), no activation, ReLU and ReLU6,
// with NaNs and values past 6 in the input; nothing past the plane is
// written.
func TestDepthwise3x3RowsMatchRows(t *testing.T) {
	r := newTestRand(6)
	for _, path := range gemmPathsSupported {
		k := depthwiseFor(path)
		if k.rows3x3 == nil {
			continue
		}
		for v := 1; v <= 8; v++ {
			for _, ow := range []int{16*v - 5, 16 * v} {
				if ow < 1 {
					continue
				}
				wq := ow + 2
				offs := make([]int, 9)
				for t := range offs {
					offs[t] = t/3*wq + t%3
				}
				for rows := 1; rows <= 11; rows++ {
					x := randSlice(r, (rows+2)*wq+16*v, 4)
					x[len(x)/2] = float32(math.NaN())
					w := randSlice(r, 9, 1)
					for _, relu := range []int{0, 1, 2} {
						got, want := make([]float32, rows*ow+1), make([]float32, rows*ow)
						got[rows*ow] = 42
						k.rows3x3(&w[0], &x[0], wq, &got[0], ow, rows, 0.25, relu)
						k.rows(9, &offs[0], &w[0], &x[0], wq, &want[0], ow, rows, 0.25, relu)
						for i, wv := range want {
							if math.Float32bits(got[i]) != math.Float32bits(wv) {
								t.Fatalf("%s ow %d rows %d relu %d: output %d = %v, the row kernel's %v", path.name, ow, rows, relu, i, got[i], wv)
							}
						}
						if got[rows*ow] != 42 {
							t.Fatalf("%s ow %d rows %d: wrote past the plane", path.name, ow, rows)
						}
					}
				}
			}
		}
	}
}
