package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// find returns the buffer called name, or fails the test.
func find(t *testing.T, p *Plan, name string) *Buffer {
	t.Helper()
	for i := range p.Buffers {
		if p.Buffers[i].Name == name {
			return &p.Buffers[i]
		}
	}
	t.Fatalf("no buffer %q", name)
	return nil
}

// kernels lists the kernels of a phase.
func kernels(ph Phase) string {
	var ks []string
	for _, s := range ph {
		ks = append(ks, string(s.Kernel))
	}
	return strings.Join(ks, " ")
}

func TestLowerParamsLikePyTorch(t *testing.T) {
	p := mustBuild(t, regularised(), Options{Batch: 2, Training: true})
	want := []struct {
		name      string
		shape     []int
		trainable bool
		init      string
		bound     float64
	}{
		{"conv1.weight", []int{8, 3, 3, 3}, true, "uniform", 1 / 5.196152422706632},
		{"conv1.bias", []int{8}, true, "uniform", 1 / 5.196152422706632},
		{"bn1.weight", []int{8}, true, "ones", 0},
		{"bn1.bias", []int{8}, true, "zeros", 0},
		{"bn1.running_mean", []int{8}, false, "zeros", 0},
		{"bn1.running_var", []int{8}, false, "ones", 0},
		{"fc1.weight", []int{32, 8}, true, "uniform", 1 / 2.8284271247461903},
		{"fc1.bias", []int{32}, true, "uniform", 1 / 2.8284271247461903},
		{"bn2.weight", []int{32}, true, "ones", 0},
		{"bn2.bias", []int{32}, true, "zeros", 0},
		{"bn2.running_mean", []int{32}, false, "zeros", 0},
		{"bn2.running_var", []int{32}, false, "ones", 0},
		{"fc2.weight", []int{10, 32}, true, "uniform", 1 / 5.656854249492381},
		{"fc2.bias", []int{10}, true, "uniform", 1 / 5.656854249492381},
	}
	if len(p.Params) != len(want) {
		t.Fatalf("%d params, want %d", len(p.Params), len(want))
	}
	for i, w := range want {
		pr := p.Params[i]
		if pr.Name != w.name || !equalShapes(p.shapeOf(pr.Buf), w.shape) || pr.Trainable != w.trainable ||
			pr.Init != w.init || diff(pr.Bound, w.bound) > 1e-12 {
			t.Errorf("param %d = %s %v trainable %v %s %g, want %+v", i, pr.Name, p.shapeOf(pr.Buf), pr.Trainable, pr.Init, pr.Bound, w)
		}
		if pr.Buf != BufID(i) {
			t.Errorf("param %s has buffer %d: params must come first", pr.Name, pr.Buf)
		}
		if w.trainable != (len(pr.State) == 1) { // sgd: one velocity
			t.Errorf("param %s has %d state buffers", pr.Name, len(pr.State))
		}
	}
}

func diff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}

func TestLowerForward(t *testing.T) {
	tests := []struct {
		model   func() *spec.Model
		kernels string
	}{
		{mlp, "gemm unary gemm unary gemm"},
		{lenet5, "conv2d unary maxpool2d conv2d unary maxpool2d gemm unary gemm unary gemm"},
		{attention, "gemm gemm gemm transpose matmul unary softmax matmul gemm gemm"},
		{concatModel, "conv2d unary conv2d concat avgpool2d gemm"},
		{regularised, "conv2d batchnorm unary globalavgpool gemm batchnorm unary dropout gemm"},
	}
	for _, tc := range tests {
		m := tc.model()
		p, err := lower(m, 3, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(p); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
		if got := kernels(p.Forward); got != tc.kernels {
			t.Errorf("%s: forward %q, want %q", m.Name, got, tc.kernels)
		}
		if p.Buffers[p.Input].Shape[0] != 3 {
			t.Errorf("%s: input %v has no batch axis first", m.Name, p.Buffers[p.Input].Shape)
		}
	}
}

func TestLowerViews(t *testing.T) {
	p := mustBuild(t, lenet5(), Options{Batch: 2})
	flat := find(t, p, "flat.out")
	if flat.AliasOf != find(t, p, "pool2.out").ID || !equalShapes(flat.Shape, []int{2, 400}) {
		t.Errorf("flatten is %+v, want a [2,400] view of pool2.out", flat)
	}
	// Dense over [tokens, features] views its input as rows.
	p = mustBuild(t, attention(), Options{Batch: 2})
	rows := find(t, p, "q.in_rows")
	if rows.AliasOf != p.Input || !equalShapes(rows.Shape, []int{16, 16}) {
		t.Errorf("q.in_rows is %+v", rows)
	}
	// Inference: dropout is a view, batchnorm keeps its kernel.
	p = mustBuild(t, regularised(), Options{Batch: 2})
	if d := find(t, p, "drop.out"); d.AliasOf == NoBuf {
		t.Errorf("inference dropout owns storage: %+v", d)
	}
	if strings.Contains(kernels(p.Forward), "dropout") || !strings.Contains(kernels(p.Forward), "batchnorm") {
		t.Errorf("inference forward: %s", kernels(p.Forward))
	}
	if p.Labels != NoBuf || p.Loss != NoBuf || len(p.Backward) != 0 || len(p.Update) != 0 {
		t.Errorf("inference plan has training parts")
	}
}

func TestLowerErrors(t *testing.T) {
	bad := mlp()
	bad.Nodes[2].Op = "fourier"
	_, err := Build(bad, Options{Batch: 1})
	var pe *spec.Error
	if !errors.As(err, &pe) || err.Error() != `mlp.cue:3:3: layer relu1: the planner cannot lower op "fourier"` {
		t.Errorf("unknown op: %v", err)
	}
	bad = mlp()
	bad.Nodes[3].OutShape = []int{300} // fc2 claims 300 units but has 256
	bad.Nodes[3].Units = 300
	bad.Nodes[4].InShapes = [][]int{{256}}
	if _, err = Build(bad, Options{Batch: 1}); err == nil || !strings.Contains(err.Error(), "mlp.cue:") {
		t.Errorf("inconsistent shapes: %v", err)
	}
	bad = mlp()
	bad.Training.Loss = "hinge"
	if _, err = Build(bad, Options{Batch: 1, Training: true}); err == nil || !strings.Contains(err.Error(), `mlp.cue:6:3: layer fc3: the planner knows no loss "hinge"`) {
		t.Errorf("unknown loss: %v", err)
	}
	bad = mlp()
	bad.Training.BatchSize = 0
	if _, err = Build(bad, Options{}); err == nil || !strings.Contains(err.Error(), "batch") {
		t.Errorf("no batch: %v", err)
	}
}

func TestLoss(t *testing.T) {
	p := mustBuild(t, mlp(), Options{Batch: 5, Training: true})
	loss := p.Backward[0]
	if loss.Kernel != KSoftmaxXent || loss.In[0] != p.Output || loss.In[1] != p.Labels || loss.Out[0] != p.Loss {
		t.Errorf("loss step %+v", loss)
	}
	if !equalShapes(p.shapeOf(p.Labels), []int{5, 10}) {
		t.Errorf("labels %v", p.shapeOf(p.Labels))
	}
	p = mustBuild(t, concatModel(), Options{Batch: 5, Training: true})
	if p.Backward[0].Kernel != KMSE {
		t.Errorf("mse model's loss is %s", p.Backward[0].Kernel)
	}
	for _, c := range []struct {
		loss  string
		delta float64
		want  Kernel
	}{{"mae", 0, KMAE}, {"huber", 0.5, KHuber}, {"huber", 0, KHuber}} {
		m := concatModel()
		m.Training.Loss, m.Training.HuberDelta = c.loss, c.delta
		p = mustBuild(t, m, Options{Batch: 5, Training: true})
		st := p.Backward[0]
		wantDelta := c.delta
		if c.want == KHuber && wantDelta == 0 {
			wantDelta = 1 // the schema's default
		}
		if st.Kernel != c.want || st.Attr.Delta != wantDelta || st.In[1] != p.Labels {
			t.Errorf("%s model's loss step is %s with delta %v, want %s with %v", c.loss, st.Kernel, st.Attr.Delta, c.want, wantDelta)
		}
	}
}

func TestDifferentiate(t *testing.T) {
	tests := []struct {
		model    func() *spec.Model
		fusion   bool
		backward string
	}{
		{mlp, false, "softmax_xent gemm_bwd unary_bwd gemm_bwd unary_bwd gemm_bwd"},
		{mlp, true, "softmax_xent gemm_bwd gemm_bwd gemm_bwd"},
		// fc1's output is read by fc2 and by add: the contributions are summed.
		{residual, true, "softmax_xent gemm_bwd binary_bwd unary_bwd gemm_bwd accumulate gemm_bwd"},
		{attention, false, "softmax_xent gemm_bwd gemm_bwd matmul_bwd softmax_bwd unary_bwd matmul_bwd transpose gemm_bwd gemm_bwd gemm_bwd"},
		{concatModel, false, "mse gemm_bwd avgpool2d_bwd concat_bwd conv2d_bwd unary_bwd conv2d_bwd"},
		{regularised, false, "softmax_xent gemm_bwd dropout_bwd unary_bwd batchnorm_bwd gemm_bwd globalavgpool_bwd unary_bwd batchnorm_bwd conv2d_bwd"},
		// centred is read by powconst and div, fc by reducemean and sub:
		// both gradients are summed.
		{transformerNorm, true, "softmax_xent gemm_bwd reducemean_bwd unary_bwd binary_bwd unary_bwd reducemean_bwd unary_bwd accumulate binary_bwd reducemean_bwd accumulate gemm_bwd layernorm_bwd"},
	}
	for _, tc := range tests {
		// a Target that keeps the accumulate steps that sum contributions
		p := mustBuild(t, tc.model(), Options{Batch: 2, Training: true, Fusion: tc.fusion, Target: keeping()})
		if got := kernels(p.Backward); got != tc.backward {
			t.Errorf("%s fusion %v: backward\n%s\nwant\n%s", p.Model, tc.fusion, got, tc.backward)
		}
		// Nobody needs the input's gradient.
		last := p.Backward[len(p.Backward)-1]
		if last.Kernel == KGemmBwd || last.Kernel == KConv2DBwd || last.Kernel == KBatchNormBwd {
			if last.Out[0] != NoBuf {
				t.Errorf("%s: the first layer computes the input's gradient", p.Model)
			}
		}
		for _, pr := range p.Params {
			if pr.Trainable && (pr.Grad == NoBuf || p.Buffers[pr.Grad].Name != pr.Name+".grad") {
				t.Errorf("%s: param %s has gradient %d", p.Model, pr.Name, pr.Grad)
			}
		}
	}
}

// The attention input feeds q, k and v; its gradient is not needed, so the
// three contributions to it must not exist while those to the shared input
// of the matmuls do.
func TestDifferentiateSkipsUnneededGradients(t *testing.T) {
	p := mustBuild(t, attention(), Options{Batch: 2, Training: true})
	for _, b := range p.Buffers {
		if strings.HasPrefix(b.Name, "input.") && b.Kind == KindGrad {
			t.Errorf("gradient of the input: %s", b.Name)
		}
	}
	// A branch no trainable param feeds needs no gradient either.
	b := newModel("frozen", 4)
	x := b.last()
	e := b.unary("e", spec.OpExp, 0, x)
	h := b.dense("fc", 4, x)
	b.binary("mix", spec.OpMul, e, h)
	p = mustBuild(t, b.model(), Options{Batch: 2, Training: true})
	mix := p.Backward[1]
	if mix.Kernel != KBinaryBwd || mix.Out[0] != NoBuf || mix.Out[1] == NoBuf {
		t.Errorf("mix backward %+v: want only the dense branch's gradient", mix)
	}
	if strings.Contains(kernels(p.Backward), "unary_bwd") {
		t.Errorf("backward differentiates exp, which has no params upstream: %s", kernels(p.Backward))
	}
}

func TestOptimize(t *testing.T) {
	tests := []struct {
		model     func() *spec.Model
		kernel    Kernel
		state     []string
		decoupled bool
	}{
		{mlp, KAdam, []string{"adam_m", "adam_v"}, false},
		{attention, KAdam, []string{"adam_m", "adam_v"}, true},
		{regularised, KSGD, []string{"velocity"}, false},
	}
	for _, tc := range tests {
		p := mustBuild(t, tc.model(), Options{Batch: 2, Training: true})
		n := 0
		if len(p.Update) > 0 && p.Update[0].Kernel == KClipGradNorm { // attention clips its gradients first
			n = 1
		}
		for _, pr := range p.Params {
			if !pr.Trainable {
				continue
			}
			s := p.Update[n]
			n++
			if s.Kernel != tc.kernel || s.Out[0] != pr.Buf || s.In[0] != pr.Grad || s.Attr.Decoupled != tc.decoupled {
				t.Errorf("%s: update of %s is %+v", p.Model, pr.Name, s)
			}
			for i, suffix := range tc.state {
				if p.Buffers[pr.State[i]].Name != pr.Name+"."+suffix {
					t.Errorf("%s: state %d of %s is %s", p.Model, i, pr.Name, p.Buffers[pr.State[i]].Name)
				}
			}
		}
		if n != len(p.Update) {
			t.Errorf("%s: %d updates for %d trainable params", p.Model, len(p.Update), n)
		}
	}
	m := mlp()
	m.Training.Optimizer.Kind = "lion"
	if _, err := Build(m, Options{Batch: 2, Training: true}); err == nil || !strings.Contains(err.Error(), `"lion"`) {
		t.Errorf("unknown optimizer: %v", err)
	}
}

// TestFuseUpdate: a target with UpdateTensors gets its Adam and SGD steps
// in multi-tensor steps of at most that many params, each param's (grad,
// m, v) and (param, m, v), or (grad, velocity) and (param, velocity), in
// Params order; the CPU target keeps one step per param.
func TestFuseUpdate(t *testing.T) {
	gpu := Target{Name: "gpu", Conv: CPU.Conv, UpdateTensors: 3}
	for _, tc := range []struct {
		model  func() *spec.Model
		target Target
	}{
		{mlp, gpu},
		{mlp, CPU},
		{regularised, gpu},
		{regularised, CPU},
	} {
		p := mustBuild(t, tc.model(), Options{Batch: 2, Training: true, Target: tc.target})
		var trainable []Param
		for _, pr := range p.Params {
			if pr.Trainable {
				trainable = append(trainable, pr)
			}
		}
		n := 0
		for _, s := range p.Update {
			k, width := 1, len(s.Out)
			if s.Kernel == KAdamMulti || s.Kernel == KSGDMulti {
				width = map[Kernel]int{KAdamMulti: 3, KSGDMulti: 2}[s.Kernel]
				k = len(s.Out) / width
				if tc.target.UpdateTensors < 2 || k > tc.target.UpdateTensors || k < 2 {
					t.Errorf("%s on %s: a multi-tensor step of %d params", p.Model, tc.target.Name, k)
				}
			}
			for j := 0; j < k; j++ {
				pr := trainable[n+j]
				if s.Out[width*j] != pr.Buf || s.In[width*j] != pr.Grad || s.Out[width*j+1] != pr.State[0] || s.In[width*j+1] != pr.State[0] {
					t.Errorf("%s on %s: param %d of update step is %v, want %s", p.Model, tc.target.Name, j, s.Out[width*j], pr.Name)
				}
			}
			n += k
		}
		if n != len(trainable) {
			t.Errorf("%s on %s: the updates cover %d of %d trainable params", p.Model, tc.target.Name, n, len(trainable))
		}
		if tc.target.UpdateTensors < 2 {
			if len(p.Update) != len(trainable) {
				t.Errorf("%s on %s: %d update steps for %d params, want one each", p.Model, tc.target.Name, len(p.Update), len(trainable))
			}
		} else if want := (len(trainable) + 2) / 3; len(p.Update) != want {
			t.Errorf("%s on %s: %d update steps for %d params, want %d", p.Model, tc.target.Name, len(p.Update), len(trainable), want)
		}
		if err := Verify(p); err != nil {
			t.Errorf("%s on %s: %v", p.Model, tc.target.Name, err)
		}
	}
}

func TestFuseEpilogue(t *testing.T) {
	p := mustBuild(t, lenet5(), Options{Batch: 2, Training: true, Fusion: true})
	want := []string{
		"conv1 + relu1 -> conv2d (relu epilogue)",
		"conv2 + relu2 -> conv2d (relu epilogue)",
		"fc1 + relu3 -> gemm (relu epilogue)",
		"fc2 + relu4 -> gemm (relu epilogue)",
	}
	if strings.Join(p.Fusions, "\n") != strings.Join(want, "\n") {
		t.Errorf("fusions %q", p.Fusions)
	}
	for _, s := range p.Backward {
		if s.Kernel == KConv2DBwd && s.Attr.Act != "relu" {
			t.Errorf("fused conv's backward has act %q", s.Attr.Act)
		}
	}
	// GELU is not fused; leakyrelu is (positive slope); a value read twice
	// is not (on a Target that keeps the accumulate of its gradients).
	p = mustBuild(t, residual(), Options{Batch: 2, Training: true, Fusion: true, Target: keeping()})
	if len(p.Fusions) != 1 || p.Forward[1].Attr.Act != "" {
		t.Errorf("residual fusions %q", p.Fusions)
	}
	b := newModel("leaky", 4)
	b.dense("fc", 4)
	b.unary("act", spec.OpLeakyReLU, 0.2)
	p = mustBuild(t, b.model(), Options{Batch: 2, Training: true, Fusion: true})
	if len(p.Forward) != 1 || p.Forward[0].Attr.Act != "leakyrelu" || p.Forward[0].Attr.Alpha != 0.2 {
		t.Errorf("leaky forward %+v", p.Forward)
	}
	// The output is read by the loss: a final activation is still fused
	// (its only reader is the gemm), but a gemm whose output is the
	// model's output is never rewritten.
	b = newModel("head", 4)
	b.dense("fc", 4)
	p = mustBuild(t, b.model(), Options{Batch: 2, Training: true, Fusion: true})
	if len(p.Fusions) != 0 {
		t.Errorf("fused the output: %q", p.Fusions)
	}
}

func TestFuseElementwise(t *testing.T) {
	b := newModel("chain", 16)
	b.dense("fc", 16)
	b.unary("g", spec.OpGELU, 0)
	b.unary("half", spec.OpMulConst, 0.5)
	b.unary("shift", spec.OpAddConst, 1)
	b.unary("t", spec.OpTanh, 0)
	b.dense("head", 4)
	p := mustBuild(t, b.model(), Options{Batch: 2, Training: true, Fusion: true})
	if got := kernels(p.Forward); got != "gemm unary gemm" {
		t.Fatalf("forward %s", got)
	}
	u := p.Forward[1]
	var ops []string
	for _, op := range u.Attr.Chain {
		ops = append(ops, op.Op)
	}
	if strings.Join(ops, ",") != "gelu,mulconst,addconst,tanh" || u.Attr.Chain[1].Alpha != 0.5 ||
		strings.Join(u.Fused, ",") != "g,half,shift,t" {
		t.Errorf("chain %+v fused %v", u.Attr.Chain, u.Fused)
	}
	if len(p.Fusions) != 1 || p.Fusions[0] != "g + half + shift + t -> unary (chain gelu, mulconst, addconst, tanh)" {
		t.Errorf("fusions %q", p.Fusions)
	}
	bw := p.Backward[2]
	if bw.Kernel != KUnaryBwd || len(bw.Attr.Chain) != 4 || bw.In[0] != p.Forward[0].Out[0] {
		t.Errorf("chain backward %+v", bw)
	}
}

// Fusion changes steps, not params: same param buffers, fewer steps.
func TestFusionKeepsParamsAndCutsSteps(t *testing.T) {
	for _, tc := range allModels {
		for _, training := range []bool{true, false} {
			on := mustBuild(t, tc.model(), Options{Batch: 4, Training: training, Fusion: true})
			off := mustBuild(t, tc.model(), Options{Batch: 4, Training: training, Fusion: false})
			if len(on.Params) != len(off.Params) {
				t.Fatalf("%s: %d and %d params", tc.name, len(on.Params), len(off.Params))
			}
			for i := range on.Params {
				a, b := on.Params[i], off.Params[i]
				ba, bb := on.Buffers[a.Buf], off.Buffers[b.Buf]
				if a.Name != b.Name || a.Buf != b.Buf || !equalShapes(ba.Shape, bb.Shape) || ba.Offset != bb.Offset {
					t.Errorf("%s: param %d differs: %+v / %+v", tc.name, i, ba, bb)
				}
			}
			if on.StateSize != off.StateSize {
				t.Errorf("%s: state %d fused, %d not", tc.name, on.StateSize, off.StateSize)
			}
			son, soff := on.Stats(), off.Stats()
			steps := func(s Stats) int { return s.ForwardSteps + s.BackwardSteps + s.UpdateSteps }
			if len(on.Fusions) > 0 && (steps(son) >= steps(soff) || son.TotalBytes >= soff.TotalBytes) {
				t.Errorf("%s: fusion gives %d steps, %d bytes; without %d steps, %d bytes", tc.name, steps(son), son.TotalBytes, steps(soff), soff.TotalBytes)
			}
			if len(off.Fusions) != 0 {
				t.Errorf("%s: fusion off but fusions %q", tc.name, off.Fusions)
			}
		}
	}
}

func TestAssignBuffersReuses(t *testing.T) {
	for _, fusion := range []bool{true, false} {
		p := mustBuild(t, lenet5(), Options{Batch: 64, Training: true, Fusion: fusion})
		if p.WorkSize >= p.NaiveWorkSize || p.WorkSize == 0 {
			t.Errorf("lenet5 fusion %v: work %d, naive %d", fusion, p.WorkSize, p.NaiveWorkSize)
		}
		// The state arena is params, then gradients, then optimizer state.
		last := -1
		for _, pr := range p.Params {
			if o := p.Buffers[pr.Buf].Offset; o <= last {
				t.Errorf("param %s at %d, before the previous one", pr.Name, o)
			} else {
				last = o
			}
		}
		if g := p.Buffers[p.Params[0].Grad].Offset; g <= last {
			t.Errorf("first gradient at %d, inside the params", g)
		}
	}
	// No placement can beat the most bytes live at one step, and reuse must
	// beat giving every buffer its own storage.
	for _, training := range []bool{true, false} {
		p := mustBuild(t, lenet5(), Options{Batch: 64, Training: training, Fusion: true})
		bound := liveBound(p)
		if p.WorkSize < bound || p.WorkSize >= p.NaiveWorkSize {
			t.Errorf("training %v: work %d, live bound %d, naive %d", training, p.WorkSize, bound, p.NaiveWorkSize)
		}
	}
}

// liveBound is the most aligned elements live at any one step.
func liveBound(p *Plan) int {
	first, last := liveRanges(p)
	bound := 0
	for at := -1; at <= len(p.allSteps()); at++ {
		n := 0
		for _, b := range p.Buffers {
			if b.Arena == ArenaWork && b.AliasOf == NoBuf && first[b.ID] <= at && at <= last[b.ID] {
				n += alignUp(b.Size)
			}
		}
		bound = max(bound, n)
	}
	return bound
}

func TestMemoryLimit(t *testing.T) {
	p := mustBuild(t, flagship(), Options{Training: true, Fusion: true})
	total := 4 * int64(p.StateSize+p.WorkSize)
	if _, err := Build(flagship(), Options{Training: true, Fusion: true, MemoryLimit: total}); err != nil {
		t.Errorf("a plan at the limit fails: %v", err)
	}
	_, err := Build(flagship(), Options{Training: true, Fusion: true, MemoryLimit: total - 1})
	var pe *spec.Error
	if !errors.As(err, &pe) || pe.Pos.File != "mnist.cue" || pe.Layer == "" || !strings.Contains(err.Error(), "above the memory limit") {
		t.Fatalf("over the limit: %v", err)
	}
	t.Log(err)
}

// Verify must catch a broken plan; each case breaks one invariant.
func TestVerifyCatches(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(p *Plan)
		want    string
	}{
		{"wrong output shape", func(p *Plan) { b := &p.Buffers[p.Output]; b.Shape = []int{1, 20}; b.Size = 20 }, "has shape [1,20], want [2,10]"},
		{"missing operand", func(p *Plan) { p.Forward[0].In = p.Forward[0].In[:2] }, "inputs, want 3"},
		{"read before written", func(p *Plan) { p.Backward = append(p.Backward[:1], p.Backward[2:]...) }, "before any step writes it"},
		{"written twice", func(p *Plan) { p.Forward = append(p.Forward, p.Forward[len(p.Forward)-1]) }, "a second time"},
		{"duplicate name", func(p *Plan) { p.Buffers[1].Name = p.Buffers[0].Name }, "is taken"},
		{"overlap", func(p *Plan) {
			in := &p.Buffers[p.Input]
			out := &p.Buffers[p.root(p.Output)]
			out.Offset = in.Offset
		}, "overlap"},
		{"view of a view", func(p *Plan) {
			v := p.addView("v1", p.Output, p.shapeOf(p.Output))
			w := p.addView("v2", v, p.shapeOf(p.Output))
			p.Buffers[w].AliasOf = v
		}, "itself a view"},
		{"backward kernel forward", func(p *Plan) { p.Forward[0].Kernel = KGemmBwd }, "phase"},
		{"unfusable act", func(p *Plan) { p.Forward[0].Attr.Act = "gelu" }, "cannot be fused"},
		{"empty scratch", func(p *Plan) { p.addBuffer("fc1.cols", KindScratch, []int{0}) }, "has an empty axis"},
		{"precision off a gemm", func(p *Plan) { p.Update[0].Attr.Precision = PrecisionBF16 }, "adam step with a precision"},
		{"unknown precision", func(p *Plan) { p.Forward[0].Attr.Precision = "fp8" }, `unknown precision "fp8"`},
	}
	for _, tc := range tests {
		p := mustBuild(t, mlp(), Options{Batch: 2, Training: true})
		tc.breakIt(p)
		err := Verify(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify says %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, tc := range allModels {
		var a, b bytes.Buffer
		for _, w := range []*bytes.Buffer{&a, &b} {
			p := mustBuild(t, tc.model(), Options{Batch: 8, Training: true, Fusion: true})
			if err := json.NewEncoder(w).Encode(p); err != nil {
				t.Fatal(err)
			}
			if err := WriteText(w, p); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: two builds differ", tc.name)
		}
	}
}

// TestGoldenPlans keeps the text plans of the hand-built models; run with
// MLBUILD_UPDATE=1 to rewrite them, and review the diff like code.
func TestGoldenPlans(t *testing.T) {
	for _, tc := range allModels {
		for _, mode := range []struct {
			suffix           string
			training, fusion bool
		}{{"train", true, true}, {"train-nofusion", true, false}, {"infer", false, true}} {
			if mode.suffix != "train" && tc.name != "flagship" && tc.name != "regularised" {
				continue
			}
			p := mustBuild(t, tc.model(), Options{Batch: 8, Training: mode.training, Fusion: mode.fusion})
			var got bytes.Buffer
			if err := WriteText(&got, p); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", "plans", tc.name+"-"+mode.suffix+".golden")
			if os.Getenv("MLBUILD_UPDATE") != "" {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s differs from the plan; run with MLBUILD_UPDATE=1 and review the diff\n%s", file, got.String())
			}
		}
	}
}
