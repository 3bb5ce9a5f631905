package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Winograd convolution, F(2×2, 5×5): the "winograd F(2x2,5x5)" method of a
// GPU target, for stride-1, "same"-padded 5×5 convolutions (padding 2, no
// dilation, one group) with enough channels to pay for the transforms.
//
// The output is cut into 2×2 tiles; tile t of image n reads the 6×6 patch
// of the padded input at (2·th − 2, 2·tw − 2). With the transforms of
// Toom-Cook on the points 0, 1, −1, 2, −2 and ∞ (wgBT, wgG, wgAT), one
// channel's tile is Aᵀ[(G·w·Gᵀ) ⊙ (Bᵀ·d·B)]A: 36 multiplications for 4
// outputs instead of 100. Summed over input channels, the 36 elementwise
// products become 36 GEMMs, one strided batched GEMM:
//
//	U[ξν] = G·W[o][c]·Gᵀ          [36][OC][C]   (wgFilterKernel)
//	V[ξν] = Bᵀ·patch[c][t]·B       [36][C][T]    (wgInputKernel)
//	M[ξν] = U[ξν]·V[ξν]            [36][OC][T]   (cuBLAS, batch 36)
//	y     = Aᵀ·M[·][o][t]·A + b     act, into y  (wgOutputKernel)
//
// The input gradient is the same algorithm on dy (the activation's
// derivative applied first) with the filter turned by 180° and its channel
// axes swapped. The weight gradient is F(5×5, 2×2), which shares the input
// transform Bᵀ: a tile's 2×2 block of dy is the filter (G2, wgDyKernel) and
// the forward's V the input, so the backward reads the forward's V again
// (planner.ConvChoice.SharesForward):
//
//	U2[ξν] = G2·dy[o][t]·G2ᵀ       [36][OC][T]   (wgDyKernel)
//	M2[ξν] = U2[ξν]·V[ξν]ᵀ         [36][OC][C]   (cuBLAS, batch 36, K = T)
//	dW     = A2ᵀ·M2[·][o][c]·A2    [OC][C][5][5] (wgWeightGradKernel)
//
// The matrices were derived for these points with exact fractions and are
// checked by the tests against direct correlation (winograd_test.go).

// WinogradMethod is the method name the planner records (Attr.Method).
const WinogradMethod = "winograd F(2x2,5x5)"

// winogradMinChannels: below this many input or output channels the
// transforms cost more than the multiplications they save.
const winogradMinChannels = 16

var (
	// wgBT is Bᵀ, the input transform of F(2, 5) and F(5, 2).
	wgBT = [][]float32{
		{4, 0, -5, 0, 1, 0},
		{0, -4, -4, 1, 1, 0},
		{0, 4, -4, -1, 1, 0},
		{0, -2, -1, 2, 1, 0},
		{0, 2, -1, -2, 1, 0},
		{0, 4, 0, -5, 0, 1},
	}
	// wgG is the filter transform of F(2, 5): 5 taps to 6 points.
	wgG = [][]float32{
		{1. / 4, 0, 0, 0, 0},
		{-1. / 6, -1. / 6, -1. / 6, -1. / 6, -1. / 6},
		{-1. / 6, 1. / 6, -1. / 6, 1. / 6, -1. / 6},
		{1. / 24, 1. / 12, 1. / 6, 1. / 3, 2. / 3},
		{1. / 24, -1. / 12, 1. / 6, -1. / 3, 2. / 3},
		{0, 0, 0, 0, 1},
	}
	// wgAT is Aᵀ, the output transform of F(2, 5): 6 points to 2 outputs.
	wgAT = [][]float32{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 1},
	}
	// wgG2 is the filter transform of F(5, 2): a 2×2 block of dy.
	wgG2 = [][]float32{
		{1. / 4, 0},
		{-1. / 6, -1. / 6},
		{-1. / 6, 1. / 6},
		{1. / 24, 1. / 12},
		{1. / 24, -1. / 12},
		{0, 1},
	}
	// wgAT2 is the output transform of F(5, 2): 6 points to 5 taps.
	wgAT2 = [][]float32{
		{1, 1, 1, 1, 1, 0},
		{0, 1, -1, 2, -2, 0},
		{0, 1, 1, 4, 4, 0},
		{0, 1, -1, 8, -8, 0},
		{0, 1, 1, 16, 16, 1},
	}
)

// WinogradFits reports whether a convolution of geometry g can run as
// Winograd F(2×2, 5×5) and has the channels to gain from it.
func WinogradFits(g planner.ConvGeom) bool {
	g = normConv(g)
	return g.KH == 5 && g.KW == 5 && g.PH == 2 && g.PW == 2 && g.SH == 1 && g.SW == 1 && g.DH == 1 && g.DW == 1 &&
		g.Groups == 1 && g.OH == g.H && g.OW == g.W && g.C >= winogradMinChannels && g.OC >= winogradMinChannels
}

// wgTiles is the number of 2×2 output tiles of the batch.
func wgTiles(g planner.ConvGeom) int { return g.N * ceilDiv(g.OH, 2) * ceilDiv(g.OW, 2) }

// wgLayout is where each part of a Winograd convolution's workspace lies,
// in float32s; forward and backward use one layout, so the backward finds
// the forward's V where it left it.
type wgLayout struct{ v, u, r1, r2, size int }

func winogradLayout(g planner.ConvGeom) wgLayout {
	t := wgTiles(g)
	var l wgLayout
	l.u = l.v + 36*g.C*t     // V: the input's transform [36][C][T]
	l.r1 = l.u + 36*g.OC*g.C // U, M2 or U': [36][OC][C] or [36][C][OC]
	l.r2 = l.r1 + 36*g.OC*t  // M, U2 or V': [36][OC][T]
	l.size = l.r2 + 36*g.C*t // M': [36][C][T]
	return l
}

// WinogradScratch is the workspace, in float32s, of a Winograd convolution
// of geometry g, forward or backward.
func WinogradScratch(g planner.ConvGeom) int { return winogradLayout(normConv(g)).size }

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
// channels. W is the layer's [OC][C][5][5].
func wgFilterKernel(g planner.ConvGeom, flip bool) *Kernel {
	outCh, inCh := g.OC, g.C
	what := "filters"
	if flip {
		outCh, inCh = g.C, g.OC
		what = "filters turned by 180°, channels swapped,"
	}
	n := outCh * inCh
	return elementwise(fmt.Sprintf("Winograd F(2x2,5x5) transform of %d %s G·w·Gᵀ", n, what), n,
		[]Param{in("w", g.OC*g.C*25), out("u", 36*n)}, func(i Expr) []Stmt {
			s := []Stmt{let("p", Int, div(i, i32(inCh))), let("q", Int, rem(i, i32(inCh)))}
			base := add(mul(vr("p"), i32(g.C)), vr("q"))
			if flip {
				base = add(mul(vr("q"), i32(g.C)), vr("p"))
			}
			s = append(s, let("wb", Int, mul(base, i32(25))))
			for kh := range 5 {
				for kw := range 5 {
					tap := kh*5 + kw
					if flip {
						tap = (4-kh)*5 + (4 - kw)
					}
					s = append(s, let(fmt.Sprintf("w%d%d", kh, kw), Float, load("w", add(vr("wb"), i32(tap)))))
				}
			}
			s = append(s, sandwich(wgG, wgG, "w", "t", "u", 5, 5)...)
			for xi := range 6 {
				for nu := range 6 {
					s = append(s, store("u", add(i32((xi*6+nu)*n), i), vr(fmt.Sprintf("u%d%d", xi, nu))))
				}
			}
			return s
		})
}

// wgTileCoords declares n, th, tw of tile t of an H×W output.
func wgTileCoords(t Expr, oh, ow int) []Stmt {
	th, tw := ceilDiv(oh, 2), ceilDiv(ow, 2)
	return []Stmt{
		let("n", Int, div(t, i32(th*tw))),
		let("th", Int, div(rem(t, i32(th*tw)), i32(tw))),
		let("tw", Int, rem(t, i32(tw))),
	}
}

// wgInputKernel transforms the 6×6 input patches: V[ξν][c][t] =
// (Bᵀ·d·B)[ξ][ν], d the patch of channel c at (2·th − 2, 2·tw − 2) of
// x [N][ch][h][w], zero outside the image.
func wgInputKernel(n, ch, h, w int) *Kernel {
	g := planner.ConvGeom{N: n, OH: h, OW: w}
	t := wgTiles(g)
	total := ch * t
	return elementwise(fmt.Sprintf("Winograd F(2x2,5x5) transform of %d 6x6 patches of [%d,%d,%d,%d], Bᵀ·d·B", total, n, ch, h, w), total,
		[]Param{in("x", n*ch*h*w), out("v", 36*total)}, func(i Expr) []Stmt {
			s := []Stmt{let("c", Int, div(i, i32(t))), let("t", Int, rem(i, i32(t)))}
			s = append(s, wgTileCoords(vr("t"), h, w)...)
			s = append(s,
				let("h0", Int, sub(mul(vr("th"), i32(2)), i32(2))),
				let("w0", Int, sub(mul(vr("tw"), i32(2)), i32(2))),
				let("xb", Int, mul(add(mul(vr("n"), i32(ch)), vr("c")), i32(h*w))))
			for a := range 6 {
				for b := range 6 {
					hh, ww := add(vr("h0"), i32(a)), add(vr("w0"), i32(b))
					inside := and(ge(hh, i32(0)), lt(hh, i32(h)), ge(ww, i32(0)), lt(ww, i32(w)))
					s = append(s, let(fmt.Sprintf("d%d%d", a, b), Float,
						sel(inside, load("x", add(vr("xb"), add(mul(hh, i32(w)), ww))), flt(0))))
				}
			}
			s = append(s, sandwich(wgBT, wgBT, "d", "t", "v", 6, 6)...)
			for xi := range 6 {
				for nu := range 6 {
					s = append(s, store("v", add(i32((xi*6+nu)*total), i), vr(fmt.Sprintf("v%d%d", xi, nu))))
				}
			}
			return s
		})
}

// wgOutputKernel turns the GEMMs' products back into 2×2 output tiles:
// y[n][o][2·th + a][2·tw + b] = (Aᵀ·M[·][o][t]·A)[a][b] (+ bias, act), for
// y [N][outCh][h][w].
func wgOutputKernel(n, outCh, h, w int, hasBias bool, act string, alpha float32) (*Kernel, error) {
	g := planner.ConvGeom{N: n, OH: h, OW: w}
	t := wgTiles(g)
	total := outCh * t
	params := []Param{in("m", 36*total), out("y", n*outCh*h*w)}
	if hasBias {
		params = append(params, in("b", outCh))
	}
	var err error
	k := elementwise(fmt.Sprintf("Winograd F(2x2,5x5) output tiles Aᵀ·M·A of [%d,%d,%d,%d], bias %v, %q", n, outCh, h, w, hasBias, act), total,
		params, func(i Expr) []Stmt {
			s := []Stmt{let("o", Int, div(i, i32(t))), let("t", Int, rem(i, i32(t)))}
			s = append(s, wgTileCoords(vr("t"), h, w)...)
			for xi := range 6 {
				for nu := range 6 {
					s = append(s, let(fmt.Sprintf("m%d%d", xi, nu), Float, load("m", add(i32((xi*6+nu)*total), i))))
				}
			}
			s = append(s, sandwich(wgAT, wgAT, "m", "t", "y", 6, 6)...)
			s = append(s, let("yb", Int, mul(add(mul(vr("n"), i32(outCh)), vr("o")), i32(h*w))))
			if hasBias {
				s = append(s, let("bias", Float, load("b", vr("o"))))
			}
			for a := range 2 {
				for b := range 2 {
					var v Expr = vr(fmt.Sprintf("y%d%d", a, b))
					if hasBias {
						v = add(v, vr("bias"))
					}
					var e Expr
					e, err = actExpr(act, alpha, v)
					hh := add(mul(vr("th"), i32(2)), i32(a))
					ww := add(mul(vr("tw"), i32(2)), i32(b))
					s = append(s, when(and(lt(hh, i32(h)), lt(ww, i32(w))),
						store("y", add(vr("yb"), add(mul(hh, i32(w)), ww)), e)))
				}
			}
			return s
		})
	return k, err
}

// wgDyKernel transforms dy's 2×2 blocks, the filters of the weight
// gradient's F(5×5, 2×2): U2[ξν][o][t] = (G2·z·G2ᵀ)[ξ][ν], z the block of
// dy [N][OC][OH][OW] at (2·th, 2·tw), zero past the edge.
func wgDyKernel(g planner.ConvGeom) *Kernel {
	t := wgTiles(g)
	total := g.OC * t
	return elementwise(fmt.Sprintf("Winograd F(5x5,2x2) transform of %d 2x2 blocks of dy [%d,%d,%d,%d], G2·z·G2ᵀ", total, g.N, g.OC, g.OH, g.OW), total,
		[]Param{in("dy", g.N*g.OC*g.OH*g.OW), out("u", 36*total)}, func(i Expr) []Stmt {
			s := []Stmt{let("o", Int, div(i, i32(t))), let("t", Int, rem(i, i32(t)))}
			s = append(s, wgTileCoords(vr("t"), g.OH, g.OW)...)
			s = append(s, let("zb", Int, mul(add(mul(vr("n"), i32(g.OC)), vr("o")), i32(g.OH*g.OW))))
			for a := range 2 {
				for b := range 2 {
					hh := add(mul(vr("th"), i32(2)), i32(a))
					ww := add(mul(vr("tw"), i32(2)), i32(b))
					s = append(s, let(fmt.Sprintf("z%d%d", a, b), Float,
						sel(and(lt(hh, i32(g.OH)), lt(ww, i32(g.OW))), load("dy", add(vr("zb"), add(mul(hh, i32(g.OW)), ww))), flt(0))))
				}
			}
			s = append(s, sandwich(wgG2, wgG2, "z", "t", "u", 2, 2)...)
			for xi := range 6 {
				for nu := range 6 {
					s = append(s, store("u", add(i32((xi*6+nu)*total), i), vr(fmt.Sprintf("u%d%d", xi, nu))))
				}
			}
			return s
		})
}

// wgWeightGradKernel turns the weight gradient's products into the 5×5
// taps: dW[o][c] = A2ᵀ·M2[·][o][c]·A2.
func wgWeightGradKernel(g planner.ConvGeom) *Kernel {
	total := g.OC * g.C
	return elementwise(fmt.Sprintf("Winograd F(5x5,2x2) weight gradient taps A2ᵀ·M2·A2 of [%d,%d,5,5]", g.OC, g.C), total,
		[]Param{in("m", 36*total), out("dw", total*25)}, func(i Expr) []Stmt {
			var s []Stmt
			for xi := range 6 {
				for nu := range 6 {
					s = append(s, let(fmt.Sprintf("m%d%d", xi, nu), Float, load("m", add(i32((xi*6+nu)*total), i))))
				}
			}
			s = append(s, sandwich(wgAT2, wgAT2, "m", "t", "k", 6, 6)...)
			s = append(s, let("kb", Int, mul(i, i32(25))))
			for kh := range 5 {
				for kw := range 5 {
					s = append(s, store("dw", add(vr("kb"), i32(kh*5+kw)), vr(fmt.Sprintf("k%d%d", kh, kw))))
				}
			}
			return s
		})
}

// winograd lowers a convolution step whose method is WinogradMethod.
func (l *lowering) winograd(st *planner.Step, bwd bool) error {
	a := st.Attr
	g := normConv(*a.Conv)
	if !WinogradFits(g) {
		return fmt.Errorf("method %q does not apply to this convolution (%dx%d window, stride %dx%d, padding %dx%d, %d groups, %d→%d channels)",
			WinogradMethod, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.Groups, g.C, g.OC)
	}
	nin, nout, wsAt := 3, 2, func() planner.BufID { return st.Out[1] }
	if bwd {
		nin, nout, wsAt = 5, 3, func() planner.BufID { return st.In[4] }
	}
	if err := l.operands(st, nin, nout); err != nil {
		return err
	}
	ws := wsAt()
	lay := winogradLayout(g)
	if b, err := l.buf(ws); err != nil {
		return err
	} else if b.Size < lay.size {
		return fmt.Errorf("Winograd workspace %q has %d float32s, the method needs %d (gpu.WinogradScratch)", b.Name, b.Size, lay.size)
	}
	t := wgTiles(g)
	alpha := float32(a.Alpha)
	if !bwd {
		x, b, y := st.In[0], st.In[2], st.Out[0]
		if err := l.launch("winograd_filter", wgFilterKernel(g, false), nil, whole(st.In[1]), at(ws, lay.u)); err != nil {
			return err
		}
		if err := l.launch("winograd_input", wgInputKernel(g.N, g.C, g.H, g.W), nil, whole(x), at(ws, lay.v)); err != nil {
			return err
		}
		if err := l.gemm(Gemm{M: g.OC, N: t, K: g.C, Alpha: 1, Batch: 36, Stride: [3]int{g.OC * g.C, g.C * t, g.OC * t},
			A: Matrix{ws, lay.u, g.OC, g.C, g.C}, B: Matrix{ws, lay.v, g.C, t, t}, C: Matrix{ws, lay.r1, g.OC, t, t}}); err != nil {
			return err
		}
		k, err := wgOutputKernel(g.N, g.OC, g.OH, g.OW, present(b), a.Act, alpha)
		ops := []operand{at(ws, lay.r1), whole(y)}
		if present(b) {
			ops = append(ops, whole(b))
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
			if err := l.launch("winograd_input", wgInputKernel(g.N, g.C, g.H, g.W), nil, whole(x), at(ws, lay.v)); err != nil {
				return err
			}
		}
		if err := l.launch("winograd_dy", wgDyKernel(g), nil, whole(dy), at(ws, lay.r1)); err != nil {
			return err
		}
		if err := l.gemm(Gemm{TransB: true, M: g.OC, N: g.C, K: t, Alpha: 1, Batch: 36, Stride: [3]int{g.OC * t, g.C * t, g.OC * g.C},
			A: Matrix{ws, lay.r1, g.OC, t, t}, B: Matrix{ws, lay.v, g.C, t, t}, C: Matrix{ws, lay.u, g.OC, g.C, g.C}}); err != nil {
			return err
		}
		if err := l.launch("winograd_weight_grad", wgWeightGradKernel(g), nil, at(ws, lay.u), whole(dw)); err != nil {
			return err
		}
	}
	if present(dx) {
		if err := l.launch("winograd_filter", wgFilterKernel(g, true), nil, whole(w), at(ws, lay.u)); err != nil {
			return err
		}
		if err := l.launch("winograd_input", wgInputKernel(g.N, g.OC, g.OH, g.OW), nil, whole(dy), at(ws, lay.r1)); err != nil {
			return err
		}
		if err := l.gemm(Gemm{M: g.C, N: t, K: g.OC, Alpha: 1, Batch: 36, Stride: [3]int{g.C * g.OC, g.OC * t, g.C * t},
			A: Matrix{ws, lay.u, g.C, g.OC, g.OC}, B: Matrix{ws, lay.r1, g.OC, t, t}, C: Matrix{ws, lay.r2, g.C, t, t}}); err != nil {
			return err
		}
		k, err := wgOutputKernel(g.N, g.C, g.H, g.W, false, "", 0)
		if err := l.launch("winograd_output", k, err, at(ws, lay.r2), whole(dx)); err != nil {
			return err
		}
	}
	return nil
}
