package gpu

import (
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// TestWinogradMatrices checks the transforms' one-dimensional identities
// in float64 on random data: Aᵀ[(G·g) ⊙ (Bᵀ·d)] is the correlation of d
// (α values) with g, for F(2, 5), F(4, 5) and F(4, 3) (g: r taps) and for
// the weight gradients' F(5, 2), F(5, 4) and F(3, 4) (r outputs), each
// pair sharing Bᵀ.
func TestWinogradMatrices(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct {
		name  string
		at, g [][]float32
		m, k  int
		bt    [][]float32
	}{{"F(2,5)", WinogradF2.at, WinogradF2.g, 2, 5, WinogradF2.bt}, {"F(5,2)", WinogradF2.at2, WinogradF2.g2, 5, 2, WinogradF2.bt},
		{"F(4,5)", WinogradF4.at, WinogradF4.g, 4, 5, WinogradF4.bt}, {"F(5,4)", WinogradF4.at2, WinogradF4.g2, 5, 4, WinogradF4.bt},
		{"F(4,3)", Winograd3F4.at, Winograd3F4.g, 4, 3, Winograd3F4.bt}, {"F(3,4)", Winograd3F4.at2, Winograd3F4.g2, 3, 4, Winograd3F4.bt}} {
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

// winogradPoints are the points each algorithm was derived on, in the
// order of its matrices' columns; ∞ is last and implicit.
var winogradPoints = map[*Winograd][]string{
	WinogradF2:  {"0", "1", "-1", "2", "-2"},
	WinogradF4:  {"0", "1", "-1", "2", "-2", "1/2", "-1/2"},
	Winograd3F4: {"0", "1", "-1", "2", "-2"},
}

// winogradDerived are Bᵀ, G (α×r), Aᵀ (m×α), G2 (α×m) and A2ᵀ (r×α) of
// F(m, r) and F(r, m) on the finite points (∞ added), in exact fractions:
// row i of G is (1, p_i, …, p_i^(r−1)) / Π_{j≠i}(p_i − p_j), row i of Bᵀ
// the coefficients of Π_{j≠i}(x − p_j), lowest power first, column i of Aᵀ
// the powers of p_i; ∞'s row of G is the last power alone, its row of Bᵀ
// the coefficients of Π_j(x − p_j), its column of Aᵀ 1 in the last row.
func winogradDerived(points []*big.Rat, m, r int) (bt, g, at, g2, at2 [][]*big.Rat) {
	alpha := len(points) + 1
	zero := func(rows, cols int) [][]*big.Rat {
		x := make([][]*big.Rat, rows)
		for i := range x {
			x[i] = make([]*big.Rat, cols)
			for j := range x[i] {
				x[i][j] = new(big.Rat)
			}
		}
		return x
	}
	// poly multiplies out Π (x − p_j) over the points but skip (-1: none).
	poly := func(skip int) []*big.Rat {
		c := []*big.Rat{big.NewRat(1, 1)}
		for j, p := range points {
			if j == skip {
				continue
			}
			next := make([]*big.Rat, len(c)+1)
			for k := range next {
				next[k] = new(big.Rat)
			}
			for k, v := range c {
				next[k+1].Add(next[k+1], v)
				next[k].Sub(next[k], new(big.Rat).Mul(v, p))
			}
			c = next
		}
		return c
	}
	pow := func(p *big.Rat, k int) *big.Rat {
		v := big.NewRat(1, 1)
		for range k {
			v = new(big.Rat).Mul(v, p)
		}
		return v
	}
	filter := func(taps int) [][]*big.Rat {
		x := zero(alpha, taps)
		for i, p := range points {
			den := big.NewRat(1, 1)
			for j, q := range points {
				if j != i {
					den.Mul(den, new(big.Rat).Sub(p, q))
				}
			}
			for k := range taps {
				x[i][k].Quo(pow(p, k), den)
			}
		}
		x[alpha-1][taps-1].SetInt64(1)
		return x
	}
	output := func(outs int) [][]*big.Rat {
		x := zero(outs, alpha)
		for i, p := range points {
			for k := range outs {
				x[k][i] = pow(p, k)
			}
		}
		x[outs-1][alpha-1].SetInt64(1)
		return x
	}
	bt = zero(alpha, alpha)
	for i := range alpha {
		skip := i
		if i == alpha-1 {
			skip = -1
		}
		for k, v := range poly(skip) {
			bt[i][k].Set(v)
		}
	}
	return bt, filter(r), output(m), filter(m), output(r)
}

// TestWinogradDerivedFromPoints derives every algorithm's matrices from
// its points again in exact fractions (winogradDerived) and checks that
// the float32 tables are those fractions rounded, and that the fractions
// compute the correlation exactly: Aᵀ[(G·g) ⊙ (Bᵀ·d)] equals Σ_k g_k·d_(i+k)
// as a fraction for random integer g and d, for the forward's F(m, r) and
// the weight gradient's F(r, m).
func TestWinogradDerivedFromPoints(t *testing.T) {
	rnd := rand.New(rand.NewSource(5))
	for _, wa := range []*Winograd{WinogradF2, WinogradF4, Winograd3F4} {
		var points []*big.Rat
		for _, s := range winogradPoints[wa] {
			p, ok := new(big.Rat).SetString(s)
			if !ok {
				t.Fatalf("point %q", s)
			}
			points = append(points, p)
		}
		if len(points)+1 != wa.alpha || wa.alpha != wa.m+wa.r-1 {
			t.Fatalf("%s: %d points and ∞ for α = %d", wa.Method, len(points), wa.alpha)
		}
		bt, g, at, g2, at2 := winogradDerived(points, wa.m, wa.r)
		for _, c := range []struct {
			name  string
			table [][]float32
			exact [][]*big.Rat
		}{{"Bᵀ", wa.bt, bt}, {"G", wa.g, g}, {"Aᵀ", wa.at, at}, {"G2", wa.g2, g2}, {"A2ᵀ", wa.at2, at2}} {
			if len(c.table) != len(c.exact) {
				t.Fatalf("%s %s: %d rows, the derivation has %d", wa.Method, c.name, len(c.table), len(c.exact))
			}
			for i := range c.exact {
				if len(c.table[i]) != len(c.exact[i]) {
					t.Fatalf("%s %s row %d: %d columns, the derivation has %d", wa.Method, c.name, i, len(c.table[i]), len(c.exact[i]))
				}
				for j, v := range c.exact[i] {
					if f, _ := v.Float32(); f != c.table[i][j] {
						t.Errorf("%s %s[%d][%d] = %g, the derivation has %s (%g)", wa.Method, c.name, i, j, c.table[i][j], v.RatString(), f)
					}
				}
			}
		}
		for _, f := range []struct {
			name          string
			outs, taps    int
			filter, trans [][]*big.Rat
		}{{fmt.Sprintf("F(%d,%d)", wa.m, wa.r), wa.m, wa.r, g, at}, {fmt.Sprintf("F(%d,%d)", wa.r, wa.m), wa.r, wa.m, g2, at2}} {
			for range 10 {
				d, w := make([]*big.Rat, wa.alpha), make([]*big.Rat, f.taps)
				for i := range d {
					d[i] = big.NewRat(rnd.Int63n(201)-100, 1)
				}
				for i := range w {
					w[i] = big.NewRat(rnd.Int63n(201)-100, 1)
				}
				prod := make([]*big.Rat, wa.alpha)
				for xi := range wa.alpha {
					u, v := new(big.Rat), new(big.Rat)
					for k := range f.taps {
						u.Add(u, new(big.Rat).Mul(f.filter[xi][k], w[k]))
					}
					for j := range wa.alpha {
						v.Add(v, new(big.Rat).Mul(bt[xi][j], d[j]))
					}
					prod[xi] = u.Mul(u, v)
				}
				for i := range f.outs {
					got, want := new(big.Rat), new(big.Rat)
					for xi := range wa.alpha {
						got.Add(got, new(big.Rat).Mul(f.trans[i][xi], prod[xi]))
					}
					for k := range f.taps {
						want.Add(want, new(big.Rat).Mul(w[k], d[i+k]))
					}
					if got.Cmp(want) != 0 {
						t.Fatalf("%s %s output %d: %s, the correlation is %s", wa.Method, f.name, i, got.RatString(), want.RatString())
					}
				}
			}
		}
	}
}

// TestWinogradFits: only stride-1 "same" r×r convolutions with 16 or more
// channels each way take an algorithm of filter side r.
func TestWinogradFits(t *testing.T) {
	five := planner.ConvGeom{N: 4, C: 32, H: 14, W: 14, OC: 64, OH: 14, OW: 14, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1}
	// CIFAR ResNet-18's last stage: one 4×4 tile an image
	three := planner.ConvGeom{N: 4, C: 512, H: 4, W: 4, OC: 512, OH: 4, OW: 4, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}
	for _, c := range []struct {
		name string
		wa   *Winograd
		base planner.ConvGeom
	}{{"models/mnist.cue's second convolution", WinogradF4, five}, {"models/mnist.cue's second convolution", WinogradF2, five}, {"a 3x3 layer", Winograd3F4, three}} {
		if !c.wa.Fits(c.base) {
			t.Fatalf("%s does not fit %s", c.name, c.wa.Method)
		}
		for name, change := range map[string]func(g *planner.ConvGeom){
			"the other size": func(g *planner.ConvGeom) {
				if g.KH == 5 {
					g.KH, g.KW, g.PH, g.PW = 3, 3, 1, 1
				} else {
					g.KH, g.KW, g.PH, g.PW = 5, 5, 2, 2
				}
			},
			"3x5 window": func(g *planner.ConvGeom) { g.KW, g.PW = 8-g.KH, (7-g.KH)/2 },
			"stride 2":   func(g *planner.ConvGeom) { g.SH, g.SW, g.OH, g.OW = 2, 2, g.H/2, g.W/2 },
			"padding 0":  func(g *planner.ConvGeom) { g.PH, g.PW, g.OH, g.OW = 0, 0, g.H-g.KH+1, g.W-g.KW+1 },
			"dilation 2": func(g *planner.ConvGeom) { g.DH, g.DW = 2, 2 },
			"groups 2":   func(g *planner.ConvGeom) { g.Groups = 2 },
			"1 channel":  func(g *planner.ConvGeom) { g.C = 1 },
			"8 outputs":  func(g *planner.ConvGeom) { g.OC = 8 },
		} {
			g := c.base
			change(&g)
			if c.wa.Fits(g) {
				t.Errorf("%s, %s: %s fits, want not", c.name, name, c.wa.Method)
			}
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
	}{{WinogradF2, 7}, {WinogradF4, 4}, {Winograd3F4, 3}} {
		wgChunk = c.chunk // t.Run returns when its parallel subtests are done
		t.Run(c.wa.Method, func(t *testing.T) { testLoweredWinograd(t, c.wa) })
	}
}

func testLoweredWinograd(t *testing.T, wa *Winograd) {
	conv := func(n, c, h, w, oc int) planner.ConvGeom {
		return withOutputSize(planner.ConvGeom{N: n, C: c, H: h, W: w, OC: oc, KH: wa.r, KW: wa.r, SH: 1, SW: 1, PH: wa.pad(), PW: wa.pad(), DH: 1, DW: 1, Groups: 1})
	}
	// 9×7 and 6×8: sides that are not multiples of the tile's
	odd, even := conv(3, 16, 9, 7, 17), conv(2, 19, 6, 8, 16)
	// 64 output channels: the forward's products are wgProductRowsKernel's
	// where the dialect has 16-byte accesses
	wide := conv(2, 16, 9, 7, 64)
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
