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
var winogradGeoms = []struct {
	name string
	g    Conv
}{
	{"flagship conv2 pad2", convCase(3, 32, 14, 14, 64, 5, 5, 1, 2, 1, 1)},
	{"odd 9x7 pad2", convCase(2, 3, 9, 7, 5, 5, 5, 1, 2, 1, 1)},
	{"pad0 11x8", convCase(1, 17, 11, 8, 19, 5, 5, 1, 0, 1, 1)},
	{"pad1 6x13", convCase(2, 1, 6, 13, 2, 5, 5, 1, 1, 1, 1)},
	{"smaller than a tile", convCase(1, 2, 5, 5, 3, 5, 5, 1, 0, 1, 1)},
	{"pad3 wider than reach", convCase(1, 4, 4, 6, 3, 5, 5, 1, 3, 1, 1)},
	{"several rounds", convCase(9, 5, 14, 14, 7, 5, 5, 1, 2, 1, 1)},
	{"first layer 28x28", convCase(5, 1, 28, 28, 33, 5, 5, 1, 2, 1, 1)},
	{"channels past the GEMM's kc", convCase(2, 260, 6, 5, 3, 5, 5, 1, 2, 1, 1)},
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

// winogradTol bounds the forward pass's error relative to the output
// scale (the largest |pre-activation| of the float64 reference; the fused
// activations' slopes are at most 1) for inputs and filters uniform in
// [-1, 1). Measured on these geometries: up to 4.8e-6 (with 260 input
// channels; 2.8e-6 with the flagship's 32), against 1.6e-6 for the direct
// method; the error grows with the channels summed.
const winogradTol = 1e-5

// winogradDWTol bounds the weight gradient's error relative to its scale
// against im2col + GEMM: F(5×5,2×2)'s output transform multiplies by up
// to 16, and each product sums the tiles of a whole round. Measured on
// these geometries: 1.0e-5 (dx 3.6e-6, db 6.7e-8).
const winogradDWTol = 5e-5

func TestConvWinogradFwd(t *testing.T) {
	forEachGemmPath(t, func(t *testing.T) {
		r := newTestRand(60)
		worst, worstDirect := 0.0, 0.0
		for _, tc := range winogradGeoms {
			g := tc.g
			if !winogradOK(g.norm()) {
				t.Fatalf("%s: Winograd does not take its test geometry", tc.name)
			}
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			w := randSlice(r, g.OC*g.C*25, 1)
			b := randSlice(r, g.OC, 1)
			for _, a := range allActs {
				bias := b
				if a.act == ActSigmoid {
					bias = nil
				}
				scale := maxAbs(convRef(x, w, bias, g, ActNone, 0))
				y := randSlice(r, g.N*g.OC*g.OH*g.OW, 100) // garbage to be overwritten
				Conv2DWinogradFwd(x, w, bias, y, g, a.act, 0.2)
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
				if e > winogradTol {
					t.Errorf("%s act %s: max |y-ref| / output scale = %.3g, bound %g", tc.name, a.name, e, winogradTol)
				}
			}
		}
		t.Logf("largest error relative to the output scale: Winograd %.3g, direct %.3g", worst, worstDirect)
	})
}

// TestConvWinogradBwd: the backward pass against the im2col method's on
// every path (within winogradTol of each gradient's scale), and against
// finite differences of the Winograd forward.
func TestConvWinogradBwd(t *testing.T) {
	forEachGemmPath(t, func(t *testing.T) {
		r := newTestRand(64)
		var worst [3]float64
		for _, tc := range winogradGeoms {
			g := tc.g
			x := randSlice(r, g.N*g.C*g.H*g.W, 1)
			w := randSlice(r, g.OC*g.C*25, 1)
			y := make([]float32, g.N*g.OC*g.OH*g.OW)
			Conv2DIm2colFwd(x, w, nil, y, g, ActReLU, 0)
			dy := randSlice(r, len(y), 1)
			grads := func(bwd func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)) [3][]float32 {
				dx, dw, db := randSlice(r, len(x), 9), randSlice(r, len(w), 9), randSlice(r, g.OC, 9)
				bwd(x, w, y, cloneF(dy), dx, dw, db, g, ActReLU, 0)
				return [3][]float32{dx, dw, db}
			}
			got, want := grads(Conv2DWinogradBwd), grads(Conv2DIm2colBwd)
			for i, name := range []string{"dx", "dw", "db"} {
				e := winogradErr(got[i], want[i], maxAbs(want[i]))
				worst[i] = math.Max(worst[i], e)
				bound := winogradTol
				if name == "dw" {
					bound = winogradDWTol
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
	// the float32 differences.
	r := newTestRand(65)
	for _, tc := range winogradGeoms {
		if tc.g.C > 4 || tc.g.H > 14 {
			continue
		}
		convBwdFiniteDifferences(t, r, "winograd", tc.name, tc.g, Conv2DWinogradFwd, Conv2DWinogradBwd)
	}
}

// TestConvWinogradSameResultOnAnyThreadCount: rounds are whole images, each
// computed by one worker the same way, so the thread count changes
// nothing in y and dx (dw and db are summed per worker, so their last
// bits may change with the thread count).
func TestConvWinogradSameResultOnAnyThreadCount(t *testing.T) {
	defer SetThreads(Threads())
	g := convCase(21, 6, 9, 10, 5, 5, 5, 1, 2, 1, 1)
	r := newTestRand(61)
	x, w, b := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*25, 1), randSlice(r, g.OC, 1)
	run := func(threads int) []float32 {
		SetThreads(threads)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		Conv2DWinogradFwd(x, w, b, y, g, ActReLU, 0)
		dx := make([]float32, len(x))
		Conv2DWinogradBwd(x, w, y, cloneF(y), dx, make([]float32, len(w)), make([]float32, g.OC), g, ActReLU, 0)
		return append(y, dx...)
	}
	one := run(1)
	for _, n := range []int{2, 3, 8} {
		if msg := closeTo(run(n), one, 0); msg != "" {
			t.Errorf("%d threads differ from 1 (y, then dx): %s", n, msg)
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
	}
}
