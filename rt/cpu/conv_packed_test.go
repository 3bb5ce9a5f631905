package cpu

import (
	"fmt"
	"math"
	"testing"
)

// forEachPathAndThreads runs f under every Sgemm implementation this CPU
// has (the conv kernels use its microkernels) and thread counts 1, 2 and 3,
// restoring both afterwards.
func forEachPathAndThreads(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer SetGemmPath("")
	defer SetThreads(Threads())
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{1, 2, 3} {
			SetThreads(threads)
			t.Run(fmt.Sprintf("%s/%dthreads", path, threads), f)
		}
	}
}

// convBwdRef is the plain backward pass of a convolution without
// activation: dx, dw and db for the output gradient dy, in float64.
func convBwdRef(x, w, dy []float32, g Conv) (dx, dw, db []float32) {
	g = g.norm()
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	dx64 := make([]float64, len(x))
	dw64 := make([]float64, len(w))
	db64 := make([]float64, g.OC)
	for n := 0; n < g.N; n++ {
		for oc := 0; oc < g.OC; oc++ {
			grp := oc / ocg
			for oh := 0; oh < g.OH; oh++ {
				for ow := 0; ow < g.OW; ow++ {
					d := float64(dy[((n*g.OC+oc)*g.OH+oh)*g.OW+ow])
					db64[oc] += d
					for ci := 0; ci < cg; ci++ {
						c := grp*cg + ci
						for kh := 0; kh < g.KH; kh++ {
							for kw := 0; kw < g.KW; kw++ {
								ih, iw := oh*g.SH-g.PH+kh*g.DH, ow*g.SW-g.PW+kw*g.DW
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue
								}
								xi := ((n*g.C+c)*g.H+ih)*g.W + iw
								wi := ((oc*cg+ci)*g.KH+kh)*g.KW + kw
								dx64[xi] += float64(w[wi]) * d
								dw64[wi] += float64(x[xi]) * d
							}
						}
					}
				}
			}
		}
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	return f32(dx64), f32(dw64), f32(db64)
}

// packedConvGeoms add, to convGeoms, shapes that exercise the packed
// driver's edges: output positions not a multiple of any panel width (16,
// 32), channel counts past one or two register tiles (12 rows on AVX-512, 6
// on AVX2), filters longer than one kc block (256 taps), batch 1 (split
// over panels), and the benchmarks' LeNet-5 and MNIST layers.
var packedConvGeoms = append([]struct {
	name string
	g    Conv
}{
	{"c1 5x5 pad2 33x7", convCase(3, 1, 33, 7, 7, 5, 5, 1, 2, 1, 1)},
	{"oc 13 past one tile", convCase(2, 3, 9, 11, 13, 3, 3, 1, 1, 1, 1)},
	{"oc 25 stride2", convCase(2, 2, 13, 9, 25, 3, 3, 2, 0, 1, 1)},
	{"taps 261 past kc", convCase(2, 29, 6, 5, 5, 3, 3, 1, 1, 1, 1)},
	{"batch 1", convCase(1, 3, 17, 19, 4, 3, 3, 1, 1, 1, 1)},
	{"groups3 oc33", convCase(2, 6, 7, 7, 33, 2, 2, 1, 0, 1, 3)},
	{"lenet conv2", convCase(4, 6, 14, 14, 16, 5, 5, 1, 0, 1, 1)},
	{"mnist conv1", convCase(3, 1, 28, 28, 16, 5, 5, 1, 2, 1, 1)},
	// Direct kernels (one input channel per group, stride 1): depthwise
	// groups, dilation, rows wider than a 128-position block, uneven
	// padding, a 1-wide output, and channel counts off every block.
	{"direct depthwise", convCase(3, 4, 9, 10, 12, 3, 3, 1, 1, 1, 4)},
	{"direct groups3 oc9", convCase(2, 3, 6, 5, 9, 2, 3, 1, 0, 1, 3)},
	{"direct dilation2 oc5", convCase(2, 1, 11, 9, 5, 3, 3, 1, 2, 2, 1)},
	{"direct wide 1x137 oc3", convCase(2, 1, 1, 137, 3, 1, 7, 1, 0, 1, 1)},
	{"direct pad 0x3", Conv{N: 2, C: 1, H: 8, W: 6, OC: 6, OH: 6, OW: 6, KH: 3, KW: 7, SH: 1, SW: 1, PH: 0, PW: 3, DH: 1, DW: 1, Groups: 1}},
	{"direct ow1", convCase(1, 1, 5, 3, 1, 3, 3, 1, 0, 1, 1)},
	{"direct 67x31 oc17", convCase(2, 1, 67, 31, 17, 4, 4, 1, 1, 1, 1)},
	// Padding past the filter's reach (im2col only): output rows wider
	// than the padded input's.
	{"1x1 pad1", convCase(2, 3, 5, 4, 4, 1, 1, 1, 1, 1, 1)},
	{"3x3 dilation2 pad5", convCase(2, 2, 6, 7, 3, 3, 3, 1, 5, 2, 1)},
	// Depthwise layers of stride 2 (the depthwise method's), batch 1
	// and past the thread counts.
	{"depthwise 3x3 stride2", convCase(5, 6, 13, 12, 6, 3, 3, 2, 1, 1, 6)},
	{"depthwise 5x5 stride2 batch 1", convCase(1, 7, 17, 18, 7, 5, 5, 2, 2, 1, 7)},
	// 1×1 images (squeeze-and-excitation), which the pointwise method
	// runs as one dense layer for the batch.
	{"pointwise 1x1 images", convCase(5, 6, 1, 1, 4, 1, 1, 1, 0, 1, 1)},
	{"pointwise 1x1 images groups 2", convCase(3, 6, 1, 1, 4, 1, 1, 1, 0, 1, 2)},
}, convGeoms...)

// TestConvMatchesNaiveOnEveryPath runs every convolution method on every
// geometry it accepts, on every GEMM path and thread count, against the
// plain loops: forward with and without bias, backward with and without
// dx.
func TestConvMatchesNaiveOnEveryPath(t *testing.T) {
	forEachPathAndThreads(t, func(t *testing.T) {
		r := newTestRand(21)
		for _, m := range convMethods {
			for _, tc := range packedConvGeoms {
				g := tc.g
				if !m.ok(g) {
					continue
				}
				name := m.name + " " + tc.name
				x := randSlice(r, g.N*g.C*g.H*g.W, 1)
				w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
				b := randSlice(r, g.OC, 1)
				y := randSlice(r, g.N*g.OC*g.OH*g.OW, 100) // garbage to overwrite
				m.fwd(x, w, b, y, g, ActNone, 0)
				if msg := closeTo(y, convRef(x, w, b, g, ActNone, 0), 1e-5); msg != "" {
					t.Errorf("%s forward: %s", name, msg)
				}
				m.fwd(x, w, nil, y, g, ActReLU, 0)
				if msg := closeTo(y, convRef(x, w, nil, g, ActReLU, 0), 1e-5); msg != "" {
					t.Errorf("%s forward relu no bias: %s", name, msg)
				}

				if m.bwd == nil {
					continue // a forward-only method
				}
				dy := randSlice(r, len(y), 1)
				wantDx, wantDw, wantDb := convBwdRef(x, w, dy, g)
				// dw and db are float32 sums over every image and position:
				// allow one rounding (2⁻²⁴) per term summed.
				sumTol := max(1e-5, float64(g.N*g.OH*g.OW)*0x1p-24)
				dx, dw, db := randSlice(r, len(x), 9), randSlice(r, len(w), 9), randSlice(r, g.OC, 9)
				m.bwd(x, w, y, cloneF(dy), dx, dw, db, g, ActNone, 0)
				for _, c := range []struct {
					name      string
					got, want []float32
					tol       float64
				}{{"dx", dx, wantDx, 1e-5}, {"dw", dw, wantDw, sumTol}, {"db", db, wantDb, sumTol}} {
					if msg := closeTo(c.got, c.want, c.tol); msg != "" {
						t.Errorf("%s backward %s: %s", name, c.name, msg)
					}
				}
				dw2 := randSlice(r, len(w), 9)
				m.bwd(x, w, y, cloneF(dy), nil, dw2, nil, g, ActNone, 0)
				if msg := closeTo(dw2, wantDw, sumTol); msg != "" {
					t.Errorf("%s backward dw without dx and db: %s", name, msg)
				}

				// With ReLU: y from the ReLU forward (no bias), dy masked
				// where y is zero, with and without dx.
				m.fwd(x, w, nil, y, g, ActReLU, 0)
				masked := cloneF(dy)
				for i, v := range y {
					if v == 0 {
						masked[i] = 0
					}
				}
				wantDx, wantDw, wantDb = convBwdRef(x, w, masked, g)
				for _, withDx := range []bool{true, false} {
					var dx []float32
					if withDx {
						dx = randSlice(r, len(x), 9)
					}
					dw, db := randSlice(r, len(w), 9), randSlice(r, g.OC, 9)
					m.bwd(x, w, y, cloneF(dy), dx, dw, db, g, ActReLU, 0)
					if msg := closeTo(dw, wantDw, sumTol); msg != "" {
						t.Errorf("%s backward relu dx %v: dw %s", name, withDx, msg)
					}
					if msg := closeTo(db, wantDb, sumTol); msg != "" {
						t.Errorf("%s backward relu dx %v: db %s", name, withDx, msg)
					}
					if msg := closeTo(dx, wantDx, 1e-5); withDx && msg != "" {
						t.Errorf("%s backward relu: dx %s", name, msg)
					}
				}
			}
		}
	})
}

// TestMaxPool2x2NaNAndTies checks the 2×2 fast path's edge cases, and its
// winners against the general path's maxPoolArg: NaN wins and its first occurrence takes the gradient, ties go to the first
// pixel, ±Inf and -0 are ordinary values, odd planes leave the last row and
// column with zero gradient.
func TestMaxPool2x2NaNAndTies(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	g := convCase(1, 1, 3, 5, 1, 2, 2, 2, 0, 1, 1) // 3x5 in, 1x2 out
	x := []float32{
		1, nan, 2, 2, 9,
		nan, 0, 2, -inf, 9,
		7, 7, 7, 7, 7,
	}
	y := make([]float32, 2)
	MaxPool2DFwd(x, y, g)
	if !math.IsNaN(float64(y[0])) || y[1] != 2 {
		t.Fatalf("max pool of %v: y = %v, want [NaN 2]", x, y)
	}
	dx := randSlice(newTestRand(3), len(x), 9)
	MaxPool2DBwd(x, y, []float32{5, 6}, dx, g)
	want := []float32{
		0, 5, 6, 0, 0,
		0, 0, 0, 0, 0,
		0, 0, 0, 0, 0,
	}
	if msg := closeTo(dx, want, 0); msg != "" {
		t.Errorf("max pool backward of %v: dx = %v, want %v: %s", x, dx, want, msg)
	}
	for oh := 0; oh < g.OH; oh++ {
		for ow := 0; ow < g.OW; ow++ {
			a := maxPoolArg(x, g.norm(), oh, ow)
			if dx[a] != []float32{5, 6}[ow] {
				t.Errorf("window %d: general path's winner %d has gradient %v", ow, a, dx[a])
			}
		}
	}
}
