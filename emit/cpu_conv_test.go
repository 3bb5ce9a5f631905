package emit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/cpu"
)

type (
	convFwdKernel func(x, w, b, y []float32, g cpu.Conv, act cpu.Act, alpha float32)
	convBwdKernel func(x, w, y, dy, dx, dw, db []float32, g cpu.Conv, act cpu.Act, alpha float32)
)

// rtConvKernels are the rt/cpu functions behind the names the CPU emitter
// writes: the test fails to build when one is renamed, and fails when the
// emitter names a kernel missing here.
var (
	rtConvFwd = map[string]convFwdKernel{"Conv2DDirectFwd": cpu.Conv2DDirectFwd, "Conv2DIm2colFwd": cpu.Conv2DIm2colFwd, "Conv2DWinogradF4Fwd": cpu.Conv2DWinogradF4Fwd, "Conv2DWinograd3Fwd": cpu.Conv2DWinograd3Fwd, "Conv2DPointwiseFwd": cpu.Conv2DPointwiseFwd, "Conv2DDepthwiseFwd": cpu.Conv2DDepthwiseFwd, "Conv2DPhaseFwd": cpu.Conv2DPhaseFwd, "Conv2DGroupedFwd": cpu.Conv2DGroupedFwd}
	rtConvBwd = map[string]convBwdKernel{"Conv2DDirectBwd": cpu.Conv2DDirectBwd, "Conv2DIm2colBwd": cpu.Conv2DIm2colBwd, "Conv2DWinogradF4Bwd": cpu.Conv2DWinogradF4Bwd, "Conv2DWinograd3Bwd": cpu.Conv2DWinograd3Bwd, "Conv2DPointwiseBwd": cpu.Conv2DPointwiseBwd, "Conv2DDepthwiseBwd": cpu.Conv2DDepthwiseBwd}
)

// TestCPUConvRuleMatchesKernels ties the planner's CPU rule to rt/cpu:
// on every geometry, in every pass, the kernel the emitter calls for the
// method the rule chooses accepts the geometry (the direct kernels panic
// on one they do not compute) and gives what im2col + GEMM gives, which
// takes every geometry.
func TestCPUConvRuleMatchesKernels(t *testing.T) {
	for method, k := range cpuConvKernels {
		if rtConvFwd[k.fwd] == nil || k.bwd != "" && rtConvBwd[k.bwd] == nil {
			t.Fatalf("method %s: the emitter calls cpu.%s and cpu.%s, not both known to this test", method, k.fwd, k.bwd)
		}
	}
	geom := func(n, c, h, w, oc, kh, kw, sh, sw, ph, pw, d, groups int) planner.ConvGeom {
		return planner.ConvGeom{N: n, C: c, H: h, W: w, OC: oc,
			OH: (h+2*ph-d*(kh-1)-1)/sh + 1, OW: (w+2*pw-d*(kw-1)-1)/sw + 1,
			KH: kh, KW: kw, SH: sh, SW: sw, PH: ph, PW: pw, DH: d, DW: d, Groups: groups}
	}
	r := rand.New(rand.NewPCG(3, 0x5eed))
	seen := map[string]bool{}
	for _, c := range []struct {
		name string
		g    planner.ConvGeom
	}{
		{"mnist conv1 5x5 pad 2", geom(3, 1, 12, 12, 4, 5, 5, 1, 1, 2, 2, 1, 1)},
		{"3x3 stride 2", geom(2, 3, 9, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1)},
		{"stride 2 across only", geom(2, 2, 7, 9, 3, 3, 3, 1, 2, 1, 1, 1, 1)},
		{"1x1 pad 1", geom(2, 3, 5, 4, 4, 1, 1, 1, 1, 1, 1, 1, 1)},
		{"1x1", geom(3, 5, 6, 7, 4, 1, 1, 1, 1, 0, 0, 1, 1)},
		{"1x1 groups 2", geom(2, 4, 5, 3, 6, 1, 1, 1, 1, 0, 0, 1, 2)},
		{"depthwise 3x3 stride 2", geom(2, 6, 9, 9, 6, 3, 3, 2, 2, 1, 1, 1, 6)},
		{"depthwise 5x5 stride 2 across", geom(2, 5, 12, 20, 5, 5, 5, 1, 2, 2, 2, 1, 5)},
		{"depthwise 3x3", geom(2, 5, 8, 9, 5, 3, 3, 1, 1, 1, 1, 1, 5)},
		{"3x3 dilation 2 pad 5", geom(2, 2, 9, 9, 2, 3, 3, 1, 1, 5, 5, 2, 1)},
		{"groups 2 pad 0x2", geom(2, 4, 6, 6, 6, 3, 5, 1, 1, 0, 2, 1, 2)},
		{"16 to 32 5x5, 1024 tiles", geom(4, 16, 32, 32, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
		{"32 to 32 5x5 pad 1, 1024 tiles", geom(4, 32, 33, 33, 32, 5, 5, 1, 1, 1, 1, 1, 1)},
		{"7x7 stride 2 pad 3 (a stem)", geom(2, 3, 19, 20, 8, 7, 7, 2, 2, 3, 3, 1, 1)},
		{"2x2 stride 2", geom(2, 4, 9, 8, 5, 2, 2, 2, 2, 0, 0, 1, 1)},
		{"groups 3 stride 2 (regnet's)", geom(2, 12, 9, 9, 12, 3, 3, 2, 2, 1, 1, 1, 3)},
		{"64 to 64 3x3 pad 1, 256 tiles", geom(4, 64, 32, 30, 64, 3, 3, 1, 1, 1, 1, 1, 1)},
	} {
		g := c.g
		cg := cpu.Conv{N: g.N, C: g.C, H: g.H, W: g.W, OC: g.OC, OH: g.OH, OW: g.OW, KH: g.KH, KW: g.KW,
			SH: g.SH, SW: g.SW, PH: g.PH, PW: g.PW, DH: g.DH, DW: g.DW, Groups: g.Groups}
		rnd := func(n int) []float32 {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(r.Float64()*2 - 1)
			}
			return s
		}
		x, w, b := rnd(g.N*g.C*g.H*g.W), rnd(g.OC*g.C/g.Groups*g.KH*g.KW), rnd(g.OC)
		ny := g.N * g.OC * g.OH * g.OW
		dy := rnd(ny)
		ref := cpuConvKernels[planner.ConvIm2colGemm]

		for _, pass := range []planner.ConvPass{planner.ConvForward, planner.ConvBackward, planner.ConvBackwardNoDx} {
			choice := planner.CPU.Conv(g, pass)
			k, ok := cpuConvKernels[choice.Method]
			if pass != planner.ConvForward && k.bwd == "" {
				ok = false
			}
			if !ok || choice.Scratch != 0 {
				t.Errorf("%s, %s: the CPU rule chose %+v, which the CPU emitter has no scratch-free kernel for", c.name, pass, choice)
				continue
			}
			seen[choice.Method] = true
			name := fmt.Sprintf("%s, %s by %s", c.name, pass, choice.Method)
			y, want := make([]float32, ny), make([]float32, ny)
			if !runs(t, name, func() { rtConvFwd[k.fwd](x, w, b, y, cg, cpu.ActTanh, 0) }) {
				continue
			}
			rtConvFwd[ref.fwd](x, w, b, want, cg, cpu.ActTanh, 0)
			cmp := compare
			if choice.Method == planner.ConvWinograd || choice.Method == planner.ConvWinogradF4 || choice.Method == planner.ConvWinograd3 {
				cmp = nil // compareScaled, see below
			}
			if pass == planner.ConvForward {
				if cmp == nil {
					// Winograd's error is bounded by the scale of the
					// pre-activation, which tanh (slope at most 1) may
					// squeeze far below it.
					pre := make([]float32, ny)
					rtConvFwd[ref.fwd](x, w, b, pre, cg, cpu.ActNone, 0)
					compareScaledTo(t, name+": y", y, want, maxAbsF(pre))
					continue
				}
				cmp(t, name+": y", y, want)
				continue
			}
			if cmp == nil {
				cmp = compareScaled
			}
			grads := func(fn convBwdKernel) [][]float32 {
				var dx []float32
				if pass == planner.ConvBackward {
					dx = make([]float32, len(x))
				}
				dw, db := make([]float32, len(w)), make([]float32, len(b))
				fn(x, w, want, append([]float32(nil), dy...), dx, dw, db, cg, cpu.ActTanh, 0)
				return [][]float32{dx, dw, db}
			}
			var got [][]float32
			if !runs(t, name, func() { got = grads(rtConvBwd[k.bwd]) }) {
				continue
			}
			for i, wantGrad := range grads(rtConvBwd[ref.bwd]) {
				cmp(t, name+": "+[]string{"dx", "dw", "db"}[i], got[i], wantGrad)
			}
		}
	}
	for method := range cpuConvKernels {
		if !seen[method] {
			t.Errorf("no geometry made the CPU rule choose %s", method)
		}
	}
}

// runs calls f and reports a panic as a test error.
func runs(t *testing.T, name string, f func()) (ok bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: the kernel refused the geometry the rule chose it for: %v", name, r)
			ok = false
		}
	}()
	f()
	return true
}

// compare reports where got and want differ by more than float32 sums of
// these sizes round to.
func compare(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > 1e-4*math.Max(1, math.Abs(float64(want[i]))) || math.IsNaN(float64(got[i])) {
			t.Errorf("%s: element %d = %g, want %g", name, i, got[i], want[i])
			return
		}
	}
}

// compareScaled is compare for Winograd, whose error is bounded relative
// to the scale of the whole output (rt/cpu's TestConvWinograd*), not of
// each element.
func compareScaled(t *testing.T, name string, got, want []float32) {
	t.Helper()
	compareScaledTo(t, name, got, want, maxAbsF(want))
}

// maxAbsF is the largest |v| of s.
func maxAbsF(s []float32) float64 {
	var m float64
	for _, v := range s {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// compareScaledTo is compareScaled with the scale given (at least 1).
func compareScaledTo(t *testing.T, name string, got, want []float32, scale float64) {
	t.Helper()
	scale = math.Max(scale, 1)
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > 1e-4*scale || math.IsNaN(float64(got[i])) {
			t.Errorf("%s: element %d = %g, want %g (output scale %g)", name, i, got[i], want[i], scale)
			return
		}
	}
}

// TestBackendTargets: every backend plans with a rule of its own, named
// after it, that gives every convolution a method.
func TestBackendTargets(t *testing.T) {
	g := planner.ConvGeom{N: 2, C: 3, H: 8, W: 8, OC: 4, OH: 8, OW: 8, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}
	for _, b := range Backends {
		if b.Target.Name != b.Name || b.Target.Conv == nil {
			t.Errorf("backend %s plans for target %q (rule set: %v)", b.Name, b.Target.Name, b.Target.Conv != nil)
			continue
		}
		if o := b.PlanOptions(planner.Options{}); o.Target.Name != b.Name {
			t.Errorf("backend %s: PlanOptions sets target %q", b.Name, o.Target.Name)
		}
		if c := b.Target.Conv(g, planner.ConvForward); c.Method == "" || c.Scratch < 0 {
			t.Errorf("backend %s: a 3x3 convolution gets %+v", b.Name, c)
		}
	}
}

// TestCPUReferenceAvoidsWinograd: a GPU step's CPU reference runs the
// direct method (or im2col past its padding) where the CPU itself would
// run Winograd, so the reference adds no Winograd rounding error.
func TestCPUReferenceAvoidsWinograd(t *testing.T) {
	g := planner.ConvGeom{N: 250, C: 32, H: 14, W: 14, OC: 64, OH: 14, OW: 14, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1}
	wide := g
	wide.PH, wide.PW, wide.OH, wide.OW = 5, 5, 20, 20
	g3 := planner.ConvGeom{N: 32, C: 64, H: 56, W: 56, OC: 64, OH: 56, OW: 56, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}
	for _, c := range []struct {
		g        planner.ConvGeom
		fwd, bwd string
	}{{g, "Conv2DDirectFwd", "Conv2DDirectBwd"}, {wide, "Conv2DIm2colFwd", "Conv2DIm2colBwd"}, {g3, "Conv2DDirectFwd", "Conv2DDirectBwd"}} {
		if m := planner.CPU.Conv(c.g, planner.ConvForward).Method; m != planner.ConvWinogradF4 && m != planner.ConvWinograd3 {
			t.Fatalf("the CPU rule chooses %q for %+v; the test wants a Winograd geometry", m, c.g)
		}
		for _, pass := range []planner.ConvPass{planner.ConvForward, planner.ConvBackward} {
			// The GPU's own Winograd method has the CPU's name.
			for _, method := range []string{"im2col+cublas", planner.ConvWinograd, planner.ConvWinogradF4, planner.ConvWinograd3} {
				k, err := cpuConvKernel(c.g, pass, method, true)
				if err != nil || k.fwd != c.fwd || k.bwd != c.bwd {
					t.Errorf("padding %d, %s, GPU method %q: reference kernels %+v (%v), want %s and %s", c.g.PH, pass, method, k, err, c.fwd, c.bwd)
				}
			}
		}
	}
}

// TestBackendPoolEpilogue: the GPU backends pool in a convolution's
// epilogue (the CPU never does), and CUDA's inference plans of
// models/mnist.cue fold both max pools into the convolutions before them
// (the direct and Winograd methods), and so does its training plan, whose
// convolutions also write the windows' argmax for the pools' backward
// steps; the plans of Metal (im2col only) and the CPU keep them as
// steps.
func TestBackendPoolEpilogue(t *testing.T) {
	for _, b := range Backends {
		if (b.gpu != nil) != (b.Target.PoolEpilogue != nil) || (b.gpu != nil) != b.Target.PoolArgmax {
			t.Errorf("backend %s: GPU %v, pools in a convolution's epilogue %v, with the argmax in training %v", b.Name, b.gpu != nil, b.Target.PoolEpilogue != nil, b.Target.PoolArgmax)
		}
	}
	for _, c := range []struct {
		b     *Backend
		batch int
		train bool
		want  string
	}{
		{CUDA, 250, false, "conv2d(direct+pool) conv2d(winograd F(4x4,5x5)+pool) gemm gemm"},
		{CUDA, 1, false, "conv2d(direct+pool) conv2d(winograd F(4x4,5x5)+pool) gemm gemm"},
		{CUDA, 250, true, "conv2d(direct+pool+argmax) conv2d(winograd F(4x4,5x5)+pool+argmax) gemm gemm"},
		{Metal, 250, true, "conv2d(im2col+mps) maxpool2d conv2d(im2col+mps) maxpool2d gemm gemm"},
		{Metal, 250, false, "conv2d(im2col+mps) maxpool2d conv2d(im2col+mps) maxpool2d gemm gemm"},
		{CPU, 250, false, "conv2d(direct) maxpool2d conv2d(winograd F(4x4,5x5)) maxpool2d gemm gemm"},
	} {
		in := backendInput(t, c.b, "../models/mnist.cue", true, c.batch)
		p := in.Infer
		if c.batch == 1 {
			p = in.Infer1
		}
		if c.train {
			p = in.Train
		}
		var steps []string
		for _, s := range p.Forward {
			k := string(s.Kernel)
			if s.Kernel == planner.KConv2D {
				k += "(" + s.Attr.Method
				if s.Attr.Pool != nil {
					k += "+pool"
				}
				if len(s.Out) > 2 && s.Out[2] != planner.NoBuf {
					k += "+argmax"
				}
				k += ")"
			}
			steps = append(steps, k)
		}
		if got := strings.Join(steps, " "); got != c.want {
			t.Errorf("%s, batch %d, training %v: forward %s, want %s", c.b.Name, c.batch, c.train, got, c.want)
		}
		if !c.train {
			continue
		}
		fromArgmax := 0
		for _, s := range p.Backward {
			if s.Kernel == planner.KMaxPool2DArgmaxBwd {
				fromArgmax++
			}
		}
		if want := strings.Count(c.want, "+argmax"); fromArgmax != want {
			t.Errorf("%s training: %d pool backward steps from the argmax, want %d", c.b.Name, fromArgmax, want)
		}
	}
}
