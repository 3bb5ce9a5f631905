package cpu

import (
	"fmt"
	"math"
	"testing"
)

// bf16ConvPath is one way BF16's convolutions run: a bfloat16 path (the
// pure-Go kernel and packers on small tiles and cache blocks, so that
// every edge is crossed, and the AVX512-BF16 path where the CPU has it),
// or nil, the emulation on rounded float32 copies.
type bf16ConvPath struct {
	name string
	p    *gemmPath
}

func bf16ConvPaths() []bf16ConvPath {
	paths := []bf16ConvPath{
		{"go 3x5 kc 6", &gemmPath{name: "bf16-go", mr: 3, nr: 5, kc: 6, mc: 7, nc: 11, kernel: pairKernelGo(3, 5),
			pairs: &pairPackers{packA: packPairsA, packB: packPairsB, rows: pairRowsGo, columns8: pairColumnsGo}}},
		{"go 8x5 kc 18", &gemmPath{name: "bf16-go-8", mr: 8, nr: 5, kc: 18, mc: 40, nc: 11, kernel: pairKernelGo(8, 5),
			pairs: &pairPackers{packA: packPairsA, packB: packPairsB, rows: pairRowsGo, panels8: pairPanels8Go, columns8: pairColumnsGo}}},
		{"emulated", nil},
	}
	if p := bf16Path(); p != nil {
		paths = append(paths, bf16ConvPath{p.name, p})
	}
	return paths
}

// bf16ConvGeoms are convGeoms, three layers whose filters are longer
// than the AVX512-BF16 path's kc (512 taps) or whose channels fill its
// 8-row tiles, with odd channel counts among them, and 1×1 images, which
// the pointwise method runs as a dense layer.
func bf16ConvGeoms() []struct {
	name string
	g    Conv
} {
	return append(convGeoms[:len(convGeoms):len(convGeoms)], []struct {
		name string
		g    Conv
	}{
		{"64->20 3x3 on 8x8", convCase(2, 64, 8, 8, 20, 3, 3, 1, 1, 1, 1)},
		{"33->17 3x3 stride 2 on 9x11", convCase(3, 33, 9, 11, 17, 3, 3, 2, 1, 1, 1)},
		{"pointwise 40->24 on 7x9", convCase(3, 40, 7, 9, 24, 1, 1, 1, 0, 1, 1)},
		{"pointwise 24->16 on 1x1 (a dense layer)", convCase(20, 24, 1, 1, 16, 1, 1, 1, 0, 1, 1)},
	}...)
}

// convBF16Ref is the convolution y = conv(x, w) and its backward dx, dw
// for the gradient dy, in float64 over the operands rounded to bfloat16:
// what BF16's float32 sums approximate; with each entry's scale, the sum
// of the absolute values of its products.
type convBF16Ref struct {
	y, dx, dw                []float64
	yScale, dxScale, dwScale []float64
}

func newConvBF16Ref(x, w, dy []float32, g Conv) convBF16Ref {
	g = g.norm()
	r := convBF16Ref{
		y: make([]float64, g.N*g.OC*g.OH*g.OW), yScale: make([]float64, g.N*g.OC*g.OH*g.OW),
		dx: make([]float64, len(x)), dxScale: make([]float64, len(x)),
		dw: make([]float64, len(w)), dwScale: make([]float64, len(w)),
	}
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	for n := 0; n < g.N; n++ {
		for oc := 0; oc < g.OC; oc++ {
			for oh := 0; oh < g.OH; oh++ {
				for ow := 0; ow < g.OW; ow++ {
					yi := ((n*g.OC+oc)*g.OH+oh)*g.OW + ow
					d := float64(RoundBF16(dy[yi]))
					for ci := 0; ci < cg; ci++ {
						c := oc/ocg*cg + ci
						for kh := 0; kh < g.KH; kh++ {
							for kw := 0; kw < g.KW; kw++ {
								ih, iw := oh*g.SH-g.PH+kh*g.DH, ow*g.SW-g.PW+kw*g.DW
								if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
									continue
								}
								xi, wi := ((n*g.C+c)*g.H+ih)*g.W+iw, ((oc*cg+ci)*g.KH+kh)*g.KW+kw
								xv, wv := float64(RoundBF16(x[xi])), float64(RoundBF16(w[wi]))
								r.y[yi] += xv * wv
								r.yScale[yi] += math.Abs(xv * wv)
								r.dx[xi] += d * wv
								r.dxScale[xi] += math.Abs(d * wv)
								r.dw[wi] += d * xv
								r.dwScale[wi] += math.Abs(d * xv)
							}
						}
					}
				}
			}
		}
	}
	return r
}

// bf16Worst returns the largest |got − ref| / scale over the entries, and
// the largest |got − f32| / scale, how far the bfloat16 result is from
// float32's.
func bf16Worst(got, f32 []float32, ref, scale []float64) (fromRef, fromF32 float64) {
	for i, v := range got {
		if scale[i] == 0 {
			if v != 0 || f32[i] != 0 {
				return math.Inf(1), math.Inf(1)
			}
			continue
		}
		fromRef = max(fromRef, math.Abs(float64(v)-ref[i])/scale[i])
		fromF32 = max(fromF32, math.Abs(float64(v)-float64(f32[i]))/scale[i])
	}
	return fromRef, fromF32
}

// Bounds of TestConvBF16, relative to each entry's scale Σ|a·b| over its
// products. bf16FromRounded: the float32 sums of the products of the
// rounded operands against their float64 sum, a few float32 roundings
// (the longest sums here are some 600 products). bf16FromF32: against
// the float32 method on the unrounded operands, bfloat16's rounding of
// both operands (8 significant bits), each within 2⁻⁸ of its value, so
// each product within 2⁻⁷ + 2⁻¹⁶ of the exact one (7.83e-3), plus
// float32's sums.
// bf16Rounds: the least largest difference from float32 that shows the
// operands were rounded at all.
const (
	bf16FromRounded = 1e-5
	bf16FromF32     = 7.84e-3
	bf16Rounds      = 1e-4
)

// TestConvBF16: BF16's im2col and pointwise convolutions, forward and
// backward (dx, dw, db) on every way they run, against float64 sums of
// the rounded operands and against the float32 methods on the same data,
// within the bounds above; db, which sums the gradient unrounded, within
// float32's 1e-5 of the float32 method's.
func TestConvBF16(t *testing.T) {
	type method struct {
		name string
		ok   func(Conv) bool
		fwd  func(p *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32)
		bwd  func(p *gemmPath, x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)
		f32  int // its index in convMethods
	}
	methods := []method{
		{"im2col", func(Conv) bool { return true }, im2colFwdBF16, im2colBwdBF16, 1},
		{"pointwise", func(g Conv) bool { return pointwiseOK(g.norm()) },
			func(p *gemmPath, x, w, b, y []float32, g Conv, act Act, alpha float32) {
				pointwiseFwdBF16(BF16, p, x, w, b, y, g.norm(), act, alpha)
			},
			func(p *gemmPath, x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
				pointwiseBwdBF16(BF16, p, x, w, y, dy, dx, dw, db, g.norm(), act, alpha)
			}, 2},
	}
	r := newTestRand(30)
	for _, m := range methods {
		f32 := convMethods[m.f32]
		for _, tc := range bf16ConvGeoms() {
			g := tc.g
			if !m.ok(g) {
				continue
			}
			x, w := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
			b, dyIn := randSlice(r, g.OC, 1), randSlice(r, g.N*g.OC*g.OH*g.OW, 1)
			// The float32 method: its output (the backward's y for
			// every path, so that ReLU's mask is the same) and
			// gradients.
			y32 := make([]float32, len(dyIn))
			f32.fwd(x, w, b, y32, g, ActReLU, 0)
			dy32, dx32, dw32, db32 := cloneF(dyIn), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
			f32.bwd(x, w, y32, dy32, dx32, dw32, db32, g, ActReLU, 0)
			lin32 := make([]float32, len(dyIn)) // without bias and activation
			f32.fwd(x, w, nil, lin32, g, ActNone, 0)
			ref := newConvBF16Ref(x, w, dy32, g)
			for _, path := range bf16ConvPaths() {
				name := fmt.Sprintf("%s %s on %s", m.name, tc.name, path.name)
				lin := make([]float32, len(dyIn))
				m.fwd(path.p, x, w, nil, lin, g, ActNone, 0)
				fromRef, fromF32 := bf16Worst(lin, lin32, ref.y, ref.yScale)
				if fromRef > bf16FromRounded || fromF32 > bf16FromF32 || (g.C/g.Groups*g.KH*g.KW >= 16 && fromF32 < bf16Rounds) {
					t.Errorf("%s: forward %.3g of its scale from the rounded operands' sums, %.3g from float32's", name, fromRef, fromF32)
				}
				// The bias and ReLU: the pointwise method adds
				// the products to the bias, im2col the bias to
				// their sum.
				y, want := make([]float32, len(dyIn)), make([]float32, len(dyIn))
				m.fwd(path.p, x, w, b, y, g, ActReLU, 0)
				for i, v := range lin {
					want[i] = max(0, v+b[i/(g.OH*g.OW)%g.OC])
				}
				if msg := closeTo(y, want, 1e-6); msg != "" {
					t.Errorf("%s: with bias and ReLU: %s", name, msg)
				}
				dy, dx, dw, db := cloneF(dyIn), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
				m.bwd(path.p, x, w, y32, dy, dx, dw, db, g, ActReLU, 0)
				for _, c := range []struct {
					name       string
					got, f32   []float32
					ref, scale []float64
				}{{"dx", dx, dx32, ref.dx, ref.dxScale}, {"dw", dw, dw32, ref.dw, ref.dwScale}} {
					fromRef, fromF32 := bf16Worst(c.got, c.f32, c.ref, c.scale)
					if fromRef > bf16FromRounded || fromF32 > bf16FromF32 || fromF32 < bf16Rounds {
						t.Errorf("%s: %s %.3g of its scale from the rounded operands' sums, %.3g from float32's", name, c.name, fromRef, fromF32)
					}
				}
				if msg := closeTo(db, db32, 1e-5); msg != "" {
					t.Errorf("%s: db: %s", name, msg)
				}
				if msg := closeTo(dy, dy32, 0); msg != "" {
					t.Errorf("%s: dy is not the pre-activation gradient: %s", name, msg)
				}
			}
		}
	}
}

// TestConvBF16Chains: on a bfloat16 path, each output of BF16's im2col
// forward is gemm_bf16.go's float32 chain over its taps' pairs, the
// same bits as the bfloat16 GEMM of the filters and the image's columns
// (bf16Chain), across the path's cache blocks of taps and for any thread
// count.
func TestConvBF16Chains(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(31)
	for _, path := range bf16ConvPaths() {
		if path.p == nil {
			continue
		}
		for _, tc := range bf16ConvGeoms() {
			g := tc.g.norm()
			x, w := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
			ohw, krows, ocg, cg := g.OH*g.OW, g.colRows(), g.OC/g.Groups, g.C/g.Groups
			want := make([]float32, g.N*g.OC*ohw)
			cols := make([]float32, krows*ohw)
			for n := 0; n < g.N; n++ {
				for gi := 0; gi < g.Groups; gi++ {
					packConvPanel(x[n*g.C*g.H*g.W:], g, gi*cg, 0, krows, 0, ohw, ohw, cols)
					copy(want[(n*g.OC+gi*ocg)*ohw:], bf16Chain(false, false, ocg, ohw, krows, w[gi*ocg*krows:], krows, cols, ohw))
				}
			}
			for _, threads := range []int{1, 3} {
				SetThreads(threads)
				y := make([]float32, len(want))
				im2colFwdBF16(path.p, x, w, nil, y, g, ActNone, 0)
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
						t.Errorf("%s on %s, %d threads: y[%d] = %g, want the chain's %g", tc.name, path.name, threads, i, y[i], want[i])
						break
					}
				}
			}
		}
	}
}

// TestPrecisionConvs: FP32's convolution methods are the package's
// functions, and BF16's are not float32's.
func TestPrecisionConvs(t *testing.T) {
	r := newTestRand(32)
	for _, c := range []struct {
		name string
		g    Conv
		fwd  func(p *Precision) func(x, w, b, y []float32, g Conv, act Act, alpha float32)
		bwd  func(p *Precision) func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)
		f32  int
	}{
		{"im2col", convCase(2, 16, 6, 6, 8, 3, 3, 2, 1, 1, 1),
			func(p *Precision) func(x, w, b, y []float32, g Conv, act Act, alpha float32) {
				return p.Conv2DIm2colFwd
			},
			func(p *Precision) func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
				return p.Conv2DIm2colBwd
			}, 1},
		{"pointwise", convCase(2, 16, 6, 6, 8, 1, 1, 1, 0, 1, 1),
			func(p *Precision) func(x, w, b, y []float32, g Conv, act Act, alpha float32) {
				return p.Conv2DPointwiseFwd
			},
			func(p *Precision) func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
				return p.Conv2DPointwiseBwd
			}, 2},
	} {
		g := c.g
		x, w, b := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*g.KH*g.KW, 1), randSlice(r, g.OC, 1)
		dyIn := randSlice(r, g.N*g.OC*g.OH*g.OW, 1)
		run := func(fwd func(x, w, b, y []float32, g Conv, act Act, alpha float32), bwd func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)) [][]float32 {
			y := make([]float32, len(dyIn))
			fwd(x, w, b, y, g, ActReLU, 0)
			dy, dx, dw, db := cloneF(dyIn), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.OC)
			bwd(x, w, y, dy, dx, dw, db, g, ActReLU, 0)
			return [][]float32{y, dx, dw}
		}
		f32 := run(convMethods[c.f32].fwd, convMethods[c.f32].bwd)
		fp32 := run(c.fwd(FP32), c.bwd(FP32))
		bf16 := run(c.fwd(BF16), c.bwd(BF16))
		for i, name := range []string{"y", "dx", "dw"} {
			if msg := closeTo(fp32[i], f32[i], 0); msg != "" {
				t.Errorf("%s: FP32's %s is not the package function's: %s", c.name, name, msg)
			}
			if closeTo(bf16[i], f32[i], 1e-5) == "" {
				t.Errorf("%s: BF16's %s within 1e-5 of float32's: were the operands rounded?", c.name, name)
			}
		}
	}
}
