package gpu

import (
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// poolOver is the max pool of a kh×kw window and stride over g's output.
func poolOver(g planner.ConvGeom, kh, kw int) planner.ConvGeom {
	return planner.ConvGeom{N: g.N, C: g.OC, H: g.OH, W: g.OW, OC: g.OC, OH: g.OH / kh, OW: g.OW / kw,
		KH: kh, KW: kw, SH: kh, SW: kw, DH: 1, DW: 1, Groups: 1}
}

func TestPoolEpilogue(t *testing.T) {
	first := withOutputSize(planner.ConvGeom{N: 4, C: 1, H: 28, W: 28, OC: 32, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1})
	second := withOutputSize(planner.ConvGeom{N: 4, C: 32, H: 14, W: 14, OC: 64, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1})
	padded := poolOver(first, 2, 2)
	padded.PH, padded.PW, padded.OH, padded.OW = 1, 1, 15, 15
	overlapping := poolOver(first, 3, 3)
	overlapping.SH, overlapping.SW, overlapping.OH, overlapping.OW = 2, 2, 13, 13
	elsewhere := poolOver(second, 2, 2)
	third := withOutputSize(planner.ConvGeom{N: 4, C: 32, H: 14, W: 14, OC: 64, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1})
	for _, c := range []struct {
		name   string
		g      planner.ConvGeom
		method string
		pool   planner.ConvGeom
		want   bool
	}{
		{"direct 2x2", first, ConvDirectMethod, poolOver(first, 2, 2), true},
		{"direct 4x4", first, ConvDirectMethod, poolOver(first, 4, 4), true},
		{"direct 2x1", first, ConvDirectMethod, poolOver(first, 2, 1), true},
		{"direct 5x5 window", first, ConvDirectMethod, poolOver(first, 5, 5), false},
		{"direct too many taps", second, ConvDirectMethod, poolOver(second, 2, 2), false},
		{"F(4x4) 2x2", second, WinogradF4.Method, poolOver(second, 2, 2), true},
		{"F(4x4) 4x4", second, WinogradF4.Method, poolOver(second, 4, 4), true},
		{"F(4x4) 3x3", second, WinogradF4.Method, poolOver(second, 3, 3), false},
		{"F(2x2) 2x2", second, WinogradF2.Method, poolOver(second, 2, 2), true},
		{"F(2x2) 4x4", second, WinogradF2.Method, poolOver(second, 4, 4), false},
		{"F(4x4,3x3) 2x2", third, Winograd3F4.Method, poolOver(third, 2, 2), true},
		{"F(4x4,3x3) of a 5x5 layer", second, Winograd3F4.Method, poolOver(second, 2, 2), false},
		{"F(4x4,5x5) of a 3x3 layer", third, WinogradF4.Method, poolOver(third, 2, 2), false},
		{"im2col", second, "im2col+cublas", poolOver(second, 2, 2), false},
		{"padded pool", first, ConvDirectMethod, padded, false},
		{"overlapping windows", first, ConvDirectMethod, overlapping, false},
		{"another tensor's pool", first, ConvDirectMethod, elsewhere, false},
	} {
		if got := PoolEpilogue(c.g, c.method, c.pool); got != c.want {
			t.Errorf("%s: PoolEpilogue = %v, want %v", c.name, got, c.want)
		}
	}
}

// pooledConvCase is one layer of the pooled-layer tests (pooledConvCases): a
// forward convolution by method with a max pool of a kh×kw window in its
// epilogue.
type pooledConvCase struct {
	name   string
	g      planner.ConvGeom
	kh, kw int
	method string
	bias   bool
	act    string
	alpha  float32
}

// pooledLayer is one pooled case's buffers in a test plan: input, weight,
// bias (NoBuf without), the pooled output and the Winograd workspace
// (NoBuf for other methods).
type pooledLayer struct{ x, w, b, y, cols planner.BufID }

// addPooledLayer checks that PoolEpilogue takes case c and adds its
// buffers to p; it returns them with the convolution's and the pool's
// geometries.
func addPooledLayer(t *testing.T, p *planner.Plan, c pooledConvCase) (pooledLayer, planner.ConvGeom, planner.ConvGeom) {
	t.Helper()
	g, pool := c.g, poolOver(c.g, c.kh, c.kw)
	if !PoolEpilogue(g, c.method, pool) {
		t.Fatalf("%s: PoolEpilogue declines the layer", c.name)
	}
	l := pooledLayer{b: planner.NoBuf, cols: planner.NoBuf}
	l.x = testBuffer(p, c.name+".in", planner.KindActivation, g.N, g.C, g.H, g.W)
	l.w = testBuffer(p, c.name+".weight", planner.KindParam, g.OC, g.C/g.Groups, g.KH, g.KW)
	if c.bias {
		l.b = testBuffer(p, c.name+".bias", planner.KindParam, g.OC)
	}
	l.y = testBuffer(p, c.name+".pool", planner.KindActivation, g.N, g.OC, pool.OH, pool.OW)
	if wa := WinogradByMethod(c.method); wa != nil {
		l.cols = testBuffer(p, c.name+".cols", planner.KindScratch, wa.Scratch(g))
	}
	return l, g, pool
}

// smallProductsKernel lets the test's small Winograd layers run their
// products as wgProductRowsKernel (wgRowsMinGroups) until it ends.
func smallProductsKernel(t *testing.T) {
	saved := wgRowsMinGroups
	t.Cleanup(func() { wgRowsMinGroups = saved })
	wgRowsMinGroups = 1
}

// pooledConvCases are the pooled layers of both lowered tests: direct
// layers with odd outputs, ragged runs, stride, dilation, groups and
// non-square windows; Winograd layers with ragged tiles and 4×4 windows.
func pooledConvCases() []pooledConvCase {
	conv := func(n, c, h, w, oc, k, s, pad, dil, groups int) planner.ConvGeom {
		return withOutputSize(planner.ConvGeom{N: n, C: c, H: h, W: w, OC: oc, KH: k, KW: k, SH: s, SW: s, PH: pad, PW: pad, DH: dil, DW: dil, Groups: groups})
	}
	f4, f2, f43 := WinogradF4.Method, WinogradF2.Method, Winograd3F4.Method
	return []pooledConvCase{
		// models/mnist.cue's first layer in small: 14 pooled pixels a row, 1 a thread
		{"direct_first", conv(3, 1, 28, 28, 8, 5, 1, 2, 1, 1), 2, 2, ConvDirectMethod, true, "relu", 0},
		// 11×15 output: the last row and column are in no window
		{"direct_odd", conv(2, 2, 11, 15, 3, 3, 1, 1, 1, 1), 2, 2, ConvDirectMethod, true, "tanh", 0},
		// 1×1 windows, 2 pixels a thread: rows of 15 end in a ragged run
		{"direct_1x1", conv(2, 2, 11, 15, 3, 3, 1, 1, 1, 1), 1, 1, ConvDirectMethod, true, "relu", 0},
		{"direct_strided_3x3", conv(2, 1, 19, 17, 4, 3, 2, 1, 1, 1), 3, 3, ConvDirectMethod, false, "", 0},
		{"direct_dilated_grouped", conv(2, 2, 13, 12, 4, 3, 1, 2, 2, 2), 2, 2, ConvDirectMethod, true, "leakyrelu", 0.1},
		{"direct_2x1", conv(2, 1, 9, 9, 6, 3, 1, 1, 1, 1), 2, 1, ConvDirectMethod, true, "sigmoid", 0},
		// models/mnist.cue's second layer in small: 14×14, a ragged last tile row of 2 rows
		{"winograd_14", conv(2, 16, 14, 14, 17, 5, 1, 2, 1, 1), 2, 2, f4, true, "relu", 0},
		// 13×13: the last tile row has 1 row, which no window reads
		{"winograd_13", conv(2, 17, 13, 13, 16, 5, 1, 2, 1, 1), 2, 2, f4, false, "leakyrelu", 0.2},
		{"winograd_4x4", conv(1, 16, 14, 14, 16, 5, 1, 2, 1, 1), 4, 4, f4, true, "", 0},
		{"winograd_F2", conv(2, 16, 9, 7, 16, 5, 1, 2, 1, 1), 2, 2, f2, true, "sigmoid", 0},
		// 64 output channels: the products and M·A in one kernel where the
		// dialect has 16-byte accesses (wgProductRowsKernel)
		{"winograd_64", conv(2, 16, 9, 11, 64, 5, 1, 2, 1, 1), 2, 2, f4, true, "relu", 0},
		// F(4×4,3×3): 10×11, ragged tiles both ways; 64 channels each way,
		// the products kernel's with K = 64 too
		{"winograd3_10", conv(2, 16, 10, 11, 17, 3, 1, 1, 1, 1), 2, 2, f43, true, "relu", 0},
		{"winograd3_64", conv(2, 64, 6, 9, 64, 3, 1, 1, 1, 1), 2, 2, f43, false, "relu", 0},
	}
}

// TestLoweredPooledConvMatchesCPU lowers inference plans of convolutions
// that max-pool in their epilogue (Attr.Pool), runs their ops (kernels
// through each dialect's g++ shim, GEMMs in float64) and compares the
// pooled output with rt/cpu's convolution followed by its max pool. The
// direct layers have rows of pooled pixels that leave a thread a ragged
// run (1×1 windows, 2 a thread), odd sizes whose last row and column no
// window reads, stride,
// dilation, groups and non-square windows; the Winograd layers have
// ragged tiles (14×14 and 13×13 outputs of 4×4 tiles: the last tile row
// holds 2 rows of output, one window, or 1, none) and 4×4 windows. y
// starts as junk, so a pixel not written fails.
func TestLoweredPooledConvMatchesCPU(t *testing.T) {
	smallProductsKernel(t)
	cases := pooledConvCases()
	p := &planner.Plan{Model: "pooled_convs"}
	var layers []pooledLayer
	for _, c := range cases {
		l, g, pool := addPooledLayer(t, p, c)
		p.Forward = append(p.Forward, planner.Step{Kernel: planner.KConv2D, Layer: c.name,
			In: []planner.BufID{l.x, l.w, l.b}, Out: []planner.BufID{l.y, l.cols},
			Attr: planner.Attr{Conv: &g, Pool: &pool, Act: c.act, Alpha: float64(c.alpha), Method: c.method}})
		layers = append(layers, l)
	}
	initial := convLayerArena(p, nil, 5)
	for i, b := range p.Buffers {
		if b.Kind == planner.KindActivation && strings.HasSuffix(b.Name, ".pool") {
			for j := range initial[i] {
				initial[i][j] = 500 + float32(j%100) // junk
			}
		}
	}

	for _, d := range []*Dialect{CUDA, Metal} {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			prog, err := Lower(p, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				var ops []string
				for _, op := range prog.Forward {
					switch {
					case op.Layer != c.name:
					case op.Gemm != nil:
						ops = append(ops, "gemm")
					default:
						ops = append(ops, op.Launch.Kernel[strings.Index(op.Launch.Kernel, "_")+1:])
					}
				}
				want := "conv_direct"
				if c.method != ConvDirectMethod {
					want = "winograd_filter winograd_input gemm winograd_output"
					if d.Load4 != "" && wgProductsFit(c.g.OC, c.g.C, 4) {
						// the dialect's own products kernel (winograd_products.go)
						want = "winograd_filter winograd_input winograd_products winograd_output"
					}
				}
				if got := strings.Join(ops, " "); got != want {
					t.Errorf("%s: forward ops %s, want %s (the pool in the convolution's epilogue)", c.name, got, want)
				}
			}
			arena := make([][]float32, len(initial))
			for i := range initial {
				arena[i] = append([]float32(nil), initial[i]...)
			}
			s := startKernelServer(t, d, prog)
			s.run(t, prog.Forward, arena, make([]float32, gpuhost.StepArgsLen))
			for ci, c := range cases {
				l := layers[ci]
				g, pool := c.g, poolOver(c.g, c.kh, c.kw)
				var b []float32
				if c.bias {
					b = initial[l.b]
				}
				full := make([]float32, g.N*g.OC*g.OH*g.OW)
				cpu.Conv2DIm2colFwd(initial[l.x], initial[l.w], b, full, cpuConv(g), cpuFusedAct(t, c.act), c.alpha)
				want := make([]float32, len(arena[l.y]))
				cpu.MaxPool2DFwd(full, want, cpuConv(pool))
				got := arena[l.y]
				var scale float64
				for _, v := range want {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				worst, at := 0.0, 0
				for i := range want {
					e := math.Abs(float64(got[i])-float64(want[i])) / math.Max(scale, 1)
					if math.IsNaN(float64(got[i])) {
						e = math.Inf(1)
					}
					if e > worst {
						worst, at = e, i
					}
				}
				if worst > 1e-5 {
					t.Errorf("%s/%s: pooled y[%d] = %g, rt/cpu has %g (error %.3g of the largest |value| %g)", d.Name, c.name, at, got[at], want[at], worst, scale)
				}
			}
		})
	}
}

// TestLoweredTrainingPoolMatchesCPU lowers training plans of convolutions
// that max-pool in their epilogue and write each window's argmax (Attr.Pool
// with a third output), followed by the pool's backward from that argmax
// (maxpool2d_argmax_bwd), runs them through each dialect's g++ shim and
// compares with rt/cpu. Inputs and weights are multiples of 1/4 of a few
// sizes, so windows hold ties: the direct method sums them exactly, and
// its argmax must be rt/cpu's MaxPool2DArgmax of the activation's output
// (the first maximum); Winograd rounds, so its argmax must point at a
// window maximum, be rt/cpu's where the maximum stands clear of the
// rest, and be 0 where relu makes the whole window 0. The backward,
// from the GPU's argmax and pooled output, must be rt/cpu's
// MaxPool2DArgmaxBwd of dy times the activation's derivative at every
// pixel, the rows and columns of no window (odd outputs) included: dx and
// the argmax start as junk.
func TestLoweredTrainingPoolMatchesCPU(t *testing.T) {
	smallProductsKernel(t)
	cases := pooledConvCases()
	for i := range cases {
		if cases[i].name == "winograd_13" {
			cases[i].act, cases[i].alpha = "relu", 0 // windows that relu makes all 0: their argmax must be 0
		}
	}
	p := &planner.Plan{Model: "pooled_training_convs", Training: true}
	type layer struct {
		pooledLayer
		arg, dy, dx planner.BufID
	}
	var layers []layer
	for _, c := range cases {
		pl, g, pool := addPooledLayer(t, p, c)
		l := layer{pooledLayer: pl}
		l.arg = testBuffer(p, c.name+".argmax", planner.KindScratch, g.N, g.OC, pool.OH, pool.OW)
		l.dy = testBuffer(p, c.name+".pool.grad", planner.KindGrad, g.N, g.OC, pool.OH, pool.OW)
		l.dx = testBuffer(p, c.name+".out.grad", planner.KindGrad, g.N, g.OC, g.OH, g.OW)
		p.Forward = append(p.Forward, planner.Step{Kernel: planner.KConv2D, Layer: c.name,
			In: []planner.BufID{l.x, l.w, l.b}, Out: []planner.BufID{l.y, l.cols, l.arg},
			Attr: planner.Attr{Conv: &g, Pool: &pool, Act: c.act, Alpha: float64(c.alpha), Method: c.method}})
		p.Backward = append(p.Backward, planner.Step{Kernel: planner.KMaxPool2DArgmaxBwd, Layer: c.name,
			In: []planner.BufID{l.arg, l.y, l.dy}, Out: []planner.BufID{l.dx},
			Attr: planner.Attr{Conv: &pool, Act: c.act, Alpha: float64(c.alpha)}})
		layers = append(layers, l)
	}
	initial := convLayerArena(p, nil, 9)
	r := rand.New(rand.NewSource(3))
	for _, l := range layers {
		for _, id := range []planner.BufID{l.x, l.w, l.b} {
			if id == planner.NoBuf {
				continue
			}
			for j := range initial[id] {
				initial[id][j] = float32(r.Intn(5)-2) / 4 // ties
			}
		}
		for j := range initial[l.dy] {
			initial[l.dy][j] = 2*r.Float32() - 1
		}
		for _, id := range []planner.BufID{l.y, l.arg, l.dx} {
			for j := range initial[id] {
				initial[id][j] = 500 + float32(j%100) // junk
			}
		}
	}

	for _, d := range []*Dialect{CUDA, Metal} {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			prog, err := Lower(p, d)
			if err != nil {
				t.Fatal(err)
			}
			arena := make([][]float32, len(initial))
			for i := range initial {
				arena[i] = append([]float32(nil), initial[i]...)
			}
			s := startKernelServer(t, d, prog)
			s.run(t, prog.Forward, arena, make([]float32, gpuhost.StepArgsLen))
			s.run(t, prog.Backward, arena, make([]float32, gpuhost.StepArgsLen))
			for ci, c := range cases {
				l := layers[ci]
				g, pool := c.g, poolOver(c.g, c.kh, c.kw)
				var b []float32
				if c.bias {
					b = initial[l.b]
				}
				z := make([]float32, g.N*g.OC*g.OH*g.OW)
				full := make([]float32, len(z))
				cpu.Conv2DIm2colFwd(initial[l.x], initial[l.w], b, z, cpuConv(g), cpu.ActNone, 0)
				cpu.Conv2DIm2colFwd(initial[l.x], initial[l.w], b, full, cpuConv(g), cpuFusedAct(t, c.act), c.alpha)
				n := len(arena[l.y])
				wantY, wantArg := make([]float32, n), make([]float32, n)
				cpu.MaxPool2DFwd(full, wantY, cpuConv(pool))
				cpu.MaxPool2DArgmax(full, wantArg, cpuConv(pool))
				gotY, gotArg := arena[l.y], arena[l.arg]
				var scale float64
				for _, v := range full {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				scale = math.Max(scale, 1)
				for i := range wantY {
					if e := math.Abs(float64(gotY[i]) - float64(wantY[i])); !(e <= 1e-5*scale) {
						t.Fatalf("%s/%s: pooled y[%d] = %g, rt/cpu has %g", d.Name, c.name, i, gotY[i], wantY[i])
					}
				}
				// the window's values in rt/cpu's output (post and pre activation)
				window := func(v []float32, i int) []float32 {
					pl, oh, ow := i/(pool.OH*pool.OW), i/pool.OW%pool.OH, i%pool.OW
					var out []float32
					for qh := range pool.KH {
						for qw := range pool.KW {
							out = append(out, v[pl*g.OH*g.OW+(oh*pool.KH+qh)*g.OW+ow*pool.KW+qw])
						}
					}
					return out
				}
				tol := float32(4e-5 * scale) // Winograd's rounding, twice what y allows
				exact, clear, zeros, firstNonzero := 0, 0, 0, 0
				for i, a := range gotArg {
					if a != float32(int(a)) || a < 0 || int(a) >= pool.KH*pool.KW {
						t.Fatalf("%s/%s: argmax[%d] = %g, not a position in a %dx%d window", d.Name, c.name, i, a, pool.KH, pool.KW)
					}
					if wantArg[i] != 0 {
						firstNonzero++
					}
					if c.method == ConvDirectMethod {
						if a != wantArg[i] {
							t.Fatalf("%s/%s: argmax[%d] = %g, rt/cpu has %g (window %v)", d.Name, c.name, i, a, wantArg[i], window(full, i))
						}
						exact++
						continue
					}
					f, pre := window(full, i), window(z, i)
					m := f[int(wantArg[i])]
					if f[int(a)] < m-tol {
						t.Fatalf("%s/%s: argmax[%d] = %g points at %g, the window's maximum is %g (window %v)", d.Name, c.name, i, a, f[int(a)], m, f)
					}
					alone := true
					for q, v := range f {
						if q != int(wantArg[i]) && v > m-2*tol {
							alone = false
						}
					}
					if alone {
						clear++
						if a != wantArg[i] {
							t.Fatalf("%s/%s: argmax[%d] = %g, rt/cpu has %g, a clear maximum (window %v)", d.Name, c.name, i, a, wantArg[i], f)
						}
					}
					if c.act == "relu" && slices.Max(pre) < -tol {
						zeros++
						if a != 0 {
							t.Fatalf("%s/%s: argmax[%d] = %g in a window that relu makes all 0 (before relu %v): want the first", d.Name, c.name, i, a, pre)
						}
					}
				}
				if pool.KH*pool.KW > 1 && (firstNonzero == 0 || c.method != ConvDirectMethod && clear == 0 || c.act == "relu" && c.method != ConvDirectMethod && zeros == 0) {
					t.Fatalf("%s/%s: %d argmaxes not 0, %d clear maxima, %d all-zero windows: the case checks too little", d.Name, c.name, firstNonzero, clear, zeros)
				}
				// The backward from the GPU's argmax and pooled output.
				dz := append([]float32(nil), initial[l.dy]...)
				if c.act != "" {
					cpu.ActBwd(gotY, dz, cpuFusedAct(t, c.act), c.alpha)
				}
				want := make([]float32, len(arena[l.dx]))
				cpu.MaxPool2DArgmaxBwd(gotArg, dz, want, cpuConv(pool))
				got := arena[l.dx]
				routed := 0
				for i := range want {
					if e := math.Abs(float64(got[i]) - float64(want[i])); !(e <= 1e-6) {
						t.Fatalf("%s/%s: dx[%d] = %g, rt/cpu has %g", d.Name, c.name, i, got[i], want[i])
					}
					if want[i] != 0 {
						routed++
					}
				}
				if routed == 0 {
					t.Fatalf("%s/%s: no gradient routed: the backward checks nothing", d.Name, c.name)
				}
			}
		})
	}
}
