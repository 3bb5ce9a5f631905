package gpu

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// TestWinogradMatrices checks the transforms' one-dimensional identities
// in float64 on random data: Aᵀ[(G·g) ⊙ (Bᵀ·d)] is the correlation of d
// (α values) with g, for F(2, 5) and F(4, 5) (g: 5 taps) and for the weight
// gradients' F(5, 2) and F(5, 4) (5 outputs), each pair sharing Bᵀ.
func TestWinogradMatrices(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct {
		name  string
		at, g [][]float32
		m, k  int
		bt    [][]float32
	}{{"F(2,5)", WinogradF2.at, WinogradF2.g, 2, 5, WinogradF2.bt}, {"F(5,2)", WinogradF2.at2, WinogradF2.g2, 5, 2, WinogradF2.bt},
		{"F(4,5)", WinogradF4.at, WinogradF4.g, 4, 5, WinogradF4.bt}, {"F(5,4)", WinogradF4.at2, WinogradF4.g2, 5, 4, WinogradF4.bt}} {
		alpha := len(c.bt)
		for range 20 {
			g, d := make([]float64, c.k), make([]float64, alpha)
			for i := range g {
				g[i] = r.Float64()*2 - 1
			}
			for i := range d {
				d[i] = r.Float64()*2 - 1
			}
			prod := make([]float64, alpha)
			for xi := range alpha {
				var u, v float64
				for k := range c.k {
					u += float64(c.g[xi][k]) * g[k]
				}
				for j := range alpha {
					v += float64(c.bt[xi][j]) * d[j]
				}
				prod[xi] = u * v
			}
			for i := range c.m {
				var got, want float64
				for xi := range alpha {
					got += float64(c.at[i][xi]) * prod[xi]
				}
				for k := range c.k {
					want += g[k] * d[i+k]
				}
				// float32 coefficients (1/6, 1/24) round at 6e-8.
				if math.Abs(got-want) > 1e-6 {
					t.Fatalf("%s output %d: %g, the correlation is %g", c.name, i, got, want)
				}
			}
		}
	}
}

// TestWinogradFits: only stride-1 "same" 5×5 convolutions with 16 or more
// channels each way take the method.
func TestWinogradFits(t *testing.T) {
	base := planner.ConvGeom{N: 4, C: 32, H: 14, W: 14, OC: 64, OH: 14, OW: 14, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1}
	if !WinogradFits(base) {
		t.Fatal("models/mnist.cue's second convolution does not fit")
	}
	for name, change := range map[string]func(g *planner.ConvGeom){
		"3x3":        func(g *planner.ConvGeom) { g.KH, g.KW, g.PH, g.PW = 3, 3, 1, 1 },
		"stride 2":   func(g *planner.ConvGeom) { g.SH, g.SW, g.OH, g.OW = 2, 2, 7, 7 },
		"padding 0":  func(g *planner.ConvGeom) { g.PH, g.PW, g.OH, g.OW = 0, 0, 10, 10 },
		"dilation 2": func(g *planner.ConvGeom) { g.DH, g.DW = 2, 2 },
		"groups 2":   func(g *planner.ConvGeom) { g.Groups = 2 },
		"1 channel":  func(g *planner.ConvGeom) { g.C = 1 },
		"8 outputs":  func(g *planner.ConvGeom) { g.OC = 8 },
	} {
		g := base
		change(&g)
		if WinogradFits(g) {
			t.Errorf("%s: WinogradFits, want not", name)
		}
	}
}

// TestLoweredWinogradMatchesCPU lowers convolution layers with the Winograd
// method, forward and backward, runs every op (kernels through each
// dialect's g++ shim, the batched GEMMs product by product in float64) and
// compares y, dx, dW and db with rt/cpu's im2col convolution: sizes whose
// tiles overrun the edge (odd), channels that are not multiples of
// anything, with and without bias, activation and dx, the backward reading
// the forward's input transform or computing it again.
//
// wgChunk is lowered to a few tiles so that every layer's tiles are cut
// into several chunks, the last one padded for some.
func TestLoweredWinogradMatchesCPU(t *testing.T) {
	smallProductsKernel(t)
	saved := wgChunk
	t.Cleanup(func() { wgChunk = saved })
	for _, c := range []struct {
		wa    *Winograd
		chunk int
	}{{WinogradF2, 7}, {WinogradF4, 4}} {
		wgChunk = c.chunk // t.Run returns when its parallel subtests are done
		t.Run(c.wa.Method, func(t *testing.T) { testLoweredWinograd(t, c.wa) })
	}
}

func testLoweredWinograd(t *testing.T, wa *Winograd) {
	odd := withOutputSize(planner.ConvGeom{N: 3, C: 16, H: 9, W: 7, OC: 17, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1})
	even := withOutputSize(planner.ConvGeom{N: 2, C: 19, H: 6, W: 8, OC: 16, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1})
	// 64 output channels: the forward's products are wgProductRowsKernel's
	// where the dialect has 16-byte accesses
	wide := withOutputSize(planner.ConvGeom{N: 2, C: 16, H: 9, W: 7, OC: 64, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1})
	cases := []convLayerCase{
		{name: "odd_kept", g: odd, bias: true, act: "relu", dx: true, scratch: wa.Scratch(odd)},
		{name: "even_again", g: even, act: "", dx: true, scratch: wa.Scratch(even)},
		{name: "odd_no_dx", g: odd, bias: true, act: "leakyrelu", alpha: 0.1, scratch: wa.Scratch(odd)},
		{name: "wide", g: wide, bias: true, act: "relu", dx: true, scratch: wa.Scratch(wide)},
	}
	kept := map[string]bool{"odd_kept": true, "odd_no_dx": true}
	p, bufs := convLayerPlan(cases)
	for i := range cases {
		for _, st := range []*planner.Step{&p.Forward[i], &p.Backward[i]} {
			g := *st.Attr.Conv
			st.Attr.Conv, st.Attr.Method = &g, wa.Method
		}
		if kept[cases[i].name] {
			p.Backward[i].In[4] = bufs[i].cols
			p.Backward[i].Attr.KeptCols = true
		}
	}
	initial := convLayerArena(p, bufs, 11)
	for _, d := range []*Dialect{CUDA, Metal} {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			prog, err := Lower(p, d)
			if err != nil {
				t.Fatal(err)
			}
			batched, own := 0, 0
			for _, ph := range [][]Op{prog.Forward, prog.Backward} {
				for _, op := range ph {
					if op.Launch != nil && strings.HasSuffix(op.Launch.Kernel, "_winograd_products") {
						own++
					}
					if op.Gemm != nil {
						if np := wa.products(); op.Gemm.Batch%np != 0 || op.Gemm.Batch <= np {
							t.Errorf("%s: a GEMM of batch %d, want %d products of several chunks", op.Layer, op.Gemm.Batch, np)
						}
						batched++
					}
				}
			}
			// forward 3 (and wide's without the products kernel); dW and
			// dx of three layers, dW of one
			wantOwn, want := 1, 3+3+1+3
			if d.Load4 == "" {
				wantOwn, want = 0, want+1
			}
			if batched != want || own != wantOwn {
				t.Errorf("%d batched GEMMs and %d products kernels, want %d and %d", batched, own, want, wantOwn)
			}
			arena := runConvLayers(t, d, prog, initial)
			for ci, c := range cases {
				lb := bufs[ci]
				y, dx, dw, db := convLayerReference(t, c, lb, initial)
				compare := func(what string, got, want []float32) {
					t.Helper()
					var scale float64
					for _, v := range want {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					worst, at := 0.0, 0
					for i := range want {
						e := math.Abs(float64(got[i])-float64(want[i])) / scale
						if math.IsNaN(float64(got[i])) {
							e = math.Inf(1)
						}
						if e > worst {
							worst, at = e, i
						}
					}
					// Winograd's transforms amplify float32 rounding
					// (entries up to 16 in A2ᵀ): relative to the
					// output's scale, 1e-5 is what float32 allows here.
					if worst > 1e-5 {
						t.Errorf("%s/%s: %s[%d] = %g, rt/cpu has %g (error %.3g of the largest |value| %g)", d.Name, c.name, what, at, got[at], want[at], worst, scale)
					}
					t.Logf("%s/%s: %s within %.2g of the largest |value|", d.Name, c.name, what, worst)
				}
				compare("y", arena[lb.y], y)
				compare("dW", arena[lb.dw], dw)
				if c.bias {
					compare("db", arena[lb.db], db)
				}
				if c.dx {
					compare("dx", arena[lb.dx], dx)
				}
			}
		})
	}
}

// TestFastPrecisionLowersToGemms: a convolution step in bf16 (or a dense
// step) lowers every product to a GEMM that carries the precision: the
// Winograd products kernel and the dense_dot kernel, which multiply in
// float32, are not chosen for it, where the same f32 steps take them.
func TestFastPrecisionLowersToGemms(t *testing.T) {
	smallProductsKernel(t)
	wide := withOutputSize(planner.ConvGeom{N: 2, C: 16, H: 9, W: 7, OC: 64, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1})
	for _, precision := range []string{planner.PrecisionF32, planner.PrecisionBF16, planner.PrecisionTF32} {
		p, _ := convLayerPlan([]convLayerCase{{name: "wide", g: wide, bias: true, act: "relu", dx: true, scratch: WinogradF4.Scratch(wide)}})
		for _, st := range []*planner.Step{&p.Forward[0], &p.Backward[0]} {
			g := *st.Attr.Conv
			st.Attr.Conv, st.Attr.Method, st.Attr.Precision = &g, WinogradF4.Method, precision
		}
		prog, err := Lower(p, CUDA)
		if err != nil {
			t.Fatal(err)
		}
		own, gemms := 0, 0
		for _, op := range append(prog.Forward, prog.Backward...) {
			if op.Launch != nil && strings.HasSuffix(op.Launch.Kernel, "_winograd_products") {
				own++
			}
			if op.Gemm != nil {
				gemms++
				want := precision // an f32 GEMM names none
				if want == planner.PrecisionF32 {
					want = ""
				}
				if op.Gemm.Precision != want {
					t.Errorf("%s step: a GEMM in %q, want %q", precision, op.Gemm.Precision, want)
				}
			}
		}
		if wantOwn := map[bool]int{true: 1, false: 0}[precision == planner.PrecisionF32]; own != wantOwn || gemms == 0 {
			t.Errorf("%s: %d products kernels and %d GEMMs, want %d and some", precision, own, gemms, wantOwn)
		}
	}
}
