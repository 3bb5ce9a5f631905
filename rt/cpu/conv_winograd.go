package cpu

import (
	"fmt"
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
// done once per call, in float64.
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
var winogradG = [winoTile][5]float64{
	{1.0 / 4, 0, 0, 0, 0},
	{-1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6},
	{-1.0 / 6, 1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6},
	{1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 3, 2.0 / 3},
	{1.0 / 24, -1.0 / 12, 1.0 / 6, -1.0 / 3, 2.0 / 3},
	{0, 0, 0, 0, 1},
}

// winogradKernels is one instruction set's pair of transform kernels.
// Strides are in floats; n is the number of channels, a multiple of lanes.
type winogradKernels struct {
	// input writes Bᵀ d B of one tile for n channels: d[i][j][c] is
	// src[i·ldRow + j·ldCol + c] and the result at ξ = 6i + j goes to
	// dst[ξ·ldXi + c]. dst is also its scratch between the row and the
	// column pass.
	input func(src *float32, ldRow, ldCol int, dst *float32, ldXi, n int)
	// output writes Aᵀ m A + bias of one tile for n channels, with
	// negative results cleared when relu is not zero: m[ξ][c] is
	// src[ξ·ldXi + c] and y[a][b][c] goes to dst[a·ldRow + b·ldCol + c].
	output func(src *float32, ldXi int, dst *float32, ldRow, ldCol int, bias *float32, relu, n int)
	lanes  int
}

// winogradGo is the pure-Go pair, which every GOARCH has; it computes
// what the vector kernels compute, in the same order.
var winogradGo = &winogradKernels{input: winoInputGo, output: winoOutputGo, lanes: 1}

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

// reluSign clears v when its sign bit is set, as the vector kernels do.
func reluSign(v float32) float32 {
	if int32(*(*uint32)(unsafe.Pointer(&v))) < 0 {
		return 0
	}
	return v
}

// winogradOK reports whether normalised geometry g suits F(2×2,5×5):
// stride 1, no dilation, one group, a 5×5 filter. Any padding works.
func winogradOK(g Conv) bool {
	return g.SH == 1 && g.SW == 1 && g.DH == 1 && g.DW == 1 && g.Groups == 1 && g.KH == 5 && g.KW == 5
}

// winoGeom is the tiling of one image and the sizes of the work buffers.
type winoGeom struct {
	th, tw   int // tile rows and columns: ⌈OH/2⌉, ⌈OW/2⌉
	hp, wp   int // the padded channels-last image: 2·th+4 rows of 2·tw+4 pixels
	cp, ocp  int // channels and output channels rounded up to the vector lanes
	images   int // images per round of 36 products
	rowTiles int // tiles of one round (the rows of each product)
}

// winogradRoundBytes bounds V and M of one round (36·tiles·(C+OC)
// floats), at least one image: on the 2-core Xeon measured, rounds of one
// image of models/mnist.cue's second layer (49 tiles, 677 KB) ran in 18 ms
// on 2 threads, rounds of 2 to 6 images in 30 ms (1 thread: 31-33 ms
// either way).
const winogradRoundBytes = 768 << 10

func newWinoGeom(g Conv, lanes int) winoGeom {
	th, tw := (g.OH+1)/2, (g.OW+1)/2
	lanes = max(lanes, 16) // one padded layout on every path
	cp, ocp := gemmRoundUp(g.C, lanes), gemmRoundUp(g.OC, lanes)
	images := max(1, min(g.N, winogradRoundBytes/(4*winoXi*(cp+ocp)*th*tw)))
	return winoGeom{th: th, tw: tw, hp: 2*th + 4, wp: 2*tw + 4, cp: cp, ocp: ocp,
		images: images, rowTiles: images * th * tw}
}

// winogradFilters writes U[ξ][c][oc] = (G f Gᵀ)[ξ] into u (36·C·ocp
// floats, zero for oc ≥ OC), computed in float64, where the filter f of
// output channel oc and input channel c is w[oc][c], or with flip (g is
// then the geometry of dx's convolution, see convWinogradBackward) the
// forward filter w[c][oc] turned by 180 degrees.
func winogradFilters(w []float32, u []float32, g Conv, ocp int, flip bool) {
	clear(u[:winoXi*g.C*ocp])
	var f [25]float32
	for oc := 0; oc < g.OC; oc++ {
		for c := 0; c < g.C; c++ {
			if flip {
				src := w[(c*g.OC+oc)*25 : (c*g.OC+oc+1)*25]
				for i, v := range src {
					f[24-i] = v
				}
			} else {
				copy(f[:], w[(oc*g.C+c)*25:(oc*g.C+c+1)*25])
			}
			var t [winoTile][5]float64 // G·f
			for i := range t {
				for l := 0; l < 5; l++ {
					var s float64
					for k := 0; k < 5; k++ {
						s += winogradG[i][k] * float64(f[k*5+l])
					}
					t[i][l] = s
				}
			}
			for i := 0; i < winoTile; i++ {
				for j := 0; j < winoTile; j++ {
					var s float64
					for l := 0; l < 5; l++ {
						s += t[i][l] * winogradG[j][l]
					}
					u[((i*winoTile+j)*g.C+c)*ocp+oc] = float32(s)
				}
			}
		}
	}
}

// sgemmSerial is Sgemm on the calling goroutine only, for kernels that
// already split their work over threads.
func sgemmSerial(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	checkGemmOperand("a", a, m, k, lda)
	checkGemmOperand("b", b, k, n, ldb)
	checkGemmOperand("c", c, m, n, ldc)
	g := gemmCalls.Get().(*gemmCall)
	*g = gemmCall{barrier: g.barrier, p: activeGemmPath.Load(), m: m, n: n, k: k, alpha: 1, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	g.run(0, m, 0, n)
	*g = gemmCall{barrier: g.barrier}
	gemmCalls.Put(g)
}

// convWinogradForward is Conv2DWinogradFwd for geometry that winogradOK
// accepts (with flip, the filters are those of the forward convolution
// whose dx g computes: see winogradFilters). Rounds of whole images are
// split over the threads; each worker pads its images channels-last,
// transforms their tiles into V, runs the 36 products into M and
// transforms M back into the output.
func convWinogradForward(x, w, b, y []float32, g Conv, act Act, alpha float32, k *winogradKernels, flip bool) {
	d := newWinoGeom(g, k.lanes)
	hw, ohw := g.H*g.W, g.OH*g.OW
	lead := convWorkers.Get()
	lead.a = grow(lead.a, winoXi*g.C*d.ocp+d.ocp)
	u, bias := lead.a[:winoXi*g.C*d.ocp], lead.a[winoXi*g.C*d.ocp:]
	winogradFilters(w, u, g, d.ocp, flip)
	clear(bias)
	if b != nil {
		copy(bias, b[:g.OC])
	}
	relu := 0
	if act == ActReLU {
		relu = 1
	}
	rounds := gemmCeilDiv(g.N, d.images)
	imgIn, imgOut := d.hp*d.wp*d.cp, 2*d.th*2*d.tw*d.ocp
	ldV, ldM := d.rowTiles*d.cp, d.rowTiles*d.ocp
	workers := convParallel(rounds, func(cw *convWorker) {
		cw.panel = grow(cw.panel, imgIn)
		clear(cw.panel)
		cw.cols = grow(cw.cols, winoXi*(ldV+ldM))
		cw.tile = grow(cw.tile, imgOut)
	}, func(cw *convWorker, round int) {
		n0 := round * d.images
		n1 := min(g.N, n0+d.images)
		xh, v, m := cw.panel, cw.cols[:winoXi*ldV], cw.cols[winoXi*ldV:]
		for n := n0; n < n1; n++ {
			// The image channels-last, padded; the borders stay zero.
			img := x[n*g.C*hw : (n+1)*g.C*hw]
			for ih := 0; ih < g.H; ih++ {
				row := xh[((ih+g.PH)*d.wp+g.PW)*d.cp:]
				for c := 0; c < g.C; c++ {
					src := img[c*hw+ih*g.W : c*hw+(ih+1)*g.W]
					for iw, val := range src {
						row[iw*d.cp+c] = val
					}
				}
			}
			t0 := (n - n0) * d.th * d.tw
			for ty := 0; ty < d.th; ty++ {
				for tx := 0; tx < d.tw; tx++ {
					t := t0 + ty*d.tw + tx
					k.input(&xh[(2*ty*d.wp+2*tx)*d.cp], d.wp*d.cp, d.cp, &v[t*d.cp], ldV, d.cp)
				}
			}
		}
		tiles := (n1 - n0) * d.th * d.tw
		for xi := 0; xi < winoXi; xi++ {
			sgemmSerial(tiles, d.ocp, g.C, v[xi*ldV:], d.cp, u[xi*g.C*d.ocp:], d.ocp, m[xi*ldM:], d.ocp)
		}
		yh := cw.tile
		for n := n0; n < n1; n++ {
			t0 := (n - n0) * d.th * d.tw
			for ty := 0; ty < d.th; ty++ {
				for tx := 0; tx < d.tw; tx++ {
					t := t0 + ty*d.tw + tx
					k.output(&m[t*d.ocp], ldM, &yh[(2*ty*2*d.tw+2*tx)*d.ocp], 2*d.tw*d.ocp, d.ocp, &bias[0], relu, d.ocp)
				}
			}
			// Channels-last back to NCHW.
			out := y[n*g.OC*ohw : (n+1)*g.OC*ohw]
			for oh := 0; oh < g.OH; oh++ {
				src := yh[oh*2*d.tw*d.ocp:]
				for oc := 0; oc < g.OC; oc++ {
					dst := out[oc*ohw+oh*g.OW : oc*ohw+(oh+1)*g.OW]
					for ow := range dst {
						dst[ow] = src[ow*d.ocp+oc]
					}
				}
			}
			if act != ActNone && act != ActReLU {
				applyAct(out, act, alpha)
			}
		}
	})
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
}

// convWinogradBackward is Conv2DWinogradBwd for geometry that both
// winogradOK and convDirectOK accept: dy is multiplied in place by the
// activation's derivative, dw and db come from the direct method, and dx
// is Winograd's forward convolution of dy, padded by 4 less the padding,
// with the filters transposed and turned by 180 degrees.
func convWinogradBackward(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32, k *winogradKernels) {
	ny := g.N * g.OC * g.OH * g.OW
	if act != ActNone {
		actBackward(y[:ny], dy[:ny], act, alpha)
	}
	convDirectBackward(x, w, y, dy, nil, dw, db, g, ActNone, 0, convDirectFor(activeGemmPath.Load()))
	if dx == nil {
		return
	}
	gt := Conv{N: g.N, C: g.OC, H: g.OH, W: g.OW, OC: g.C, OH: g.H, OW: g.W,
		KH: 5, KW: 5, SH: 1, SW: 1, PH: 4 - g.PH, PW: 4 - g.PW, DH: 1, DW: 1, Groups: 1}
	convWinogradForward(dy, w, nil, dx, gt, ActNone, 0, k, true)
}

// winogradRefusal says why the Winograd method does not take normalised g.
func winogradRefusal(fn string, g Conv) string {
	return fmt.Sprintf("cpu.%s: a %dx%d filter, stride %dx%d, dilation %dx%d, %d groups, padding %dx%d; Winograd F(2x2,5x5) needs a 5x5 filter, stride 1, no dilation and one group (and for the backward pass padding up to 4)",
		fn, g.KH, g.KW, g.SH, g.SW, g.DH, g.DW, g.Groups, g.PH, g.PW)
}
