package gpu

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// testBuffer appends a buffer of the given shape, its own (no alias), to a
// test plan and returns its id.
func testBuffer(p *planner.Plan, name string, kind planner.BufKind, shape ...int) planner.BufID {
	id := planner.BufID(len(p.Buffers))
	p.Buffers = append(p.Buffers, planner.Buffer{ID: id, Name: name, Kind: kind, Shape: shape, Size: prod(shape), AliasOf: planner.NoBuf})
	return id
}

// handPlan builds, by hand, the plan of a small MNIST-style network
// (conv 1→4 3x3 relu, maxpool 2, dense 676/4→16 relu, dropout, dense 16→10,
// softmax cross-entropy, Adam), standing in for planner.Build until it
// lands. Arenas and offsets are left zero: Lower binds by buffer id.
func handPlan(batch int) *planner.Plan {
	p := &planner.Plan{Model: "hand", Batch: batch, Training: true}
	add := func(name string, kind planner.BufKind, shape ...int) planner.BufID {
		return testBuffer(p, name, kind, shape...)
	}
	geom := &planner.ConvGeom{N: batch, C: 1, H: 28, W: 28, OC: 4, OH: 26, OW: 26, KH: 3, KW: 3, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1}
	pool := &planner.ConvGeom{N: batch, C: 4, H: 26, W: 26, OC: 4, OH: 13, OW: 13, KH: 2, KW: 2, SH: 2, SW: 2, DH: 1, DW: 1, Groups: 1}
	x := add("input", planner.KindInput, batch, 1, 28, 28)
	lab := add("labels", planner.KindLabels, batch, 10)
	cw, cb := add("conv1.weight", planner.KindParam, 4, 1, 3, 3), add("conv1.bias", planner.KindParam, 4)
	c1 := add("conv1.out", planner.KindActivation, batch, 4, 26, 26)
	cols := add("conv1.cols", planner.KindScratch, ConvScratch(*geom))
	p1 := add("pool1.out", planner.KindActivation, batch, 4, 13, 13)
	f1 := add("flatten.out", planner.KindActivation, batch, 676)
	w1, b1 := add("fc1.weight", planner.KindParam, 16, 676), add("fc1.bias", planner.KindParam, 16)
	h1 := add("fc1.out", planner.KindActivation, batch, 16)
	d1 := add("drop.out", planner.KindActivation, batch, 16)
	mask := add("drop.mask", planner.KindScratch, batch, 16)
	w2, b2 := add("fc2.weight", planner.KindParam, 10, 16), add("fc2.bias", planner.KindParam, 10)
	z := add("fc2.out", planner.KindActivation, batch, 10)
	loss := add("loss", planner.KindLoss, 1)
	dz := add("fc2.out.grad", planner.KindGrad, batch, 10)
	dd1 := add("drop.out.grad", planner.KindGrad, batch, 16)
	dh1 := add("fc1.out.grad", planner.KindGrad, batch, 16)
	df1 := add("flatten.out.grad", planner.KindGrad, batch, 676)
	dp1 := add("pool1.out.grad", planner.KindGrad, batch, 4, 13, 13)
	dc1 := add("conv1.out.grad", planner.KindGrad, batch, 4, 26, 26)
	p.Buffers[f1].AliasOf, p.Buffers[df1].AliasOf = p1, dp1
	grads := map[planner.BufID]planner.BufID{}
	for _, w := range []planner.BufID{cw, cb, w1, b1, w2, b2} {
		grads[w] = add(p.Buffers[w].Name+".grad", planner.KindParamGrad, p.Buffers[w].Shape...)
	}
	p.Input, p.Labels, p.Output, p.Loss = x, lab, z, loss
	NB := planner.NoBuf
	p.Forward = planner.Phase{
		{Kernel: planner.KConv2D, Layer: "conv1", In: []planner.BufID{x, cw, cb}, Out: []planner.BufID{c1, cols}, Attr: planner.Attr{Conv: geom, Act: "relu"}},
		{Kernel: planner.KMaxPool2D, Layer: "pool1", In: []planner.BufID{c1}, Out: []planner.BufID{p1}, Attr: planner.Attr{Conv: pool}},
		{Kernel: planner.KGemm, Layer: "fc1", In: []planner.BufID{f1, w1, b1}, Out: []planner.BufID{h1}, Attr: planner.Attr{Act: "relu"}},
		{Kernel: planner.KDropout, Layer: "drop", In: []planner.BufID{h1}, Out: []planner.BufID{d1, mask}, Attr: planner.Attr{Rate: 0.25}},
		{Kernel: planner.KGemm, Layer: "fc2", In: []planner.BufID{d1, w2, b2}, Out: []planner.BufID{z}},
	}
	p.Backward = planner.Phase{
		{Kernel: planner.KSoftmaxXent, Layer: "loss", In: []planner.BufID{z, lab}, Out: []planner.BufID{loss, dz}},
		{Kernel: planner.KGemmBwd, Layer: "fc2", In: []planner.BufID{d1, w2, z, dz}, Out: []planner.BufID{dd1, grads[w2], grads[b2]}},
		{Kernel: planner.KDropoutBwd, Layer: "drop", In: []planner.BufID{mask, dd1}, Out: []planner.BufID{dh1}, Attr: planner.Attr{Rate: 0.25}},
		{Kernel: planner.KGemmBwd, Layer: "fc1", In: []planner.BufID{f1, w1, h1, dh1}, Out: []planner.BufID{df1, grads[w1], grads[b1]}, Attr: planner.Attr{Act: "relu"}},
		{Kernel: planner.KMaxPool2DBwd, Layer: "pool1", In: []planner.BufID{c1, p1, dp1}, Out: []planner.BufID{dc1}, Attr: planner.Attr{Conv: pool}},
		{Kernel: planner.KConv2DBwd, Layer: "conv1", In: []planner.BufID{x, cw, c1, dc1, cols}, Out: []planner.BufID{NB, grads[cw], grads[cb]}, Attr: planner.Attr{Conv: geom, Act: "relu"}},
	}
	for _, w := range []planner.BufID{cw, cb, w1, b1, w2, b2} {
		m := add(p.Buffers[w].Name+".adam_m", planner.KindOptState, p.Buffers[w].Shape...)
		v := add(p.Buffers[w].Name+".adam_v", planner.KindOptState, p.Buffers[w].Shape...)
		p.Update = append(p.Update, planner.Step{Kernel: planner.KAdam, Layer: p.Buffers[w].Name, In: []planner.BufID{grads[w], m, v}, Out: []planner.BufID{w, m, v},
			Attr: planner.Attr{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}})
	}
	return p
}

// describe prints a program's ops one a line, for the golden file.
func describe(prog *Program) string {
	var b strings.Builder
	for _, ph := range []struct {
		name string
		ops  []Op
	}{{"forward", prog.Forward}, {"backward", prog.Backward}, {"update", prog.Update}, {"infer", prog.Infer}} {
		fmt.Fprintf(&b, "%s:\n", ph.name)
		for _, op := range ph.ops {
			if l := op.Launch; l != nil {
				var binds []string
				for _, bd := range l.Bindings {
					if bd.StepArgs {
						binds = append(binds, "args")
					} else {
						binds = append(binds, fmt.Sprintf("%d@%d", bd.Buf, bd.Offset))
					}
				}
				fmt.Fprintf(&b, "  %-6s %-14s launch %s %dx%d (%s)\n", op.Layer, op.Kernel, l.Kernel, l.Groups, l.Threadgroup, strings.Join(binds, " "))
			} else {
				g := op.Gemm
				fmt.Fprintf(&b, "  %-6s %-14s gemm tA=%v tB=%v %dx%dx%d beta=%g A=%d@%d/%d B=%d@%d/%d C=%d@%d/%d\n", op.Layer, op.Kernel,
					g.TransA, g.TransB, g.M, g.N, g.K, g.Beta, g.A.Buf, g.A.Offset, g.A.LD, g.B.Buf, g.B.Offset, g.B.LD, g.C.Buf, g.C.Offset, g.C.LD)
			}
		}
	}
	return b.String()
}

// golden compares got with testdata/golden/name, rewriting it when
// MLBUILD_UPDATE=1.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if os.Getenv("MLBUILD_UPDATE") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the generated output; review and rerun with MLBUILD_UPDATE=1 if intended.\n--- generated:\n%s", path, got)
	}
}

func TestLowerHandPlan(t *testing.T) {
	p := handPlan(3)
	for _, d := range []*Dialect{Metal, CUDA} {
		prog, err := Lower(p, d)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Lower(p, d)
		if err != nil {
			t.Fatal(err)
		}
		if again.Source != prog.Source || describe(again) != describe(prog) {
			t.Errorf("%s: lowering is not deterministic", d.Name)
		}
		// Dedup: the im2col of the forward and backward passes, the
		// adam kernels of equal-sized params, are shared.
		seen := map[string]bool{}
		for _, k := range prog.Kernels {
			if seen[k.Name] {
				t.Errorf("%s: kernel %s printed twice", d.Name, k.Name)
			}
			seen[k.Name] = true
		}
		launches := 0
		for _, ops := range [][]Op{prog.Forward, prog.Backward, prog.Update, prog.Infer} {
			for _, op := range ops {
				if op.Launch != nil {
					launches++
					if !seen[op.Launch.Kernel] {
						t.Errorf("%s: launch of unknown kernel %s", d.Name, op.Launch.Kernel)
					}
				}
			}
		}
		if len(prog.Kernels) >= launches {
			t.Errorf("%s: %d kernels for %d launches: nothing was shared", d.Name, len(prog.Kernels), launches)
		}
		syntaxCheck(t, d, prog.Source)
		ext := map[string]string{"metal": "metal", "cuda": "cu"}[d.Name]
		golden(t, "hand_plan."+ext, prog.Source)
		if d == Metal {
			golden(t, "hand_plan.ops", describe(prog))
		}
	}
}

// syntaxCheck compiles a whole program's kernel source with g++ through the
// dialect's shim (syntax and types only).
func syntaxCheck(t *testing.T, d *Dialect, src string) {
	t.Helper()
	gpp := gxx(t)
	if d == CUDA {
		src = "#include \"cuda_shim.h\"\n" + src
	}
	path := filepath.Join(t.TempDir(), "program.cpp")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	shim, _ := filepath.Abs("testdata/shim")
	if out, err := exec.Command(gpp, append(append([]string{"-std=c++20", "-fsyntax-only", "-Wno-attributes"}, shimIncludes(shim)...), path)...).CombinedOutput(); err != nil {
		t.Errorf("%s program source does not compile through the shim: %v\n%s", d.Name, err, out)
	}
}

func TestLowerErrors(t *testing.T) {
	p := handPlan(2)
	p.Forward[2].In[1] = planner.BufID(len(p.Buffers) + 5)
	if _, err := Lower(p, Metal); err == nil || !strings.Contains(err.Error(), `layer "fc1"`) {
		t.Errorf("bad buffer id: got error %v, want one naming layer fc1", err)
	}
	p = handPlan(2)
	p.Forward[1].Attr.Conv = nil
	if _, err := Lower(p, Metal); err == nil || !strings.Contains(err.Error(), "pool1") {
		t.Errorf("pool without geometry: got error %v", err)
	}
	p = handPlan(2)
	p.Forward[0].Kernel = "fft"
	if _, err := Lower(p, Metal); err == nil || !strings.Contains(err.Error(), `"fft"`) {
		t.Errorf("unknown kernel: got error %v", err)
	}
}

// TestBufferLimit: a kernel that binds more buffers than its dialect allows
// (Metal: 31) is refused when it is lowered, not when Metal compiles it;
// the multi-tensor Adam of each dialect fits, and its multi-tensor SGD
// with momentum and a twin for every param.
func TestBufferLimit(t *testing.T) {
	var params []Param
	var ops []operand
	for i := 0; i < 32; i++ {
		params = append(params, in(fmt.Sprint("x", i), 1))
		ops = append(ops, operand{args: true})
	}
	k := &Kernel{Params: params, Threadgroup: 1, Groups: 1}
	l := &lowering{d: Metal, lib: NewLibrary(Metal), step: &planner.Step{}}
	if err := l.launch("wide", k, nil, ops...); err == nil || !strings.Contains(err.Error(), "binds 32 buffers; metal allows 31") {
		t.Errorf("a 32-buffer Metal kernel: %v", err)
	}
	for _, d := range []*Dialect{Metal, CUDA} {
		n := UpdateTensors(d)
		sizes := make([]int, n)
		for i := range sizes {
			sizes[i] = 3
		}
		if k := adamMultiKernel(sizes, make([]float32, n), 0.9, 0.999, 1e-8, false); d.MaxBuffers > 0 && len(k.Params) > d.MaxBuffers || n < 2 {
			t.Errorf("%s: Adam over %d tensors binds %d buffers (limit %d)", d.Name, n, len(k.Params), d.MaxBuffers)
		}
		twins := make([]string, n)
		for i := range twins {
			twins[i] = fmt.Sprint("p_", i)
		}
		if k := withTwins(sgdMultiKernel(sizes, make([]float32, n), 0.9), twins); d.MaxBuffers > 0 && len(k.Params) > d.MaxBuffers {
			t.Errorf("%s: SGD with momentum over %d tensors, each with a twin, binds %d buffers (limit %d)", d.Name, n, len(k.Params), d.MaxBuffers)
		}
	}
}

// TestClipLaunchesFitTheBufferLimit: clipping 70 gradients on Metal (31
// buffers a kernel) takes three launches of sums of squares, the scale and
// three of scaling, each binding at most 31 buffers, the sums at each
// chunk's offset; on CUDA two of each.
func TestClipLaunchesFitTheBufferLimit(t *testing.T) {
	p := &planner.Plan{Model: "clip", Batch: 1, Training: true}
	st := planner.Step{Kernel: planner.KClipGradNorm, Layer: "gradients", Attr: planner.Attr{ClipNorm: 1}}
	for i := 0; i < 70; i++ {
		st.In = append(st.In, testBuffer(p, fmt.Sprint("p", i, ".grad"), planner.KindParamGrad, 3+i))
	}
	sums := testBuffer(p, "grad_norm.sums", planner.KindScratch, 71)
	st.Out = append(append([]planner.BufID(nil), st.In...), sums)
	for _, tc := range []struct {
		d      *Dialect
		chunks int
	}{{Metal, 3}, {CUDA, 2}} {
		l := &lowering{p: p, d: tc.d, lib: NewLibrary(tc.d), step: &st}
		if err := l.clipGradNorm(&st); err != nil {
			t.Fatalf("%s: %v", tc.d.Name, err)
		}
		if len(l.ops) != 2*tc.chunks+1 {
			t.Fatalf("%s: %d launches, want %d", tc.d.Name, len(l.ops), 2*tc.chunks+1)
		}
		covered := 0
		for i, op := range l.ops {
			b := op.Launch.Bindings
			if tc.d.MaxBuffers > 0 && len(b) > tc.d.MaxBuffers {
				t.Errorf("%s: launch %d binds %d buffers", tc.d.Name, i, len(b))
			}
			if i < tc.chunks { // sums of squares: the gradients, then the sums at the chunk's first
				if last := b[len(b)-1]; last.Buf != sums || last.Offset != covered || last.Size != len(b)-1 {
					t.Errorf("%s: launch %d writes sums at %d (%d), want %d (%d)", tc.d.Name, i, last.Offset, last.Size, covered, len(b)-1)
				}
				covered += len(b) - 1
			}
			if i > tc.chunks { // scaling: the scale sums[70], then the gradients
				if b[0].Buf != sums || b[0].Offset != 70 {
					t.Errorf("%s: launch %d reads its scale at %d, want 70", tc.d.Name, i, b[0].Offset)
				}
			}
		}
		if covered != 70 {
			t.Errorf("%s: the sums cover %d gradients, want 70", tc.d.Name, covered)
		}
	}
}

// TestLowerPadded: a padded softmax step (scores [2, 2, 5, 5], causal) and
// a padded fused attention step lower to kernels that bind the token ids
// [2, 5], the softmax's second buffer (after x) and the attention's last
// (after o and lse); token ids of another shape are refused with an error
// that names them.
func TestLowerPadded(t *testing.T) {
	plan := func(idShape ...int) *planner.Plan {
		p := &planner.Plan{Model: "pad", Batch: 2}
		add := func(name string, kind planner.BufKind, shape ...int) planner.BufID {
			return testBuffer(p, name, kind, shape...)
		}
		ids := add("input", planner.KindInput, idShape...)
		s := add("scores", planner.KindActivation, 2, 2, 5, 5)
		y := add("att", planner.KindActivation, 2, 2, 5, 5)
		q, kt, v := add("q", planner.KindActivation, 2, 2, 5, 8), add("kt", planner.KindActivation, 2, 2, 8, 5), add("v", planner.KindActivation, 2, 2, 5, 8)
		o, lse := add("o", planner.KindActivation, 2, 2, 5, 8), add("lse", planner.KindScratch, 2, 2, 5)
		p.Input, p.Output = ids, o
		pad := planner.Attr{Axis: 3, Causal: true, Padding: true, PadID: 95}
		p.Forward = planner.Phase{
			{Kernel: planner.KSoftmax, Layer: "att", In: []planner.BufID{s, ids}, Out: []planner.BufID{y}, Attr: pad},
			{Kernel: planner.KAttention, Layer: "attn", In: []planner.BufID{q, kt, v, ids}, Out: []planner.BufID{o, lse}, Attr: planner.Attr{Scale: 0.35, Causal: true, Padding: true, PadID: 95}},
		}
		return p
	}
	prog, err := Lower(plan(2, 5), CUDA)
	if err != nil {
		t.Fatal(err)
	}
	if len(prog.Forward) != 2 {
		t.Fatalf("%d forward ops, want 2", len(prog.Forward))
	}
	for i, c := range []struct {
		kernel string
		at, n  int // the ids' binding, of n
	}{{"softmax_padded", 1, 3}, {"attention", 5, 6}} {
		l := prog.Forward[i].Launch
		if l == nil || !strings.Contains(l.Kernel, c.kernel) || len(l.Bindings) != c.n || l.Bindings[c.at].Buf != 0 || l.Bindings[c.at].Size != 10 {
			t.Errorf("op %d: launch %+v, want kernel %s binding the token ids (buffer 0, 10 elements) at %d of %d", i, l, c.kernel, c.at, c.n)
		}
	}
	for _, k := range prog.Kernels {
		if strings.Contains(k.Doc, "padding id 95") || strings.Contains(k.Doc, "masked where their id is 95") {
			continue
		}
		t.Errorf("kernel %q does not say that it masks id 95", k.Doc)
	}
	p := plan(2, 4)
	p.Forward = p.Forward[:1]
	if _, err := Lower(p, CUDA); err == nil || !strings.Contains(err.Error(), "token ids [2 4]") {
		t.Errorf("a padded softmax with ids [2 4] for 5 keys: error %v, want one naming the ids", err)
	}
	p = plan(2, 4)
	p.Forward = p.Forward[1:]
	if _, err := Lower(p, CUDA); err == nil || !strings.Contains(err.Error(), "token ids [2 4]") {
		t.Errorf("a padded attention with ids [2 4] for 5 keys: error %v, want one naming the ids", err)
	}
}
