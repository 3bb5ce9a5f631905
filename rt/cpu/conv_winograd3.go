package cpu

import (
	"sync"
	"unsafe"
)

// This file holds Winograd convolution F(4×4,3×3), the driver's
// (conv_winograd.go) algorithm for 3×3 layers: each output tile of 4×4
// pixels comes from a 6×6 input tile as Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A, on the
// points 0, ±1, ±2 and ∞ of F(2×2,5×5). That is 36 products for 16
// outputs (2.25 an output, against 9 multiply-adds of the direct sum), so
// the 36 matrix products over the channels do 4 times fewer multiply-adds
// than the direct method. The weight gradient is F(3×3,4×4) on the same
// points: a 4×4 block of dy is the filter (G2), the forward's input
// transform the input, and A2ᵀ turns the 36 summed products into the 3×3
// gradient.
//
// The matrices come from the points as in conv_winograd.go: Bᵀ depends
// only on the points, α = 6 for both algorithms, so it is F(2×2,5×5)'s
// and so are its transform kernels. Row i of G is the filter polynomial
// at point p_i, (1, p, p²), divided by Π_{q≠p}(p − q) over the other
// points: 4 at 0, −6 at ±1, 24 at ±2 (F(2×2,5×5)'s G cut to three
// columns, the row of ∞ taking the last coefficient). Aᵀ's rows are the
// points to the powers 0 to 3, ∞ contributing to the last power only. For
// the weight gradient, G2 is G with four powers (a 4×4 filter) and A2ᵀ
// has the powers 0 to 2. TestConvWinograd3Matrices checks that these
// compute a correlation.
//
//	G = [ 1/4     0     0  ]   Aᵀ = [1 1  1 1  1 0]
//	    [-1/6  -1/6  -1/6  ]        [0 1 -1 2 -2 0]
//	    [-1/6   1/6  -1/6  ]        [0 1  1 4  4 0]
//	    [1/24  1/12   1/6  ]        [0 1 -1 8 -8 1]
//	    [1/24 -1/12   1/6  ]
//	    [ 0      0     1   ]
//
// The rounding error is about F(2×2,5×5)'s: the same input transform,
// and an output transform whose rows sum to up to 19 in absolute value
// (F(2×2,5×5): 7); winogradMethods in the tests states the measured
// bound.

// winoF3G is G of F(4×4,3×3), 6×3.
var winoF3G = [][]float64{
	{1.0 / 4, 0, 0},
	{-1.0 / 6, -1.0 / 6, -1.0 / 6},
	{-1.0 / 6, 1.0 / 6, -1.0 / 6},
	{1.0 / 24, 1.0 / 12, 1.0 / 6},
	{1.0 / 24, -1.0 / 12, 1.0 / 6},
	{0, 0, 1},
}

// winoF3AT is Aᵀ of F(4×4,3×3), 4×6.
var winoF3AT = [][]float64{
	{1, 1, 1, 1, 1, 0},
	{0, 1, -1, 2, -2, 0},
	{0, 1, 1, 4, 4, 0},
	{0, 1, -1, 8, -8, 1},
}

// winoF3E is E of F(3×3,4×4), 6×4: G2 without its row scales
// (winogradScale, the same points' as F(2×2,5×5)): row i holds point i
// to the powers 0 to 3 (∞: the last power only). Its coefficients are
// powers of two, so the dy transform rounds only its sums.
var winoF3E = [][]float64{
	{1, 0, 0, 0},
	{1, 1, 1, 1},
	{1, -1, 1, -1},
	{1, 2, 4, 8},
	{1, -2, 4, -8},
	{0, 0, 0, 1},
}

// winoF3AW is A2ᵀ of F(3×3,4×4), 3×6: the points to the powers 0 to 2.
var winoF3AW = [][]float64{
	{1, 1, 1, 1, 1, 0},
	{0, 1, -1, 2, -2, 0},
	{0, 1, 1, 4, 4, 1},
}

// winogradF3RoundBytes and winogradF3MinRows size F(4×4,3×3)'s rounds
// (newWinoGeom): one image where it has 192 tiles or more, else enough
// images for 192 rows in each of the 36 products. The layers of many
// channels and few tiles (ResNet-18's 256 channels at 14×14: 16 tiles an
// image) ran their products with 16 rows, in which the AVX-512
// microkernel's 12 rows fit badly, and streamed all of U (9.4 MB there)
// for each. One thread of the shared 2-core Zen 4, CPU ms forward at batch
// 32 (ResNet-18, BenchmarkConvWinograd3), rounds of 1280 KB against 192
// rows: 256 at 14² 44.9 → 39.9, 512 at 7² 171 → 62; 64 at 56² and 128 at
// 28² no different (38.4, 31.8 against 36.7, 31.1); 96 rows measured about
// the same, 384 slower on the layers of many tiles.
const (
	winogradF3RoundBytes = 1280 << 10
	winogradF3MinRows    = 192
)

// winoF3 is F(4×4,3×3).
var winoF3 = &winoAlg{name: "F(4x4,3x3)", m: 4, r: 3, alpha: 6, g: winoF3G,
	dwScale: winogradScale, aw: winoF3AW, roundBytes: winogradF3RoundBytes, minRows: winogradF3MinRows, kernels: winogradF3For}

// winoF3ATConsts are the constants of an Aᵀ pass kernel of F(4×4,3×3)
// (2, 4, 8), each repeated across the lanes.
func winoF3ATConsts(lanes int) []float32 {
	return winoExpand([][]float64{{2, 4, 8}}, lanes)
}

// newWinoF3Kernels builds F(4×4,3×3)'s transforms from an instruction
// set's kernels: input is F(2×2,5×5)'s input transform (the same Bᵀ), dy
// the dy transform (D = E g Eᵀ of a 4×4 block g of dy), at6 the Aᵀ pass
// (given winoF3ATConsts for its matrix).
func newWinoF3Kernels(input, dy winoTileFunc, at6 winoPass, lanes int) *winogradKernels {
	return newWino4Kernels(input, dy, at6, winoF3ATConsts(lanes), 6, lanes)
}

// winogradF3Go is F(4×4,3×3) with the pure-Go kernels, built on first use
// (winogradF3For), as the vector sets are (archWinogradF3).
var winogradF3Go struct {
	once sync.Once
	k    *winogradKernels
}

// winogradF3For returns F(4×4,3×3)'s transforms that go with GEMM path
// p, so that forcing a path in tests forces the matching transforms.
func winogradF3For(p *gemmPath) *winogradKernels {
	if k := archWinogradF3(p.name); k != nil {
		return k
	}
	winogradF3Go.once.Do(func() { winogradF3Go.k = newWinoF3Kernels(winoInputGo, winoDyF3Go, winoAT6Go, 1) })
	return winogradF3Go.k
}

// winoAT6Go is the Aᵀ pass of F(4×4,3×3) in Go (a winoPass whose mat
// and rows, 4, go unread), as the vector kernels compute it (AT6): with
// s_k, d_k the sum and difference of the inputs at ±k,
//
//	y0 = (z0 + s1) + s2, y1 = d1 + 2·d2, y2 = s1 + 4·s2, y3 = (d1 + z5) + 8·d2.
func winoAT6Go(_ *float32, _ int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int) {
	s := unsafe.Slice(src, (lines-1)*ldLine+5*ldJ+n)
	d := unsafe.Slice(dst, (lines-1)*ldLineOut+3*ldR+n)
	var b []float32
	if bias != nil {
		b = unsafe.Slice(bias, n)
	}
	for l := 0; l < lines; l++ {
		in, out := l*ldLine, l*ldLineOut
		for c := 0; c < n; c++ {
			z0, z1, z2, z3, z4, z5 := s[in+c], s[in+ldJ+c], s[in+2*ldJ+c], s[in+3*ldJ+c], s[in+4*ldJ+c], s[in+5*ldJ+c]
			s1, d1, s2, d2 := z1+z2, z1-z2, z3+z4, z3-z4
			y := [4]float32{(z0 + s1) + s2, d1 + 2*d2, s1 + 4*s2, (d1 + z5) + 8*d2}
			for r, v := range y {
				if b != nil {
					v += b[c]
				}
				if relu != 0 {
					v = reluSign(v)
				}
				d[out+r*ldR+c] = v
			}
		}
	}
}

// winoE6 applies E to one line z0..z3, as the vector kernels compute it.
// Every product is exact (the coefficients are powers of two).
func winoE6(z0, z1, z2, z3 float32) [6]float32 {
	e, o := z0+z2, z1+z3
	a3, b3 := z0+4*z2, 2*z1+8*z3
	return [6]float32{z0, e + o, e - o, a3 + b3, a3 - b3, z3}
}

// winoDyF3Go is D = E g Eᵀ of one 4×4 block g of dy: t = g·Eᵀ row by row,
// then E·t column by column into dst.
func winoDyF3Go(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
	s := unsafe.Slice(src, 3*ldRow+3*ldCol+n)
	d := unsafe.Slice(dst, 35*ldXi+n)
	var t [4][6]float32
	for c := 0; c < n; c++ {
		for a := range t {
			r := s[a*ldRow+c:]
			t[a] = winoE6(r[0], r[ldCol], r[2*ldCol], r[3*ldCol])
		}
		for j := 0; j < 6; j++ {
			for i, v := range winoE6(t[0][j], t[1][j], t[2][j], t[3][j]) {
				d[(6*i+j)*ldXi+c] = v
			}
		}
	}
}

// Conv2DWinograd3Fwd computes y = act(conv(x, w) + b) by Winograd
// F(4×4,3×3) (conv_winograd3.go): 36 matrix products of transformed 6×6
// tiles for 4×4 outputs, 4 times fewer multiply-adds in the products than
// the direct sum. It needs a 3×3 filter, stride 1, no dilation and one
// group, and panics otherwise (the planner chooses it only then). Its
// rounding error is larger than the direct method's (winogradMethods in
// conv_winograd_test.go states the bound). Its work buffers hold whole
// images, 36·4 bytes per 4×4 tile and channel (C + OC) per thread.
func Conv2DWinograd3Fwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !winoF3.fits(g) {
		panic(winogradRefusal(winoF3, "Conv2DWinograd3Fwd", g))
	}
	convWinogradForward(x, w, b, y, g, act, alpha, winoF3, winoF3.kernels(activeGemmPath.Load()), false, winoCachedFilters)
}

// Conv2DWinograd3Bwd is the backward pass of a convolution that
// Conv2DWinograd3Fwd takes, with padding up to 2: dx is F(4×4,3×3)'s
// convolution of dy with the flipped filters, dw is F(3×3,4×4)'s. It
// overwrites dy with the gradient of the pre-activation.
func Conv2DWinograd3Bwd(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !winoF3.fits(g) || !convDirectOK(g) {
		panic(winogradRefusal(winoF3, "Conv2DWinograd3Bwd", g))
	}
	convWinogradBackward(x, w, y, dy, dx, dw, db, g, act, alpha, winoF3, winoF3.kernels(activeGemmPath.Load()))
}
