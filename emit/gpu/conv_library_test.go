package gpu

import (
	"math"
	"slices"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

// refConv runs a library convolution on the arena by the conformance
// suite's float64 reference (gpuhosttest.ConvReference): the product's
// output = Alpha·product + Beta·output, the output not read when Beta is
// 0 (as cuDNN does).
func refConv(t *testing.T, c *Conv, arena [][]float32) {
	t.Helper()
	g := c.Geom
	x, w, y := arena[c.X.Buf][c.X.Offset:][:c.X.Size], arena[c.W.Buf][c.W.Offset:][:c.W.Size], arena[c.Y.Buf][c.Y.Offset:][:c.Y.Size]
	products := map[string]gpuhost.ConvProduct{ConvForward: gpuhost.ConvForward, ConvInputGrad: gpuhost.ConvInputGrad, ConvWeightGrad: gpuhost.ConvWeightGrad}
	outs := map[string][]float32{ConvForward: y, ConvInputGrad: x, ConvWeightGrad: w}
	p, ok := products[c.Product]
	if !ok {
		t.Fatalf("a convolution of product %q", c.Product)
	}
	geom := gpuhost.ConvGeom{N: g.N, C: g.C, H: g.H, W: g.W, OC: g.OC, KH: g.KH, KW: g.KW, PH: g.PH, PW: g.PW,
		SH: g.SH, SW: g.SW, DH: g.DH, DW: g.DW, Groups: g.Groups, OH: g.OH, OW: g.OW}
	copy(outs[c.Product], gpuhosttest.ConvReference(geom, p, x, w, y, c.Alpha, c.Beta, 0))
}

// TestLoweredLibraryConvMatchesCPU lowers convolution layers whose method
// is the library's (ConvLibraryMethod), with no workspace, runs their ops
// (kernels through the dialect's g++ shim, each Conv by refConv) and
// compares y, dx, dW and db with rt/cpu's. The forward is one Conv and a
// bias_act launch where the layer has a bias or an activation; the
// backward one Conv per gradient it writes.
func TestLoweredLibraryConvMatchesCPU(t *testing.T) {
	grouped := withOutputSize(planner.ConvGeom{N: 5, C: 4, H: 9, W: 8, OC: 6, KH: 3, KW: 2, SH: 2, SW: 2, PH: 1, PW: 1, DH: 2, DW: 1, Groups: 2})
	plain := withOutputSize(planner.ConvGeom{N: 3, C: 3, H: 6, W: 5, OC: 4, KH: 3, KW: 3, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1})
	cases := []convLayerCase{
		{name: "grouped", g: grouped, bias: true, act: "leakyrelu", alpha: 0.1, dx: true, scratch: 1},
		{name: "plain", g: plain, scratch: 1},
		{name: "relu_no_bias", g: plain, act: "relu", dx: true, scratch: 1},
	}
	p, bufs := convLayerPlan(cases)
	for i := range cases {
		for _, st := range []*planner.Step{&p.Forward[i], &p.Backward[i]} {
			st.Attr.Method = ConvLibraryMethod
		}
		p.Forward[i].Out[1], p.Backward[i].In[4] = planner.NoBuf, planner.NoBuf
	}
	initial := convLayerArena(p, bufs, 11)
	prog, err := Lower(p, CUDA)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var convs, launches, gemms int
		for _, op := range append(append([]Op(nil), prog.ForwardSteps[i]...), prog.BackwardSteps[i]...) {
			switch {
			case op.Conv != nil:
				convs++
				if op.Conv.Precision != "" {
					t.Errorf("%s: a convolution in precision %q in an f32 plan", c.name, op.Conv.Precision)
				}
			case op.Gemm != nil:
				gemms++
			default:
				launches++
			}
		}
		wantConvs, wantLaunches := 2, 0
		if c.dx {
			wantConvs++
		}
		if c.bias || c.act != "" {
			wantLaunches++ // bias_act
		}
		if c.act != "" {
			wantLaunches++ // act_bwd
		}
		if c.bias {
			wantLaunches++ // bias_grad
		}
		if convs != wantConvs || launches != wantLaunches || gemms != 0 {
			t.Errorf("%s: %d convolutions, %d launches, %d GEMMs; want %d, %d, 0", c.name, convs, launches, gemms, wantConvs, wantLaunches)
		}
	}
	arena := runConvLayers(t, CUDA, prog, initial)
	for _, c := range cases {
		lb := bufs[indexOfCase(cases, c.name)]
		y, dx, dw, db := convLayerReference(t, c, lb, initial)
		closeTo(t, c.name+" y", arena[lb.y], y)
		closeTo(t, c.name+" dW", arena[lb.dw], dw)
		if dx != nil {
			closeTo(t, c.name+" dx", arena[lb.dx], dx)
		}
		if db != nil {
			closeTo(t, c.name+" db", arena[lb.db], db)
		}
	}
	// A tf32 step's Convs carry its precision; a bf16 one is refused.
	for i := range cases {
		p.Forward[i].Attr.Precision, p.Backward[i].Attr.Precision = planner.PrecisionTF32, planner.PrecisionTF32
	}
	prog, err = Lower(p, CUDA)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range prog.Forward {
		if op.Conv != nil && op.Conv.Precision != planner.PrecisionTF32 {
			t.Errorf("a tf32 step's convolution in precision %q", op.Conv.Precision)
		}
	}
	p.Forward[0].Attr.Precision = planner.PrecisionBF16
	if _, err := Lower(p, CUDA); err == nil {
		t.Error("a bf16 library convolution was lowered; want an error")
	}
}

func indexOfCase(cases []convLayerCase, name string) int {
	for i, c := range cases {
		if c.name == name {
			return i
		}
	}
	return -1
}

// closeTo fails when got differs from want by more than 1e-4 relative
// (NaN never passes).
func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	worst, at := 0.0, 0
	for i := range want {
		e := math.Abs(float64(got[i])-float64(want[i])) / (1 + math.Abs(float64(want[i])))
		if math.IsNaN(float64(got[i])) {
			e = math.Inf(1)
		}
		if e > worst {
			worst, at = e, i
		}
	}
	if worst > 1e-4 {
		t.Errorf("%s[%d] = %g, rt/cpu has %g (relative error %.3g)", what, at, got[at], want[at], worst)
	}
}

// TestFilterOrder runs filterOrderKernel both ways in both dialects on
// the CPU, on filters with groups and 1×1 taps: KRSC element
// ((o·KH + kh)·KW + kw)·C/G + c holds KCRS element ((o·C/G + c)·KH +
// kh)·KW + kw, and the way back restores the KCRS filter.
func TestFilterOrder(t *testing.T) {
	for _, g := range []planner.ConvGeom{{N: 1, C: 6, H: 5, W: 5, OC: 4, KH: 3, KW: 2, Groups: 2}, {N: 1, C: 3, H: 5, W: 5, OC: 5, KH: 1, KW: 1, Groups: 1}} {
		cg := g.C / g.Groups
		n := g.OC * cg * g.KH * g.KW
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(i + 1)
		}
		want := make([]float32, n)
		for o := range g.OC {
			for c := range cg {
				for kh := range g.KH {
					for kw := range g.KW {
						want[((o*g.KH+kh)*g.KW+kw)*cg+c] = w[((o*cg+c)*g.KH+kh)*g.KW+kw]
					}
				}
			}
		}
		for _, d := range []*Dialect{CUDA, Metal} {
			res := runCases(t, d, []gpuCase{{name: "krsc", k: filterOrderKernel(g, true), in: [][]float32{w, zeros(n)}},
				{name: "kcrs", k: filterOrderKernel(g, false), in: [][]float32{want, zeros(n)}}})
			for i := range want {
				if res[0][1][i] != want[i] || res[1][1][i] != w[i] {
					t.Fatalf("%s %+v: KRSC[%d] = %v (want %v), back KCRS[%d] = %v (want %v)", d.Name, g, i, res[0][1][i], want[i], i, res[1][1][i], w[i])
				}
			}
		}
	}
}

// TestSampleKernel runs sampleKernel in both dialects on the CPU: the
// copy of a channels-last x's pixels that 1×1 windows of strides 2 and
// (3, 2) read, on odd image sides, with channels a multiple of 4 (four
// a thread) and not, against a plain loop; and SampledConv takes only
// strided 1×1 windows without padding.
func TestSampleKernel(t *testing.T) {
	for _, g := range []planner.ConvGeom{
		{N: 2, C: 8, H: 7, W: 5, OC: 3, OH: 4, OW: 3, KH: 1, KW: 1, SH: 2, SW: 2, Groups: 1},
		{N: 3, C: 6, H: 9, W: 6, OC: 3, OH: 3, OW: 3, KH: 1, KW: 1, SH: 3, SW: 2, Groups: 1},
	} {
		if !SampledConv(g) {
			t.Fatalf("%v: SampledConv refuses a strided 1×1 window", g)
		}
		x := make([]float32, g.N*g.H*g.W*g.C)
		for i := range x {
			x[i] = float32(i)
		}
		var want []float32
		for n := 0; n < g.N; n++ {
			for i := 0; i < g.OH; i++ {
				for j := 0; j < g.OW; j++ {
					at := ((n*g.H+i*g.SH)*g.W + j*g.SW) * g.C
					want = append(want, x[at:at+g.C]...)
				}
			}
		}
		for _, d := range []*Dialect{CUDA, Metal} {
			res := runCases(t, d, []gpuCase{{name: "sample", k: sampleKernel(g), in: [][]float32{x, zeros(len(want))}}})
			if got := res[0][1]; !slices.Equal(got, want) {
				t.Errorf("%s %v: sampled %v, want %v", d.Name, g, got, want)
			}
		}
	}
	for _, g := range []planner.ConvGeom{
		{N: 1, C: 4, H: 8, W: 8, OC: 4, OH: 8, OW: 8, KH: 1, KW: 1, SH: 1, SW: 1, Groups: 1},
		{N: 1, C: 4, H: 8, W: 8, OC: 4, OH: 4, OW: 4, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, Groups: 1},
		{N: 1, C: 4, H: 8, W: 8, OC: 4, OH: 5, OW: 5, KH: 1, KW: 1, SH: 2, SW: 2, PH: 1, PW: 1, Groups: 1},
	} {
		if SampledConv(g) {
			t.Errorf("%v: SampledConv takes it", g)
		}
	}
}
