package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// seq1d is a 1-D convolution (stride 2, padding 1, groups 2), tanh, a
// 1-D max pool and a dense head over [4, 12] samples, with the windows as
// spec.Decode leaves them: the 2-D window of height 1.
func seq1d() *spec.Model {
	b := newModel("seq1d", 4, 12)
	b.add(spec.Node{Name: "conv", Op: spec.OpConv1D, OutChannels: 6, Kernel: [2]int{1, 3}, Stride: [2]int{1, 2},
		Padding: [2]int{0, 1}, Dilation: [2]int{1, 1}, Groups: 2, Bias: true},
		func(in [][]int) []int { return []int{6, 6} })
	b.unary("act", spec.OpTanh, 0)
	b.add(spec.Node{Name: "pool", Op: spec.OpMaxPool1D, Kernel: [2]int{1, 2}, Stride: [2]int{1, 2}, Dilation: [2]int{1, 1}},
		func(in [][]int) []int { return []int{6, 3} })
	b.flatten("flat")
	b.dense("head", 3)
	return b.model()
}

// TestLowerConv1D: a conv1d keeps PyTorch's [OC, C/groups, K] weight, and
// runs as the conv2d step of height 1 over views ([N, C, 1, L] input,
// [OC, C/groups, 1, K] weight) that copy nothing; its activation fuses
// into it through the [N, OC, OL] view the next layer reads; the weight's
// gradient is written through the same view of the param's gradient; the
// plan text says 1-D.
func TestLowerConv1D(t *testing.T) {
	p := mustBuild(t, seq1d(), Options{Batch: 5, Training: true, Fusion: true})
	w := slices.IndexFunc(p.Params, func(pr Param) bool { return pr.Name == "conv.weight" })
	if w < 0 || !slices.Equal(p.shapeOf(p.Params[w].Buf), []int{6, 2, 3}) || !slices.Equal(p.shapeOf(p.Params[w].Grad), []int{6, 2, 3}) {
		t.Fatalf("params %+v", p.Params)
	}
	conv := p.Forward[0]
	g := conv.Attr.Conv
	if conv.Kernel != KConv2D || g == nil || !g.OneD || g.H != 1 || g.KH != 1 || g.W != 12 || g.OW != 6 || g.SW != 2 || g.PW != 1 || g.Groups != 2 || conv.Attr.Act != "tanh" {
		t.Fatalf("forward step 0 %+v geometry %+v", conv, g)
	}
	for i, want := range [][]int{{5, 4, 1, 12}, {6, 2, 1, 3}} {
		b := p.Buffers[conv.In[i]]
		if !slices.Equal(b.Shape, want) || b.AliasOf == NoBuf {
			t.Errorf("operand %d %s %v: want a view of shape %v", i, b.Name, b.Shape, want)
		}
	}
	if b := p.Buffers[conv.In[1]]; b.AliasOf != p.Params[w].Buf {
		t.Errorf("the weight operand views %d, not the param", b.AliasOf)
	}
	if y := p.Buffers[conv.Out[0]]; !slices.Equal(y.Shape, []int{5, 6, 1, 6}) || p.Buffers[y.AliasOf].Name != "act.out" {
		t.Errorf("output %s %v views %d: want the activation's output seen as [5 6 1 6]", y.Name, y.Shape, y.AliasOf)
	}
	var bwd *Step
	for i := range p.Backward {
		if p.Backward[i].Kernel == KConv2DBwd {
			bwd = &p.Backward[i]
		}
	}
	if bwd == nil || p.Buffers[bwd.Out[1]].AliasOf != p.Params[w].Grad {
		t.Fatalf("conv backward %+v: its dW must be a view of conv.weight.grad", bwd)
	}
	var text strings.Builder
	if err := WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "conv2d(tanh 1-D k3 s2 p1") || !strings.Contains(text.String(), "maxpool2d(1-D k2 s2 p0)") {
		t.Errorf("plan text:\n%s", text.String())
	}
}
