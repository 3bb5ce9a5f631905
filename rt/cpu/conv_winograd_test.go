package cpu

import (
	"math"
	"strings"
	"testing"
)

// winogradGeoms are awkward 5×5 geometries for the Winograd method: odd
// output sizes (a tile half outside), sizes below one tile, padding 0, 1
// and 2, channels that fill no vector, one image, and batches that make
// several rounds with a short last one, and more input channels than one
// packed GEMM panel holds (the products then pack U[ξ] on every call).
var winogradGeoms = []winogradGeom{
	{"flagship conv2 pad2", convCase(3, 32, 14, 14, 64, 5, 5, 1, 2, 1, 1)},
	{"odd 9x7 pad2", convCase(2, 3, 9, 7, 5, 5, 5, 1, 2, 1, 1)},
	{"pad0 11x8", convCase(1, 17, 11, 8, 19, 5, 5, 1, 0, 1, 1)},
	{"pad1 6x13", convCase(2, 1, 6, 13, 2, 5, 5, 1, 1, 1, 1)},
	{"smaller than a tile", convCase(1, 2, 5, 5, 3, 5, 5, 1, 0, 1, 1)},
	{"one tile column, 3 of 4 outputs wide", convCase(2, 3, 9, 7, 4, 5, 5, 1, 0, 1, 1)},
	{"pad3 wider than reach", convCase(1, 4, 4, 6, 3, 5, 5, 1, 3, 1, 1)},
	{"several rounds", convCase(9, 5, 14, 14, 7, 5, 5, 1, 2, 1, 1)},
	{"first layer 28x28", convCase(5, 1, 28, 28, 33, 5, 5, 1, 2, 1, 1)},
	{"channels past the GEMM's kc", convCase(2, 260, 6, 5, 3, 5, 5, 1, 2, 1, 1)},
}

// winogradGeom is a named test geometry.
type winogradGeom struct {
	name string
	g    Conv
}

// winogradErr is the largest |got − want| over scale.
func winogradErr(got, want []float32, scale float64) float64 {
	var e float64
	for i := range want {
		e = math.Max(e, math.Abs(float64(got[i])-float64(want[i])))
	}
	return e / scale
}

// maxAbs is the largest |v| of s.
func maxAbs(s []float32) float64 {
	var m float64
	for _, v := range s {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// winogradMethod is one Winograd algorithm's kernels and the bounds of
// its error relative to each result's scale (for inputs and filters
// uniform in [-1, 1)): tol for the forward pass (relative to the largest
// |pre-activation| of the float64 reference; the fused activations'
// slopes are at most 1) and dx, dwTol for the weight gradient against
// im2col + GEMM; geoms are its test geometries, r its filter side.
type winogradMethod struct {
	name       string
	fwd        func(x, w, b, y []float32, g Conv, act Act, alpha float32)
	bwd        func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)
	tol, dwTol float64
	geoms      []winogradGeom
	r          int
}

// winogradMethods are F(2×2,5×5), F(4×4,5×5) and F(4×4,3×3).
//
// F(2×2): measured on winogradGeoms up to 4.8e-6 forward (with 260 input
// channels; 2.8e-6 with the flagship's 32), against 1.6e-6 for the direct
// method (the error grows with the channels summed); dx 3.6e-6, dw 1.0e-5
// (F(5×5,2×2)'s output transform multiplies by up to 16, and each product
// sums the tiles of a whole round), db 6.7e-8.
//
// F(4×4): measured up to 9.1e-6 forward (260 input channels; 4.7e-6 with
// the flagship's 32), dx 6.2e-6, dw 1.0e-5: about twice F(2×2)'s. Since
// the filter transform and the weight gradient's finish are float32
// SGEMMs (winoPackFilters, dwKron; they were float64 loops), this test
// measures up to 6.4e-6 forward and 9.5e-6 for dx (5.4e-6 and 6.7e-6
// before), dw 8.6e-6 (7.2e-6). Its
// transforms have larger coefficients: the rows of Bᵀ sum to up to 15 in
// absolute value (F(2×2): 10), so the transformed inputs are up to 15² times
// the input, and the rows of Aᵀ to up to 19.25 (F(2×2): 7), so the output
// transform sums terms up to 19.25² times larger than the outputs; F(4×4)'s
// points ±1/2 also make G's entries (down to 1/90) and the products they
// scale cancel in the sum. The bounds leave about twice the measured error.
//
// F(4×4,3×3) (on winograd3Geoms): measured up to 6.7e-6 forward (4.6e-6
// on the vector paths; the direct method 8.0e-7), dx 5.2e-6, dw 3.3e-6,
// db 6.1e-8: its output transform's rows sum to up to 19 (F(2×2,5×5): 7),
// and its filters' 9 taps make the direct sum's error small.
var winogradMethods = []winogradMethod{
	{"F2", Conv2DWinogradFwd, Conv2DWinogradBwd, 1e-5, 5e-5, winogradGeoms, 5},
	{"F4", Conv2DWinogradF4Fwd, Conv2DWinogradF4Bwd, 2e-5, 5e-5, winogradGeoms, 5},
	{"F3", Conv2DWinograd3Fwd, Conv2DWinograd3Bwd, 1.5e-5, 1e-5, winograd3Geoms, 3},
}

func TestConvWinogradFwd(t *testing.T) {
	for _, wm := range winogradMethods {
		t.Run(wm.name, func(t *testing.T) { testConvWinogradFwd(t, wm) })
	}
}

func testConvWinogradFwd(t *testing.T, wm winogradMethod) {
	forEachGemmPath(t, func(t *testing.T) {
		r := newTestRand(60)
		worst, worstDirect := 0.0, 0.0
		for _, tc := range wm.geoms {
			g := tc.g
			if g.KH != wm.r || g.KW != wm.r {
				t.Fatalf("%s: not a %dx%d filter", tc.name, wm.r, wm.r)
			}
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			w := randSlice(r, g.OC*g.C*g.KH*g.KW, 1)
			b := randSlice(r, g.OC, 1)
			for _, a := range allActs {
				bias := b
				if a.act == ActSigmoid {
					bias = nil
				}
				scale := maxAbs(convRef(x, w, bias, g, ActNone, 0))
				y := randSlice(r, g.N*g.OC*g.OH*g.OW, 100) // garbage to be overwritten
				wm.fwd(x, w, bias, y, g, a.act, 0.2)
				ref := convRef(x, w, bias, g, a.act, 0.2)
				e := winogradErr(y, ref, scale)
				if a.act == ActNone {
					worst = math.Max(worst, e)
					if convDirectOK(g.norm()) {
						yd := make([]float32, len(y))
						Conv2DDirectFwd(x, w, bias, yd, g, a.act, 0.2)
						worstDirect = math.Max(worstDirect, winogradErr(yd, ref, scale))
					}
				}
				if e > wm.tol {
					t.Errorf("%s act %s: max |y-ref| / output scale = %.3g, bound %g", tc.name, a.name, e, wm.tol)
				}
			}
		}
		t.Logf("largest error relative to the output scale: Winograd %.3g, direct %.3g", worst, worstDirect)
	})
}

// TestConvWinogradBwd: each method's backward pass against the im2col
// method's on every path (within its bounds of each gradient's scale), and against
// finite differences of the Winograd forward.
func TestConvWinogradBwd(t *testing.T) {
	for _, wm := range winogradMethods {
		t.Run(wm.name, func(t *testing.T) { testConvWinogradBwd(t, wm) })
	}
}

func testConvWinogradBwd(t *testing.T, wm winogradMethod) {
	forEachGemmPath(t, func(t *testing.T) {
		r := newTestRand(64)
		var worst [3]float64
		for _, tc := range wm.geoms {
			g := tc.g
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			w := randSlice(r, g.OC*g.C*g.KH*g.KW, 1)
			y := make([]float32, g.N*g.OC*g.OH*g.OW)
			Conv2DIm2colFwd(x, w, nil, y, g, ActReLU, 0)
			dy := randSlice(r, len(y), 1)
			grads := func(bwd func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)) [3][]float32 {
				dx, dw, db := randSlice(r, len(x), 9), randSlice(r, len(w), 9), randSlice(r, g.OC, 9)
				bwd(x, w, y, cloneF(dy), dx, dw, db, g, ActReLU, 0)
				return [3][]float32{dx, dw, db}
			}
			got, want := grads(wm.bwd), grads(Conv2DIm2colBwd)
			for i, name := range []string{"dx", "dw", "db"} {
				e := winogradErr(got[i], want[i], maxAbs(want[i]))
				worst[i] = math.Max(worst[i], e)
				bound := wm.tol
				if name == "dw" {
					bound = wm.dwTol
				}
				if e > bound {
					t.Errorf("%s %s: max error / scale = %.3g, bound %g", tc.name, name, e, bound)
				}
			}
		}
		t.Logf("largest error relative to the scale, against im2col: dx %.3g, dw %.3g, db %.3g", worst[0], worst[1], worst[2])
	})
	// Finite differences on the geometries with few channels: over
	// hundreds of terms Winograd's rounding noise and the ReLU kinks blur
	// the float32 differences. F(4×4,5×5)'s and F(4×4,3×3)'s noise blurs
	// them even there, so they are checked with tanh only; their ReLU
	// gradients are those compared with im2col's above.
	r := newTestRand(65)
	for _, tc := range wm.geoms {
		if tc.g.C > 4 || tc.g.H > 14 {
			continue
		}
		convBwdFiniteDifferencesActs(t, r, "winograd "+wm.name, tc.name, tc.g, wm.fwd, wm.bwd, wm.name != "F2")
	}
}

// TestConvWinogradSameResultOnAnyThreadCount: rounds are whole images, each
// computed by one worker the same way, so the thread count changes
// nothing in y and dx (dw and db are summed per worker, so their last
// bits may change with the thread count).
func TestConvWinogradSameResultOnAnyThreadCount(t *testing.T) {
	defer SetThreads(Threads())
	for _, wm := range winogradMethods {
		// 21 images make rounds for every thread count, one image (9
		// columns: a tile column part outside) fewer rounds than
		// threads.
		for _, g := range []Conv{convCase(21, 6, 9, 10, 5, wm.r, wm.r, 1, 2, 1, 1), convCase(1, 20, 13, 9, 17, wm.r, wm.r, 1, 1, 1, 1)} {
			r := newTestRand(61)
			x, w, b := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*g.KH*g.KW, 1), randSlice(r, g.OC, 1)
			run := func(threads int) []float32 {
				SetThreads(threads)
				y := make([]float32, g.N*g.OC*g.OH*g.OW)
				wm.fwd(x, w, b, y, g, ActReLU, 0)
				dx := make([]float32, len(x))
				wm.bwd(x, w, y, cloneF(y), dx, make([]float32, len(w)), make([]float32, g.OC), g, ActReLU, 0)
				return append(y, dx...)
			}
			one := run(1)
			for _, n := range []int{2, 3, 8} {
				if msg := closeTo(run(n), one, 0); msg != "" {
					t.Errorf("%s, %d images: %d threads differ from 1 (y, then dx): %s", wm.name, g.N, n, msg)
				}
			}
		}
	}
}

// TestConvWinogradTransformsAgree: each vector transform (input, dy and
// output) computes what the Go transform computes, in the same order, so the results are the same
// bits (channel counts of one and several vectors).
func TestConvWinogradTransformsAgree(t *testing.T) {
	for _, path := range GemmPaths() {
		k := archWinograd(path)
		if k == nil {
			continue
		}
		for _, n := range []int{k.lanes, 3 * k.lanes} {
			r := newTestRand(62)
			ldRow, ldCol, ldXi := 7*n+k.lanes, n+k.lanes, n+2*k.lanes
			src := randSlice(r, 6*ldRow, 3)
			want, got := make([]float32, 36*ldXi), make([]float32, 36*ldXi)
			winoInputGo(&src[0], ldRow, ldCol, &want[0], ldXi, n)
			k.input(&src[0], ldRow, ldCol, &got[0], ldXi, n)
			if msg := closeTo(got, want, 0); msg != "" {
				t.Errorf("%s input transform, %d channels: %s", path, n, msg)
			}
			dyw, dyg := make([]float32, 36*ldXi), make([]float32, 36*ldXi)
			winoDyGo(&src[0], ldRow, ldCol, &dyw[0], ldXi, n)
			k.dy(&src[0], ldRow, ldCol, &dyg[0], ldXi, n)
			if msg := closeTo(dyg, dyw, 0); msg != "" {
				t.Errorf("%s dy transform, %d channels: %s", path, n, msg)
			}
			bias := randSlice(r, n, 1)
			for relu := 0; relu < 2; relu++ {
				yw, yg := make([]float32, 2*ldRow), make([]float32, 2*ldRow)
				winoOutputGo(&want[0], ldXi, &yw[0], ldRow, ldCol, &bias[0], relu, n)
				k.output(&want[0], ldXi, &yg[0], ldRow, ldCol, &bias[0], relu, n)
				if msg := closeTo(yg, yw, 0); msg != "" {
					t.Errorf("%s output transform, %d channels, relu %d: %s", path, n, relu, msg)
				}
			}
		}
	}
}

// TestConvWinogradF4Transforms: F(4×4,5×5)'s transforms on every path
// (the AVX-512 and AVX2 passes and the Go ones) against the matrices
// applied in float64: Bᵀ d B, Aᵀ m A + bias with and without ReLU, and
// E g Eᵀ (G2 without its row scales), for channel counts of one and
// several vectors and strides that leave gaps. The vector passes of Bᵀ
// and Aᵀ multiply by the zero coefficients and fuse multiply-adds, the Go
// passes neither, so the bound is a few float32 roundings of the largest
// term, not the same bits; E's products are exact, so its transforms must
// be the Go one's bits.
func TestConvWinogradF4Transforms(t *testing.T) {
	// The dy transform applies E and the weight gradient's finish the
	// scales: together they must be G2 (emit/gpu's WinogradF4).
	for i, row := range winoF4G2 {
		for j, g := range row {
			if got := winoF4G2Scale[i] * winoF4E[i][j]; math.Abs(got-g) > 1e-15 {
				t.Errorf("G2[%d][%d]: scale·E is %v, want %v", i, j, got, g)
			}
		}
	}
	checkWinoTransforms(t, winogradF4For, winoDyF4Go, winoF4BT, winoF4E, winoF4AT, 66)
}

// checkWinoTransforms checks one Winograd algorithm's transforms on every
// path (kernels picks them by the path's name) against its matrices
// applied in float64: Bᵀ d B (bt, α×α), E g Eᵀ (e) and Aᵀ m A + bias with
// and without ReLU (at, m×α), for channel counts of one and several
// vectors and strides that leave gaps, within a few float32 roundings of
// the largest term (1e-6 of it); E's products are exact, so every path's
// dy transform must be dyGo's bits.
func checkWinoTransforms(t *testing.T, kernels func(*gemmPath) *winogradKernels, dyGo func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int), bt, e, at [][]float64, seed uint64) {
	t.Helper()
	alpha, m := len(bt), len(at)
	xis := alpha * alpha
	// apply2 returns M X Mᵀ per channel, X (J×J) at x(i, j).
	apply2 := func(m [][]float64, x func(i, j int) float64) [][]float64 {
		r, jn := len(m), len(m[0])
		out := make([][]float64, r)
		for a := range r {
			out[a] = make([]float64, r)
			for b := range r {
				for i := range jn {
					for j := range jn {
						out[a][b] += m[a][i] * x(i, j) * m[b][j]
					}
				}
			}
		}
		return out
	}
	for _, path := range GemmPaths() {
		k := kernels(&gemmPath{name: path}) // the transforms go by the path's name
		for _, n := range []int{k.lanes, 3 * k.lanes} {
			r := newTestRand(seed)
			ldRow, ldCol, ldXi := (alpha+1)*n+k.lanes, n+k.lanes, n+2*k.lanes
			src := randSlice(r, max(alpha*ldRow, xis*ldXi), 3)
			check := func(what string, got []float32, at func(a, b, c int) int, want func(c int) [][]float64, bias []float32, relu int) {
				t.Helper()
				worst, scale := 0.0, 0.0
				for c := range n {
					w := want(c)
					for a := range w {
						for b := range w[a] {
							v := w[a][b]
							if bias != nil {
								v += float64(bias[c])
							}
							scale = math.Max(scale, math.Abs(v))
							if relu != 0 && v < 0 {
								v = 0
							}
							worst = math.Max(worst, math.Abs(float64(got[at(a, b, c)])-v))
						}
					}
				}
				if !(worst <= 1e-6*scale) || scale == 0 { // NaN fails too
					t.Errorf("%s %s, %d channels: max error %.3g against a scale of %.3g", path, what, n, worst, scale)
				}
			}
			v := make([]float32, xis*ldXi)
			k.input(&src[0], ldRow, ldCol, &v[0], ldXi, n)
			check("input transform", v, func(a, b, c int) int { return (alpha*a+b)*ldXi + c }, func(c int) [][]float64 {
				return apply2(bt, func(i, j int) float64 { return float64(src[i*ldRow+j*ldCol+c]) })
			}, nil, 0)
			dyv := make([]float32, xis*ldXi)
			for i := range dyv {
				dyv[i] = float32(math.NaN()) // every ξ must be written
			}
			k.dy(&src[0], ldRow, ldCol, &dyv[0], ldXi, n)
			check("dy transform", dyv, func(a, b, c int) int { return (alpha*a+b)*ldXi + c }, func(c int) [][]float64 {
				return apply2(e, func(i, j int) float64 { return float64(src[i*ldRow+j*ldCol+c]) })
			}, nil, 0)
			goDy := make([]float32, xis*ldXi)
			dyGo(&src[0], ldRow, ldCol, &goDy[0], ldXi, n)
			for xi := range xis {
				if msg := closeTo(dyv[xi*ldXi:xi*ldXi+n], goDy[xi*ldXi:xi*ldXi+n], 0); msg != "" {
					t.Errorf("%s dy transform, %d channels, ξ %d: not the Go transform's bits: %s", path, n, xi, msg)
				}
			}
			bias := randSlice(r, n, 1)
			for relu := 0; relu < 2; relu++ {
				mm := cloneF(src[:xis*ldXi]) // the output transform overwrites its source
				y := make([]float32, m*ldRow)
				k.output(&mm[0], ldXi, &y[0], ldRow, ldCol, &bias[0], relu, n)
				check("output transform", y, func(a, b, c int) int { return a*ldRow + b*ldCol + c }, func(c int) [][]float64 {
					return apply2(at, func(i, j int) float64 { return float64(src[(alpha*i+j)*ldXi+c]) })
				}, bias, relu)
			}
		}
	}
}

// TestConvWinogradRefusesOtherGeometry: the kernel panics, naming the
// geometry, on one it does not compute (the planner never hands it one).
func TestConvWinogradRefusesOtherGeometry(t *testing.T) {
	for _, g := range []Conv{convCase(1, 2, 6, 6, 2, 3, 3, 1, 1, 1, 1), convCase(1, 2, 9, 9, 2, 5, 5, 2, 2, 1, 1), convCase(1, 2, 9, 9, 2, 5, 5, 1, 4, 2, 1)} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "Winograd F(2x2,5x5) needs") {
					t.Errorf("%+v: panic %q, want the refusal", g, msg)
				}
			}()
			y := make([]float32, g.N*g.OC*g.OH*g.OW)
			Conv2DWinogradFwd(make([]float32, g.N*g.C*g.H*g.W), make([]float32, g.OC*g.C*g.KH*g.KW), nil, y, g, ActNone, 0)
		}()
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "cpu.Conv2DWinogradF4Bwd") || !strings.Contains(msg, "Winograd F(4x4,5x5) needs") {
					t.Errorf("%+v: panic %q, want F(4x4)'s refusal", g, msg)
				}
			}()
			y := make([]float32, g.N*g.OC*g.OH*g.OW)
			Conv2DWinogradF4Bwd(make([]float32, g.N*g.C*g.H*g.W), make([]float32, g.OC*g.C*g.KH*g.KW), y, y, nil, make([]float32, g.OC*g.C*g.KH*g.KW), nil, g, ActNone, 0)
		}()
	}
}

// BenchmarkConvWinograd times the passes of models/mnist.cue's second
// convolution (32→64 channels, 14×14, padding 2, batch 250) by the direct
// and the Winograd method, and of the layers the CPU rule's thresholds
// (planner's cpuWinogradPays) were set on.
func BenchmarkConvWinograd(b *testing.B) {
	for _, tc := range []struct {
		name string
		g    Conv
	}{
		{"mnist conv2 32-64", convCase(250, 32, 14, 14, 64, 5, 5, 1, 2, 1, 1)},
		{"bench conv2 16-32", convCase(250, 16, 14, 14, 32, 5, 5, 1, 2, 1, 1)},
		{"mnist conv1 1-32", convCase(250, 1, 28, 28, 32, 5, 5, 1, 2, 1, 1)},
		{"lenet conv2 6-16", convCase(250, 6, 14, 14, 16, 5, 5, 1, 0, 1, 1)},
		{"8-16 pad2", convCase(250, 8, 14, 14, 16, 5, 5, 1, 2, 1, 1)},
		{"mnist batch1 32-64", convCase(1, 32, 14, 14, 64, 5, 5, 1, 2, 1, 1)},
	} {
		g := tc.g
		r := newTestRand(63)
		x, w, bias := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*25, 0.05), randSlice(r, g.OC, 0.05)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		b.Run(tc.name+"/direct fwd", func(b *testing.B) {
			start := processCPU()
			for b.Loop() {
				Conv2DDirectFwd(x, w, bias, y, g, ActReLU, 0)
			}
			reportCPUTime(b, start)
		})
		b.Run(tc.name+"/winograd fwd", func(b *testing.B) {
			start := processCPU()
			for b.Loop() {
				Conv2DWinogradFwd(x, w, bias, y, g, ActReLU, 0)
			}
			reportCPUTime(b, start)
		})
		b.Run(tc.name+"/winograd4 fwd", func(b *testing.B) {
			start := processCPU()
			for b.Loop() {
				Conv2DWinogradF4Fwd(x, w, bias, y, g, ActReLU, 0)
			}
			reportCPUTime(b, start)
		})
		dy, dx, dw, db := randSlice(r, len(y), 1), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
		b.Run(tc.name+"/direct bwd", func(b *testing.B) {
			start := processCPU()
			for b.Loop() {
				Conv2DDirectBwd(x, w, y, dy, dx, dw, db, g, ActReLU, 0)
			}
			reportCPUTime(b, start)
		})
		b.Run(tc.name+"/winograd bwd", func(b *testing.B) {
			start := processCPU()
			for b.Loop() {
				Conv2DWinogradBwd(x, w, y, dy, dx, dw, db, g, ActReLU, 0)
			}
			reportCPUTime(b, start)
		})
		b.Run(tc.name+"/winograd4 bwd", func(b *testing.B) {
			start := processCPU()
			for b.Loop() {
				Conv2DWinogradF4Bwd(x, w, y, dy, dx, dw, db, g, ActReLU, 0)
			}
			reportCPUTime(b, start)
		})
	}
}

// BenchmarkConvWinogradPaths times F(2×2,5×5) against F(4×4,5×5) on
// models/mnist.cue's second layer on every GEMM path this machine has
// (with its transforms): the planner chooses the method without seeing
// the machine, so F(4×4) has to win on each.
func BenchmarkConvWinogradPaths(b *testing.B) {
	defer SetGemmPath("")
	g := convCase(250, 32, 14, 14, 64, 5, 5, 1, 2, 1, 1)
	r := newTestRand(67)
	x, w, bias := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*25, 0.05), randSlice(r, g.OC, 0.05)
	y := make([]float32, g.N*g.OC*g.OH*g.OW)
	dy, dx, dw, db := randSlice(r, len(y), 1), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
	for _, path := range GemmPaths() {
		for _, wm := range winogradMethods {
			b.Run(path+"/"+wm.name+" fwd", func(b *testing.B) {
				if err := SetGemmPath(path); err != nil {
					b.Fatal(err)
				}
				start := processCPU()
				for b.Loop() {
					wm.fwd(x, w, bias, y, g, ActReLU, 0)
				}
				reportCPUTime(b, start)
			})
			b.Run(path+"/"+wm.name+" bwd", func(b *testing.B) {
				if err := SetGemmPath(path); err != nil {
					b.Fatal(err)
				}
				start := processCPU()
				for b.Loop() {
					wm.bwd(x, w, y, dy, dx, dw, db, g, ActReLU, 0)
				}
				reportCPUTime(b, start)
			})
		}
	}
}
