package planner

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// stepsOf returns the steps of p whose kernel is one of kernels, in phase
// order.
func stepsOf(p *Plan, kernels ...Kernel) []Step {
	var out []Step
	for _, ph := range []Phase{p.Forward, p.Backward} {
		for _, s := range ph {
			if slices.Contains(kernels, s.Kernel) {
				out = append(out, s)
			}
		}
	}
	return out
}

// convSteps returns the conv2d and conv2d_bwd steps of p in phase order.
func convSteps(p *Plan) []Step { return stepsOf(p, KConv2D, KConv2DBwd) }

// workspace returns a convolution step's scratch operand.
func workspace(s Step) BufID {
	if s.Kernel == KConv2D {
		return s.Out[1]
	}
	return s.In[4]
}

// TestChooseMethodsCPU: on the CPU (the default target) every convolution
// step of LeNet-5 (stride 1 throughout) records the direct method, and no
// step has a workspace: the plan holds no empty scratch buffer at all.
func TestChooseMethodsCPU(t *testing.T) {
	p := mustBuild(t, lenet5(), Options{Training: true, Fusion: true})
	steps := convSteps(p)
	if len(steps) != 4 {
		t.Fatalf("saw %d convolution steps, want 4", len(steps))
	}
	for _, s := range steps {
		if s.Attr.Method != ConvDirect {
			t.Errorf("%s %s: method %q, want %q for a stride-1 convolution", s.Kernel, s.Layer, s.Attr.Method, ConvDirect)
		}
		if ws := workspace(s); ws != NoBuf {
			t.Errorf("%s %s: workspace %s, but no CPU method needs one", s.Kernel, s.Layer, p.Buffers[ws].Name)
		}
	}
	for _, b := range p.Buffers {
		if b.Size == 0 || strings.Contains(b.Name, "cols") {
			t.Errorf("buffer %s (%s, %d float32s) left in a CPU plan", b.Name, b.Kind, b.Size)
		}
	}
}

// TestChooseMethodsTarget: a backend's own rule replaces the CPU's; the
// plan records its method per pass and gives each step exactly the
// scratch it asks for, as a buffer of the step's own that the memory plan
// places.
func TestChooseMethodsTarget(t *testing.T) {
	var asked []ConvPass
	target := Target{Name: "test", Conv: func(g ConvGeom, pass ConvPass) ConvChoice {
		asked = append(asked, pass)
		switch pass {
		case ConvForward:
			return ConvChoice{Method: "fwd", Scratch: g.C * g.KH * g.KW}
		case ConvBackward:
			return ConvChoice{Method: "bwd", Scratch: 7}
		}
		return ConvChoice{Method: "bwd-no-dx"}
	}}
	p := mustBuild(t, lenet5(), Options{Training: true, Fusion: true, Target: target})
	if wantAsked := []ConvPass{ConvForward, ConvForward, ConvBackward, ConvBackwardNoDx}; !slices.Equal(asked, wantAsked) {
		t.Errorf("the rule was asked for %v, want %v (conv1, conv2 forward; conv2 backward with dx, conv1 without)", asked, wantAsked)
	}
	want := map[string]struct {
		method  string
		scratch string // the workspace's name, "" for none
		size    int
	}{
		"conv2d conv1":     {"fwd", "conv1.cols", 1 * 5 * 5},
		"conv2d conv2":     {"fwd", "conv2.cols", 6 * 5 * 5},
		"conv2d_bwd conv2": {"bwd", "conv2.bwd_cols", 7},
		"conv2d_bwd conv1": {"bwd-no-dx", "", 0},
	}
	for _, s := range convSteps(p) {
		key := string(s.Kernel) + " " + s.Layer
		w, ok := want[key]
		if !ok {
			t.Errorf("unexpected step %s", key)
			continue
		}
		if s.Attr.Method != w.method {
			t.Errorf("%s: method %q, want %q", key, s.Attr.Method, w.method)
		}
		ws := workspace(s)
		switch {
		case w.scratch == "" && ws != NoBuf:
			t.Errorf("%s: workspace %s, want none", key, p.Buffers[ws].Name)
		case w.scratch != "" && ws == NoBuf:
			t.Errorf("%s: no workspace, want %s", key, w.scratch)
		case w.scratch != "":
			b := p.Buffers[ws]
			if b.Name != w.scratch || b.Kind != KindScratch || b.Size != w.size || b.Arena != ArenaWork {
				t.Errorf("%s: workspace %s %s of %d float32s in arena %q, want scratch %s of %d in the work arena",
					key, b.Name, b.Kind, b.Size, b.Arena, w.scratch, w.size)
			}
		}
	}
}

// TestCPUConvRule: the CPU runs Winograd forward on 5×5 and 3×3 layers
// with enough channels and tiles, and backward where they do too (with dx:
// and dx's convolution, channels swapped, has enough of them), the direct method wherever rt/cpu's direct
// kernels apply (stride 1, padding within the filter's reach), the
// pointwise product on every 1×1 layer of stride 1 without padding, the
// depthwise method on depthwise layers, the phase method on the forward
// pass of strided layers whose phase filters add under a third to the
// products, and im2col + GEMM elsewhere, with no scratch from the plan.
func TestCPUConvRule(t *testing.T) {
	geom := func(k, s, p, d int) ConvGeom {
		return ConvGeom{N: 2, C: 3, H: 9, W: 9, OC: 4, OH: 4, OW: 4, KH: k, KW: k, SH: s, SW: s, PH: p, PW: p, DH: d, DW: d, Groups: 1}
	}
	// wide is a 5×5 layer padded by 2 on 32×32 (14×14 for batch 250).
	wide := func(n, c, oc, s, d, groups int) ConvGeom {
		h := 32
		if n == 250 {
			h = 14
		}
		p := 2 * max(d, 1)
		o := (h+2*p-max(d, 1)*4-1)/max(s, 1) + 1
		return ConvGeom{N: n, C: c, H: h, W: h, OC: oc, OH: o, OW: o, KH: 5, KW: 5, SH: s, SW: s, PH: p, PW: p, DH: d, DW: d, Groups: groups}
	}
	// res is a 3×3 layer of c channels on h×h padded by p, batch n.
	res := func(n, c, h, p int) ConvGeom {
		o := h + 2*p - 2
		return ConvGeom{N: n, C: c, H: h, W: h, OC: c, OH: o, OW: o, KH: 3, KW: 3, SH: 1, SW: 1, PH: p, PW: p, DH: 1, DW: 1, Groups: 1}
	}
	for _, c := range []struct {
		name string
		g    ConvGeom
		want [3]string // forward, backward, backward without dx
	}{
		{"5x5 pad 2", geom(5, 1, 2, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"3x3 stride 2", func() ConvGeom { g := geom(3, 2, 1, 1); g.C = 5; return g }(), [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 stride 2, 1028 outputs", func() ConvGeom { g := geom(3, 2, 1, 1); g.C, g.N = 5, 257; return g }(), [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 stride 2, 3 channels (a stem)", geom(3, 2, 1, 1), [3]string{ConvGrouped, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 stride 2, 3 channels, 1028 outputs", func() ConvGeom { g := geom(3, 2, 1, 1); g.N = 257; return g }(), [3]string{ConvGrouped, ConvIm2colGemm, ConvIm2colGemm}},
		{"mobilenet_v2's stem", ConvGeom{N: 1, C: 3, H: 224, W: 224, OC: 32, OH: 112, OW: 112, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}, [3]string{ConvGrouped, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 stride 2, dilation 2, 3 channels", geom(3, 2, 2, 2), [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"1x1 pad 1", geom(1, 1, 1, 1), [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 dilation 2 pad 4", geom(3, 1, 4, 2), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"3x3 dilation 2 pad 5", geom(3, 1, 5, 2), [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 pad 1x3", func() ConvGeom { g := geom(3, 1, 1, 1); g.PW = 3; return g }(), [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"unset stride and dilation", geom(3, 0, 1, 0), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"stride 2 across only", func() ConvGeom { g := geom(3, 1, 1, 1); g.SW = 2; return g }(), [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"mnist conv2 batch 250", wide(250, 32, 64, 1, 1, 1), [3]string{ConvWinogradF4, ConvWinogradF4, ConvWinogradF4}},
		{"16 to 32, 1024 tiles", wide(4, 16, 32, 1, 1, 1), [3]string{ConvWinogradF4, ConvWinogradF4, ConvWinogradF4}},
		{"32 to 32, 1024 tiles", wide(4, 32, 32, 1, 1, 1), [3]string{ConvWinogradF4, ConvWinogradF4, ConvWinogradF4}},
		{"32 to 32, pad 5", func() ConvGeom { g := wide(4, 32, 32, 1, 1, 1); g.PH, g.PW, g.OH, g.OW = 5, 5, 38, 38; return g }(), [3]string{ConvWinogradF4, ConvIm2colGemm, ConvIm2colGemm}},
		{"32 to 64, batch 1", wide(1, 32, 64, 1, 1, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"15 input channels", wide(250, 15, 64, 1, 1, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"31 output channels", wide(250, 32, 31, 1, 1, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"64x64 images", func() ConvGeom { g := wide(4, 32, 64, 1, 1, 1); g.H, g.W, g.OH, g.OW = 64, 64, 64, 64; return g }(), [3]string{ConvWinogradF4, ConvWinogradF4, ConvWinogradF4}},
		{"72x72 images, past the work buffers' bound", func() ConvGeom { g := wide(4, 32, 64, 1, 1, 1); g.H, g.W, g.OH, g.OW = 72, 72, 72, 72; return g }(), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"5x5 stride 2", wide(250, 32, 64, 2, 1, 1), [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"5x5 dilation 2", wide(250, 32, 64, 1, 2, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"5x5 groups 2", wide(250, 32, 64, 1, 1, 2), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"unset stride, dilation, groups", wide(250, 32, 64, 0, 0, 0), [3]string{ConvWinogradF4, ConvWinogradF4, ConvWinogradF4}},
		{"resnet18 64 at 56², batch 32", res(32, 64, 56, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"resnet18 256 at 14², batch 32", res(32, 256, 14, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"resnet18 512 at 7², batch 32", res(32, 512, 7, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"resnet18 512 at 7², batch 11: 44 tiles", res(11, 512, 7, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"resnet18 512 at 7², batch 12: 48 tiles", res(12, 512, 7, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"cifar 512 at 4², batch 128", res(128, 512, 4, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"resnet18 256 at 14², batch 1: forward with kept filters", res(1, 256, 14, 1), [3]string{ConvWinograd3, ConvDirect, ConvDirect}},
		{"resnet18 512 at 7², batch 1: 4 tiles", res(1, 512, 7, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"resnet18 512 at 7², batch 4: filters past the cache's bound", res(4, 512, 7, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"resnet18 128 at 28², batch 1", res(1, 128, 28, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"resnet18 64 at 56², batch 1", res(1, 64, 56, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"32 channels at 56²", res(32, 32, 56, 1), [3]string{ConvWinograd3, ConvWinograd3, ConvWinograd3}},
		{"16 channels at 56²", res(32, 16, 56, 1), [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"3x3 pad 3: forward only", res(32, 64, 54, 3), [3]string{ConvWinograd3, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 stride 2", func() ConvGeom { g := res(32, 64, 56, 1); g.SH, g.SW, g.OH, g.OW = 2, 2, 28, 28; return g }(), [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"3x3 stride 2, batch 1", func() ConvGeom { g := res(1, 64, 56, 1); g.SH, g.SW, g.OH, g.OW = 2, 2, 28, 28; return g }(), [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"1x1", geom(1, 1, 0, 1), [3]string{ConvPointwise, ConvPointwise, ConvPointwise}},
		{"1x1 unset stride, groups 3", func() ConvGeom { g := geom(1, 0, 0, 0); g.C, g.OC, g.Groups = 6, 9, 3; return g }(), [3]string{ConvPointwise, ConvPointwise, ConvPointwise}},
		{"1x1 stride 2", geom(1, 2, 0, 1), [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"regnet 1x1 stride 2 at 112², batch 1", ConvGeom{N: 1, C: 32, H: 112, W: 112, OC: 48, OH: 56, OW: 56, KH: 1, KW: 1, SH: 2, SW: 2, DH: 1, DW: 1, Groups: 1}, [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"1x1 stride 2 at 112², batch 2", ConvGeom{N: 2, C: 32, H: 112, W: 112, OC: 48, OH: 56, OW: 56, KH: 1, KW: 1, SH: 2, SW: 2, DH: 1, DW: 1, Groups: 1}, [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"1x1 stride 2 padded at 112², batch 1", ConvGeom{N: 1, C: 32, H: 110, W: 110, OC: 48, OH: 56, OW: 56, KH: 1, KW: 1, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}, [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
		{"resnet50 1x1 stride 2, batch 1", ConvGeom{N: 1, C: 512, H: 28, W: 28, OC: 1024, OH: 14, OW: 14, KH: 1, KW: 1, SH: 2, SW: 2, DH: 1, DW: 1, Groups: 1}, [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"7x7 stride 2 (ResNet's stem)", ConvGeom{N: 2, C: 3, H: 224, W: 224, OC: 64, OH: 112, OW: 112, KH: 7, KW: 7, SH: 2, SW: 2, PH: 3, PW: 3, DH: 1, DW: 1, Groups: 1}, [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"2x2 stride 2", geom(2, 2, 0, 1), [3]string{ConvPhase, ConvIm2colGemm, ConvIm2colGemm}},
		{"7x7 stride 2 groups 3", ConvGeom{N: 2, C: 3, H: 32, W: 32, OC: 6, OH: 16, OW: 16, KH: 7, KW: 7, SH: 2, SW: 2, PH: 3, PW: 3, DH: 1, DW: 1, Groups: 3}, [3]string{ConvGrouped, ConvIm2colGemm, ConvIm2colGemm}},
		{"depthwise 3x3 stride 2", func() ConvGeom { g := geom(3, 2, 1, 1); g.OC, g.Groups = 3, 3; return g }(), [3]string{ConvDepthwise, ConvDepthwise, ConvDepthwise}},
		{"depthwise 5x5 stride 2", wide(2, 8, 8, 2, 1, 8), [3]string{ConvDepthwise, ConvDepthwise, ConvDepthwise}},
		{"depthwise 3x3 stride 1", func() ConvGeom { g := geom(3, 1, 1, 1); g.OC, g.Groups = 3, 3; return g }(), [3]string{ConvDepthwise, ConvDepthwise, ConvDepthwise}},
		{"depthwise 1x1 pad 1", func() ConvGeom { g := geom(1, 1, 1, 1); g.OC, g.Groups = 3, 3; return g }(), [3]string{ConvDepthwise, ConvDepthwise, ConvDepthwise}},
		{"depthwise multiplier 2, stride 2", func() ConvGeom { g := geom(3, 2, 1, 1); g.OC, g.Groups = 6, 3; return g }(), [3]string{ConvGrouped, ConvIm2colGemm, ConvIm2colGemm}},
		{"groups of 8, stride 2 (regnet)", ConvGeom{N: 1, C: 104, H: 56, W: 56, OC: 104, OH: 28, OW: 28, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 13}, [3]string{ConvGrouped, ConvIm2colGemm, ConvIm2colGemm}},
		{"groups of 8, stride 1 (regnet)", ConvGeom{N: 1, C: 104, H: 28, W: 28, OC: 104, OH: 28, OW: 28, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 13}, [3]string{ConvDirect, ConvDirect, ConvDirect}},
		{"groups of 17, stride 2", ConvGeom{N: 1, C: 34, H: 8, W: 8, OC: 34, OH: 4, OW: 4, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 2}, [3]string{ConvIm2colGemm, ConvIm2colGemm, ConvIm2colGemm}},
	} {
		for i, pass := range []ConvPass{ConvForward, ConvBackward, ConvBackwardNoDx} {
			got := CPU.Conv(c.g, pass)
			if got != (ConvChoice{Method: c.want[i]}) {
				t.Errorf("%s, %s: %+v, want method %q and no scratch", c.name, pass, got, c.want[i])
			}
		}
	}
}

// TestChooseMethodsBadRule: a target whose rule names no method is
// reported as an error naming the layer, not a panic or an empty call.
func TestChooseMethodsBadRule(t *testing.T) {
	bad := Target{Name: "broken", Conv: func(ConvGeom, ConvPass) ConvChoice { return ConvChoice{Scratch: -1} }}
	_, err := Build(lenet5(), Options{Training: true, Target: bad})
	if err == nil || !strings.Contains(err.Error(), "conv1") || !strings.Contains(err.Error(), "broken") {
		t.Errorf("Build with a rule that gives no method: error %v, want one naming conv1 and the broken backend", err)
	}
}

// TestPlanTextShowsMethods: `mlbuild plan` prints each convolution step's
// recorded method, and an absent workspace as "-", never an empty buffer.
func TestPlanTextShowsMethods(t *testing.T) {
	b := newModel("strided", 1, 12, 12)
	b.conv("conv1", 5, 3, 1) // 5 channels: conv2 is no stem (cpuGroupedPays)
	b.add(spec.Node{Name: "conv2", Op: spec.OpConv2D, OutChannels: 4, Kernel: [2]int{3, 3},
		Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1, Bias: true},
		func(in [][]int) []int { return []int{4, 6, 6} })
	b.flatten("flat")
	b.dense("fc", 10)
	p := mustBuild(t, b.model(), Options{Batch: 2, Training: true})
	var text bytes.Buffer
	if err := WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"conv2d(k3x3 s1 p1 direct)  conv1  [2,1,12,12] [5,1,3,3] [5] -> [2,5,12,12] -",
		"conv2d(k3x3 s2 p1 phase direct)  conv2  [2,5,12,12] [4,5,3,3] [4] -> [2,4,6,6] -",
		"conv2d_bwd(k3x3 s2 p1 im2col+gemm)",
		"conv2d_bwd(k3x3 s1 p1 direct)",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("plan text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cols") {
		t.Errorf("plan text names a convolution workspace, but CPU methods take none:\n%s", out)
	}
}

// TestPlanTextShowsWinograd: at batch 250 the seed paper's MNIST model
// (conv2: 16 to 32 channels on 14×14) runs its second convolution forward
// and backward by Winograd F(4×4,5×5), its first (one input channel) by
// the direct method; `mlbuild plan` says so.
func TestPlanTextShowsWinograd(t *testing.T) {
	p := mustBuild(t, flagship(), Options{Batch: 250, Training: true, Fusion: true})
	var text bytes.Buffer
	if err := WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(text.String()), " ")
	for _, want := range []string{
		"conv2d(relu k5x5 s1 p2 winograd F(4x4,5x5)) conv2+relu2 [250,16,14,14] [32,16,5,5] [32] -> [250,32,14,14] -",
		"conv2d(relu k5x5 s1 p2 direct) conv1+relu1",
		"conv2d_bwd(relu k5x5 s1 p2 winograd F(4x4,5x5)) conv2+relu2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestChooseMethodsLibrary: a target with library convolutions gets them
// where its rule lets it (here every step that its Conv rule gave the
// scratch-taking method), with no workspace, in an f32 plan; in a bf16
// plan the rule keeps the steps on its own method; and Plan.Methods
// counts the steps each way with the reason.
func TestChooseMethodsLibrary(t *testing.T) {
	target := Target{Name: "lib", Conv: func(g ConvGeom, pass ConvPass) ConvChoice {
		return ConvChoice{Method: "cols", Scratch: 64}
	}, ConvLibrary: func(_ ConvGeom, c ConvChoice, precision string) (ConvChoice, LibraryWhy) {
		if precision == PrecisionBF16 {
			return c, LibraryWhy{Reason: "no bf16"}
		}
		return ConvChoice{Method: "lib"}, LibraryWhy{Taken: true, Reason: "in place"}
	}}
	for _, c := range []struct {
		precision, method, line string
		scratch                 bool
	}{
		{"", "lib", "4 convolution steps: lib, in place", false},
		{PrecisionBF16, "cols", "4 convolution steps: cols, not the library's: no bf16", true},
	} {
		m := lenet5()
		m.Precision = c.precision
		p := mustBuild(t, m, Options{Training: true, Fusion: true, Target: target})
		for _, s := range convSteps(p) {
			if s.Attr.Method != c.method || (workspace(s) != NoBuf) != c.scratch {
				t.Errorf("precision %q: %s %s: method %q, workspace %v; want %q, %v", c.precision, s.Kernel, s.Layer, s.Attr.Method, workspace(s) != NoBuf, c.method, c.scratch)
			}
		}
		if !slices.Equal(p.Methods, []string{c.line}) {
			t.Errorf("precision %q: Plan.Methods %q, want %q", c.precision, p.Methods, c.line)
		}
		var text bytes.Buffer
		if err := WriteText(&text, p); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "convolution methods\n  "+c.line) {
			t.Errorf("precision %q: the plan's text lacks %q:\n%s", c.precision, c.line, text.String())
		}
	}
}
