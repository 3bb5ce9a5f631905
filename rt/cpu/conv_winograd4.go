package cpu

import (
	"sync"
	"unsafe"
)

// This file holds Winograd convolution F(4×4,5×5), the second algorithm
// of the driver in conv_winograd.go: each output tile of 4×4 pixels comes
// from an 8×8 input tile as Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A, with the
// interpolation points 0, ±1, ±2, ±1/2 and ∞. That is 64 products for 16
// outputs (4 an output, against F(2×2,5×5)'s 36 for 4, 9 an output), so the
// 64 matrix products over the channels do 2.25 times fewer multiply-adds
// than F(2×2)'s 36, for larger transforms. The weight gradient is
// F(5×5,4×4) on the same points: a 4×4 block of dy is the filter (G2), the
// forward's input transform the input, and A2ᵀ turns the 64 summed products
// into the 5×5 gradient.
//
// The matrices are those of emit/gpu's WinogradF4 (derived there with exact
// fractions and checked against direct correlation by its tests), copied
// here because rt/cpu imports nothing of the emitter.
//
// The transforms are separable: each is one pass along the rows of the
// tile and one along its columns, and each pass applies a small matrix
// (R×J, J = 8 or 4) to J vectors of channels at a time. The vector kernels
// (conv_winograd4_amd64.s) pair the points ±p: Bᵀ, the input transform of
// both the forward pass and the weight gradient (winoF4BTConsts), Aᵀ, the
// output transform (winoF4ATConsts), and E, the weight gradient's dy
// transform (winoF4EConsts): G2 without its row scales, which the weight
// gradient's finish applies instead (dwKron).

// The rounding error is about twice F(2×2)'s: the rows of Bᵀ sum to up to
// 15 in absolute value (F(2×2): 10), so the transformed inputs are up to
// 15² times the input, and the rows of Aᵀ to up to 19.25 (F(2×2): 7), so
// the output transform sums terms up to 19.25² times larger than the
// outputs; winogradMethods in the tests states the measured bound.

// winoF4BT is Bᵀ of F(4×4,5×5), 8×8.
var winoF4BT = [][]float64{
	{-1, 0, 21. / 4, 0, -21. / 4, 0, 1, 0},
	{0, 1, 1, -17. / 4, -17. / 4, 1, 1, 0},
	{0, -1, 1, 17. / 4, -17. / 4, -1, 1, 0},
	{0, 1. / 2, 1. / 4, -5. / 2, -5. / 4, 2, 1, 0},
	{0, -1. / 2, 1. / 4, 5. / 2, -5. / 4, -2, 1, 0},
	{0, 2, 4, -5. / 2, -5, 1. / 2, 1, 0},
	{0, -2, 4, 5. / 2, -5, -1. / 2, 1, 0},
	{0, -1, 0, 21. / 4, 0, -21. / 4, 0, 1},
}

// winoF4G is G of F(4×4,5×5), 8×5: row i is the filter polynomial's
// coefficients times the powers of point i, over the product of (p − q)
// over the other points q.
var winoF4G = [][]float64{
	{-1, 0, 0, 0, 0},
	{-2. / 9, -2. / 9, -2. / 9, -2. / 9, -2. / 9},
	{-2. / 9, 2. / 9, -2. / 9, 2. / 9, -2. / 9},
	{1. / 90, 1. / 45, 2. / 45, 4. / 45, 8. / 45},
	{1. / 90, -1. / 45, 2. / 45, -4. / 45, 8. / 45},
	{32. / 45, 16. / 45, 8. / 45, 4. / 45, 2. / 45},
	{32. / 45, -16. / 45, 8. / 45, -4. / 45, 2. / 45},
	{0, 0, 0, 0, 1},
}

// winoF4AT is Aᵀ of F(4×4,5×5), 4×8: the points to the powers 0 to 3.
var winoF4AT = [][]float64{
	{1, 1, 1, 1, 1, 1, 1, 0},
	{0, 1, -1, 2, -2, 1. / 2, -1. / 2, 0},
	{0, 1, 1, 4, 4, 1. / 4, 1. / 4, 0},
	{0, 1, -1, 8, -8, 1. / 8, -1. / 8, 1},
}

// winoF4G2 is G2 of F(5×5,4×4), 8×4: G's rows cut to four powers. The
// kernels apply it as diag(winoF4G2Scale)·winoF4E; the tests check that
// this is G2.
var winoF4G2 = [][]float64{
	{-1, 0, 0, 0},
	{-2. / 9, -2. / 9, -2. / 9, -2. / 9},
	{-2. / 9, 2. / 9, -2. / 9, 2. / 9},
	{1. / 90, 1. / 45, 2. / 45, 4. / 45},
	{1. / 90, -1. / 45, 2. / 45, -4. / 45},
	{32. / 45, 16. / 45, 8. / 45, 4. / 45},
	{32. / 45, -16. / 45, 8. / 45, -4. / 45},
	{0, 0, 0, 1},
}

// winoF4AW is A2ᵀ of F(5×5,4×4), 5×8: the points to the powers 0 to 4.
var winoF4AW = [][]float64{
	{1, 1, 1, 1, 1, 1, 1, 0},
	{0, 1, -1, 2, -2, 1. / 2, -1. / 2, 0},
	{0, 1, 1, 4, 4, 1. / 4, 1. / 4, 0},
	{0, 1, -1, 8, -8, 1. / 8, -1. / 8, 0},
	{0, 1, 1, 16, 16, 1. / 16, 1. / 16, 1},
}

// winoF4E is E, G2 without its row scales winoF4G2Scale (G2 =
// diag(winoF4G2Scale)·E): row i holds point i to the powers 0 to 3 (∞: the
// last power only). Its coefficients are powers of two, so the dy
// transform rounds only its sums, and the scales (−2/9, 1/90, 32/45) go
// into the finish's matrix (dwKron), computed in float64 and rounded once.
var winoF4E = [][]float64{
	{1, 0, 0, 0},
	{1, 1, 1, 1},
	{1, -1, 1, -1},
	{1, 2, 4, 8},
	{1, -2, 4, -8},
	{1, 1. / 2, 1. / 4, 1. / 8},
	{1, -1. / 2, 1. / 4, -1. / 8},
	{0, 0, 0, 1},
}

// winoF4G2Scale are G2's row scales: one over the product of (p − q) over
// the other points q.
var winoF4G2Scale = []float64{-1, -2. / 9, -2. / 9, 1. / 90, 1. / 90, 32. / 45, 32. / 45, 1}

// winoF4 is F(4×4,5×5). The dy transform applies E, so the weight
// gradient's finish scales by G2's row scales.
var winoF4 = &winoAlg{name: "F(4x4,5x5)", m: 4, r: 5, alpha: 8, g: winoF4G,
	dwScale: winoF4G2Scale, aw: winoF4AW, roundBytes: winogradF4RoundBytes, kernels: winogradF4For}

// winoPass is one pass of a separable transform over n channels (a
// multiple of the kernel's lanes), with J inputs a line (8 for Aᵀ, the
// one kernel of this form): for each of lines lines l and each r < rows,
//
//	dst[l·ldLineOut + r·ldR + c] = act(Σ_j mat[r][j]·src[l·ldLine + j·ldJ + c] + bias[c])
//
// where act clears negative results when relu is not zero and bias may be
// nil. mat holds each coefficient repeated across the lanes (winoExpand).
// A line's J inputs are all read before its outputs are written, so a
// pass may write over the lines it reads.
type winoPass func(mat *float32, rows int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int)

// winoExpand lays out m (R×J) for a pass kernel of that many lanes: each
// coefficient, rounded to float32, repeated lanes times, row after row.
func winoExpand(m [][]float64, lanes int) []float32 {
	var out []float32
	for _, row := range m {
		for _, v := range row {
			for range lanes {
				out = append(out, float32(v))
			}
		}
	}
	return out
}

// winoF4BTConsts are the constants of the vector kernels' Bᵀ (the BT8
// macro), each repeated across the lanes. Bᵀ's rows pair up around the
// points ±p, so 26 vector operations a line do what 64 multiply-adds of a
// generic pass would.
func winoF4BTConsts(lanes int) []float32 {
	return winoExpand([][]float64{{21. / 4, 17. / 4, 1. / 4, 5. / 4, 1. / 2, 5. / 2, 2, 4, 5}}, lanes)
}

// winoF4ATConsts are the constants of an Aᵀ pass kernel (a winoPass that
// takes them for its matrix and computes Aᵀ's rows in 16 vector operations
// a line, against 32 multiply-adds), each repeated across the lanes.
func winoF4ATConsts(lanes int) []float32 {
	return winoExpand([][]float64{{2, 1. / 2, 4, 1. / 4, 8, 1. / 8}}, lanes)
}

// winoF4EConsts are the constants of the vector kernels' E (the E8
// macro), each repeated across the lanes: 16 vector operations a line,
// the rows paired around ±p, against 32 multiply-adds of a generic pass.
func winoF4EConsts(lanes int) []float32 {
	return winoExpand([][]float64{{4, 2, 8, 1. / 4, 1. / 2, 1. / 8}}, lanes)
}

// winoTileFunc is a transform of one whole tile (winogradKernels.input and
// .dy): src at rows ldRow and columns ldCol apart, dst at ξ·ldXi, n
// channels.
type winoTileFunc func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)

// newWinoF4Kernels builds F(4×4,5×5)'s transforms from an instruction
// set's kernels: input is the whole input transform (V = Bᵀ d B of one
// tile, winogradKernels.input), dy the whole dy transform (D = E g Eᵀ of
// a 4×4 block g of dy, winogradKernels.dy), at8 the Aᵀ pass (given
// winoF4ATConsts for its matrix).
func newWinoF4Kernels(input, dy winoTileFunc, at8 winoPass, lanes int) *winogradKernels {
	return newWino4Kernels(input, dy, at8, winoF4ATConsts(lanes), 8, lanes)
}

// newWino4Kernels builds the transforms of an F(4×4,r×r) whose tiles are
// side×side (r+3): input and dy as given, and the output transform from
// the Aᵀ pass atPass with its constants at.
func newWino4Kernels(input, dy winoTileFunc, atPass winoPass, at []float32, side, lanes int) *winogradKernels {
	return &winogradKernels{lanes: lanes, input: input, dy: dy,
		// Y = Aᵀ M A + bias: t = M·A row by row, in place into the
		// first four columns of M, then Aᵀ·t column by column into y.
		output: func(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int) {
			atPass(&at[0], 4, src, ldXi, side*ldXi, src, ldXi, side*ldXi, side, nil, 0, n)
			atPass(&at[0], 4, src, side*ldXi, ldXi, dst, ldRow, ldCol, 4, bias, relu, n)
		},
	}
}

// winogradF4Go is F(4×4,5×5) with the pure-Go kernels, which every GOARCH
// has, built on first use (winogradF4For), as the vector sets are
// (archWinogradF4): built at package initialisation, they would be linked
// into every program that imports this package, F(4×4) layers or not.
var winogradF4Go struct {
	once sync.Once
	k    *winogradKernels
}

// winoInputF4Go is V = Bᵀ d B of one tile: t = d·B row by row into dst,
// then Bᵀ·t column by column in place.
func winoInputF4Go(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
	winoBT8Go(src, ldCol, ldRow, dst, ldXi, 8*ldXi, 8, n)
	winoBT8Go(dst, 8*ldXi, ldXi, dst, 8*ldXi, ldXi, 8, n)
}

// winogradF4For returns F(4×4,5×5)'s transforms that go with GEMM path
// p, so that forcing a path in tests forces the matching transforms.
func winogradF4For(p *gemmPath) *winogradKernels {
	if k := archWinogradF4(p.name); k != nil {
		return k
	}
	winogradF4Go.once.Do(func() { winogradF4Go.k = newWinoF4Kernels(winoInputF4Go, winoDyF4Go, winoAT8Go, 1) })
	return winogradF4Go.k
}

// winoE8 applies E to one line z0..z3, as the vector kernels compute it
// (conv_winograd4_amd64.s's E8). Every product is exact (the coefficients
// are powers of two), so fused or not, the results are the same bits.
func winoE8(z0, z1, z2, z3 float32) [8]float32 {
	e, o := z0+z2, z1+z3
	a3, b3 := z0+4*z2, 2*z1+8*z3
	a5, b5 := z0+0.25*z2, 0.5*z1+0.125*z3
	return [8]float32{z0, e + o, e - o, a3 + b3, a3 - b3, a5 + b5, a5 - b5, z3}
}

// winoDyF4Go is D = E g Eᵀ of one 4×4 block g of dy: t = g·Eᵀ row by row,
// then E·t column by column into dst.
func winoDyF4Go(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
	s := unsafe.Slice(src, 3*ldRow+3*ldCol+n)
	d := unsafe.Slice(dst, 63*ldXi+n)
	var t [4][8]float32
	for c := 0; c < n; c++ {
		for a := range t {
			r := s[a*ldRow+c:]
			t[a] = winoE8(r[0], r[ldCol], r[2*ldCol], r[3*ldCol])
		}
		for j := 0; j < 8; j++ {
			for i, v := range winoE8(t[0][j], t[1][j], t[2][j], t[3][j]) {
				d[(8*i+j)*ldXi+c] = v
			}
		}
	}
}

// winoBT8Go is a winoPass of Bᵀ (8 rows, no bias, no ReLU) in Go: Bᵀ's
// rows paired around the points ±p, as the vector kernels compute them
// (conv_winograd4_amd64.s's BT8).
func winoBT8Go(src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines, n int) {
	s := unsafe.Slice(src, (lines-1)*ldLine+7*ldJ+n)
	d := unsafe.Slice(dst, (lines-1)*ldLineOut+7*ldR+n)
	for l := 0; l < lines; l++ {
		in, out := l*ldLine, l*ldLineOut
		for c := 0; c < n; c++ {
			z0, z1, z2, z3 := s[in+c], s[in+ldJ+c], s[in+2*ldJ+c], s[in+3*ldJ+c]
			z4, z5, z6, z7 := s[in+4*ldJ+c], s[in+5*ldJ+c], s[in+6*ldJ+c], s[in+7*ldJ+c]
			o0 := (z6 - z0) + 21.0/4*(z2-z4)
			a1, b1 := (z2+z6)-17.0/4*z4, (z1+z5)-17.0/4*z3
			a3, b3 := z6+0.25*z2-1.25*z4, 0.5*z1-2.5*z3+2*z5
			a5, b5 := z6+4*z2-5*z4, 2*z1-2.5*z3+0.5*z5
			o7 := (z7 - z1) + 21.0/4*(z3-z5)
			d[out+c], d[out+ldR+c], d[out+2*ldR+c], d[out+3*ldR+c] = o0, a1+b1, a1-b1, a3+b3
			d[out+4*ldR+c], d[out+5*ldR+c], d[out+6*ldR+c], d[out+7*ldR+c] = a3-b3, a5+b5, a5-b5, o7
		}
	}
}

// winoAT8Go is the Aᵀ pass in Go (a winoPass whose mat and rows, 4, go
// unread), as the vector kernels compute it (AT8).
func winoAT8Go(_ *float32, _ int, src *float32, ldJ, ldLine int, dst *float32, ldR, ldLineOut, lines int, bias *float32, relu, n int) {
	s := unsafe.Slice(src, (lines-1)*ldLine+7*ldJ+n)
	d := unsafe.Slice(dst, (lines-1)*ldLineOut+3*ldR+n)
	var b []float32
	if bias != nil {
		b = unsafe.Slice(bias, n)
	}
	for l := 0; l < lines; l++ {
		in, out := l*ldLine, l*ldLineOut
		for c := 0; c < n; c++ {
			z0, z1, z2, z3 := s[in+c], s[in+ldJ+c], s[in+2*ldJ+c], s[in+3*ldJ+c]
			z4, z5, z6, z7 := s[in+4*ldJ+c], s[in+5*ldJ+c], s[in+6*ldJ+c], s[in+7*ldJ+c]
			s1, d1, s2, d2, s3, d3 := z1+z2, z1-z2, z3+z4, z3-z4, z5+z6, z5-z6
			y := [4]float32{((z0 + s1) + s2) + s3, d1 + 2*d2 + 0.5*d3, s1 + 4*s2 + 0.25*s3, (d1 + z7) + 8*d2 + 0.125*d3}
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
