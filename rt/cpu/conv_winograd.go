package cpu

import (
	"fmt"
	"sync"
	"unsafe"
)

// This file holds Winograd convolution F(2×2,5×5) for stride-1, undilated,
// ungrouped 5×5 layers. Each output tile of 2×2 pixels is computed from a
// 6×6 input tile d as
//
//	Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
//
// with the interpolation points 0, ±1, ±2 and ∞: 36 multiplications per
// tile and channel pair instead of 100. Summed over input channels, the
// element-wise products become 36 independent matrix products, one per
// position ξ of the 6×6 transformed tile:
//
//	M[ξ] (tiles × OC) = V[ξ] (tiles × C) · U[ξ] (C × OC)
//
// which run through the package's SGEMM. The transforms of the input (V)
// and of the products (M → Y) are vectorised across channels: images are
// first copied into a zero-padded channels-last layout, [row][column][c],
// so that one tile's 36 inputs of 16 (AVX-512) or 8 (AVX2) consecutive
// channels are 36 vector loads at fixed strides, and the outputs come back
// channels-last and are transposed into NCHW. The filter transform U is
// done once per call, as one small SGEMM per input channel
// (winoPackFilters).
//
// The matrices (rows of Bᵀ are the products of (x − p) over the other
// points, G's rows evaluate the filter polynomial at each point divided by
// that product's value there, Aᵀ's rows are powers of the points):
//
//	Bᵀ = [4  0 -5  0 1 0]   G = [ 1/4     0      0      0     0   ]   Aᵀ = [1 1  1 1  1 0]
//	     [0 -4 -4  1 1 0]       [-1/6  -1/6   -1/6   -1/6  -1/6  ]        [0 1 -1 2 -2 1]
//	     [0  4 -4 -1 1 0]       [-1/6   1/6   -1/6    1/6  -1/6  ]
//	     [0 -2 -1  2 1 0]       [1/24  1/12    1/6    1/3   2/3  ]
//	     [0  2 -1 -2 1 0]       [1/24 -1/12    1/6   -1/3   2/3  ]
//	     [0  4  0 -5 0 1]       [ 0      0      0      0     1   ]
//
// The rounding error is larger than the direct sum's: the transformed
// values are up to 5·5·|d| in size and the filter's up to |g|, and the
// output transform adds terms scaled by up to 2·2; TestConvWinograd states
// the measured bound.

// winoTile is the side of the transformed tile (F(2×2,5×5): 2 + 5 − 1) and
// winoOut the side of the output tile.
const (
	winoTile = 6
	winoOut  = 2
	winoXi   = winoTile * winoTile
)

// winogradG is the filter transform G of F(2,5), in float64.
var winogradG = [][]float64{
	{1.0 / 4, 0, 0, 0, 0},
	{-1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6},
	{-1.0 / 6, 1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6},
	{1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 3, 2.0 / 3},
	{1.0 / 24, -1.0 / 12, 1.0 / 6, -1.0 / 3, 2.0 / 3},
	{0, 0, 0, 0, 1},
}

// winoAlg is one Winograd algorithm F(m×m,r×r) with the weight gradient's
// F(r×r,m×m) on the same α = m + r − 1 points: the parts that depend on
// the points and the filter size, so that one driver
// (convWinogradForward, convWinogradWeightGrad) runs F(2×2,5×5),
// F(4×4,5×5) (conv_winograd4.go) and F(4×4,3×3) (conv_winograd3.go).
type winoAlg struct {
	name        string      // "F(2x2,5x5)", for messages
	m, r, alpha int         // output tile side, filter side, transformed tile side
	g           [][]float64 // G, α×r: the filter transform, applied in float64
	// dwScale and aw finish the weight gradient in float64: dw = awᵀ-side
	// transform of (dwScale_i·dwScale_j·P[ij]), aw being A'ᵀ (r×α).
	dwScale []float64
	aw      [][]float64
	// roundBytes bounds a round's V and M (winogradRoundBytes) unless
	// minRows, when not 0, asks for more: rounds of at least minRows
	// tiles, as many for each thread (newWinoGeom).
	roundBytes, minRows int
	// kernels returns the transforms that go with a GEMM path.
	kernels func(p *gemmPath) *winogradKernels
	// kronK, kronFlip and kronDW are the filter transform's G ⊗ G (kron) and
	// the weight gradient's finish (dwKron).
	kronOnce                sync.Once
	kronK, kronFlip, kronDW []float32
}

// winoF2 is F(2×2,5×5), this file's algorithm.
var winoF2 = &winoAlg{name: "F(2x2,5x5)", m: winoOut, r: 5, alpha: winoTile,
	g: winogradG, dwScale: winogradScale, aw: winogradAW, roundBytes: winogradRoundBytes, kernels: winogradFor}

// winogradKernels is one instruction set's pair of transform kernels.
// Strides are in floats; n is the number of channels, a multiple of lanes.
type winogradKernels struct {
	// input writes Bᵀ d B of one tile for n channels: d[i][j][c] is
	// src[i·ldRow + j·ldCol + c] and the result at ξ = αi + j goes to
	// dst[ξ·ldXi + c]. dst is also its scratch between the row and the
	// column pass.
	input func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
	// output writes Aᵀ m A + bias of one tile for n channels, with
	// negative results cleared when relu is not zero: m[ξ][c] is
	// src[ξ·ldXi + c] and y[a][b][c] goes to dst[a·ldRow + b·ldCol + c].
	output func(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int)
	// dy writes E g Eᵀ of one m×m tile g of the output gradient for n
	// channels (winoDyGo and winoDyF4Go say what E is: the weight
	// gradient's filter transform without its row scales, dwScale):
	// g[a][b][c] is src[a·ldRow +
	// b·ldCol + c] and the result at ξ goes to dst[ξ·ldXi + c].
	dy    func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
	lanes int
}

// winogradGo is the pure-Go pair, which every GOARCH has; it computes
// what the vector kernels compute, in the same order.
var winogradGo = &winogradKernels{input: winoInputGo, output: winoOutputGo, dy: winoDyGo, lanes: 1}

// winogradFor returns the transform kernels that go with GEMM path p, so
// that forcing a path in tests forces the matching transforms.
func winogradFor(p *gemmPath) *winogradKernels {
	if k := archWinograd(p.name); k != nil {
		return k
	}
	return winogradGo
}

// winoBT applies Bᵀ to z in place, in the order the vector kernels use.
func winoBT(z *[winoTile]float32) {
	z0, z1, z2, z3, z4, z5 := z[0], z[1], z[2], z[3], z[4], z[5]
	s1, s2 := z4-4*z2, 4*z1-z3
	s3, s4 := z4-z2, (z1-z3)+(z1-z3)
	z[0] = (4*z0 + z4) - 5*z2
	z[1], z[2] = s1-s2, s1+s2
	z[3], z[4] = s3-s4, s3+s4
	z[5] = (4*z1 + z5) - 5*z3
}

func winoInputGo(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
	s := unsafe.Slice(src, 5*ldRow+5*ldCol+n)
	d := unsafe.Slice(dst, 35*ldXi+n)
	var z [winoTile]float32
	for c := 0; c < n; c++ {
		// Rows first (d·B), then columns (Bᵀ·), as the vector kernels.
		for i := 0; i < winoTile; i++ {
			for j := range z {
				z[j] = s[i*ldRow+j*ldCol+c]
			}
			winoBT(&z)
			for j, v := range z {
				d[(i*winoTile+j)*ldXi+c] = v
			}
		}
		for j := 0; j < winoTile; j++ {
			for i := range z {
				z[i] = d[(i*winoTile+j)*ldXi+c]
			}
			winoBT(&z)
			for i, v := range z {
				d[(i*winoTile+j)*ldXi+c] = v
			}
		}
	}
}

func winoOutputGo(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int) {
	s := unsafe.Slice(src, 35*ldXi+n)
	d := unsafe.Slice(dst, ldRow+ldCol+n)
	b := unsafe.Slice(bias, n)
	for c := 0; c < n; c++ {
		m := func(i, j int) float32 { return s[(i*winoTile+j)*ldXi+c] }
		for a := 0; a < winoOut; a++ {
			// Row a of Aᵀ over the columns, then over the rows.
			var r [winoTile]float32
			for j := range r {
				if a == 0 {
					r[j] = m(0, j) + m(1, j) + m(2, j) + m(3, j) + m(4, j)
				} else {
					r[j] = ((m(1, j) - m(2, j)) + m(5, j)) + 2*(m(3, j)-m(4, j))
				}
			}
			y0 := r[0] + r[1] + r[2] + r[3] + r[4] + b[c]
			y1 := ((r[1] - r[2]) + r[5]) + 2*(r[3]-r[4]) + b[c]
			if relu != 0 {
				y0, y1 = reluSign(y0), reluSign(y1)
			}
			d[a*ldRow+c], d[a*ldRow+ldCol+c] = y0, y1
		}
	}
}

// winoE applies E, the filter transform of F(5×5,2×2) without its row
// scales (winogradScale), to the pair z: e_p = z0 + p·z1 at the points 0,
// 1, −1, 2, −2, and z1 at ∞.
func winoE(z0, z1 float32) [winoTile]float32 {
	p1, m1 := z0+z1, z0-z1
	return [winoTile]float32{z0, p1, m1, p1 + z1, m1 - z1, z1}
}

func winoDyGo(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int) {
	s := unsafe.Slice(src, ldRow+ldCol+n)
	d := unsafe.Slice(dst, 35*ldXi+n)
	for c := 0; c < n; c++ {
		col0 := winoE(s[c], s[ldRow+c])             // down column 0
		col1 := winoE(s[ldCol+c], s[ldRow+ldCol+c]) // down column 1
		for i := 0; i < winoTile; i++ {
			for j, v := range winoE(col0[i], col1[i]) {
				d[(i*winoTile+j)*ldXi+c] = v
			}
		}
	}
}

// reluSign clears v when its sign bit is set, as the vector kernels do.
func reluSign(v float32) float32 {
	if int32(*(*uint32)(unsafe.Pointer(&v))) < 0 {
		return 0
	}
	return v
}

// winogradOK reports whether normalised geometry g suits F(m×m,5×5)
// (winoFits). It names no winoAlg, whose kernels a program would then
// link: F(4×4,5×5)'s entry points check with it too.
func winogradOK(g Conv) bool { return winoFits(g, 5) }

// fits reports whether normalised geometry g suits a (winoFits).
func (a *winoAlg) fits(g Conv) bool { return winoFits(g, a.r) }

// winoFits reports whether normalised geometry g suits Winograd with an
// r×r filter: stride 1, no dilation, one group. Any padding works.
func winoFits(g Conv, r int) bool {
	return g.SH == 1 && g.SW == 1 && g.DH == 1 && g.DW == 1 && g.Groups == 1 && g.KH == r && g.KW == r
}

// winoGeom is the tiling of one image and the sizes of the work buffers.
type winoGeom struct {
	m, alpha int // output tile side, transformed tile side (winoAlg)
	xi       int // α², the number of products
	th, tw   int // tile rows and columns: ⌈OH/m⌉, ⌈OW/m⌉
	hp, wp   int // the padded channels-last image: m·th+r−1 rows of m·tw+r−1 pixels
	cp, ocp  int // channels and output channels rounded up to the vector lanes
	images   int // images per round of α² products
	rowTiles int // tiles of one round (the rows of each product)
}

// winogradRoundBytes bounds V and M of one round of F(2×2,5×5)
// (α²·tiles·(C+OC) floats), at least one image: on the 2-core Xeon
// measured, rounds of one image of models/mnist.cue's second layer (49
// tiles, 677 KB) ran in 18 ms on 2 threads, rounds of 2 to 6 images in 30
// ms (1 thread: 31-33 ms either way).
const winogradRoundBytes = 768 << 10

// winogradF4RoundBytes is winogradRoundBytes for F(4×4,5×5), whose images
// of that layer are 16 tiles (393 KB): rounds of one image make products
// of 16 rows, which the AVX-512 microkernel's 12 rows cover badly. On one
// thread of the shared 2-core Zen 4, its forward took 27 ms with 768 KB
// (one image), 22 ms with 1280 KB (three images, 48 rows) and 24 ms with
// 2 MB (five).
const winogradF4RoundBytes = 1280 << 10

// winoLinePad (floats, one 64-byte cache line) is added to the strides
// between the products' rows of V, M and D (ξ to ξ + 1) and between the
// rows of the weight gradient's dy image, which are otherwise multiples of
// 4 KB for the flagship's second layer (48 tiles of 64 channels: 12 KB;
// 16 pixels of 64 channels: 4 KB). The transforms write (or read) all 64
// ξ of a tile in turn, and addresses 4 KB apart fall in one set of the L1
// cache and alias for the store-to-load check. F(4×4) on that layer, one
// thread, median of 3 on the quiet 2-core Xeon: forward 16.1 → 13.9 ms,
// backward 37.2 → 32.2, BenchmarkFlagshipStep 85.1 → 74.9 (the dy rows:
// backward 32.1 → 31.3); two lines measured no better.
const winoLinePad = 16

func newWinoGeom(g Conv, a *winoAlg, lanes int) winoGeom {
	th, tw := gemmCeilDiv(g.OH, a.m), gemmCeilDiv(g.OW, a.m)
	lanes = max(lanes, 16) // one padded layout on every path
	cp, ocp := gemmRoundUp(g.C, lanes), gemmRoundUp(g.OC, lanes)
	xi := a.alpha * a.alpha
	images := max(1, min(g.N, a.roundBytes/(4*xi*(cp+ocp)*th*tw)))
	if a.minRows > 0 {
		images = min(g.N, max(images, gemmCeilDiv(a.minRows, th*tw)))
		// The rounds split evenly over the threads, when there are
		// images enough: 3 rounds on 2 threads take as long as 4.
		if t := Threads(); g.N >= t {
			images = gemmCeilDiv(g.N, gemmRoundUp(gemmCeilDiv(g.N, images), t))
		}
	}
	return winoGeom{m: a.m, alpha: a.alpha, xi: xi, th: th, tw: tw, hp: a.m*th + a.r - 1, wp: a.m*tw + a.r - 1, cp: cp, ocp: ocp,
		images: images, rowTiles: images * th * tw}
}

// winogradScale are the row scales of G' = diag(winogradScale)·E, the
// filter transform of F(5×5,2×2) (the same points, so the same Bᵀ): one
// over the product of (p − q) over the other points q.
var winogradScale = []float64{1.0 / 4, -1.0 / 6, -1.0 / 6, 1.0 / 24, 1.0 / 24, 1}

// winogradAW is A'ᵀ of F(5×5,2×2): row i holds the points to the power i
// (and 1 for ∞ in the last row).
var winogradAW = [][]float64{
	{1, 1, 1, 1, 1, 0},
	{0, 1, -1, 2, -2, 0},
	{0, 1, 1, 4, 4, 0},
	{0, 1, -1, 8, -8, 0},
	{0, 1, 1, 16, 16, 1},
}

// winoPackFilters writes U[ξ][c][oc] = (G f Gᵀ)[ξ], zero for oc ≥ OC,
// straight into the GEMM's packed B layout (sgemmPackedB) for path p:
// U[ξ] (C × ocp) at packed[ξ·C·np:], np = ocp rounded up to nr, in blocks
// of kc input channels, each block's nr-column panels k-major as packB
// lays them out. The filter f of output channel oc and input channel c is
// w[oc][c], or with flip (g is then the geometry of dx's convolution, see
// convWinogradBackward) the forward filter w[c][oc] turned by 180
// degrees. (G f Gᵀ)[αi + j] is Σ_kl G[i][k]·G[j][l]·f[k][l], so U[·][c][·]
// is one product K·Fᵀ (α² × r² by r² × OC) per input channel, K = G ⊗ G
// (kron) and F the channel's r²-tap filters, one a row (with flip, K's
// columns reversed): a float32 SGEMM into a scratch in L1, copied into
// its rows of the panels, split over the threads by input channel.
// Against the float64 transform it replaced (scalar, 1.35 ms a call for
// the flagship's second layer), U's error grows from one rounding to a
// 25-term float32 sum's; the convolutions' errors stay within
// TestConvWinogradFwd/Bwd's bounds (winogradMethods gives them). U was
// written whole, then packed by packB where C fit one kc block (else
// packed again by every round's products): writing the panels straight
// away, F(4×4,3×3) forward, one thread, CPU ms, ResNet-18's 512 channels
// at 7² (U 37.7 MB) batch 32 84 → 48-52, 256 at 14² batch 1 5.3 → 3.4-4.6.
func winoPackFilters(a *winoAlg, w []float32, packed []float32, g Conv, ocp int, flip bool, p *gemmPath) {
	xi, nr := a.alpha*a.alpha, p.nr
	np := gemmRoundUp(ocp, nr)
	packed = packed[:xi*g.C*np]
	taps := a.r * a.r
	k, off, ldf := a.kron(flip), taps, g.C*taps
	if flip {
		off, ldf = g.OC*taps, taps
	}
	ParallelFor(g.C, 1, func(lo, hi int) {
		cw := convWorkers.Get()
		cw.rows = grow(cw.rows, xi*np)
		u := cw.rows
		clear(u) // zero past OC
		for c := lo; c < hi; c++ {
			sgemmSerialTT(false, true, xi, g.OC, taps, k, taps, w[c*off:], ldf, 0, u, np)
			pc := c / p.kc * p.kc
			kb := min(p.kc, g.C-pc)
			for x := range xi {
				block := packed[x*g.C*np+pc*np:]
				row := u[x*np : (x+1)*np]
				for jr := 0; jr < np; jr += nr {
					copy(block[jr*kb+(c-pc)*nr:jr*kb+(c-pc+1)*nr], row[jr:jr+nr])
				}
			}
		}
		convWorkers.Put(cw)
	})
}

// dwKron returns K' (α² × r²) of the weight gradient's finish: dw's
// r×r block is A'ᵀ (scales ⊙ P) A', so K'[αi + j][rk + l] =
// aw[k][i]·aw[l][j]·dwScale[i]·dwScale[j], computed in float64 and
// rounded once, built on first use.
func (a *winoAlg) dwKron() []float32 {
	a.kronOnce.Do(a.buildKron)
	return a.kronDW
}

// kron returns K = G ⊗ G (α² × r²: K[αi + j][rk + l] = G[i][k]·G[j][l],
// computed in float64 and rounded once), or with flip K with its columns
// reversed, built on first use.
func (a *winoAlg) kron(flip bool) []float32 {
	a.kronOnce.Do(a.buildKron)
	if flip {
		return a.kronFlip
	}
	return a.kronK
}

// buildKron computes kron's and dwKron's matrices.
func (a *winoAlg) buildKron() {
	al, r := a.alpha, a.r
	taps := r * r
	a.kronK, a.kronFlip, a.kronDW = make([]float32, al*al*taps), make([]float32, al*al*taps), make([]float32, al*al*taps)
	for i := range al {
		for j := range al {
			for k := range r {
				for l := range r {
					v := float32(a.g[i][k] * a.g[j][l])
					a.kronK[(i*al+j)*taps+r*k+l] = v
					a.kronFlip[(i*al+j)*taps+taps-1-(r*k+l)] = v
					a.kronDW[(i*al+j)*taps+r*k+l] = float32(a.aw[k][i] * a.aw[l][j] * a.dwScale[i] * a.dwScale[j])
				}
			}
		}
	}
}

// sgemmSerial is Sgemm (alpha 1, beta 0, no transposes) on the calling
// goroutine only, for kernels that already split their work over threads.
func sgemmSerial(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	sgemmSerialT(false, m, n, k, a, lda, b, ldb, 0, c, ldc)
}

// sgemmSerialT is sgemmSerial with op(A) = Aᵀ when transA, and beta.
func sgemmSerialT(transA bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmSerialTT(transA, false, m, n, k, a, lda, b, ldb, beta, c, ldc)
}

// sgemmSerialTT is sgemmSerialT with op(B) = Bᵀ when transB.
func sgemmSerialTT(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemmOperands(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	g := gemmCalls.Get().(*gemmCall)
	*g = gemmCall{barrier: g.barrier, p: activeGemmPath.Load(), transA: transA, transB: transB, m: m, n: n, k: k, alpha: 1, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	g.run(0, m, 0, n)
	*g = gemmCall{barrier: g.barrier}
	gemmCalls.Put(g)
}

// sgemmPackedB is sgemmSerial with B (k × n) already packed: for each
// block of the path's kc steps of the shared dimension in turn (pc = 0,
// kc, …), the block's nr-column panels as packB lays them out, the block
// at bp[pc·⌈n/nr⌉·nr:] (winoPackFilters), where Sgemm would pack B on
// every call. Each block of mc rows of A meets all of B's columns, which
// stream past it a panel at a time, so n need not be within nc.
func sgemmPackedB(p *gemmPath, m, n, k int, a []float32, lda int, bp []float32, c []float32, ldc int) {
	checkGemmOperand("a", a, m, k, lda)
	checkGemmOperand("c", c, m, n, ldc)
	np := gemmRoundUp(n, p.nr)
	if p.pairs != nil || len(bp) < np*k {
		panic("cpu: sgemmPackedB: B is not packed in kc blocks of panels")
	}
	if p.direct != nil && m*min(k, p.kc) <= gemmSmallMaxA {
		sgemmPackedBInPlace(p, m, n, k, a, lda, bp, c, ldc)
		return
	}
	g := gemmCalls.Get().(*gemmCall)
	*g = gemmCall{barrier: g.barrier, p: p, m: m, n: n, k: k, alpha: 1, a: a, lda: lda, c: c, ldc: ldc}
	w := gemmArenas.Get().(*gemmArena)
	w.fit(p)
	for ic := 0; ic < m; ic += p.mc {
		mb := min(p.mc, m-ic)
		for pc := 0; pc < k; pc += p.kc {
			kb := min(p.kc, k-pc)
			packA(p, false, a, lda, ic, pc, mb, kb, w.a)
			g.tiles(w, bp[pc*np:], ic, mb, 0, n, pc, kb)
		}
	}
	gemmArenas.Put(w)
	*g = gemmCall{barrier: g.barrier}
	gemmCalls.Put(g)
}

// sgemmPackedBInPlace is sgemmPackedB on the small-product path's tiles
// (runSmall), for an A of at most gemmSmallMaxA floats a kc block: A is
// read where it lies, and each packed panel of B is a k×nr matrix in
// place (ldb nr), so the rows past the last whole mr-row tile run in the
// smaller tiles. The packed kernel computes a whole mr-row tile for them:
// 24 rows for the 16 tiles of a 14² image at batch 1, 60 for the 49 of a
// 28² one.
func sgemmPackedBInPlace(p *gemmPath, m, n, k int, a []float32, lda int, bp []float32, c []float32, ldc int) {
	np := gemmRoundUp(n, p.nr)
	w := gemmArenas.Get().(*gemmArena)
	w.fit(p)
	for pc := 0; pc < k; pc += p.kc {
		kb := min(p.kc, k-pc)
		var beta float32
		if pc > 0 {
			beta = 1
		}
		block := bp[pc*np:]
		for jr := 0; jr < n; jr += p.nr {
			cols := min(p.nr, n-jr)
			b := &block[jr*kb]
			i := 0
			for _, t := range p.direct {
				for ; m-i >= t.rows; i += t.rows {
					if cols == p.nr {
						t.kernel(kb, &a[i*lda+pc], lda, 1, b, p.nr, &c[i*ldc+jr], ldc, 1, beta)
						continue
					}
					t.kernel(kb, &a[i*lda+pc], lda, 1, b, p.nr, &w.tile[0], p.nr, 1, 0)
					mergeTile(w.tile, p.nr, t.rows, cols, c[i*ldc+jr:], ldc, 1, beta)
				}
			}
		}
	}
	gemmArenas.Put(w)
}

// convWinogradForward is Conv2DWinogradFwd for geometry that winogradOK
// accepts (with flip, the filters are those of the forward convolution
// whose dx g computes: see winoPackFilters). Rounds of whole images are
// split over the threads; each worker pads its images channels-last,
// transforms their tiles into V, runs the α² products into M and
// transforms M back into the output. (A batch of fewer images than
// threads leaves threads idle: sharing each step of a round among them
// instead added 3 KB of code, past models/mnist.cue's program budget, for
// a batch of one on two threads, where the layers F(4×4,3×3) takes ran
// about as fast on one thread as the direct method on two.)
func convWinogradForward(x, w, b, y []float32, g Conv, act Act, alpha float32, a *winoAlg, k *winogradKernels, flip bool, keep winoKeep) {
	d := newWinoGeom(g, a, k.lanes)
	winoXi := d.xi
	hw, ohw := g.H*g.W, g.OH*g.OW
	path := activeGemmPath.Load()
	lead := convWorkers.Get()
	lead.a = grow(lead.a, d.ocp)
	bias := lead.a[:d.ocp]
	clear(bias)
	if b != nil {
		copy(bias, b[:g.OC])
	}
	// The filters go into the GEMM's packed B panels once: U[ξ] in
	// blocks of kc input channels.
	panel := gemmRoundUp(d.ocp, path.nr) * g.C
	var packed []float32
	var cached *winoCached
	if keep != nil {
		packed, cached = keep(a, w, g, d.ocp, g.N*d.th*d.tw, path)
	}
	if packed == nil {
		lead.tile = grow(lead.tile, winoXi*panel)
		packed = lead.tile
		winoPackFilters(a, w, packed, g, d.ocp, flip, path)
	}
	relu := 0
	if act == ActReLU {
		relu = 1
	}
	rounds := gemmCeilDiv(g.N, d.images)
	imgIn, imgOut := d.hp*d.wp*d.cp, d.m*d.th*d.m*d.tw*d.ocp
	ldV, ldM := d.rowTiles*d.cp+winoLinePad, d.rowTiles*d.ocp+winoLinePad
	workers := convParallel(rounds, func(cw *convWorker) {
		// Only what no image's copy writes is cleared: the padded
		// rows' borders, and the channels past C of the transposed rows
		// (none where C is a whole number of vectors). Clearing both
		// whole took 1% of ResNet-18's one-sample inference.
		cw.panel = grow(cw.panel, imgIn)
		winoClearBorders(cw.panel[:imgIn], g, d)
		cw.cols = grow(cw.cols, winoXi*(ldV+ldM))
		cw.tile = grow(cw.tile, imgOut)
		cw.rows = grow(cw.rows, hw*d.cp)
		if d.cp != g.C {
			clear(cw.rows[:hw*d.cp])
		}
	}, func(cw *convWorker, round int) {
		n0 := round * d.images
		n1 := min(g.N, n0+d.images)
		xh, v, m := cw.panel, cw.cols[:winoXi*ldV], cw.cols[winoXi*ldV:]
		// With fewer rounds than threads (a batch of one) each step of
		// the round is shared among the idle threads: the transposes
		// and the output transform by blocks of 16 channels (cp and ocp
		// are multiples of 16: whole vectors and 8×8 transposes), the
		// padded rows' copies by rows, the input transform by tile rows
		// and the α² products one by one; otherwise each runs whole (one
		// chunk).
		share := rounds < Threads()
		split := func(n int, fn func(lo, hi int)) {
			grain := n
			if share {
				grain = 1
			}
			ParallelFor(n, grain, fn)
		}
		for n := n0; n < n1; n++ {
			// The image channels-last, then into the padded rows; the
			// borders and the channels past C stay zero. (Transposed
			// straight into the padded rows, one image row at a time,
			// ResNet-18's 64 channels at 56² measured no faster: 8
			// channels' rows of 56 pixels a block, against all 3136.)
			split(d.cp/16, func(lo, hi int) {
				c0, c1 := min(16*lo, g.C), min(16*hi, g.C)
				transposeBlocks(path, x[(n*g.C+c0)*hw:(n*g.C+c1)*hw], c1-c0, hw, hw, cw.rows[c0:], d.cp)
			})
			split(g.H, func(lo, hi int) {
				for ih := lo; ih < hi; ih++ {
					copy(xh[((ih+g.PH)*d.wp+g.PW)*d.cp:((ih+g.PH)*d.wp+g.PW+g.W)*d.cp], cw.rows[ih*g.W*d.cp:])
				}
			})
			t0 := (n - n0) * d.th * d.tw
			split(d.th, func(lo, hi int) {
				for ty := lo; ty < hi; ty++ {
					for tx := 0; tx < d.tw; tx++ {
						t := t0 + ty*d.tw + tx
						k.input(&xh[(d.m*ty*d.wp+d.m*tx)*d.cp], d.wp*d.cp, d.cp, &v[t*d.cp], ldV, d.cp)
					}
				}
			})
		}
		tiles := (n1 - n0) * d.th * d.tw
		split(winoXi, func(lo, hi int) {
			for xi := lo; xi < hi; xi++ {
				sgemmPackedB(path, tiles, d.ocp, g.C, v[xi*ldV:], d.cp, packed[xi*panel:(xi+1)*panel], m[xi*ldM:], d.ocp)
			}
		})
		// The outputs go channels-last into rows of OW pixels, so that
		// the image's pixels are contiguous and one transpose takes them
		// back to NCHW. The last tile column's pixels past OW spill into
		// the next row's first m·tw − OW < m pixels, which the tile
		// column 0 of the same tile row (rows within the tile) or of the
		// next one (the row below it) writes afterwards: the tile
		// columns go right to left, the tile rows top down. With one
		// tile column that tile would overwrite its own outputs, so the
		// rows keep m pixels and go back one by one. Against rows of
		// m·tw pixels transposed one by one (for a 14-pixel row: 8, 4
		// and an overlapping 8 rows), F(4×4) on the flagship's second
		// layer: forward 18.5 → 17.1 ms (one thread, median of 5).
		// A block of channels writes only its own channels, in that
		// order.
		ldY := g.OW
		if d.tw == 1 {
			ldY = d.m
		}
		yh := cw.tile
		for n := n0; n < n1; n++ {
			t0 := (n - n0) * d.th * d.tw
			out := y[n*g.OC*ohw : (n+1)*g.OC*ohw]
			split(d.ocp/16, func(lo, hi int) {
				c0, c1 := 16*lo, 16*hi
				for ty := 0; ty < d.th; ty++ {
					for tx := d.tw - 1; tx >= 0; tx-- {
						t := t0 + ty*d.tw + tx
						k.output(&m[t*d.ocp+c0], ldM, &yh[(d.m*ty*ldY+d.m*tx)*d.ocp+c0], ldY*d.ocp, d.ocp, &bias[c0], relu, c1-c0)
					}
				}
				c1 = min(c1, g.OC)
				if ldY == g.OW {
					transposeBlocks(path, yh[c0:], g.OH*g.OW, c1-c0, d.ocp, out[c0*ohw:], ohw)
				} else {
					for oh := 0; oh < g.OH; oh++ {
						transposeBlocks(path, yh[oh*ldY*d.ocp+c0:], g.OW, c1-c0, d.ocp, out[c0*ohw+oh*g.OW:], ohw)
					}
				}
			})
			if act != ActNone && act != ActReLU {
				applyAct(out, act, alpha)
			}
		}
	})
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
	cached.release()
}

// winoClearBorders zeroes the parts of one image's padded channels-last
// rows xh (hp rows of wp pixels of cp channels) that the image's copy
// leaves alone: the PH rows above it, the rows below it down to hp, and
// each of its rows' PW pixels on the left and those past PW+W.
func winoClearBorders(xh []float32, g Conv, d winoGeom) {
	row := d.wp * d.cp
	clear(xh[:g.PH*row])
	for ih := g.PH; ih < g.PH+g.H; ih++ {
		clear(xh[ih*row : ih*row+g.PW*d.cp])
		clear(xh[ih*row+(g.PW+g.W)*d.cp : (ih+1)*row])
	}
	clear(xh[(g.PH+g.H)*row : d.hp*row])
}

// convWinogradBackward is Conv2DWinogradBwd for geometry that both
// winogradOK and convDirectOK accept: dy is multiplied in place by the
// activation's derivative, dw and db come from convWinogradWeightGrad,
// and dx is Winograd's forward convolution of dy, padded by r − 1 less
// the padding, with the filters transposed and turned by 180 degrees.
func convWinogradBackward(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32, a *winoAlg, k *winogradKernels) {
	ny := g.N * g.OC * g.OH * g.OW
	if act != ActNone {
		actBackward(y[:ny], dy[:ny], act, alpha)
	}
	convWinogradWeightGrad(x, dy, dw, db, g, a, k)
	if dx == nil {
		return
	}
	gt := Conv{N: g.N, C: g.OC, H: g.OH, W: g.OW, OC: g.C, OH: g.H, OW: g.W,
		KH: a.r, KW: a.r, SH: 1, SW: 1, PH: a.r - 1 - g.PH, PW: a.r - 1 - g.PW, DH: 1, DW: 1, Groups: 1}
	convWinogradForward(dy, w, nil, dx, gt, ActNone, 0, a, k, true, nil)
}

// convWinogradWeightGrad writes dw and, when not nil, db of a convolution
// that winogradOK accepts from x and dy (already multiplied by the
// activation's derivative) by Winograd F(r×r,m×m): every m×m tile of dy
// is a filter slid over the α×α input tile the forward pass reads for it,
// giving an r×r contribution to dw. Per round of images, the input tiles
// are transformed as in the forward pass (V), the dy tiles by E (D), and
// the 36 products P[ξ] (OC × C) += D[ξ]ᵀ·V[ξ] summed over the tiles; at
// the end dw = A'ᵀ (scales ⊙ ΣP) A' per filter, as one SGEMM per output
// channel (dwKron). Each worker keeps its own sums, added in worker order.
func convWinogradWeightGrad(x, dy, dw, db []float32, g Conv, a *winoAlg, k *winogradKernels) {
	d := newWinoGeom(g, a, k.lanes)
	winoXi := d.xi
	hw, ohw := g.H*g.W, g.OH*g.OW
	path := activeGemmPath.Load()
	ep := epilogue()
	rounds := gemmCeilDiv(g.N, d.images)
	ldDy := d.m*d.tw*d.ocp + winoLinePad
	imgIn, imgDy := d.hp*d.wp*d.cp, d.m*d.th*ldDy
	ldV, ldD := d.rowTiles*d.cp+winoLinePad, d.rowTiles*d.ocp+winoLinePad
	pLen := winoXi * g.OC * d.cp
	workers := convParallel(rounds, func(cw *convWorker) {
		cw.panel = grow(cw.panel, imgIn)
		clear(cw.panel)
		cw.tile = grow(cw.tile, imgDy)
		clear(cw.tile)
		cw.rows = grow(cw.rows, max(hw*d.cp, ohw*d.ocp))
		clear(cw.rows)
		cw.cols = grow(cw.cols, winoXi*(ldV+ldD))
		cw.dw = grow(cw.dw, pLen)
		clear(cw.dw)
		cw.db = grow(cw.db, 2*d.ocp)
		clear(cw.db)
	}, func(cw *convWorker, round int) {
		n0 := round * d.images
		n1 := min(g.N, n0+d.images)
		xh, dyh, v, dd := cw.panel, cw.tile, cw.cols[:winoXi*ldV], cw.cols[winoXi*ldV:]
		for n := n0; n < n1; n++ {
			transposeBlocks(path, x[n*g.C*hw:(n+1)*g.C*hw], g.C, hw, hw, cw.rows, d.cp)
			for ih := 0; ih < g.H; ih++ {
				copy(xh[((ih+g.PH)*d.wp+g.PW)*d.cp:((ih+g.PH)*d.wp+g.PW+g.W)*d.cp], cw.rows[ih*g.W*d.cp:])
			}
			// dy channels-last in rows of m·tw pixels; the pixels past
			// OH×OW and the channels past OC stay zero.
			transposeBlocks(path, dy[n*g.OC*ohw:(n+1)*g.OC*ohw], g.OC, ohw, ohw, cw.rows, d.ocp)
			for oh := 0; oh < g.OH; oh++ {
				copy(dyh[oh*ldDy:oh*ldDy+g.OW*d.ocp], cw.rows[oh*g.OW*d.ocp:])
			}
			if db != nil {
				sums := cw.db[d.ocp:]
				if ep != nil {
					ep.sumRows(&cw.rows[0], &sums[0], ohw, g.OC, d.ocp)
				} else {
					clear(sums)
					for p := 0; p < ohw; p++ {
						for oc, val := range cw.rows[p*d.ocp : p*d.ocp+g.OC] {
							sums[oc] += val
						}
					}
				}
				for oc := 0; oc < g.OC; oc++ {
					cw.db[oc] += sums[oc]
				}
			}
			t0 := (n - n0) * d.th * d.tw
			for ty := 0; ty < d.th; ty++ {
				for tx := 0; tx < d.tw; tx++ {
					t := t0 + ty*d.tw + tx
					k.input(&xh[(d.m*ty*d.wp+d.m*tx)*d.cp], d.wp*d.cp, d.cp, &v[t*d.cp], ldV, d.cp)
					k.dy(&dyh[d.m*ty*ldDy+d.m*tx*d.ocp], ldDy, d.ocp, &dd[t*d.ocp], ldD, d.ocp)
				}
			}
		}
		tiles := (n1 - n0) * d.th * d.tw
		for xi := 0; xi < winoXi; xi++ {
			sgemmSerialT(true, g.OC, g.C, tiles, dd[xi*ldD:], d.ocp, v[xi*ldV:], d.cp, 1, cw.dw[xi*g.OC*d.cp:], d.cp)
		}
	})
	p := workers[0].dw[:pLen]
	for _, cw := range workers[1:] {
		for i, val := range cw.dw[:pLen] {
			p[i] += val
		}
	}
	// dw[oc][c] = Σ_ξ K'[ξ][·]·P[ξ][oc][c]: one product Pᵀ·K' (C × α² by
	// α² × r²) per output channel (dwKron).
	kw, taps := a.dwKron(), a.r*a.r
	ParallelFor(g.OC, 1, func(lo, hi int) {
		for oc := lo; oc < hi; oc++ {
			sgemmSerialT(true, g.C, taps, winoXi, p[oc*d.cp:], g.OC*d.cp, kw, taps, 0, dw[oc*g.C*taps:], taps)
		}
	})
	if db != nil {
		clear(db[:g.OC])
		for _, cw := range workers {
			for oc := 0; oc < g.OC; oc++ {
				db[oc] += cw.db[oc]
			}
		}
	}
	releaseConvWorkers(workers)
}

// transposeBlocks writes the transpose of src [rows][cols] (rows lds
// apart) into dst [cols][rows] (rows ldd apart), by the path's 8×8 and 4×8
// block transposes where it has them and element by element elsewhere.
func transposeBlocks(p *gemmPath, src []float32, rows, cols, lds int, dst []float32, ldd int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	src = src[:(rows-1)*lds+cols]
	dst = dst[:(cols-1)*ldd+rows]
	rb, cb := rows&^7, cols&^7
	if p.transpose8 == nil {
		rb, cb = 0, 0
	}
	for r0 := 0; r0 < rb; r0 += 8 {
		for c0 := 0; c0 < cb; c0 += 8 {
			p.transpose8(&src[r0*lds+c0], lds, &dst[c0*ldd+r0], ldd)
		}
	}
	r1 := rb
	if p.transpose4 != nil && cb > 0 && rows-rb >= 4 {
		for c0 := 0; c0 < cb; c0 += 8 {
			p.transpose4(&src[rb*lds+c0], lds, &dst[c0*ldd+rb], ldd)
		}
		r1 = rb + 4
	}
	if cb > 0 && r1 < rows && rows >= 8 {
		// The last rows by one more 8-row block ending at the last row,
		// which writes some of the rows before it again with the same
		// values: a row of 14 pixels (F(4×4,5×5)'s outputs of a 14×14
		// image) is 8 + 4 + 2 rows, and the 2 would otherwise go one
		// element at a time.
		for c0 := 0; c0 < cb; c0 += 8 {
			p.transpose8(&src[(rows-8)*lds+c0], lds, &dst[c0*ldd+rows-8], ldd)
		}
		r1 = rows
	}
	for r := r1; r < rows; r++ {
		for c := 0; c < cb; c++ {
			dst[c*ldd+r] = src[r*lds+c]
		}
	}
	for c := cb; c < cols; c++ {
		d := dst[c*ldd : c*ldd+rows]
		for r := range d {
			d[r] = src[r*lds+c]
		}
	}
}

// winogradRefusal says why the Winograd method does not take normalised g.
func winogradRefusal(a *winoAlg, fn string, g Conv) string {
	return fmt.Sprintf("cpu.%s: a %dx%d filter, stride %dx%d, dilation %dx%d, %d groups, padding %dx%d; Winograd %s needs a %dx%d filter, stride 1, no dilation and one group (and for the backward pass padding up to %d)",
		fn, g.KH, g.KW, g.SH, g.SW, g.DH, g.DW, g.Groups, g.PH, g.PW, a.name, a.r, a.r, a.r-1)
}
