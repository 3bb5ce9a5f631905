package planner

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// storageTarget is a GPU-like target as CUDA's: convolutions of more
// than 32 taps a filter run as the library method "lib" in the plan's
// precision, the others on a direct kernel in f32; update steps write
// their weights' twins, and the kernels of kernels may keep their
// operands in bfloat16 (nil: no BF16Storage).
func storageTarget(kernels ...Kernel) Target {
	t := bf16Target(KSGD, KSGDMulti, KAdam)
	t.Conv = func(g ConvGeom, _ ConvPass) ConvChoice {
		if g.C/max(g.Groups, 1)*g.KH*g.KW <= 32 {
			return ConvChoice{Method: "direct"}
		}
		return ConvChoice{Method: "lib"}
	}
	t.ConvPrecision = func(method, want string) DenseChoice {
		if method == "direct" {
			return DenseChoice{Precision: PrecisionF32, Why: "direct"}
		}
		return DenseChoice{Precision: want}
	}
	if kernels != nil {
		k := map[Kernel]bool{}
		for _, kn := range kernels {
			k[kn] = true
		}
		t.BF16Storage = &BF16Storage{Kernels: k, Library: "lib"}
	}
	return t
}

// TestStoreBF16: in the tiny ResNet's bf16 training plan, every library
// convolution multiplies bfloat16 tensors (Precision bf16), reads W's
// twin and, in the backward, writes dW to a bfloat16 workspace of W's
// shape; every buffer a step names is float32 or stored in bfloat16, and
// a stored one only by the storage kernels or bf16 library
// convolutions; the model's input, output and loss stay float32. Without
// batch norm among the storage kernels, or with none, every library
// convolution falls back to tf32 on float32 tensors (the ReLUs and sums
// between the batch norms may still be stored), each with its
// reason (the first ones the kernel that cannot, later ones a
// convolution that fell back before them); an f32 plan stores nothing; and the small convolutional
// network, whose first convolution (direct) writes the second's input,
// falls back all the way down its chain.
func TestStoreBF16(t *testing.T) {
	all := []Kernel{KBatchNorm, KBatchNormBwd, KUnary, KUnaryBwd, KBinary, KBinaryBwd, KAccumulate, KGlobalAvgPool, KGlobalAvgPoolBwd}
	build := func(file, precision string, target Target) *Plan {
		t.Helper()
		m, err := spec.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		m.Precision = precision
		p, err := Build(m, Options{Training: true, Fusion: true, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	libs := func(p *Plan) (bf16, tf32 int) {
		for _, st := range p.allSteps() {
			if st.Attr.Method != "lib" {
				continue
			}
			switch st.Attr.Precision {
			case PrecisionBF16:
				bf16++
			case PrecisionTF32:
				tf32++
			default:
				t.Errorf("%s %s in precision %q", st.Kernel, st.Layer, st.Attr.Precision)
			}
		}
		return bf16, tf32
	}
	const resnet = "../testdata/specs/bf16/resnet_tiny_bf16.cue"

	p := build(resnet, PrecisionBF16, storageTarget(all...))
	if bf16, tf32 := libs(p); bf16 != 10 || tf32 != 0 {
		t.Errorf("library convolutions: %d in bf16 and %d in tf32, want 10 and 0 (5 layers, forward and backward)", bf16, tf32)
	}
	stored := map[BufID]bool{}
	for _, id := range p.Stored {
		stored[id] = true
	}
	if len(stored) < 30 {
		t.Errorf("%d buffers stored in bfloat16, want the activations and gradients around 5 convolutions (at least 30)", len(stored))
	}
	for _, id := range []BufID{p.Input, p.Output, p.Loss, p.Labels} {
		if p.Buffers[id].Elem != "" {
			t.Errorf("%s is stored in %q", p.Buffers[id].Name, p.Buffers[id].Elem)
		}
	}
	// The plan's bytes count 2 an element of a stored tensor (measure_costs.go):
	// every batch norm's, from its operands' sizes and element types.
	bns := 0
	for _, st := range p.allSteps() {
		if st.Kernel != KBatchNorm && st.Kernel != KBatchNormBwd {
			continue
		}
		var want int64
		halves := false
		for _, id := range append(append([]BufID(nil), st.In...), st.Out...) {
			if id == NoBuf {
				continue
			}
			per := int64(4)
			if p.Buffers[p.root(id)].Elem == ElemBF16 {
				per, halves = 2, true
			}
			want += per * int64(p.Buffers[id].Size)
		}
		if st.Bytes != want {
			t.Errorf("%s %s: %d bytes, want %d (2 an element of a bfloat16 tensor)", st.Kernel, st.Layer, st.Bytes, want)
		}
		if halves {
			bns++
		}
	}
	if bns == 0 {
		t.Errorf("no batch norm step names a bfloat16 tensor")
	}
	storage := map[Kernel]bool{}
	for _, k := range all {
		storage[k] = true
	}
	for _, st := range p.allSteps() {
		lib := st.Attr.Method == "lib" && st.Attr.Precision == PrecisionBF16
		for _, ids := range [][]BufID{st.In, st.Out} {
			for _, id := range ids {
				if id != NoBuf && stored[p.root(id)] && !storage[st.Kernel] && !lib {
					t.Errorf("%s %s names %s, stored in bfloat16", st.Kernel, st.Layer, p.Buffers[id].Name)
				}
			}
		}
		if !lib {
			continue
		}
		if p.TwinOf(st.In[1]) == NoBuf {
			t.Errorf("%s %s: W has no twin", st.Kernel, st.Layer)
		}
		x, y := st.In[0], st.Out[0]
		if st.Kernel == KConv2DBwd {
			y = st.In[3]
			ws := st.In[4]
			if ws == NoBuf || p.Buffers[ws].Elem != ElemBF16 || p.Buffers[ws].Size != p.Buffers[st.In[1]].Size || !stored[ws] {
				t.Errorf("%s %s: dW's workspace %v is no stored bfloat16 buffer of W's size", st.Kernel, st.Layer, ws)
			}
		}
		for _, id := range []BufID{x, y} {
			if p.Buffers[id].Elem != ElemBF16 {
				t.Errorf("%s %s: %s is float32", st.Kernel, st.Layer, p.Buffers[id].Name)
			}
		}
	}
	var text strings.Builder
	if err := WriteText(&text, p); err != nil || !strings.Contains(text.String(), "; 5 library convolutions multiply bfloat16 tensors, 5 of them writing dW to a bfloat16 workspace") {
		t.Errorf("mlbuild plan does not show the bf16 storage (%v)", err)
	}

	for _, tc := range []struct {
		name   string
		file   string
		target Target
		why    string
	}{
		{"no batch norm", resnet, storageTarget(KUnary, KUnaryBwd, KBinary, KBinaryBwd, KAccumulate, KGlobalAvgPool, KGlobalAvgPoolBwd), "batchnorm"},
		{"no storage", resnet, storageTarget(), "unary stem_relu reads or writes it in float32 only"},
		{"convnet", "../testdata/specs/bf16/convnet_bf16.cue", storageTarget(all...), "conv2d conv2d1 reads or writes it in float32 only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.target.BF16Storage == nil {
				tc.target.BF16Storage = &BF16Storage{Library: "lib"}
			}
			p := build(tc.file, PrecisionBF16, tc.target)
			if bf16, tf32 := libs(p); bf16 != 0 || tf32 == 0 {
				t.Errorf("library convolutions: %d in bf16 and %d in tf32, want all in tf32", bf16, tf32)
			}
			for _, id := range p.Stored {
				if p.Buffers[id].Kind == KindScratch {
					t.Errorf("%s: a dW workspace, but no convolution is in bf16", p.Buffers[id].Name)
				}
			}
			// Every fallback names the tensor that stays float32; the
			// first ones the cause (later ones a convolution that fell
			// back before them).
			said := false
			for _, l := range p.Precisions {
				if strings.Contains(l, "tf32, not bf16") {
					said = said || strings.Contains(l, tc.why)
					if !strings.Contains(l, ") stays float32: ") {
						t.Errorf("fallback %q names no tensor", l)
					}
				}
			}
			if !said {
				t.Errorf("no fallback says %q: %q", tc.why, p.Precisions)
			}
		})
	}

	f32 := build(resnet, PrecisionF32, storageTarget(all...))
	for _, b := range f32.Buffers {
		if b.Elem != "" || len(f32.Stored) != 0 {
			t.Fatalf("the f32 plan stores %s in %q", b.Name, b.Elem)
		}
	}
}

// TestStoreChannelsLast: for a target whose library convolutions are
// faster channels last (BF16Storage.BatchNormScratch), the tiny ResNet's
// stored 4-D tensors are stored [N, H, W, C]; every library convolution
// and element-wise step finds its 4-D operands in one layout; each
// training batch norm that names a channels-last tensor has a scratch of
// BatchNormScratch floats as Out[3], and each library convolution's
// weight a bfloat16 twin in KRSC order (Layout nhwc, of kind
// param_bf16), which the convolutions read: the forward has no
// workspace, the backward dW's alone, of W's size (no KeptCols).
// Without the global pool among the
// storage kernels, its input stays float32, so the ReLU and the sum
// before it go NCHW (the fixed point), and the rest stays channels last.
// A target without the rule keeps every layout NCHW.
func TestStoreChannelsLast(t *testing.T) {
	all := []Kernel{KBatchNorm, KBatchNormBwd, KUnary, KUnaryBwd, KBinary, KBinaryBwd, KAccumulate, KGlobalAvgPool, KGlobalAvgPoolBwd}
	last := func(kernels ...Kernel) Target {
		t := storageTarget(kernels...)
		t.BF16Storage.BatchNormScratch = func(outer, c, inner int) int { return 2 * c * (1 + outer*inner/64) }
		return t
	}
	m, err := spec.Load("../testdata/specs/bf16/resnet_tiny_bf16.cue")
	if err != nil {
		t.Fatal(err)
	}
	build := func(target Target) *Plan {
		t.Helper()
		p, err := Build(m, Options{Training: true, Fusion: true, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func(p *Plan, target Target) (nhwc int) {
		t.Helper()
		for _, b := range p.Buffers {
			if b.Layout == LayoutNHWC && b.Kind != KindParamBF16 {
				nhwc++
			}
		}
		for _, st := range p.allSteps() {
			ops := uniformOperands(p, st, target.BF16Storage)
			for _, id := range ops {
				if p.Buffers[p.root(id)].Layout != p.Buffers[p.root(ops[0])].Layout {
					t.Errorf("%s %s: %s and %s in two layouts", st.Kernel, st.Layer, p.Buffers[id].Name, p.Buffers[ops[0]].Name)
				}
			}
			if st.Kernel != KBatchNorm && st.Kernel != KBatchNormBwd {
				continue
			}
			x := p.Buffers[st.In[0]].Shape
			named := false
			for _, ids := range [][]BufID{st.In, st.Out[:3]} {
				for _, id := range ids {
					named = named || id != NoBuf && p.Buffers[p.root(id)].Layout == LayoutNHWC
				}
			}
			switch {
			case named && (len(st.Out) != 4 || p.Buffers[st.Out[3]].Size != 2*x[1]*(1+x[0]*x[2]*x[3]/64)):
				t.Errorf("%s %s names a channels-last tensor and has outputs %v, want a scratch of partial sums fourth", st.Kernel, st.Layer, st.Out)
			case !named && len(st.Out) != 3:
				t.Errorf("%s %s names no channels-last tensor but has %d outputs", st.Kernel, st.Layer, len(st.Out))
			}
		}
		return nhwc
	}
	target := last(all...)
	p := build(target)
	stored := 0
	for _, id := range p.Stored {
		if p.Buffers[id].Kind != KindScratch {
			stored++
		}
	}
	if n := check(p, target); n != stored {
		t.Errorf("%d tensors channels last, want every stored activation and gradient (%d)", n, stored)
	}
	// Each channels-last convolution's KRSC twin, and no KRSC workspace.
	convs := 0
	for _, st := range p.allSteps() {
		if st.Attr.Method != "lib" {
			continue
		}
		convs++
		w := p.Buffers[st.In[1]]
		if tw := p.TwinOf(st.In[1]); tw == NoBuf || p.Buffers[tw].Layout != LayoutNHWC || p.Buffers[tw].Kind != KindParamBF16 || !equalShapes(p.Buffers[tw].Shape, w.Shape) {
			t.Errorf("%s %s: W %s has twin %v, want a KRSC twin of its shape", st.Kernel, st.Layer, w.Name, tw)
		}
		switch ws := st.Out[1]; {
		case st.Kernel == KConv2D && ws != NoBuf:
			t.Errorf("%s %s: workspace %s, want none (it reads W's KRSC twin)", st.Kernel, st.Layer, p.Buffers[ws].Name)
		case st.Kernel == KConv2DBwd && (st.Attr.KeptCols || st.In[4] == NoBuf || p.Buffers[st.In[4]].Size != w.Size || p.Buffers[st.In[4]].Elem != ElemBF16):
			t.Errorf("%s %s: workspace %v (KeptCols %v), want dW's alone: %d bfloat16s", st.Kernel, st.Layer, st.In[4], st.Attr.KeptCols, w.Size)
		}
	}
	if convs == 0 {
		t.Error("no library convolution")
	}
	noPool := last(KBatchNorm, KBatchNormBwd, KUnary, KUnaryBwd, KBinary, KBinaryBwd, KAccumulate)
	p = build(noPool)
	n := check(p, noPool)
	for _, b := range p.Buffers {
		if (b.Name == "b2_out.out" || b.Name == "b2_sum.out") && b.Layout != "" {
			t.Errorf("%s is channels last, but the pool reads the ReLU's output in float32", b.Name)
		}
	}
	if n == 0 {
		t.Error("no tensor channels last without the pool among the storage kernels")
	}
	p = build(storageTarget(all...))
	if n := check(p, storageTarget(all...)); n != 0 {
		t.Errorf("%d tensors channels last for a target that keeps them NCHW", n)
	}
}
