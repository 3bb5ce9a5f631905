package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// convCase builds a Conv geometry from input and window sizes, computing the
// output size the way PyTorch does.
func convCase(n, c, h, w, oc, kh, kw, s, p, d, groups int) Conv {
	oh := (h+2*p-d*(kh-1)-1)/s + 1
	ow := (w+2*p-d*(kw-1)-1)/s + 1
	return Conv{N: n, C: c, H: h, W: w, OC: oc, OH: oh, OW: ow, KH: kh, KW: kw,
		SH: s, SW: s, PH: p, PW: p, DH: d, DW: d, Groups: groups}
}

// convGeoms are the awkward geometries every conv and pool test runs over.
var convGeoms = []struct {
	name string
	g    Conv
}{
	{"3x3 pad1", convCase(2, 3, 5, 6, 4, 3, 3, 1, 1, 1, 1)},
	{"stride2 pad1", convCase(2, 3, 7, 5, 2, 3, 3, 2, 1, 1, 1)},
	{"dilation2", convCase(1, 2, 7, 7, 3, 3, 3, 1, 2, 2, 1)},
	{"groups2", convCase(2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 2)},
	{"pointwise", convCase(2, 4, 3, 5, 3, 1, 1, 1, 0, 1, 1)},
	{"pointwise groups2", convCase(1, 4, 3, 3, 4, 1, 1, 1, 0, 1, 2)},
	{"1x1 stride2", convCase(2, 3, 5, 5, 2, 1, 1, 2, 0, 1, 1)},
	{"5x5 pad2", convCase(1, 1, 6, 6, 2, 5, 5, 1, 2, 1, 1)},
	{"2x4 rect", Conv{N: 2, C: 2, H: 6, W: 7, OC: 3, OH: 5, OW: 3, KH: 2, KW: 4, SH: 1, SW: 2, PH: 0, PW: 1, DH: 1, DW: 1, Groups: 1}},
	{"batch past slots", convCase(19, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1)},
	{"pointwise batch past slots", convCase(19, 5, 3, 7, 6, 1, 1, 1, 0, 1, 1)},
}

// convMethods are the convolution methods, each with the geometry it
// accepts (the planner's CPU rule chooses among them; here every method
// runs on every geometry it accepts).
var convMethods = []struct {
	name string
	fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
	bwd  func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)
	ok   func(g Conv) bool
}{
	{"direct", Conv2DDirectFwd, Conv2DDirectBwd, func(g Conv) bool { return convDirectOK(g.norm()) }},
	{"im2col", Conv2DIm2colFwd, Conv2DIm2colBwd, func(Conv) bool { return true }},
	{"pointwise", Conv2DPointwiseFwd, Conv2DPointwiseBwd, func(g Conv) bool { return pointwiseOK(g.norm()) }},
	{"depthwise", Conv2DDepthwiseFwd, Conv2DDepthwiseBwd, func(g Conv) bool { return depthwiseOK(g.norm()) }},
}

// convRef is the plain seven-loop convolution with bias and activation.
func convRef(x, w, b []float32, g Conv, act Act, alpha float32) []float32 {
	g = g.norm()
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	y := make([]float32, g.N*g.OC*g.OH*g.OW)
	for n := 0; n < g.N; n++ {
		for oc := 0; oc < g.OC; oc++ {
			grp := oc / ocg
			for oh := 0; oh < g.OH; oh++ {
				for ow := 0; ow < g.OW; ow++ {
					var s float64
					if b != nil {
						s = float64(b[oc])
					}
					for ci := 0; ci < cg; ci++ {
						c := grp*cg + ci
						for kh := 0; kh < g.KH; kh++ {
							for kw := 0; kw < g.KW; kw++ {
								ih, iw := oh*g.SH-g.PH+kh*g.DH, ow*g.SW-g.PW+kw*g.DW
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue
								}
								s += float64(x[((n*g.C+c)*g.H+ih)*g.W+iw]) * float64(w[((oc*cg+ci)*g.KH+kh)*g.KW+kw])
							}
						}
					}
					y[((n*g.OC+oc)*g.OH+oh)*g.OW+ow] = float32(actRef(s, act, alpha))
				}
			}
		}
	}
	return y
}

func TestConv2DFwdMatchesNaive(t *testing.T) {
	r := newTestRand(10)
	for _, m := range convMethods {
		for _, tc := range convGeoms {
			g := tc.g
			if !m.ok(g) {
				continue
			}
			for _, a := range allActs {
				x := randSlice(r, g.N*g.C*g.H*g.W, 1)
				w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
				b := randSlice(r, g.OC, 1)
				if a.act == ActSigmoid {
					b = nil
				}
				y := make([]float32, g.N*g.OC*g.OH*g.OW)
				m.fwd(x, w, b, y, g, a.act, 0.2)
				if msg := closeTo(y, convRef(x, w, b, g, a.act, 0.2), 1e-5); msg != "" {
					t.Errorf("%s forward %s act %s: %s", m.name, tc.name, a.name, msg)
				}
			}
		}
	}
}

func TestConv2DBwdFiniteDifferences(t *testing.T) {
	// Seed 11 put one of the pointwise method's three bias probes of
	// "pointwise" on a ReLU kink (a quarter is the most the check skips).
	r := newTestRand(12)
	for _, m := range convMethods {
		for _, tc := range convGeoms {
			if !m.ok(tc.g) || m.bwd == nil {
				continue
			}
			convBwdFiniteDifferences(t, r, m.name, tc.name, tc.g, m.fwd, m.bwd)
		}
	}
}

// convBwdFiniteDifferences checks one method's backward on geometry g
// against finite differences of its forward, with dx and db, and dw again
// without them, with tanh and with ReLU as the activation.
func convBwdFiniteDifferences(t *testing.T, r *rand.Rand, method, geom string, g Conv,
	fwdFn func(x, w, b, y []float32, g Conv, act Act, alpha float32),
	bwdFn func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)) {
	t.Helper()
	convBwdFiniteDifferencesActs(t, r, method, geom, g, fwdFn, bwdFn, false)
}

// convBwdFiniteDifferencesActs is convBwdFiniteDifferences, with tanh only
// when smoothOnly: the ReLU check tells a kink from a smooth point by its
// one-sided differences over a step of 1e-3, which a method's float32
// rounding noise can blur as much as a kink (Winograd F(4×4,5×5)'s).
func convBwdFiniteDifferencesActs(t *testing.T, r *rand.Rand, method, geom string, g Conv,
	fwdFn func(x, w, b, y []float32, g Conv, act Act, alpha float32),
	bwdFn func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32), smoothOnly bool) {
	t.Helper()
	if g.N > 4 {
		g.N = 17 // still past the 16 slots, but fewer forward passes per probe
	}
	acts := []struct {
		name  string
		act   Act
		check gradCheck
	}{{"tanh", ActTanh, smoothCheck}, {"relu", ActReLU, kinkyCheck}}
	if smoothOnly {
		acts = acts[:1]
	}
	for _, a := range acts {
		name := fmt.Sprintf("conv %s %s act %s", method, geom, a.name)
		if a.check.kinks && g.N > 2 {
			// Over many outputs a bias probe nearly always crosses
			// some ReLU kink; the smooth run covers the big batch.
			g.N = 2
		}
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 0.5)
		b := randSlice(r, g.OC, 0.5)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		fwd := func() []float32 { fwdFn(x, w, b, y, g, a.act, 0); return y }
		proj := randSlice(r, len(y), 1)
		fwd()
		dx, dw, db := randSlice(r, len(x), 9), randSlice(r, len(w), 9), randSlice(r, len(b), 9)
		bwdFn(x, w, y, cloneF(proj), dx, dw, db, g, a.act, 0)
		a.check.run(t, name, proj, fwd, gradInput{"x", x, dx}, gradInput{"w", w, dw}, gradInput{"b", b, db})

		// Without dx and db, dw is the same.
		fwd()
		dw2 := make([]float32, len(w))
		bwdFn(x, w, y, cloneF(proj), nil, dw2, nil, g, a.act, 0)
		if msg := closeTo(dw2, dw, 1e-6); msg != "" {
			t.Errorf("%s: dw without dx/db differs: %s", name, msg)
		}
	}
}

// poolRef is the plain max or average pooling, padding as -inf or 0.
func poolRef(x []float32, g Conv, isMax bool) []float32 {
	g = g.norm()
	y := make([]float32, g.N*g.C*g.OH*g.OW)
	for p := 0; p < g.N*g.C; p++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				best, sum := math.Inf(-1), 0.0
				for kh := 0; kh < g.KH; kh++ {
					for kw := 0; kw < g.KW; kw++ {
						ih, iw := oh*g.SH-g.PH+kh*g.DH, ow*g.SW-g.PW+kw*g.DW
						v := math.Inf(-1)
						if ih >= 0 && ih < g.H && iw >= 0 && iw < g.W {
							v = float64(x[(p*g.H+ih)*g.W+iw])
							sum += v
						}
						best = math.Max(best, v)
					}
				}
				if isMax {
					y[(p*g.OH+oh)*g.OW+ow] = float32(best)
				} else {
					y[(p*g.OH+oh)*g.OW+ow] = float32(sum / float64(g.KH*g.KW))
				}
			}
		}
	}
	return y
}

// poolGeoms are pooling windows: the usual 2×2/2, overlapping 3×3/2 with
// padding, odd sizes, and dilation.
var poolGeoms = []struct {
	name string
	g    Conv
}{
	{"2x2 s2", convCase(2, 3, 6, 6, 3, 2, 2, 2, 0, 1, 1)},
	{"2x2 s2 odd", convCase(1, 2, 7, 5, 2, 2, 2, 2, 0, 1, 1)},
	{"3x3 s2 pad1", convCase(2, 2, 7, 6, 2, 3, 3, 2, 1, 1, 1)},
	{"3x3 s1 dilation2", convCase(1, 2, 7, 7, 2, 3, 3, 1, 1, 2, 1)},
}

func TestPoolsMatchNaiveAndFiniteDifferences(t *testing.T) {
	r := newTestRand(11)
	for _, tc := range poolGeoms {
		g := tc.g
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		y := make([]float32, g.N*g.C*g.OH*g.OW)
		proj := randSlice(r, len(y), 1)

		MaxPool2DFwd(x, y, g)
		if msg := closeTo(y, poolRef(x, g, true), 0); msg != "" {
			t.Errorf("MaxPool2DFwd %s: %s", tc.name, msg)
		}
		dx := randSlice(r, len(x), 9)
		MaxPool2DBwd(x, y, cloneF(proj), dx, g)
		kinkyCheck.run(t, "maxpool "+tc.name, proj, func() []float32 { MaxPool2DFwd(x, y, g); return y }, gradInput{"x", x, dx})

		AvgPool2DFwd(x, y, g)
		if msg := closeTo(y, poolRef(x, g, false), 1e-6); msg != "" {
			t.Errorf("AvgPool2DFwd %s: %s", tc.name, msg)
		}
		AvgPool2DBwd(cloneF(proj), dx, g)
		smoothCheck.run(t, "avgpool "+tc.name, proj, func() []float32 { AvgPool2DFwd(x, y, g); return y }, gradInput{"x", x, dx})
	}
}

func TestMaxPoolTiesGoToFirst(t *testing.T) {
	g := convCase(1, 1, 2, 2, 1, 2, 2, 2, 0, 1, 1)
	x := []float32{1, 3, 3, 2}
	y := make([]float32, 1)
	MaxPool2DFwd(x, y, g)
	dx := make([]float32, 4)
	MaxPool2DBwd(x, y, []float32{5}, dx, g)
	if want := []float32{0, 5, 0, 0}; closeTo(dx, want, 0) != "" || y[0] != 3 {
		t.Errorf("max pool of %v: y = %v dx = %v, want y = [3] dx = %v", x, y, dx, want)
	}
}

func TestGlobalAvgPool(t *testing.T) {
	r := newTestRand(11)
	n, c, sp := 3, 4, 5
	x := randSlice(r, n*c*sp, 1)
	y := make([]float32, n*c)
	GlobalAvgPoolFwd(x, y, n, c, sp)
	want := make([]float32, n*c)
	for p := range want {
		var s float64
		for i := 0; i < sp; i++ {
			s += float64(x[p*sp+i])
		}
		want[p] = float32(s / float64(sp))
	}
	if msg := closeTo(y, want, 1e-6); msg != "" {
		t.Errorf("GlobalAvgPoolFwd: %s", msg)
	}
	proj := randSlice(r, len(y), 1)
	dx := make([]float32, len(x))
	GlobalAvgPoolBwd(proj, dx, n, c, sp)
	smoothCheck.run(t, "globalavgpool", proj, func() []float32 { GlobalAvgPoolFwd(x, y, n, c, sp); return y }, gradInput{"x", x, dx})
}

func TestConvSameResultOnAnyThreadCount(t *testing.T) {
	defer SetThreads(Threads())
	for _, m := range convMethods {
		stride, k, pad := 2, 3, 1
		switch m.name {
		case "direct":
			stride = 1
		case "pointwise":
			stride, k, pad = 1, 1, 0
		}
		g := convCase(21, 4, 9, 8, 6, k, k, stride, pad, 1, 2)
		if m.name == "depthwise" {
			g = convCase(21, 4, 9, 8, 4, k, k, stride, pad, 1, 4)
		}
		if !m.ok(g) {
			t.Fatalf("%s does not take its own test geometry", m.name)
		}
		r := newTestRand(14)
		x, w, b := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C/g.Groups*k*k, 1), randSlice(r, g.OC, 1)
		proj := randSlice(r, g.N*g.OC*g.OH*g.OW, 1)
		run := func(threads int) [][]float32 {
			SetThreads(threads)
			y := make([]float32, len(proj))
			m.fwd(x, w, b, y, g, ActReLU, 0)
			if m.bwd == nil {
				return [][]float32{y}
			}
			dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, len(b))
			m.bwd(x, w, y, cloneF(proj), dx, dw, db, g, ActReLU, 0)
			return [][]float32{y, dx, dw, db}
		}
		one := run(1)
		for _, n := range []int{2, 3, 8} {
			for i, got := range run(n) {
				if msg := closeTo(got, one[i], 1e-5); msg != "" {
					t.Errorf("%s conv with %d threads, output %d differs from 1 thread: %s", m.name, n, i, msg)
				}
			}
		}
	}
}

// TestConvDirectRefusesOtherGeometry: the direct kernels panic, naming the
// geometry, when handed one they do not compute (the planner never does),
// rather than reading past a plane or writing a wrong result.
func TestConvDirectRefusesOtherGeometry(t *testing.T) {
	for _, c := range []struct {
		name string
		g    Conv
		want string
	}{
		{"stride 2", convCase(1, 2, 7, 7, 2, 3, 3, 2, 1, 1, 1), "stride 2x2"},
		// Output rows 6 wide in a padded row stride of 5.
		{"1x1 pad 1", convCase(1, 2, 5, 5, 2, 1, 1, 1, 1, 1, 1), "padding 1x1 of a 1x1 filter"},
		{"3x3 dilation 2 pad 5", convCase(1, 2, 9, 9, 2, 3, 3, 1, 5, 2, 1), "padding 5x5 of a 3x3 filter dilated 2x2"},
	} {
		g := c.g
		x, w := make([]float32, g.N*g.C*g.H*g.W), make([]float32, g.OC*g.C*g.KH*g.KW)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		for _, dx := range [][]float32{nil, make([]float32, len(x))} {
			for pass, f := range map[string]func(){
				"forward":  func() { Conv2DDirectFwd(x, w, nil, y, g, ActNone, 0) },
				"backward": func() { Conv2DDirectBwd(x, w, y, cloneF(y), dx, make([]float32, len(w)), nil, g, ActNone, 0) },
			} {
				func() {
					defer func() {
						r := recover()
						if msg, _ := r.(string); !strings.Contains(msg, c.want) || !strings.Contains(msg, "needs stride 1 and padding within the filter's reach") {
							t.Errorf("%s %s (dx %v): recovered %v, want a panic saying %q and why", c.name, pass, dx != nil, r, c.want)
						}
					}()
					f()
				}()
			}
		}
	}
}

// TestAvgPoolDivisorsMatchPyTorch: average pools rounded up (a partial
// last window) and with count_include_pad both ways against
// torch.nn.functional.avg_pool2d(x, k, s, p, ceil_mode=True,
// count_include_pad=...) on x[i] = i/2 − 3 (torch 1.13, run once), and
// their backward against finite differences.
func TestAvgPoolDivisorsMatchPyTorch(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Conv
		want []float32
	}{
		{"6x6 k3 s2 p1 ceil", Conv{N: 1, C: 1, H: 6, W: 6, OC: 1, OH: 4, OW: 4, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1},
			[]float32{-0.555556, -0.333333, 0.333333, 0.333333, 2.166667, 4.0, 5.0, 2.75, 6.166667, 10.0, 11.0, 5.75, 4.083333, 6.5, 7.0, 3.625}},
		{"6x6 k3 s2 p1 ceil exclude pad", Conv{N: 1, C: 1, H: 6, W: 6, OC: 1, OH: 4, OW: 4, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, ExcludePad: true},
			[]float32{-1.25, -0.5, 0.5, 1.0, 3.25, 4.0, 5.0, 5.5, 9.25, 10.0, 11.0, 11.5, 12.25, 13.0, 14.0, 14.5}},
		{"5x7 k2 s2 ceil", Conv{N: 1, C: 1, H: 5, W: 7, OC: 1, OH: 3, OW: 4, KH: 2, KW: 2, SH: 2, SW: 2},
			[]float32{-1.0, 0.0, 1.0, 1.75, 6.0, 7.0, 8.0, 8.75, 11.25, 12.25, 13.25, 14.0}},
	} {
		g := tc.g
		x := make([]float32, g.H*g.W)
		for i := range x {
			x[i] = float32(i)/2 - 3
		}
		y := make([]float32, g.OH*g.OW)
		AvgPool2DFwd(x, y, g)
		if msg := closeTo(y, tc.want, 1e-5); msg != "" {
			t.Errorf("%s: %s", tc.name, msg)
		}
		r := newTestRand(3)
		proj := randSlice(r, len(y), 1)
		dx := randSlice(r, len(x), 9)
		AvgPool2DBwd(cloneF(proj), dx, g)
		smoothCheck.run(t, "avgpool "+tc.name, proj, func() []float32 { AvgPool2DFwd(x, y, g); return y }, gradInput{"x", x, dx})
	}
}
