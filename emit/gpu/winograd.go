package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Winograd convolutions F(m×m, r×r): the "winograd F(2x2,5x5)",
// "winograd F(4x4,5x5)" and "winograd F(4x4,3x3)" methods of a GPU target,
// for stride-1, "same"-padded r×r convolutions (padding (r − 1)/2, no
// dilation, one group) with enough channels to pay for the transforms.
//
// The output is cut into m×m tiles; tile t of image n reads the α×α patch
// (α = m + r − 1) of the padded input at (m·th − p, m·tw − p), p the
// padding. With the transforms of Toom-Cook on α points (Winograd: Bᵀ, G,
// Aᵀ), one channel's tile is Aᵀ[(G·w·Gᵀ) ⊙ (Bᵀ·d·B)]A: α² multiplications
// for m² outputs instead of r²·m² (F(2x2,5x5): 36 for 4, F(4x4,5x5): 64
// for 16, F(4x4,3x3): 36 for 16). Summed over input channels, the α²
// elementwise products become α² GEMMs, one strided batched GEMM:
//
//	U[ξν] = G·W[o][c]·Gᵀ          [α²][OC][C]   (wgFilterKernel)
//	V[ξν] = Bᵀ·patch[c][t]·B       [α²][C][T]    (wgInputKernel)
//	M[ξν] = U[ξν]·V[ξν]            [α²][OC][T]   (cuBLAS, batched)
//	y     = Aᵀ·M[·][o][t]·A + b     act, into y  (wgOutputKernel)
//
// The input gradient is the same algorithm on dy (the activation's
// derivative applied first) with the filter turned by 180° and its channel
// axes swapped. The weight gradient is F(r×r, m×m) on the same points,
// which shares the input transform Bᵀ: a tile's m×m block of dy is the
// filter (G2, wgDyKernel) and the forward's V the input, so the backward
// reads the forward's V again where the target keeps the workspace from
// the forward (planner.ConvChoice.SharesForward, Attr.KeptCols), and
// transforms x again where it does not:
//
//	U2[ξν] = G2·dy[o][t]·G2ᵀ       [α²][OC][T]   (wgDyKernel)
//	M2[ξν] = U2[ξν]·V[ξν]ᵀ         [α²][OC][C]   (cuBLAS, batched, K = T)
//	dW     = A2ᵀ·M2[·][o][c]·A2    [OC][C][r][r] (wgWeightGradKernel)
//
// The matrices follow from the points: on finite points p_i (and ∞), row i
// of G is the filter polynomial's powers p_iᵏ over Π_{j≠i}(p_i − p_j), row
// i of Bᵀ the coefficients of Π_{j≠i}(x − p_j) (∞: of Π_j(x − p_j)), and
// column i of Aᵀ the powers p_iʲ (∞: the last power only). They were
// derived with exact fractions and are checked by the tests against direct
// correlation (winograd_test.go, which derives them again from the points).

// Winograd is one Winograd algorithm F(m×m, r×r) with its weight gradient's
// F(r×r, m×m).
type Winograd struct {
	Method string      // Attr.Method
	m, r   int         // output tile side, filter side
	alpha  int         // points (m + r − 1)
	bt     [][]float32 // Bᵀ, α×α: the input transform of both
	g      [][]float32 // G, α×r: the filter transform
	at     [][]float32 // Aᵀ, m×α: the output transform
	g2     [][]float32 // G2, α×m: dy's blocks, the weight gradient's filters
	at2    [][]float32 // A2ᵀ, r×α: the weight gradient's output transform
}

// taps is r², the filter's values in one channel pair.
func (wa *Winograd) taps() int { return wa.r * wa.r }

// pad is the "same" padding (r − 1)/2.
func (wa *Winograd) pad() int { return (wa.r - 1) / 2 }

// products is α², the number of GEMMs of one pass.
func (wa *Winograd) products() int { return wa.alpha * wa.alpha }

// winogradMinChannels: below this many input or output channels the
// transforms cost more than the multiplications they save.
const winogradMinChannels = 16

// WinogradF2 is F(2×2, 5×5) on the points 0, ±1, ±2, ∞: 36 products.
var WinogradF2 = &Winograd{Method: "winograd F(2x2,5x5)", m: 2, r: 5, alpha: 6,
	bt: [][]float32{
		{4, 0, -5, 0, 1, 0},
		{0, -4, -4, 1, 1, 0},
		{0, 4, -4, -1, 1, 0},
		{0, -2, -1, 2, 1, 0},
		{0, 2, -1, -2, 1, 0},
		{0, 4, 0, -5, 0, 1},
	},
	g: [][]float32{
		{1. / 4, 0, 0, 0, 0},
		{-1. / 6, -1. / 6, -1. / 6, -1. / 6, -1. / 6},
		{-1. / 6, 1. / 6, -1. / 6, 1. / 6, -1. / 6},
		{1. / 24, 1. / 12, 1. / 6, 1. / 3, 2. / 3},
		{1. / 24, -1. / 12, 1. / 6, -1. / 3, 2. / 3},
		{0, 0, 0, 0, 1},
	},
	at: [][]float32{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 1},
	},
	g2: [][]float32{
		{1. / 4, 0},
		{-1. / 6, -1. / 6},
		{-1. / 6, 1. / 6},
		{1. / 24, 1. / 12},
		{1. / 24, -1. / 12},
		{0, 1},
	},
	at2: [][]float32{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 0},
		{0, 1, 1, 4, 4, 0},
		{0, 1, -1, 8, -8, 0},
		{0, 1, 1, 16, 16, 1},
	},
}

// WinogradF4 is F(4×4, 5×5) on the points 0, ±1, ±2, ±1/2, ∞: 64 products
// for 16 outputs, less than half the transformed data of F(2×2) a pixel.
var WinogradF4 = &Winograd{Method: "winograd F(4x4,5x5)", m: 4, r: 5, alpha: 8,
	bt: [][]float32{
		{-1, 0, 21. / 4, 0, -21. / 4, 0, 1, 0},
		{0, 1, 1, -17. / 4, -17. / 4, 1, 1, 0},
		{0, -1, 1, 17. / 4, -17. / 4, -1, 1, 0},
		{0, 1. / 2, 1. / 4, -5. / 2, -5. / 4, 2, 1, 0},
		{0, -1. / 2, 1. / 4, 5. / 2, -5. / 4, -2, 1, 0},
		{0, 2, 4, -5. / 2, -5, 1. / 2, 1, 0},
		{0, -2, 4, 5. / 2, -5, -1. / 2, 1, 0},
		{0, -1, 0, 21. / 4, 0, -21. / 4, 0, 1},
	},
	g: [][]float32{
		{-1, 0, 0, 0, 0},
		{-2. / 9, -2. / 9, -2. / 9, -2. / 9, -2. / 9},
		{-2. / 9, 2. / 9, -2. / 9, 2. / 9, -2. / 9},
		{1. / 90, 1. / 45, 2. / 45, 4. / 45, 8. / 45},
		{1. / 90, -1. / 45, 2. / 45, -4. / 45, 8. / 45},
		{32. / 45, 16. / 45, 8. / 45, 4. / 45, 2. / 45},
		{32. / 45, -16. / 45, 8. / 45, -4. / 45, 2. / 45},
		{0, 0, 0, 0, 1},
	},
	at: [][]float32{
		{1, 1, 1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 1. / 2, -1. / 2, 0},
		{0, 1, 1, 4, 4, 1. / 4, 1. / 4, 0},
		{0, 1, -1, 8, -8, 1. / 8, -1. / 8, 1},
	},
	g2: [][]float32{
		{-1, 0, 0, 0},
		{-2. / 9, -2. / 9, -2. / 9, -2. / 9},
		{-2. / 9, 2. / 9, -2. / 9, 2. / 9},
		{1. / 90, 1. / 45, 2. / 45, 4. / 45},
		{1. / 90, -1. / 45, 2. / 45, -4. / 45},
		{32. / 45, 16. / 45, 8. / 45, 4. / 45},
		{32. / 45, -16. / 45, 8. / 45, -4. / 45},
		{0, 0, 0, 1},
	},
	at2: [][]float32{
		{1, 1, 1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 1. / 2, -1. / 2, 0},
		{0, 1, 1, 4, 4, 1. / 4, 1. / 4, 0},
		{0, 1, -1, 8, -8, 1. / 8, -1. / 8, 0},
		{0, 1, 1, 16, 16, 1. / 16, 1. / 16, 1},
	},
}

// Winograd3F4 is F(4×4, 3×3) on the points 0, ±1, ±2, ∞ of F(2×2, 5×5)
// (α = 6 for both, so Bᵀ is the same): 36 products for 16 outputs, a
// quarter of the direct sum's 144. G is F(2×2,5×5)'s cut to three powers
// (∞ takes the last), Aᵀ has the powers 0 to 3; its weight gradient
// F(3×3, 4×4) has G cut to four powers and the powers 0 to 2 in A2ᵀ.
// These are rt/cpu's F(4×4,3×3) matrices (conv_winograd3.go); the points
// ±1/2 in place of ±2 were not tried, so that the input transform stays
// F(2×2,5×5)'s.
var Winograd3F4 = &Winograd{Method: "winograd F(4x4,3x3)", m: 4, r: 3, alpha: 6,
	bt: WinogradF2.bt,
	g: [][]float32{
		{1. / 4, 0, 0},
		{-1. / 6, -1. / 6, -1. / 6},
		{-1. / 6, 1. / 6, -1. / 6},
		{1. / 24, 1. / 12, 1. / 6},
		{1. / 24, -1. / 12, 1. / 6},
		{0, 0, 1},
	},
	at: [][]float32{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 0},
		{0, 1, 1, 4, 4, 0},
		{0, 1, -1, 8, -8, 1},
	},
	g2: [][]float32{
		{1. / 4, 0, 0, 0},
		{-1. / 6, -1. / 6, -1. / 6, -1. / 6},
		{-1. / 6, 1. / 6, -1. / 6, 1. / 6},
		{1. / 24, 1. / 12, 1. / 6, 1. / 3},
		{1. / 24, -1. / 12, 1. / 6, -1. / 3},
		{0, 0, 0, 1},
	},
	at2: [][]float32{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 0},
		{0, 1, 1, 4, 4, 1},
	},
}

// WinogradByMethod is the algorithm a method name names, or nil.
func WinogradByMethod(method string) *Winograd {
	for _, wa := range []*Winograd{WinogradF2, WinogradF4, Winograd3F4} {
		if wa.Method == method {
			return wa
		}
	}
	return nil
}

// Fits reports whether a convolution of geometry g can run as wa (an r×r
// window, stride 1, padding (r − 1)/2, no dilation, one group, the output
// the input's size) and has the channels to gain from it.
func (wa *Winograd) Fits(g planner.ConvGeom) bool {
	g = normConv(g)
	p := wa.pad()
	return g.KH == wa.r && g.KW == wa.r && g.PH == p && g.PW == p && g.SH == 1 && g.SW == 1 && g.DH == 1 && g.DW == 1 &&
		g.Groups == 1 && g.OH == g.H && g.OW == g.W && g.C >= winogradMinChannels && g.OC >= winogradMinChannels
}

// wgTiles is the number of m×m output tiles of the batch.
func (wa *Winograd) tiles(g planner.ConvGeom) int {
	return g.N * ceilDiv(g.OH, wa.m) * ceilDiv(g.OW, wa.m)
}

// wgChunk is the number of tiles a chunk aims at. The tiles are cut into S
// chunks of Tc, and each of the α² products becomes S GEMMs of the batched
// GEMM: the weight gradient's GEMMs sum over tiles (K = tiles), and one
// 64×32 product over all 12,250 tiles of a batch of MNIST images is 72
// thread blocks for 132 SMs (451 µs on an H100); α²·S products, summed by
// the weight-gradient kernel, fill the GPU. For models/mnist.cue's second
// layer (F(4×4,5×5), 4,000 tiles) on an H100, side by side: chunks of
// 1024 tiles (3 chunks) gave a training step of 0.637 ms, 512 (7) 0.619
// ms, 256 (15) 0.631 ms (cuBLAS then picks a slower forward GEMM). A
// variable so that tests can cut small batches into several chunks.
var wgChunk = 512

// wgTiling is the tiles' split: S chunks of Tc tiles (S·Tc ≥ T; the tiles
// past T are zero in every transform).
type wgTiling struct{ t, s, tc int }

func (wa *Winograd) tiling(g planner.ConvGeom) wgTiling {
	t := wa.tiles(g)
	s := max(1, t/wgChunk)
	// Tc is a multiple of 4, so that the products kernel's 16-byte accesses
	// of every chunk are aligned (wgProductRowsKernel).
	return wgTiling{t, s, ceilDiv(ceilDiv(t, s), 4) * 4}
}

// wgLayout is where each part of a Winograd convolution's workspace lies,
// in float32s; forward and backward use one layout, so the backward finds
// the forward's V where it left it. Every transformed operand is
// [α²][S][rows][cols]: product ξν, chunk s.
type wgLayout struct {
	wgTiling
	v, u, r1, r2, size int
}

func (wa *Winograd) layout(g planner.ConvGeom) wgLayout {
	l := wgLayout{wgTiling: wa.tiling(g)}
	tp, np := l.s*l.tc, wa.products()
	l.u = l.v + np*g.C*tp                    // V: the input's transform [α²][S][C][Tc]
	l.r1 = l.u + np*l.s*g.OC*g.C             // U, M2 or U': [α²][S][OC][C] or [α²][S][C][OC]
	l.r2 = l.r1 + np*g.OC*tp                 // M, U2 or V': [α²][S][OC][Tc]
	l.size = l.r2 + np*max(g.C*tp, g.OC*g.C) // M' [α²][S][C][Tc], or the weight gradient's sum [α²][OC][C]
	return l
}

// Scratch is the workspace, in float32s, of the algorithm's convolution of
// geometry g, forward or backward.
func (wa *Winograd) Scratch(g planner.ConvGeom) int { return wa.layout(normConv(g)).size }

// lin is Σ coefs[i]·terms[i] without the zero terms, ±1 as additions.
func lin(coefs []float32, terms []Expr) Expr {
	var sum Expr
	for i, c := range coefs {
		if c == 0 {
			continue
		}
		t := terms[i]
		switch {
		case sum == nil && c == 1:
			sum = t
		case sum == nil && c == -1:
			sum = neg(t)
		case sum == nil:
			sum = mul(flt(c), t)
		case c == 1:
			sum = add(sum, t)
		case c == -1:
			sum = sub(sum, t)
		case c < 0:
			sum = sub(sum, mul(flt(-c), t))
		default:
			sum = add(sum, mul(flt(c), t))
		}
	}
	if sum == nil {
		return flt(0)
	}
	return sum
}

// sandwich emits the lets of out = L·x·Rᵀ for an a×b grid x of variables
// named xName_i_j: L is p×a, R is q×b; the result is named outName_i_j
// (p×q), by way of tName_i_j (p×b).
func sandwich(L [][]float32, R [][]float32, xName, tName, outName string, a, b int) []Stmt {
	var s []Stmt
	name := func(n string, i, j int) string { return fmt.Sprintf("%s%d%d", n, i, j) }
	for i := range L {
		for j := 0; j < b; j++ {
			terms := make([]Expr, a)
			for k := range a {
				terms[k] = vr(name(xName, k, j))
			}
			s = append(s, let(name(tName, i, j), Float, lin(L[i], terms)))
		}
	}
	for i := range L {
		for j := range R {
			terms := make([]Expr, b)
			for k := range b {
				terms[k] = vr(name(tName, i, k))
			}
			s = append(s, let(name(outName, i, j), Float, lin(R[j], terms)))
		}
	}
	return s
}

// wgFilterKernel transforms the filters: U[ξν][p][q] = (G·w·Gᵀ)[ξ][ν] for
// p < outCh, q < inCh. Forward: w = W[p][q]. For the input gradient
// (flip): w = W[q][p] turned by 180°, so that outCh is the layer's input
// channels. W is the layer's [OC][C][r][r].
//
// Each product's matrix is written once per chunk of tiles (S copies), so
// that the batched GEMM's i-th product finds its own: one thread per copy
// and filter, a grid that fills the GPU. With kMajor it is written once
// (chunks must be 1) and transposed, U[ξν][q][p], as wgProductRowsKernel
// reads it, by one thread per filter and row ξ. For models/mnist.cue's
// second layer on an H100: one thread per filter took 21 µs in threadgroups
// of 256 (2,048 threads storing 64 values each) and 6.1 in threadgroups of
// 32, one per filter and product ξν 7.7, one per filter and row ξ 5.5 (the
// 7 copies for cuBLAS took 4.5).
func wgFilterKernel(wa *Winograd, g planner.ConvGeom, flip bool, chunks int, kMajor bool) *Kernel {
	outCh, inCh := g.OC, g.C
	what := "filters"
	if flip {
		outCh, inCh = g.C, g.OC
		what = "filters turned by 180°, channels swapped,"
	}
	n := outCh * inCh
	np := wa.products()
	layout := fmt.Sprintf("%d copies", chunks)
	if kMajor {
		layout = "in-channel-major"
	}
	threads := chunks * n
	if kMajor {
		threads = wa.alpha * n
	}
	r := wa.r
	k := elementwise(fmt.Sprintf("Winograd F(%dx%d,%dx%d) transform of %d %s G·w·Gᵀ, %s", wa.m, wa.m, r, r, n, what, layout), threads,
		[]Param{in("w", g.OC*g.C*wa.taps()), out("u", np*chunks*n)}, func(i Expr) []Stmt {
			s := []Stmt{let("r", Int, rem(i, i32(n))), let("p", Int, div(vr("r"), i32(inCh))), let("q", Int, rem(vr("r"), i32(inCh)))}
			base := add(mul(vr("p"), i32(g.C)), vr("q"))
			if flip {
				base = add(mul(vr("q"), i32(g.C)), vr("p"))
			}
			s = append(s, let("wb", Int, mul(base, i32(wa.taps()))))
			for kh := range r {
				for kw := range r {
					tap := kh*r + kw
					if flip {
						tap = (r-1-kh)*r + (r - 1 - kw)
					}
					s = append(s, let(fmt.Sprintf("w%d%d", kh, kw), Float, load("w", add(vr("wb"), i32(tap)))))
				}
			}
			if kMajor {
				// row ξ of G·w, then of (G·w)·Gᵀ
				s = append(s, let("xi", Int, div(i, i32(n))))
				rowVars := make([]Expr, r)
				for j := range r {
					var row Expr
					for xi := wa.alpha - 1; xi >= 0; xi-- {
						terms := make([]Expr, r)
						for k := range r {
							terms[k] = vr(fmt.Sprintf("w%d%d", k, j))
						}
						if row == nil {
							row = lin(wa.g[xi], terms)
						} else {
							row = sel(eq(vr("xi"), i32(xi)), lin(wa.g[xi], terms), row)
						}
					}
					s = append(s, let(fmt.Sprintf("t%d", j), Float, row))
					rowVars[j] = vr(fmt.Sprintf("t%d", j))
				}
				for nu := range wa.alpha {
					s = append(s, store("u", add(mul(add(mul(vr("xi"), i32(wa.alpha)), i32(nu)), i32(n)), add(mul(vr("q"), i32(outCh)), vr("p"))),
						lin(wa.g[nu], rowVars)))
				}
				return s
			}
			s = append(s, sandwich(wa.g, wa.g, "w", "t", "u", r, r)...)
			for xi := range wa.alpha {
				for nu := range wa.alpha {
					s = append(s, store("u", add(i32((xi*wa.alpha+nu)*chunks*n), i), vr(fmt.Sprintf("u%d%d", xi, nu))))
				}
			}
			return s
		})
	if kMajor {
		k.Threadgroup, k.Groups = wgFilterRowsTG, ceilDiv(threads, wgFilterRowsTG)
	}
	return k
}

// wgFilterRowsTG is the threadgroup of the in-channel-major filter
// transform: small, so that its 16,384 threads (models/mnist.cue's second
// layer) spread over many SMs (5.5 µs on an H100 against 6.4 with 256).
const wgFilterRowsTG = 32

// wgThread declares, for thread i of a kernel over the chunked operand
// [S][ch][Tc] (i = (s·ch + c)·Tc + tc), the channel c (named chName) and
// the tile t = s·Tc + tc, then n, th, tw of tile t of an oh×ow output.
func wgThread(wa *Winograd, i Expr, tl wgTiling, ch int, chName string, oh, ow int) []Stmt {
	th, tw := ceilDiv(oh, wa.m), ceilDiv(ow, wa.m)
	return []Stmt{
		let(chName, Int, rem(div(i, i32(tl.tc)), i32(ch))),
		let("t", Int, add(mul(div(i, i32(ch*tl.tc)), i32(tl.tc)), rem(i, i32(tl.tc)))),
		let("n", Int, div(vr("t"), i32(th*tw))),
		let("th", Int, div(rem(vr("t"), i32(th*tw)), i32(tw))),
		let("tw", Int, rem(vr("t"), i32(tw))),
	}
}

// wgInputKernel transforms the α×α input patches: V[ξν][c][t] =
// (Bᵀ·d·B)[ξ][ν], d the patch of channel c at (m·th − p, m·tw − p) of
// x [N][ch][h][w] (p the padding), zero outside the image.
func wgInputKernel(wa *Winograd, n, ch, h, w int, tl wgTiling) *Kernel {
	total, al := tl.s*ch*tl.tc, wa.alpha
	return elementwise(fmt.Sprintf("Winograd F(%dx%d,%dx%d) transform of the %dx%d patches of [%d,%d,%d,%d], Bᵀ·d·B, in %d chunks of %d tiles", wa.m, wa.m, wa.r, wa.r, al, al, n, ch, h, w, tl.s, tl.tc), total,
		[]Param{in("x", n*ch*h*w), out("v", wa.products()*total)}, func(i Expr) []Stmt {
			s := wgThread(wa, i, tl, ch, "c", h, w)
			s = append(s,
				let("h0", Int, sub(mul(vr("th"), i32(wa.m)), i32(wa.pad()))),
				let("w0", Int, sub(mul(vr("tw"), i32(wa.m)), i32(wa.pad()))),
				let("xb", Int, mul(add(mul(vr("n"), i32(ch)), vr("c")), i32(h*w))))
			for a := range al {
				for b := range al {
					hh, ww := add(vr("h0"), i32(a)), add(vr("w0"), i32(b))
					inside := and(lt(vr("t"), i32(tl.t)), ge(hh, i32(0)), lt(hh, i32(h)), ge(ww, i32(0)), lt(ww, i32(w)))
					s = append(s, let(fmt.Sprintf("d%d%d", a, b), Float,
						sel(inside, load("x", add(vr("xb"), add(mul(hh, i32(w)), ww))), flt(0))))
				}
			}
			s = append(s, sandwich(wa.bt, wa.bt, "d", "t", "v", al, al)...)
			for xi := range al {
				for nu := range al {
					s = append(s, store("v", add(i32((xi*al+nu)*total), i), vr(fmt.Sprintf("v%d%d", xi, nu))))
				}
			}
			return s
		})
}

// wgOutputKernel turns the GEMMs' products back into m×m output tiles:
// y[n][o][m·th + a][m·tw + b] = (Aᵀ·M[·][o][t]·A)[a][b] (+ bias, act), for
// y [N][outCh][h][w].
//
// With a pool (a max pool of window = stride over y, whose window sides
// divide m: PoolEpilogue), the thread pools its tile in registers and
// writes (m/KH)×(m/KW) values of the pool's output [N][outCh][pool.OH]
// [pool.OW] instead: the maximum of each window, then bias and act (the
// bias shifts every value of a window alike and the epilogue's activations
// do not decrease, so the order gives the same values for less work). The
// last tiles of a ragged output (h or w not a multiple of m) hold windows
// past its edge; those are outside the pool's output and not written.
// With argmax (a training step) the thread also writes arg, shaped like
// the pool's output: the position in each window, row-major, of the first
// value whose bias and activation give the pooled value (rt/cpu's
// MaxPool2DArgmax of the activation's output).
//
// With halfDone, the operand is Z = M·A [α][m][S][outCh][Tc] instead of M
// (wgProductRowsKernel applied A along ν), and the kernel applies Aᵀ only.
func wgOutputKernel(wa *Winograd, n, outCh, h, w int, tl wgTiling, pool *planner.ConvGeom, hasBias bool, act string, alpha float32, argmax, halfDone bool) (*Kernel, error) {
	total, al := tl.s*outCh*tl.tc, wa.alpha
	cols, right := al, wa.at
	if halfDone {
		cols, right = wa.m, identity(wa.m)
	}
	// The kernel writes an oh×ow output from r×c tiles of values, each the
	// maximum of a wr×wc window of the tile (1×1 without a pool).
	oh, ow, wr, wc := h, w, 1, 1
	if pool != nil {
		oh, ow, wr, wc = pool.OH, pool.OW, pool.KH, pool.KW
	}
	r, c := wa.m/wr, wa.m/wc
	params := []Param{in("m", al*cols*total), out("y", n*outCh*oh*ow)}
	if hasBias {
		params = append(params, in("b", outCh))
	}
	if argmax {
		params = append(params, out("arg", n*outCh*oh*ow))
	}
	doc := fmt.Sprintf("Winograd F(%dx%d,%dx%d) output tiles Aᵀ·M·A of [%d,%d,%d,%d], bias %v, %q", wa.m, wa.m, wa.r, wa.r, n, outCh, h, w, hasBias, act)
	if pool != nil {
		doc = fmt.Sprintf("Winograd F(%dx%d,%dx%d) output tiles Aᵀ·M·A of [%d,%d,%d,%d] max-pooled %dx%d to [%d,%d,%d,%d], bias %v, %q",
			wa.m, wa.m, wa.r, wa.r, n, outCh, h, w, wr, wc, n, outCh, oh, ow, hasBias, act)
	}
	var err error
	k := elementwise(doc, total, params, func(i Expr) []Stmt {
		s := wgThread(wa, i, tl, outCh, "o", h, w)
		s = append(s, when(ge(vr("t"), i32(tl.t)), Return{}))
		for xi := range al {
			for nu := range cols {
				s = append(s, let(fmt.Sprintf("m%d%d", xi, nu), Float, load("m", add(i32((xi*cols+nu)*total), i))))
			}
		}
		s = append(s, sandwich(wa.at, right, "m", "t", "y", al, cols)...)
		s = append(s, let("yb", Int, mul(add(mul(vr("n"), i32(outCh)), vr("o")), i32(oh*ow))))
		if hasBias {
			s = append(s, let("bias", Float, load("b", vr("o"))))
		}
		for a := range r {
			for b := range c {
				var v Expr = vr(fmt.Sprintf("y%d%d", a*wr, b*wc))
				for dr := range wr {
					for dc := range wc {
						if dr > 0 || dc > 0 {
							v = call(FnMax, v, vr(fmt.Sprintf("y%d%d", a*wr+dr, b*wc+dc)))
						}
					}
				}
				if hasBias {
					v = add(v, vr("bias"))
				}
				var e Expr
				e, err = actExpr(act, alpha, v)
				hh := add(mul(vr("th"), i32(r)), i32(a))
				ww := add(mul(vr("tw"), i32(c)), i32(b))
				at := add(vr("yb"), add(mul(hh, i32(ow)), ww))
				st := []Stmt{store("y", at, e)}
				if argmax {
					// the window's positions from last to first: the first
					// whose bias and activation give the pooled value wins
					yv, am := fmt.Sprintf("yv%d%d", a, b), fmt.Sprintf("am%d%d", a, b)
					st = []Stmt{let(yv, Float, e), store("y", at, vr(yv)), let(am, Float, flt(0))}
					for dr := wr - 1; dr >= 0; dr-- {
						for dc := wc - 1; dc >= 0; dc-- {
							var q Expr = vr(fmt.Sprintf("y%d%d", a*wr+dr, b*wc+dc))
							if hasBias {
								q = add(q, vr("bias"))
							}
							ev, _ := actExpr(act, alpha, q)
							st = append(st, set(am, sel(eq(ev, vr(yv)), flt(float32(dr*wc+dc)), vr(am))))
						}
					}
					st = append(st, store("arg", at, vr(am)))
				}
				s = append(s, when(and(lt(hh, i32(oh)), lt(ww, i32(ow))), st...))
			}
		}
		return s
	})
	return k, err
}

// identity is the n×n identity matrix.
func identity(n int) [][]float32 {
	m := make([][]float32, n)
	for i := range m {
		m[i] = make([]float32, n)
		m[i][i] = 1
	}
	return m
}

// wgDyKernel transforms dy's m×m blocks, the filters of the weight
// gradient's F(r×r, m×m): U2[ξν][o][t] = (G2·z·G2ᵀ)[ξ][ν], z the block of
// dy [N][OC][OH][OW] at (m·th, m·tw), zero past the edge.
func wgDyKernel(wa *Winograd, g planner.ConvGeom, tl wgTiling) *Kernel {
	total, al := tl.s*g.OC*tl.tc, wa.alpha
	return elementwise(fmt.Sprintf("Winograd F(%dx%d,%dx%d) transform of the %dx%d blocks of dy [%d,%d,%d,%d], G2·z·G2ᵀ, in %d chunks of %d tiles", wa.r, wa.r, wa.m, wa.m, wa.m, wa.m, g.N, g.OC, g.OH, g.OW, tl.s, tl.tc), total,
		[]Param{in("dy", g.N*g.OC*g.OH*g.OW), out("u", wa.products()*total)}, func(i Expr) []Stmt {
			s := wgThread(wa, i, tl, g.OC, "o", g.OH, g.OW)
			s = append(s, let("zb", Int, mul(add(mul(vr("n"), i32(g.OC)), vr("o")), i32(g.OH*g.OW))))
			for a := range wa.m {
				for b := range wa.m {
					hh := add(mul(vr("th"), i32(wa.m)), i32(a))
					ww := add(mul(vr("tw"), i32(wa.m)), i32(b))
					s = append(s, let(fmt.Sprintf("z%d%d", a, b), Float,
						sel(and(lt(vr("t"), i32(tl.t)), lt(hh, i32(g.OH)), lt(ww, i32(g.OW))), load("dy", add(vr("zb"), add(mul(hh, i32(g.OW)), ww))), flt(0))))
				}
			}
			s = append(s, sandwich(wa.g2, wa.g2, "z", "t", "u", wa.m, wa.m)...)
			for xi := range al {
				for nu := range al {
					s = append(s, store("u", add(i32((xi*al+nu)*total), i), vr(fmt.Sprintf("u%d%d", xi, nu))))
				}
			}
			return s
		})
}

// wgWeightGradKernel turns the weight gradient's products into the r×r
// taps: dW[o][c] = A2ᵀ·M2[·][o][c]·A2, from the chunks' sum
// (wgChunkSumKernel).
func wgWeightGradKernel(wa *Winograd, g planner.ConvGeom) *Kernel {
	total, al, r := g.OC*g.C, wa.alpha, wa.r
	return elementwise(fmt.Sprintf("Winograd F(%dx%d,%dx%d) weight gradient taps A2ᵀ·M2·A2 of [%d,%d,%d,%d]", r, r, wa.m, wa.m, g.OC, g.C, r, r), total,
		[]Param{in("m", wa.products()*total), out("dw", total*wa.taps())}, func(i Expr) []Stmt {
			var s []Stmt
			for xi := range al {
				for nu := range al {
					s = append(s, let(fmt.Sprintf("m%d%d", xi, nu), Float, load("m", add(i32((xi*al+nu)*total), i))))
				}
			}
			s = append(s, sandwich(wa.at2, wa.at2, "m", "t", "k", al, al)...)
			s = append(s, let("kb", Int, mul(i, i32(wa.taps()))))
			for kh := range r {
				for kw := range r {
					s = append(s, store("dw", add(vr("kb"), i32(kh*r+kw)), vr(fmt.Sprintf("k%d%d", kh, kw))))
				}
			}
			return s
		})
}

// wgChunkSumKernel adds the weight gradient's chunks: out[ξν][r] =
// Σ_s m[ξν][s][r] for the n values r of one product.
func wgChunkSumKernel(np, n, chunks int) *Kernel {
	return elementwise(fmt.Sprintf("sum of %d chunks of the Winograd weight gradient's %d products of %d values", chunks, np, n), np*n,
		[]Param{in("m", np*chunks*n), out("sum", np*n)}, func(i Expr) []Stmt {
			s := []Stmt{let("b", Int, add(mul(div(i, i32(n)), i32(chunks*n)), rem(i, i32(n)))), let("acc", Float, load("m", vr("b")))}
			for c := 1; c < chunks; c++ {
				s = append(s, set("acc", add(vr("acc"), load("m", add(vr("b"), i32(c*n))))))
			}
			return append(s, store("sum", i, vr("acc")))
		})
}

// winograd lowers a convolution step whose method is wa's.
func (l *lowering) winograd(st *planner.Step, bwd bool, wa *Winograd) error {
	a := st.Attr
	g := normConv(*a.Conv)
	if !wa.Fits(g) {
		return fmt.Errorf("method %q does not apply to this convolution (%dx%d window, stride %dx%d, padding %dx%d, %d groups, %d→%d channels)",
			wa.Method, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.Groups, g.C, g.OC)
	}
	nin, nout, wsAt := 3, 2, func() planner.BufID { return st.Out[1] }
	if bwd {
		nin, nout, wsAt = 5, 3, func() planner.BufID { return st.In[4] }
	}
	if err := l.operands(st, nin, nout); err != nil {
		return err
	}
	ws := wsAt()
	lay := wa.layout(g)
	if b, err := l.buf(ws); err != nil {
		return err
	} else if b.Size < lay.size {
		return fmt.Errorf("Winograd workspace %q has %d float32s, the method needs %d (its Scratch)", b.Name, b.Size, lay.size)
	}
	tl, tc, batch := lay.wgTiling, lay.tc, wa.products()*lay.s
	alpha := float32(a.Alpha)
	if !bwd {
		x, b, y := st.In[0], st.In[2], st.Out[0]
		halfDone, err := l.wgProducts(wa, g, false, lay, whole(st.In[1]), func() error {
			return l.launch("winograd_input", wgInputKernel(wa, g.N, g.C, g.H, g.W, tl), nil, whole(x), at(ws, lay.v))
		}, ws, lay.v, lay.r1)
		if err != nil {
			return err
		}
		pool, err := epiloguePool(a)
		if err != nil {
			return err
		}
		arg, err := poolArgmax(st, pool)
		if err != nil {
			return err
		}
		k, err := wgOutputKernel(wa, g.N, g.OC, g.OH, g.OW, tl, pool, present(b), a.Act, alpha, present(arg), halfDone)
		ops := []operand{at(ws, lay.r1), whole(y)}
		if present(b) {
			ops = append(ops, whole(b))
		}
		if present(arg) {
			ops = append(ops, whole(arg))
		}
		return l.launch("winograd_output", k, err, ops...)
	}
	x, w, y, dy := st.In[0], st.In[1], st.In[2], st.In[3]
	dx, dw, db := st.Out[0], st.Out[1], st.Out[2]
	if a.Act != "" {
		k, err := actBwdKernel(g.N*g.OC*g.OH*g.OW, a.Act, alpha)
		if err := l.launch("act_bwd", k, err, whole(y), whole(dy)); err != nil {
			return err
		}
	}
	if present(db) {
		if err := l.launch("bias_grad", channelSumKernel(g.N, g.OC, g.OH*g.OW), nil, whole(dy), whole(db)); err != nil {
			return err
		}
	}
	if present(dw) {
		if !a.KeptCols {
			if err := l.launch("winograd_input", wgInputKernel(wa, g.N, g.C, g.H, g.W, tl), nil, whole(x), at(ws, lay.v)); err != nil {
				return err
			}
		}
		if err := l.launch("winograd_dy", wgDyKernel(wa, g, tl), nil, whole(dy), at(ws, lay.r1)); err != nil {
			return err
		}
		if err := l.gemm(Gemm{TransB: true, M: g.OC, N: g.C, K: tc, Alpha: 1, Batch: batch, Stride: [3]int{g.OC * tc, g.C * tc, g.OC * g.C},
			A: Matrix{ws, lay.r1, g.OC, tc, tc}, B: Matrix{ws, lay.v, g.C, tc, tc}, C: Matrix{ws, lay.u, g.OC, g.C, g.C}}); err != nil {
			return err
		}
		// The chunks' sum goes where dx's M' goes later.
		if err := l.launch("winograd_chunk_sum", wgChunkSumKernel(wa.products(), g.OC*g.C, tl.s), nil, at(ws, lay.u), at(ws, lay.r2)); err != nil {
			return err
		}
		if err := l.launch("winograd_weight_grad", wgWeightGradKernel(wa, g), nil, at(ws, lay.r2), whole(dw)); err != nil {
			return err
		}
	}
	if present(dx) {
		halfDone, err := l.wgProducts(wa, g, true, lay, whole(w), func() error {
			return l.launch("winograd_input", wgInputKernel(wa, g.N, g.OC, g.OH, g.OW, tl), nil, whole(dy), at(ws, lay.r1))
		}, ws, lay.r1, lay.r2)
		if err != nil {
			return err
		}
		k, err := wgOutputKernel(wa, g.N, g.C, g.H, g.W, tl, nil, false, "", 0, false, halfDone)
		if err := l.launch("winograd_output", k, err, at(ws, lay.r2), whole(dx)); err != nil {
			return err
		}
	}
	return nil
}

// wgProducts transforms the filters into U (at lay.u; flip: the input
// gradient's), runs input (the transform of the other operand into ws at
// v), and multiplies: M [α²·S][rows][Tc] at m, rows the output's channels
// (OC forward, C for the input gradient), K the other channels. Where the
// dialect has 16-byte accesses and the shapes fit, the products are
// wgProductRowsKernel's, with U written once, in-channel-major, and what
// lands at m is Z = M·A (halfDone); otherwise one strided batched GEMM of
// the library, with U copied for every chunk.
func (l *lowering) wgProducts(wa *Winograd, g planner.ConvGeom, flip bool, lay wgLayout, w operand, input func() error, ws planner.BufID, v, m int) (halfDone bool, err error) {
	rows, k := g.OC, g.C
	if flip {
		rows, k = g.C, g.OC
	}
	tc, np := lay.tc, wa.products()
	own := l.d.Load4 != "" && l.d.Store4 != "" && wgProductsFit(rows, k, tc) && l.fastPrecision() == "" &&
		wa.alpha*lay.s*ceilDiv(tc, wgProductTiles) >= wgRowsMinGroups
	copies := lay.s
	if own {
		copies = 1
	}
	if err := l.launch("winograd_filter", wgFilterKernel(wa, g, flip, copies, own), nil, w, at(ws, lay.u)); err != nil {
		return false, err
	}
	if err := input(); err != nil {
		return false, err
	}
	if own {
		return true, l.launch("winograd_products", wgProductRowsKernel(wa, lay.s, rows, k, tc), nil, at(ws, lay.u), at(ws, v), at(ws, m))
	}
	return false, l.gemm(Gemm{M: rows, N: tc, K: k, Alpha: 1, Batch: np * lay.s, Stride: [3]int{rows * k, k * tc, rows * tc},
		A: Matrix{ws, lay.u, rows, k, k}, B: Matrix{ws, v, k, tc, tc}, C: Matrix{ws, m, rows, tc, tc}})
}
