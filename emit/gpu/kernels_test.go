package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

func randVec(r *rand.Rand, n int, lo, hi float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = lo + (hi-lo)*r.Float32()
	}
	return v
}

func zeros(n int) []float32 { return make([]float32, n) }

func argsVec(lr float32, step, seed uint32) []float32 {
	a := gpuhost.PackStepArgs(lr, step, seed)
	v := make([]float32, len(a))
	for i, w := range a {
		v[i] = math.Float32frombits(w)
	}
	return v
}

func cpuAct(act string) cpu.Unary {
	kinds := map[string]cpu.UnaryKind{"relu": cpu.UReLU, "leakyrelu": cpu.ULeakyReLU, "sigmoid": cpu.USigmoid,
		"tanh": cpu.UTanh, "gelu": cpu.UGELU, "exp": cpu.UExp, "log": cpu.ULog, "addconst": cpu.UAddConst, "mulconst": cpu.UMulConst,
		"sqrt": cpu.USqrt, "powconst": cpu.UPowConst, "erf": cpu.UErf, "relu6": cpu.UReLU6}
	return cpu.Unary{Kind: kinds[act]}
}

func cpuChain(chain []planner.UnaryOp) []cpu.Unary {
	var c []cpu.Unary
	for _, op := range chain {
		u := cpuAct(op.Op)
		u.Alpha = float32(op.Alpha)
		c = append(c, u)
	}
	return c
}

func cpuConv(g planner.ConvGeom) cpu.Conv {
	return cpu.Conv{N: g.N, C: g.C, H: g.H, W: g.W, OC: g.OC, OH: g.OH, OW: g.OW, KH: g.KH, KW: g.KW,
		SH: g.SH, SW: g.SW, PH: g.PH, PW: g.PW, DH: g.DH, DW: g.DW, Groups: g.Groups, ExcludePad: g.ExcludePad}
}

// kernelCases builds every generator's kernels on awkward sizes (not
// multiples of the threadgroup size, rows longer than a threadgroup) with
// expectations from rt/cpu, or from a plain loop where rt/cpu has no
// matching entry point (the epilogue and im2col halves of its fused calls).
func kernelCases(t *testing.T) []gpuCase {
	r := rand.New(rand.NewPCG(1, 2))
	must := func(k *Kernel, err error) *Kernel {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	var cs []gpuCase
	addCase := func(c gpuCase) {
		if c.tol == 0 {
			c.tol = 2e-5
		}
		cs = append(cs, c)
	}

	// The dot-product dense layer against rt/cpu's GemmFwd: sums longer
	// and shorter than its lanes, outputs that do not fill the last
	// threadgroup, bias and not.
	for _, tc := range []struct {
		batch, n, k int
		bias        bool
		act         string
		ca          cpu.Act
	}{{5, 10, 128, true, "", cpu.ActNone}, {3, 7, 37, true, "relu", cpu.ActReLU}, {4, 3, 2, false, "tanh", cpu.ActTanh}} {
		x, w, b := randVec(r, tc.batch*tc.k, -1, 1), randVec(r, tc.n*tc.k, -1, 1), randVec(r, tc.n, -1, 1)
		want := zeros(tc.batch * tc.n)
		bias := b
		if !tc.bias {
			bias = nil
		}
		cpu.GemmFwd(x, w, bias, want, tc.batch, tc.k, tc.n, tc.ca, 0)
		k := must(denseDotKernel(tc.batch, tc.n, tc.k, tc.bias, tc.act, 0))
		in := [][]float32{x, w, randVec(r, tc.batch*tc.n, 3, 4)}
		if tc.bias {
			in = append(in, b)
		}
		addCase(gpuCase{name: fmt.Sprintf("dense_dot_%dx%dx%d", tc.batch, tc.n, tc.k), k: k, in: in, want: map[int][]float32{2: want}})
	}

	// Epilogues: dense [B,N] and conv [B,OC,OHW].
	for _, tc := range []struct {
		act                string
		b, channels, inner int
		bias               bool
	}{{"relu", 5, 37, 1, true}, {"leakyrelu", 3, 5, 63, true}, {"sigmoid", 7, 11, 1, false}, {"tanh", 2, 3, 301, true}, {"", 9, 13, 1, true}} {
		n := tc.b * tc.channels * tc.inner
		y, bias := randVec(r, n, -3, 3), randVec(r, tc.channels, -1, 1)
		want := slices.Clone(y)
		for i := range want {
			if tc.bias {
				want[i] += bias[(i/tc.inner)%tc.channels]
			}
		}
		if tc.act != "" {
			u := cpuAct(tc.act)
			u.Alpha = 0.1
			cpu.UnaryFwd(want, want, []cpu.Unary{u})
		}
		k := must(biasActKernel(n, tc.channels, tc.inner, tc.bias, tc.act, 0.1))
		in := [][]float32{y}
		if tc.bias {
			in = append(in, bias)
		}
		addCase(gpuCase{name: "bias_act_" + tc.act, k: k, in: in, want: map[int][]float32{0: want}})

		// Activation backward from y.
		if tc.act != "" {
			dy := randVec(r, n, -1, 1)
			wantDy := slices.Clone(dy)
			u := cpuAct(tc.act)
			u.Alpha = 0.1
			// dy·act'(pre) where the pre-activation is recovered through y
			for i := range wantDy {
				switch tc.act {
				case "relu":
					if want[i] <= 0 {
						wantDy[i] = 0
					}
				case "leakyrelu":
					if want[i] <= 0 {
						wantDy[i] *= 0.1
					}
				case "sigmoid":
					wantDy[i] *= want[i] * (1 - want[i])
				case "tanh":
					wantDy[i] *= 1 - want[i]*want[i]
				}
			}
			addCase(gpuCase{name: "act_bwd_" + tc.act, k: must(actBwdKernel(n, tc.act, 0.1)),
				in: [][]float32{want, dy}, want: map[int][]float32{1: wantDy}})
		}

		// Bias gradient: sums over axes 0 and 2.
		dy := randVec(r, n, -1, 1)
		db := zeros(tc.channels)
		for i, v := range dy {
			db[(i/tc.inner)%tc.channels] += v
		}
		addCase(gpuCase{name: "bias_grad", k: channelSumKernel(tc.b, tc.channels, tc.inner),
			in: [][]float32{dy, zeros(tc.channels)}, want: map[int][]float32{1: db}, tol: 1e-4})
	}
	// A bias gradient whose reduction is longer than a threadgroup.
	{
		dy := randVec(r, 300*3, -1, 1)
		db := zeros(3)
		for i, v := range dy {
			db[i%3] += v
		}
		addCase(gpuCase{name: "bias_grad_long", k: channelSumKernel(300, 3, 1),
			in: [][]float32{dy, zeros(3)}, want: map[int][]float32{1: db}, tol: 1e-4})
	}

	// im2col and col2im on a strided, padded, dilated, grouped geometry.
	g := planner.ConvGeom{N: 1, C: 4, H: 9, W: 7, OC: 6, KH: 3, KW: 2, SH: 2, SW: 1, PH: 1, PW: 1, DH: 2, DW: 1, Groups: 2}
	g.OH = (g.H+2*g.PH-g.DH*(g.KH-1)-1)/g.SH + 1
	g.OW = (g.W+2*g.PW-g.DW*(g.KW-1)-1)/g.SW + 1
	// One image, and a round of three side by side (rows images·OH·OW long).
	for _, images := range []int{1, 3} {
		chw, rows, ohw := g.C*g.H*g.W, g.C*g.KH*g.KW, g.OH*g.OW
		ld := images * ohw
		x := randVec(r, images*chw, -1, 1)
		cols := zeros(rows * ld)
		dcols := randVec(r, rows*ld, -1, 1)
		dx := zeros(len(x))
		for i := 0; i < images; i++ {
			for c := 0; c < g.C; c++ {
				for kh := 0; kh < g.KH; kh++ {
					for kw := 0; kw < g.KW; kw++ {
						for oh := 0; oh < g.OH; oh++ {
							for ow := 0; ow < g.OW; ow++ {
								h, w := oh*g.SH-g.PH+kh*g.DH, ow*g.SW-g.PW+kw*g.DW
								if h >= 0 && h < g.H && w >= 0 && w < g.W {
									at := ((c*g.KH+kh)*g.KW+kw)*ld + i*ohw + oh*g.OW + ow
									cols[at] = x[i*chw+(c*g.H+h)*g.W+w]
									dx[i*chw+(c*g.H+h)*g.W+w] += dcols[at]
								}
							}
						}
					}
				}
			}
		}
		addCase(gpuCase{name: fmt.Sprintf("im2col_%d", images), k: im2colKernel(g, images), in: [][]float32{x, randVec(r, len(cols), 5, 6)}, want: map[int][]float32{1: cols}})
		addCase(gpuCase{name: fmt.Sprintf("col2im_%d", images), k: col2imKernel(g, images), in: [][]float32{dcols, randVec(r, len(x), 5, 6)}, want: map[int][]float32{1: dx}})
	}

	// The backward's rows: dy [images, C, inner] to rows [C, images·inner],
	// times leaky ReLU's derivative from y, or plain.
	{
		images, channels, inner := 3, 5, 37
		dy, y := randVec(r, images*channels*inner, -1, 1), randVec(r, images*channels*inner, -1, 1)
		rows, plain := zeros(len(dy)), zeros(len(dy))
		for i := 0; i < images; i++ {
			for c := 0; c < channels; c++ {
				for j := 0; j < inner; j++ {
					s, d := (i*channels+c)*inner+j, (c*images+i)*inner+j
					plain[d] = dy[s]
					rows[d] = dy[s]
					if y[s] <= 0 {
						rows[d] *= 0.2
					}
				}
			}
		}
		addCase(gpuCase{name: "conv_rows_act", k: must(convRowsKernel(images, channels, inner, "leakyrelu", 0.2)),
			in: [][]float32{dy, randVec(r, len(dy), 5, 6), y}, want: map[int][]float32{1: rows}})
		addCase(gpuCase{name: "conv_rows", k: must(convRowsKernel(images, channels, inner, "", 0)),
			in: [][]float32{dy, randVec(r, len(dy), 5, 6)}, want: map[int][]float32{1: plain}})
	}

	// The epilogue of a round: output rows [C, images·inner] to y
	// [images, C, inner] with bias and activation.
	{
		images, channels, inner := 3, 5, 37
		rows := randVec(r, images*channels*inner, -1, 1)
		b := randVec(r, channels, -1, 1)
		y := zeros(len(rows))
		for i := 0; i < images; i++ {
			for c := 0; c < channels; c++ {
				for j := 0; j < inner; j++ {
					v := rows[(c*images+i)*inner+j] + b[c]
					if v <= 0 {
						v *= 0.2
					}
					y[(i*channels+c)*inner+j] = v
				}
			}
		}
		addCase(gpuCase{name: "conv_epilogue", k: must(convScatterKernel(images, channels, inner, true, "leakyrelu", 0.2)),
			in: [][]float32{rows, randVec(r, len(y), 5, 6), b}, want: map[int][]float32{1: y}})
	}

	// Pooling, against rt/cpu.
	for _, pg := range []planner.ConvGeom{
		{N: 2, C: 3, H: 9, W: 11, KH: 2, KW: 2, SH: 2, SW: 2, DH: 1, DW: 1},
		{N: 3, C: 2, H: 7, W: 6, KH: 3, KW: 3, SH: 2, SW: 1, PH: 1, PW: 1, DH: 1, DW: 2},
		{N: 2, C: 3, H: 8, W: 9, KH: 2, KW: 3, SH: 2, SW: 3, DH: 1, DW: 1}, // windows tile the input
		// Max pools rounding up (ceil): the last windows reach past the
		// input, 2×2/2 on odd sizes and GoogLeNet's 3×3/2.
		{N: 2, C: 3, H: 9, W: 11, KH: 2, KW: 2, SH: 2, SW: 2, DH: 1, DW: 1, Ceil: true},
		{N: 2, C: 2, H: 8, W: 13, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 0, DH: 1, DW: 1, Ceil: true},
		// Average pools dividing by the padded window's clipped size or
		// by the taps inside the input (PyTorch's count_include_pad=False).
		{N: 2, C: 2, H: 8, W: 13, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Ceil: true, ExcludePad: true},
		{N: 3, C: 2, H: 7, W: 6, KH: 3, KW: 3, SH: 2, SW: 1, PH: 1, PW: 1, DH: 1, DW: 2, ExcludePad: true},
	} {
		pg.OC = pg.C
		pg.OH = (pg.H+2*pg.PH-pg.DH*(pg.KH-1)-1)/pg.SH + 1
		pg.OW = (pg.W+2*pg.PW-pg.DW*(pg.KW-1)-1)/pg.SW + 1
		if pg.Ceil {
			pg.OH = ceilPoolSize(pg.H, pg.KH, pg.SH, pg.PH)
			pg.OW = ceilPoolSize(pg.W, pg.KW, pg.SW, pg.PW)
		}
		n, on := pg.N*pg.C*pg.H*pg.W, pg.N*pg.C*pg.OH*pg.OW
		x := randVec(r, n, -2, 2)
		x[3] = x[4] // a tie: the first maximum wins
		dy := randVec(r, on, -1, 1)
		cg := cpuConv(pg)
		ymax, yavg, dxmax, dxavg := zeros(on), zeros(on), zeros(n), zeros(n)
		cpu.MaxPool2DFwd(x, ymax, cg)
		cpu.AvgPool2DFwd(x, yavg, cg)
		cpu.MaxPool2DBwd(x, ymax, dy, dxmax, cg)
		cpu.AvgPool2DBwd(dy, dxavg, cg)
		addCase(gpuCase{name: "maxpool", k: poolKernel(pg, true), in: [][]float32{x, zeros(on)}, want: map[int][]float32{1: ymax}})
		addCase(gpuCase{name: "avgpool", k: poolKernel(pg, false), in: [][]float32{x, zeros(on)}, want: map[int][]float32{1: yavg}})
		addCase(gpuCase{name: "avgpool_bwd", k: poolBwdKernel(pg, false, nil), in: [][]float32{dy, zeros(n)}, want: map[int][]float32{1: dxavg}})
		addCase(gpuCase{name: "maxpool_bwd", k: poolBwdKernel(pg, true, nil), in: [][]float32{x, dy, zeros(n)}, want: map[int][]float32{2: dxmax}})
		// With its input's activation derivative (fuse_act_bwd.go): x as
		// a relu's or a sigmoid's output, zeros and ties among them.
		for _, tc := range []struct {
			act string
			ca  cpu.Act
			x   []float32
		}{{"relu", cpu.ActReLU, reluOf(x)}, {"sigmoid", cpu.ActSigmoid, randVec(r, n, 0.05, 0.95)}} {
			ya, dxa := zeros(on), zeros(n)
			cpu.MaxPool2DFwd(tc.x, ya, cg)
			cpu.MaxPool2DBwd(tc.x, ya, dy, dxa, cg)
			cpu.ActBwd(tc.x, dxa, tc.ca, 0)
			k, err := maxPoolBwdKernel(pg, tc.act, 0)
			if err != nil {
				t.Fatal(err)
			}
			addCase(gpuCase{name: "maxpool_bwd_" + tc.act, k: k, in: [][]float32{tc.x, dy, randVec(r, n, 3, 4)}, want: map[int][]float32{2: dxa}})
		}
		if poolTiles(pg) {
			xt := append([]float32(nil), x...)
			xt[0] = xt[1] // a tie inside one window
			yt, dxt := zeros(on), zeros(n)
			cpu.MaxPool2DFwd(xt, yt, cg)
			cpu.MaxPool2DBwd(xt, yt, dy, dxt, cg)
			// dx starts as garbage: every element must be written.
			addCase(gpuCase{name: "maxpool_bwd_tiled", k: maxPoolBwdTiledKernel(pg, nil), in: [][]float32{xt, dy, randVec(r, n, 3, 4)}, want: map[int][]float32{2: dxt}})
		}
	}
	{
		planes, spatial := 2*5, 13
		x, dy := randVec(r, planes*spatial, -1, 1), randVec(r, planes, -1, 1)
		y, dx := zeros(planes), zeros(planes*spatial)
		cpu.GlobalAvgPoolFwd(x, y, 2, 5, spatial)
		cpu.GlobalAvgPoolBwd(dy, dx, 2, 5, spatial)
		addCase(gpuCase{name: "gap", k: globalAvgPoolKernel(planes, spatial), in: [][]float32{x, zeros(planes)}, want: map[int][]float32{1: y}})
		addCase(gpuCase{name: "gap_bwd", k: globalAvgPoolBwdKernel(planes, spatial), in: [][]float32{dy, zeros(len(dx))}, want: map[int][]float32{1: dx}})
	}

	// Element-wise chains, forward and backward.
	for _, ch := range [][]planner.UnaryOp{
		{{Op: "relu"}},
		{{Op: "gelu"}},
		{{Op: "gelu"}, {Op: "tanh"}, {Op: "mulconst", Alpha: 1.5}, {Op: "leakyrelu", Alpha: 0.1}},
		{{Op: "sigmoid"}, {Op: "addconst", Alpha: 0.5}, {Op: "log"}, {Op: "exp"}},
		{{Op: "erf"}},
		// relu6 on [-1, 1) and, scaled by 6, on [-6, 6): both corners
		{{Op: "relu6"}},
		{{Op: "mulconst", Alpha: 6}, {Op: "relu6"}, {Op: "addconst", Alpha: 0.5}},
		{{Op: "exp"}, {Op: "sqrt"}},
		// powers: products (2, 3, −1), a square root, exp·log for a
		// fractional exponent (NaN for negative x, as on the CPU) and for
		// a large odd integer (with x's sign)
		{{Op: "powconst", Alpha: 2}},
		{{Op: "powconst", Alpha: 3}, {Op: "mulconst", Alpha: 0.1}},
		{{Op: "exp"}, {Op: "powconst", Alpha: -1}},
		{{Op: "exp"}, {Op: "powconst", Alpha: 0.5}},
		{{Op: "powconst", Alpha: 1.5}},
		{{Op: "powconst", Alpha: 9}},
		{{Op: "addconst", Alpha: 1e-5}, {Op: "exp"}, {Op: "powconst", Alpha: -2.5}},
	} {
		// four elements a thread, and one (n not a multiple of 4)
		n := 1000 + len(cs)%2
		x, dy := randVec(r, n, -3, 3), randVec(r, n, -1, 1)
		y, dx := zeros(n), zeros(n)
		cpu.UnaryFwd(x, y, cpuChain(ch))
		cpu.UnaryBwd(x, dy, dx, cpuChain(ch))
		addCase(gpuCase{name: "unary", k: must(unaryKernel(n, ch)), in: [][]float32{x, zeros(n)}, want: map[int][]float32{1: y}, tol: 1e-5})
		addCase(gpuCase{name: "unary_bwd", k: must(unaryBwdKernel(n, ch)), in: [][]float32{x, dy, zeros(n)}, want: map[int][]float32{2: dx}, tol: 1e-5})
		if len(ch) == 1 && planner.DerivativeFromOutput(ch[0]) {
			addCase(gpuCase{name: "unary_bwd_from_y", k: must(unaryBwdFromOutputKernel(n, ch, false)), in: [][]float32{y, dy, zeros(n)}, want: map[int][]float32{2: dx}, tol: 1e-5})
			// the sum of two gradients (fuse_accumulate_act.go)
			dy2, dxs := randVec(r, n, -1, 1), zeros(n)
			cpu.UnaryBwdFromOutputSum(y, dy, dy2, dxs, cpuChain(ch)[0])
			addCase(gpuCase{name: "unary_bwd_from_y_sum", k: must(unaryBwdFromOutputKernel(n, ch, true)), in: [][]float32{y, dy, dy2, zeros(n)}, want: map[int][]float32{3: dxs}, tol: 1e-5})
		}
	}
	// The backward from the output of the ops not in the table above.
	for _, op := range []planner.UnaryOp{{Op: "leakyrelu", Alpha: 0.1}, {Op: "sigmoid"}, {Op: "tanh"}, {Op: "exp"}} {
		n := 1000
		x, dy := randVec(r, n, -3, 3), randVec(r, n, -1, 1)
		y, dx := zeros(n), zeros(n)
		ch := []planner.UnaryOp{op}
		cpu.UnaryFwd(x, y, cpuChain(ch))
		cpu.UnaryBwd(x, dy, dx, cpuChain(ch))
		addCase(gpuCase{name: "unary_bwd_from_y", k: must(unaryBwdFromOutputKernel(n, ch, false)), in: [][]float32{y, dy, zeros(n)}, want: map[int][]float32{2: dx}, tol: 1e-5})
	}
	if _, err := unaryBwdFromOutputKernel(4, []planner.UnaryOp{{Op: "gelu"}}, false); err == nil {
		t.Errorf("unaryBwdFromOutputKernel accepts gelu")
	}

	// Broadcasting binary ops, forward and both gradients; operands of
	// y's shape (read at y's index, four elements a thread where y's size
	// is a multiple of 4, and their gradients without a sum).
	for _, tc := range []struct {
		op         string
		aS, bS, yS []int
	}{
		{"add", []int{2, 1, 5, 3}, []int{4, 1, 3}, []int{2, 4, 5, 3}},
		{"sub", []int{2, 1, 5, 3}, []int{4, 1, 3}, []int{2, 4, 5, 3}},
		{"mul", []int{2, 1, 5, 3}, []int{4, 1, 3}, []int{2, 4, 5, 3}},
		{"div", []int{2, 1, 5, 3}, []int{4, 1, 3}, []int{2, 4, 5, 3}},
		{"add", []int{2, 4, 5, 3}, []int{2, 4, 5, 3}, []int{2, 4, 5, 3}},
		{"sub", []int{3, 5, 7}, []int{3, 5, 7}, []int{3, 5, 7}},
		{"mul", []int{2, 4, 5, 3}, []int{4, 1, 3}, []int{2, 4, 5, 3}},
		{"div", []int{4, 1, 3}, []int{2, 4, 5, 3}, []int{2, 4, 5, 3}},
		{"div", []int{2, 4, 5, 3}, []int{2, 4, 5, 3}, []int{2, 4, 5, 3}},
	} {
		op, aS, bS, yS := tc.op, tc.aS, tc.bS, tc.yS
		cop := map[string]cpu.BinOp{"add": cpu.BAdd, "sub": cpu.BSub, "mul": cpu.BMul, "div": cpu.BDiv}[op]
		a, b, dy := randVec(r, prod(aS), -1, 1), randVec(r, prod(bS), -1, 1), randVec(r, prod(yS), -1, 1)
		if op == "div" {
			b = randVec(r, prod(bS), 0.5, 1.5) // away from the pole at 0
		}
		y, da, db := zeros(prod(yS)), zeros(prod(aS)), zeros(prod(bS))
		cpu.BinaryFwd(cop, a, b, y, alignShape(aS, len(yS)), alignShape(bS, len(yS)), yS)
		cpu.BinaryBwd(cop, a, b, dy, da, db, alignShape(aS, len(yS)), alignShape(bS, len(yS)), yS)
		addCase(gpuCase{name: "binary_" + op, k: must(binaryKernel(op, aS, bS, yS, false)), in: [][]float32{a, b, zeros(len(y))}, want: map[int][]float32{2: y}})
		yr := zeros(prod(yS))
		cpu.BinaryReLUFwd(cop, a, b, yr, alignShape(aS, len(yS)), alignShape(bS, len(yS)), yS)
		if z := countZeros(yr); z == 0 || z == len(yr) {
			t.Fatalf("binary %s then relu: %d of %d zeros", op, z, len(yr))
		}
		addCase(gpuCase{name: "binary_relu_" + op, k: must(binaryKernel(op, aS, bS, yS, true)), in: [][]float32{a, b, zeros(len(y))}, want: map[int][]float32{2: yr}})
		ka := must(binaryBwdKernel(op, false, aS, bS, yS))
		kb := must(binaryBwdKernel(op, true, aS, bS, yS))
		ina, inb := [][]float32{dy, zeros(len(da))}, [][]float32{dy, zeros(len(db))}
		switch op {
		case "mul":
			ina = [][]float32{dy, b, zeros(len(da))}
			inb = [][]float32{dy, a, zeros(len(db))}
		case "div":
			ina = [][]float32{dy, b, zeros(len(da))}
			inb = [][]float32{dy, a, b, zeros(len(db))}
		}
		addCase(gpuCase{name: "binary_bwd_a_" + op, k: ka, in: ina, want: map[int][]float32{len(ina) - 1: da}, tol: 1e-4})
		addCase(gpuCase{name: "binary_bwd_b_" + op, k: kb, in: inb, want: map[int][]float32{len(inb) - 1: db}, tol: 1e-4})
	}

	// Softmax and log-softmax along a middle axis and along the last axis,
	// rows shorter and longer than a threadgroup.
	for _, sh := range [][3]int{{3, 300, 2}, {4, 10, 1}, {2, 5, 7}} {
		outer, l, inner := sh[0], sh[1], sh[2]
		n := outer * l * inner
		x, dy := randVec(r, n, -5, 5), randVec(r, n, -1, 1)
		for _, log := range []bool{false, true} {
			y, dx := zeros(n), zeros(n)
			name := "softmax"
			if log {
				name = "logsoftmax"
				cpu.LogSoftmaxFwd(x, y, outer, l, inner)
				cpu.LogSoftmaxBwd(y, dy, dx, outer, l, inner)
			} else {
				cpu.SoftmaxFwd(x, y, outer, l, inner)
				cpu.SoftmaxBwd(y, dy, dx, outer, l, inner)
			}
			addCase(gpuCase{name: name, k: softmaxKernel(outer, l, inner, log), in: [][]float32{x, zeros(n)}, want: map[int][]float32{1: y}})
			// in place: dx written over dy, as the planner allows
			addCase(gpuCase{name: name + "_bwd", k: softmaxBwdKernel(outer, l, inner, log), in: [][]float32{y, dy, zeros(n)}, want: map[int][]float32{2: dx}, tol: 1e-4})
		}
	}

	// The causal softmax, rows shorter and longer than a threadgroup; its
	// backward is the plain one along the last axis.
	for _, sh := range [][2]int{{3, 5}, {2, 300}} {
		mats, tt := sh[0], sh[1]
		n := mats * tt * tt
		x, y := randVec(r, n, -5, 5), zeros(n)
		cpu.SoftmaxCausalFwd(x, y, mats, tt)
		addCase(gpuCase{name: "softmax_causal", k: softmaxCausalKernel(mats, tt), in: [][]float32{x, zeros(n)}, want: map[int][]float32{1: y}})
	}

	// The padded softmax (planner.Attr.Padding), causal and not, against
	// rt/cpu's: four samples padded at the right, the left (causal
	// queries that see no key), the middle and all over (padIDs); rows
	// shorter and longer than a threadgroup.
	for _, sh := range []struct {
		rows, t int
		causal  bool
	}{{15, 19, false}, {18, 9, true}, {2, 300, false}, {300, 300, true}} {
		const batch = 4
		n := batch * sh.rows * sh.t
		x, y, ids := randVec(r, n, -5, 5), zeros(n), padIDs(r, batch, sh.t, attnPadID)
		cpu.SoftmaxPaddedFwd(x, y, ids, batch, sh.rows, sh.t, sh.causal, attnPadID)
		addCase(gpuCase{name: fmt.Sprintf("softmax_padded_%dx%d_%v", sh.rows, sh.t, sh.causal), k: softmaxPaddedKernel(batch, sh.rows, sh.t, sh.causal, attnPadID),
			in: [][]float32{x, ids, randVec(r, n, 5, 6)}, want: map[int][]float32{2: y}})
	}

	// Losses.
	for _, bc := range [][2]int{{300, 10}, {7, 3}} {
		batch, classes := bc[0], bc[1]
		z := randVec(r, batch*classes, -4, 4)
		labels := zeros(batch * classes)
		for b := 0; b < batch; b++ {
			labels[b*classes+r.IntN(classes)] = 1
		}
		dz := zeros(len(z))
		loss := cpu.SoftmaxXent(z, labels, dz, batch, classes)
		addCase(gpuCase{name: "softmax_xent", k: softmaxXentKernel(batch, classes), in: [][]float32{z, labels, zeros(1), zeros(len(z))},
			want: map[int][]float32{2: {loss}, 3: dz}, tol: 1e-5})
		// One of 4 replicas' shares: loss and gradient divided by the
		// global batch, a quarter of the share's own mean.
		quarter := func(v []float32) []float32 {
			q := make([]float32, len(v))
			for i := range v {
				q[i] = v[i] / 4
			}
			return q
		}
		addCase(gpuCase{name: "softmax_xent_share", k: softmaxXentShareKernel(batch, classes, 4*batch), in: [][]float32{z, labels, zeros(1), zeros(len(z))},
			want: map[int][]float32{2: {loss / 4}, 3: quarter(dz)}, tol: 1e-5})
		// The rows in parallel (a share of 4), each row's loss the CPU's
		// loss of that row alone; then their sum, a quarter of the mean.
		rowLoss, one := make([]float32, batch), zeros(classes)
		var sum float64
		for b := range batch {
			rowLoss[b] = cpu.SoftmaxXent(z[b*classes:(b+1)*classes], labels[b*classes:(b+1)*classes], one, 1, classes)
			sum += float64(rowLoss[b])
		}
		addCase(gpuCase{name: "softmax_xent_rows", k: softmaxXentRowsKernel(batch, classes, 4*batch), in: [][]float32{z, labels, randVec(r, batch, 5, 6), zeros(len(z))},
			want: map[int][]float32{2: rowLoss, 3: quarter(dz)}, tol: 1e-5})
		addCase(gpuCase{name: "loss_sum", k: sumRowsKernel(batch, 1/float32(4*batch)), in: [][]float32{rowLoss, randVec(r, 1, 5, 6)},
			want: map[int][]float32{1: {float32(sum / float64(4*batch))}}, tol: 1e-5})
	}
	// Rows of labels all 0 (positions the loss ignores: padding tokens)
	// add no loss and get no gradient; the mean stays over every row. The
	// other rows' loss is rt/cpu's (a zero row adds 0·log p to it), their
	// gradient too; their row losses are those of the rows alone.
	for _, bc := range [][2]int{{300, 10}, {7, 3}} {
		batch, classes := bc[0], bc[1]
		z, labels := randVec(r, batch*classes, -4, 4), zeros(batch*classes)
		for b := 0; b < batch; b++ {
			if b%3 != 1 {
				labels[b*classes+r.IntN(classes)] = 1
			}
		}
		dz, rowLoss, one := zeros(len(z)), zeros(batch), zeros(classes)
		loss := cpu.SoftmaxXent(z, labels, dz, batch, classes)
		for b := 0; b < batch; b++ {
			if b%3 == 1 {
				clear(dz[b*classes : (b+1)*classes])
				continue
			}
			rowLoss[b] = cpu.SoftmaxXent(z[b*classes:(b+1)*classes], labels[b*classes:(b+1)*classes], one, 1, classes)
		}
		addCase(gpuCase{name: "softmax_xent_ignored", k: softmaxXentKernel(batch, classes), in: [][]float32{z, labels, zeros(1), randVec(r, len(z), 5, 6)},
			want: map[int][]float32{2: {loss}, 3: dz}, tol: 1e-5})
		addCase(gpuCase{name: "softmax_xent_rows_ignored", k: softmaxXentRowsKernel(batch, classes, batch), in: [][]float32{z, labels, randVec(r, batch, 5, 6), randVec(r, len(z), 5, 6)},
			want: map[int][]float32{2: rowLoss, 3: dz}, tol: 1e-5})
	}
	{
		n := 777
		p, tg := randVec(r, n, -2, 2), randVec(r, n, -2, 2)
		dp := zeros(n)
		loss := cpu.MSE(p, tg, dp, n)
		addCase(gpuCase{name: "mse", k: mseKernel(n), in: [][]float32{p, tg, zeros(1), zeros(n)}, want: map[int][]float32{2: {loss}, 3: dp}, tol: 1e-5})
		half := make([]float32, n)
		for i := range dp {
			half[i] = dp[i] / 2
		}
		addCase(gpuCase{name: "mse_share", k: mseShareKernel(n, 2*n), in: [][]float32{p, tg, zeros(1), zeros(n)}, want: map[int][]float32{2: {loss / 2}, 3: half}, tol: 1e-5})
		dp = zeros(n)
		loss = cpu.MAE(p, tg, dp, n)
		addCase(gpuCase{name: "mae", k: maeKernel(n), in: [][]float32{p, tg, zeros(1), zeros(n)}, want: map[int][]float32{2: {loss}, 3: dp}, tol: 1e-5})
		dp = zeros(n)
		loss = cpu.Huber(p, tg, dp, n, 0.7)
		addCase(gpuCase{name: "huber", k: huberKernel(n, 0.7), in: [][]float32{p, tg, zeros(1), zeros(n)}, want: map[int][]float32{2: {loss}, 3: dp}, tol: 1e-5})
	}

	// Dropout with the counter-based hash.
	{
		for n, stream := range map[int]uint32{1234: 0, 1236: DropoutStream("h0_projdrop")} {
			rate := float32(0.3)
			x := randVec(r, n, -1, 1)
			y, mask := zeros(n), zeros(n)
			kept := 0
			for i := range x {
				if gpuhost.DropoutUniform(42^stream, 7, uint32(i)) >= rate {
					mask[i] = 1 / (1 - rate)
					kept++
				}
				y[i] = x[i] * mask[i]
			}
			if kept < n/2 || kept > n*9/10 {
				t.Fatalf("gpuhost.DropoutUniform kept %d of %d at rate %g", kept, n, rate)
			}
			addCase(gpuCase{name: "dropout", k: dropoutKernel(n, rate, stream), in: [][]float32{argsVec(0.1, 7, 42), x, zeros(n), zeros(n)},
				want: map[int][]float32{2: y, 3: mask}})
			dy := randVec(r, n, -1, 1)
			dx := zeros(n)
			cpu.DropoutBwd(mask, dy, dx)
			addCase(gpuCase{name: "dropout_bwd", k: dropoutBwdKernel(n), in: [][]float32{mask, dy, zeros(n)}, want: map[int][]float32{2: dx}})
			addCase(gpuCase{name: "copy", k: copyKernel(n), in: [][]float32{x, zeros(n)}, want: map[int][]float32{1: x}})
		}
	}

	// Batch normalisation: training, evaluation, backward; a channel of
	// more values than a threadgroup of 1024 threads; float4 sweeps
	// (inner a multiple of 4) with whole rounds, a partial one, and fewer
	// float4s than a round's.
	for _, sh := range [][3]int{{6, 3, 50}, {300, 4, 1}, {40, 2, 64}, {16, 3, 1024}, {5, 2, 4}, {7, 3, 12}} {
		nb, c, sp := sh[0], sh[1], sh[2]
		n := nb * c * sp
		x, gamma, beta := randVec(r, n, -2, 3), randVec(r, c, 0.5, 1.5), randVec(r, c, -1, 1)
		rm, rv := randVec(r, c, -0.1, 0.1), randVec(r, c, 0.9, 1.1)
		wrm, wrv, y, sm, si := slices.Clone(rm), slices.Clone(rv), zeros(n), zeros(c), zeros(c)
		cpu.BatchNormFwd(x, gamma, beta, wrm, wrv, y, sm, si, nb, c, sp, 1e-5, 0.1, true)
		addCase(gpuCase{name: "batchnorm", k: batchNormKernel(nb, c, sp, 1e-5, 0.1, false),
			in:   [][]float32{x, gamma, beta, slices.Clone(rm), slices.Clone(rv), zeros(n), zeros(c), zeros(c)},
			want: map[int][]float32{3: wrm, 4: wrv, 5: y, 6: sm, 7: si}, tol: 1e-4})
		ye := zeros(n)
		cpu.BatchNormFwd(x, gamma, beta, rm, rv, ye, nil, nil, nb, c, sp, 1e-5, 0.1, false)
		addCase(gpuCase{name: "batchnorm_eval", k: batchNormEvalKernel(nb, c, sp, 1e-5, false),
			in: [][]float32{x, gamma, beta, rm, rv, zeros(n)}, want: map[int][]float32{5: ye}, tol: 1e-5})
		dy := randVec(r, n, -1, 1)
		dx, dg, dbt := zeros(n), zeros(c), zeros(c)
		cpu.BatchNormBwd(x, gamma, sm, si, dy, dx, dg, dbt, nb, c, sp)
		addCase(gpuCase{name: "batchnorm_bwd", k: batchNormBwdKernel(nb, c, sp, false),
			in:   [][]float32{x, gamma, sm, si, dy, zeros(n), zeros(c), zeros(c)},
			want: map[int][]float32{5: dx, 6: dg, 7: dbt}, tol: 1e-4})

		// with a fused ReLU (planner/fuse_norm_act.go): about half of
		// every channel masked, forward and backward
		yr := zeros(n)
		cpu.BatchNormReLUFwd(x, gamma, beta, slices.Clone(rm), slices.Clone(rv), yr, zeros(c), zeros(c), nb, c, sp, 1e-5, 0.1, true)
		if zs := countZeros(yr); zs < n/4 || zs > 3*n/4 {
			t.Fatalf("the fused ReLU's reference zeroed %d of %d values", zs, n)
		}
		addCase(gpuCase{name: "batchnorm_relu", k: batchNormKernel(nb, c, sp, 1e-5, 0.1, true),
			in:   [][]float32{x, gamma, beta, slices.Clone(rm), slices.Clone(rv), zeros(n), zeros(c), zeros(c)},
			want: map[int][]float32{3: wrm, 4: wrv, 5: yr, 6: sm, 7: si}, tol: 1e-4})
		yer := zeros(n)
		cpu.BatchNormReLUFwd(x, gamma, beta, rm, rv, yer, nil, nil, nb, c, sp, 1e-5, 0.1, false)
		addCase(gpuCase{name: "batchnorm_eval_relu", k: batchNormEvalKernel(nb, c, sp, 1e-5, true),
			in: [][]float32{x, gamma, beta, rm, rv, zeros(n)}, want: map[int][]float32{5: yer}, tol: 1e-5})
		dxr, dgr, dbr := zeros(n), zeros(c), zeros(c)
		cpu.BatchNormReLUBwd(x, gamma, beta, sm, si, dy, dxr, dgr, dbr, nb, c, sp)
		addCase(gpuCase{name: "batchnorm_bwd_relu", k: batchNormBwdKernel(nb, c, sp, true),
			in:   [][]float32{x, gamma, sm, si, dy, zeros(n), zeros(c), zeros(c), beta},
			want: map[int][]float32{5: dxr, 6: dgr, 7: dbr}, tol: 1e-4})
	}

	// Layer normalisation: rows shorter and longer than a threadgroup,
	// more rows than the parameter gradients' threadgroup strides over,
	// with and without a bias; backward with dx, with dx added into a
	// sum, and the parameter gradients alone.
	for _, sh := range []struct {
		rows, cols int
		bias       bool
	}{{6, 50, true}, {3, 300, false}, {40, 1, true}, {700, 3, true},
		// a GPT's rows (whole SIMD groups of float4s), rows of several
		// SIMD groups (float4s and not), and rows too long for registers
		{17, 384, false}, {16, 384, true}, {3, 2048, true}, {9, 1030, false}, {2, 8194, true}, {2, 32772, false}, {3000, 12, true}} {
		rows, cols := sh.rows, sh.cols
		n := rows * cols
		x, gamma, beta := randVec(r, n, -2, 3), randVec(r, cols, 0.5, 1.5), randVec(r, cols, -1, 1)
		y, sm, si := zeros(n), zeros(rows), zeros(rows)
		var b []float32
		in := [][]float32{x, gamma}
		if sh.bias {
			b = beta
			in = append(in, beta)
		}
		cpu.LayerNormFwd(x, gamma, b, y, sm, si, rows, cols, 1e-5)
		in = append(in, zeros(n), zeros(rows), zeros(rows))
		addCase(gpuCase{name: "layernorm", k: layerNormKernel(rows, cols, 1e-5, sh.bias), in: in,
			want: map[int][]float32{len(in) - 3: y, len(in) - 2: sm, len(in) - 1: si}, tol: 1e-4})
		dy := randVec(r, n, -1, 1)
		dx, dg, dbt := zeros(n), zeros(cols), zeros(cols)
		cpu.LayerNormBwd(x, gamma, sm, si, dy, dx, dg, dbt, rows, cols)
		addCase(gpuCase{name: "layernorm_bwd", k: layerNormBwdKernel(rows, cols),
			in: [][]float32{x, gamma, sm, si, dy, zeros(n)}, want: map[int][]float32{5: dx}, tol: 1e-4})
		// dx added into a gradient sum (Attr.AccumulateDx)
		sum := randVec(r, n, -1, 1)
		added := slices.Clone(sum)
		cpu.LayerNormBwdAdd(x, gamma, sm, si, dy, added, nil, nil, rows, cols)
		addCase(gpuCase{name: "layernorm_bwd_add", k: addingInto(layerNormBwdKernel(rows, cols), "dx"),
			in: [][]float32{x, gamma, sm, si, dy, sum}, want: map[int][]float32{5: added}, tol: 1e-4})
		addCase(gpuCase{name: "layernorm_bwd_params", k: layerNormParamGradKernel(rows, cols, true, sh.bias),
			in:   append([][]float32{x, sm, si, dy, zeros(cols)}, [][]float32{zeros(cols)}[:map[bool]int{true: 1}[sh.bias]]...),
			want: map[int][]float32{4: dg}, tol: 1e-4})
		if sh.bias {
			addCase(gpuCase{name: "layernorm_bwd_dbeta", k: layerNormParamGradKernel(rows, cols, false, true),
				in: [][]float32{x, sm, si, dy, zeros(cols)}, want: map[int][]float32{4: dbt}, tol: 1e-4})
		}
	}

	// Resizes and their backward against rt/cpu: nearest up by whole
	// factors, to sizes no factor gives and down; bilinear both ways of
	// corners, up, down, to one pixel. x and dx start as garbage (every
	// element must be written); a row of dx past a threadgroup (300 rows).
	for _, g := range []resizeGeom{
		{planes: 3, h: 4, w: 5, oh: 8, ow: 15},
		{planes: 2, h: 5, w: 7, oh: 7, ow: 3},
		{planes: 3, h: 4, w: 5, oh: 8, ow: 10, bilinear: true},
		{planes: 3, h: 4, w: 5, oh: 8, ow: 10, bilinear: true, align: true},
		{planes: 2, h: 5, w: 7, oh: 9, ow: 4, bilinear: true},
		{planes: 2, h: 5, w: 7, oh: 9, ow: 4, bilinear: true, align: true},
		{planes: 2, h: 5, w: 7, oh: 1, ow: 1, bilinear: true, align: true},
		{planes: 1, h: 300, w: 3, oh: 600, ow: 6, bilinear: true},
	} {
		rg := cpu.Resize{Planes: g.planes, H: g.h, W: g.w, OH: g.oh, OW: g.ow, Bilinear: g.bilinear, AlignCorners: g.align}
		n, on := g.planes*g.h*g.w, g.planes*g.oh*g.ow
		x, dy := randVec(r, n, -2, 2), randVec(r, on, -1, 1)
		y, dx := zeros(on), zeros(n)
		cpu.ResizeFwd(x, y, rg)
		cpu.ResizeBwd(dy, dx, rg)
		addCase(gpuCase{name: "resize", k: resizeKernel(g), in: [][]float32{x, randVec(r, on, 5, 6)}, want: map[int][]float32{1: y}, tol: 1e-5})
		addCase(gpuCase{name: "resize_bwd", k: resizeBwdKernel(g), in: [][]float32{dy, randVec(r, n, 5, 6)}, want: map[int][]float32{1: dx}, tol: 1e-5})
	}

	// Means over axes: the last, a middle one, two apart, all per sample.
	for _, c := range [][2][]int{{{3, 4, 5}, {3, 4, 1}}, {{3, 4, 5}, {3, 1, 5}}, {{2, 3, 4, 5}, {2, 1, 4, 1}}, {{2, 300, 3}, {2, 1, 1}}} {
		xS, yS := c[0], c[1]
		x, dy := randVec(r, prod(xS), -2, 2), randVec(r, prod(yS), -1, 1)
		y, dx := zeros(prod(yS)), zeros(prod(xS))
		cpu.ReduceMeanFwd(x, y, xS, yS)
		cpu.ReduceMeanBwd(dy, dx, xS, yS)
		addCase(gpuCase{name: "reducemean", k: must(reduceMeanKernel(xS, yS)), in: [][]float32{x, zeros(len(y))}, want: map[int][]float32{1: y}, tol: 1e-5})
		addCase(gpuCase{name: "reducemean_bwd", k: must(reduceMeanBwdKernel(xS, yS)), in: [][]float32{dy, zeros(len(dx))}, want: map[int][]float32{1: dx}})
	}

	// Layout kernels.
	{
		// Transposes: tiled (the last axis moves) on matrices smaller and
		// larger than a tile and not multiples of it, several matrices,
		// axes of size 1 and axes that merge; copies of runs (the last
		// axis stays) four at a time and one at a time.
		for _, tc := range []struct {
			shape, perm []int
			vec4        bool
		}{
			{[]int{2, 3, 4, 5}, []int{0, 2, 3, 1}, false},
			{[]int{3, 70, 2, 5}, []int{0, 2, 3, 1}, true}, // the GPT's key transpose: [3, 70, 10] → [3, 10, 70]
			{[]int{2, 5, 3, 33}, []int{0, 2, 3, 1}, true},
			{[]int{45, 1, 37}, []int{2, 1, 0}, true},
			{[]int{2, 64, 32}, []int{0, 2, 1}, true}, // whole tiles
			{[]int{64, 40}, []int{1, 0}, true},       // whole along A only
			{[]int{40, 64}, []int{1, 0}, true},       // whole along B only
			{[]int{2, 3, 4, 5, 6}, []int{4, 1, 3, 0, 2}, true},
			{[]int{1, 1, 7}, []int{2, 0, 1}, true},
			{[]int{1, 1, 1}, []int{1, 2, 0}, true},
			{[]int{5, 6, 8}, []int{1, 0, 2}, true}, // a head split: runs of 8, four at a time
			{[]int{5, 6, 8}, []int{1, 0, 2}, false},
			{[]int{5, 6, 7}, []int{1, 0, 2}, true}, // runs of 7: one at a time
		} {
			x := randVec(r, prod(tc.shape), -1, 1)
			y := zeros(len(x))
			cpu.Transpose(x, y, tc.shape, tc.perm)
			addCase(gpuCase{name: fmt.Sprintf("transpose%d", len(cs)), k: must(transposeKernelVec(tc.shape, tc.perm, tc.vec4)),
				in: [][]float32{x, randVec(r, len(x), 5, 6)}, want: map[int][]float32{1: y}, tol: 1e-30})
		}

		shapes := [][]int{{2, 3, 4}, {2, 5, 4}}
		xs := [][]float32{randVec(r, 24, -1, 1), randVec(r, 40, -1, 1)}
		cat := zeros(64)
		cpu.ConcatFwd(xs, cat, shapes, 1)
		// Both slices land in one buffer: chain the second copy's input on
		// the first one's expected output.
		first := zeros(64)
		cpu.ConcatFwd([][]float32{xs[0], zeros(40)}, first, shapes, 1)
		addCase(gpuCase{name: "concat0", k: sliceCopyKernel(2, 3, 4, 8, 0, true), in: [][]float32{xs[0], zeros(64)}, want: map[int][]float32{1: first}})
		addCase(gpuCase{name: "concat1", k: sliceCopyKernel(2, 5, 4, 8, 3, true), in: [][]float32{xs[1], first}, want: map[int][]float32{1: cat}})
		dxs := [][]float32{zeros(24), zeros(40)}
		dcat := randVec(r, 64, -1, 1)
		cpu.ConcatBwd(dcat, dxs, shapes, 1)
		addCase(gpuCase{name: "split0", k: sliceCopyKernel(2, 3, 4, 8, 0, false), in: [][]float32{dcat, zeros(24)}, want: map[int][]float32{1: dxs[0]}})
		addCase(gpuCase{name: "split1", k: sliceCopyKernel(2, 5, 4, 8, 3, false), in: [][]float32{dcat, zeros(40)}, want: map[int][]float32{1: dxs[1]}})

		// slice and its backward against rt/cpu: positions 2 to 6 of the
		// middle axis of [3, 9, 5] (a channel split's piece); dx starts as
		// garbage, so every element must be written.
		{
			outer, total, inner, start, n := 3, 9, 5, 2, 5
			x, dy := randVec(r, outer*total*inner, -1, 1), randVec(r, outer*n*inner, -1, 1)
			y, dx := zeros(len(dy)), zeros(len(x))
			cpu.SliceFwd(x, y, outer, total, inner, start, n)
			cpu.SliceBwd(dy, dx, outer, total, inner, start, n)
			addCase(gpuCase{name: "slice", k: sliceCopyKernel(outer, n, inner, total, start, false), in: [][]float32{x, randVec(r, len(y), 5, 6)}, want: map[int][]float32{1: y}})
			addCase(gpuCase{name: "slice_bwd", k: slicePadKernel(outer, n, inner, total, start), in: [][]float32{dy, randVec(r, len(dx), 5, 6)}, want: map[int][]float32{1: dx}})
		}

		a, b := randVec(r, 500, -1, 1), randVec(r, 500, -1, 1)
		sum := zeros(500)
		cpu.Add(a, b, sum)
		addCase(gpuCase{name: "accumulate", k: accumulateKernel(500), in: [][]float32{a, b, zeros(500)}, want: map[int][]float32{2: sum}})
		addCase(gpuCase{name: "accumulate_odd", k: accumulateKernel(499), in: [][]float32{a, b, zeros(500)}, want: map[int][]float32{2: append(slices.Clone(sum[:499]), 0)}})
		mean := make([]float32, 500)
		for i := range sum {
			mean[i] = sum[i] * 0.25
		}
		addCase(gpuCase{name: "grad_mean", k: gradMeanKernel(500, 0.25), in: [][]float32{slices.Clone(sum), randVec(r, 500, 5, 6)}, want: map[int][]float32{0: zeros(500), 1: mean}})
	}

	// Optimizers, a few steps each so that the moments and the bias
	// correction are exercised at step > 1.
	{
		n := 999
		g, p, vel := randVec(r, n, -1, 1), randVec(r, n, -1, 1), randVec(r, n, -0.1, 0.1)
		wp, wv := slices.Clone(p), slices.Clone(vel)
		cpu.SGD(wp, g, wv, 0.05, 0.9, 1e-3)
		addCase(gpuCase{name: "sgd", k: sgdKernel(n, 0.9, 1e-3), in: [][]float32{argsVec(0.05, 3, 0), g, slices.Clone(vel), slices.Clone(p)},
			want: map[int][]float32{2: wv, 3: wp}})
		wp0 := slices.Clone(p)
		cpu.SGD(wp0, g, nil, 0.05, 0, 0)
		addCase(gpuCase{name: "sgd_plain", k: sgdKernel(n, 0, 0), in: [][]float32{argsVec(0.05, 3, 0), g, slices.Clone(p)},
			want: map[int][]float32{2: wp0}})
		for _, decoupled := range []bool{false, true} {
			m, v := randVec(r, n, -0.1, 0.1), randVec(r, n, 0, 0.01)
			wp, wm, wv := slices.Clone(p), slices.Clone(m), slices.Clone(v)
			cpu.Adam(wp, g, wm, wv, 1e-3, 0.9, 0.999, 1e-8, 0.01, 5, decoupled)
			addCase(gpuCase{name: "adam", k: adamKernel(n, 0.9, 0.999, 1e-8, 0.01, decoupled),
				in:   [][]float32{argsVec(1e-3, 5, 0), g, slices.Clone(m), slices.Clone(v), slices.Clone(p)},
				want: map[int][]float32{2: wm, 3: wv, 4: wp}, tol: 1e-5})
		}
	}
	// Multi-tensor Adam: three tensors (one shorter than a threadgroup, one
	// just over two), each against cpu.Adam, each with its own weight decay
	// (AdamW decays a weight, not its bias nor a norm's gain).
	for _, decoupled := range []bool{false, true} {
		sizes := []int{300, 5, 513}
		decays := []float32{0.01, 0, 0.1}
		in := [][]float32{argsVec(1e-3, 7, 0)}
		want := map[int][]float32{}
		for j, n := range sizes {
			g, m, v, p := randVec(r, n, -1, 1), randVec(r, n, -0.1, 0.1), randVec(r, n, 0, 0.01), randVec(r, n, -1, 1)
			wp, wm, wv := slices.Clone(p), slices.Clone(m), slices.Clone(v)
			cpu.Adam(wp, g, wm, wv, 1e-3, 0.9, 0.999, 1e-8, decays[j], 7, decoupled)
			in = append(in, g, m, v, p)
			want[1+4*j+1], want[1+4*j+2], want[1+4*j+3] = wm, wv, wp
		}
		addCase(gpuCase{name: "adam_multi", k: adamMultiKernel(sizes, decays, 0.9, 0.999, 1e-8, decoupled), in: in, want: want, tol: 1e-5})
	}
	// Multi-tensor SGD, with momentum and without: the same three tensors,
	// each against cpu.SGD with its own weight decay.
	for _, momentum := range []float32{0.9, 0} {
		sizes := []int{300, 5, 513}
		decays := []float32{5e-4, 0, 0.1}
		in := [][]float32{argsVec(0.05, 3, 0)}
		want := map[int][]float32{}
		for j, n := range sizes {
			g, vel, p := randVec(r, n, -1, 1), randVec(r, n, -0.1, 0.1), randVec(r, n, -1, 1)
			wp, wv := slices.Clone(p), slices.Clone(vel)
			cpu.SGD(wp, g, wv, 0.05, momentum, decays[j])
			in = append(in, g)
			if momentum != 0 {
				in = append(in, vel)
				want[len(in)-1] = wv
			}
			in = append(in, p)
			want[len(in)-1] = wp
		}
		addCase(gpuCase{name: "sgd_multi", k: sgdMultiKernel(sizes, decays, momentum), in: in, want: want, tol: 1e-6})
	}
	// Clipping by the global norm: the sums of squares, the scale and the
	// scaled gradients of its three kernels, each against cpu.ClipGradNorm
	// (one gradient over a threadgroup of 1024, one shorter than it).
	for _, clip := range []float32{0.5, 1e6} {
		sizes := []int{3000, 5, 1025}
		var grads, want [][]float32
		for _, n := range sizes {
			g := randVec(r, n, -0.1, 0.1)
			grads, want = append(grads, g), append(want, slices.Clone(g))
		}
		sums := make([]float32, len(sizes)+1)
		cpu.ClipGradNorm(want, clip, sums)
		if clip == 0.5 && !(sums[len(sizes)] < 0.9) {
			t.Fatalf("clipping case: scale %v, want well below 1", sums[len(sizes)])
		}
		in := append(slices.Clone(grads), make([]float32, len(sizes)))
		addCase(gpuCase{name: "grad_sumsq", k: gradSumSqKernel(sizes), in: in,
			want: map[int][]float32{len(sizes): sums[:len(sizes)]}, tol: 1e-5})
		addCase(gpuCase{name: "clip_scale", k: clipScaleKernel(len(sizes), clip), in: [][]float32{append(slices.Clone(sums[:len(sizes)]), 0)},
			want: map[int][]float32{0: sums}, tol: 1e-6})
		in = [][]float32{{sums[len(sizes)]}}
		w := map[int][]float32{}
		for j := range sizes {
			in = append(in, slices.Clone(grads[j]))
			w[1+j] = want[j]
		}
		addCase(gpuCase{name: "grad_scale", k: gradScaleKernel(sizes), in: in, want: w, tol: 1e-6})
	}
	// The embedding's gather and backward (lower_embedding_test.go), so
	// that the CUDA check on a real GPU runs them too.
	for _, c := range embeddingCases(t) {
		addCase(c)
	}
	// The KV-cache decode's kernels (lower_decode_test.go).
	for _, c := range decodeCases(t) {
		addCase(c)
	}
	return cs
}

// TestKernelsOnCPU compiles every generated kernel in the Metal dialect as
// C++ with g++ through the shims in testdata/shim and runs it over its
// whole grid against the CPU reference. The CUDA dialect's twin is
// TestCUDACheckOnCPU: the same cases, printed by the CUDA dialect, with
// the same tolerances and measure, built by g++ and compared by the
// driver that `make cuda-check` runs on a GPU. (This test ran them in the
// CUDA dialect too, which built and ran the same kernels a second time:
// the largest g++ build of emit/gpu's tests.)
func TestKernelsOnCPU(t *testing.T) {
	cases := kernelCases(t)
	t.Run(Metal.Name, func(t *testing.T) {
		checkCases(t, Metal, cases, runCases(t, Metal, cases))
	})
}

// reluOf is max(x, 0) elementwise: a relu's output, with many zeros.
func reluOf(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = max(v, 0)
	}
	return y
}

// ceilPoolSize is the output size of an undilated pool window rounding up
// (PyTorch's ceil_mode): a partial last window is kept unless it would
// start in the trailing padding or beyond.
func ceilPoolSize(in, k, s, p int) int {
	out := (in+2*p-k+s-1)/s + 1
	if (out-1)*s >= in+p {
		out--
	}
	return out
}
