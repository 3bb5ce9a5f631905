package emit

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/planner"
)

// generator renders the CPU backend's program: its step functions (the
// kernel calls, which GPU programs also use for their CPU references) and
// its app.Model. Plans are rendered with a one-letter prefix each: t
// (training), e (inference at the spec's batch size), o (inference of one
// sample).
type generator struct {
	*mainFile
	// trainState maps a param name to the variable of its buffer in the
	// training plan's state arena, which the inference plans share.
	trainState map[string]string
	// reference says the plans are another backend's, whose steps the
	// CPU kernels check: their convolution methods name that backend's
	// kernels, and the CPU runs its own exact ones instead.
	reference bool
	// bf16Weights, while the decode plan renders, places each dense
	// weight it multiplies in the bfloat16 arena dW16 (by param name);
	// gemmCall then gives the step a bfloat16 branch.
	bf16Weights map[string]int
	// prefillBF16 says the batch-1 inference plan is also the decode's
	// prefill (planner.DeriveDecode recognises the model): its dense
	// steps then get a bf16 branch for generate --precision bf16 on AMX.
	prefillBF16 bool
	// view is the prefix of the plan whose steps are rendering.
	view string
	// attentionDraws numbers the training plan's fused attentions with
	// dropout (by layer): the forward draws the dropout's seed and step
	// into attentionDraws[i] and the backward reads them back.
	attentionDraws map[string]int
	// folded maps a folded weight's buffer name to its variable and
	// offset in the folded arena, which the inference plans share (they
	// fold the same layers: planner.ArenaFolded); foldedViews point the
	// variables into the arena.
	folded      map[string]foldedVar
	foldedViews []string
}

// foldedVar is a folded weight's variable in the program and its place
// in the folded arena.
type foldedVar struct {
	name         string
	offset, size int
}

func (g *generator) render() error {
	in := g.in
	for _, pl := range []*planner.Plan{in.Train, in.Infer, in.Infer1} {
		if pl == nil {
			return fmt.Errorf("emit: missing plan")
		}
		if err := planner.Verify(pl); err != nil {
			return fmt.Errorf("emit: plan for batch %d does not verify (a bug in mlbuild's planner): %v", pl.Batch, err)
		}
	}
	t := &planView{prefix: "t", plan: in.Train}
	e := &planView{prefix: "e", plan: in.Infer}
	o := &planView{prefix: "o", plan: in.Infer1}

	g.fileHeader(in.Backend,
		"every buffer below has its constant shape, so a step handed the wrong",
		"buffer does not compile. Run it with no arguments for its commands.")
	g.p("func main() { app.Main(model{}) }")
	g.p("")
	g.p("// Arena sizes in float32 elements.")
	g.p("const (")
	g.p("stateSize = %d", in.Train.StateSize)
	for _, v := range []*planView{t, e, o} {
		g.p("%sWorkSize = %d // naive: %d", v.prefix, v.plan.WorkSize, v.plan.NaiveWorkSize)
	}
	outSize := in.Train.Buffers[in.Train.Output].Size
	g.p("tLogitsSize = %d", outSize)
	if e.plan.FoldedSize != o.plan.FoldedSize {
		return fmt.Errorf("emit: the inference plans' folded arenas differ (%d and %d elements; a bug in mlbuild's planner)", e.plan.FoldedSize, o.plan.FoldedSize)
	}
	if e.plan.FoldedSize > 0 {
		g.p("foldedSize = %d // the batch norms folded into the layers before them, shared by the inference plans", e.plan.FoldedSize)
	}
	g.p(")")
	g.p("")
	g.p("// The arenas, made when a phase first needs them (useState, useTrain,")
	g.p("// useInfer, useOne) after app.Allocate has checked the machine's memory.")
	g.p("var (")
	g.p("state []float32")
	for _, v := range []*planView{t, e, o} {
		g.p("%sWork []float32", v.prefix)
	}
	g.p("tLogits []float32")
	if e.plan.FoldedSize > 0 {
		g.p("folded []float32")
	}
	g.p("// trainLogits keeps the training prediction, whose buffer the backward pass reuses.")
	g.p("trainLogits *[tLogitsSize]float32")
	g.p("dropoutRand = cpu.NewRand(1)")
	g.attentionDraws = map[string]int{}
	for _, st := range in.Train.Forward {
		if st.Kernel == planner.KAttention && st.Attr.Rate > 0 {
			g.attentionDraws[st.Layer] = len(g.attentionDraws)
		}
	}
	if n := len(g.attentionDraws); n > 0 {
		g.p("// attentionDraws are each fused attention's dropout seed and step,")
		g.p("// drawn by its forward and read again by its backward.")
		g.p("attentionDraws [%d]uint64", n)
	}
	g.p(")")
	g.p("")

	if err := g.declareBuffers(t, true); err != nil {
		return err
	}
	for _, v := range []*planView{e, o} {
		if err := g.declareBuffers(v, false); err != nil {
			return err
		}
	}
	g.useArenas(t, e, o)

	var body bytes.Buffer
	saved := g.buf
	g.buf = body
	if _, err := planner.DeriveDecode(o.plan); err == nil && !g.reference {
		g.prefillBF16 = true
	}
	if err := g.renderPhases(t, e, o); err != nil {
		return err
	}
	g.renderModel(t, e, o)
	if err := g.renderDecode(o); err != nil {
		return err
	}
	g.renderMeta()
	body = g.buf
	g.buf = saved
	g.sharedDecls("Constant shapes and element-wise chains of the steps.")
	g.buf.Write(body.Bytes())
	return nil
}

// declareBuffers gives every buffer of a plan a typed view, declared
// here and pointed into its arena by useArenas (v.views). Params and
// statistics of the inference plans are the training plan's.
func (g *generator) declareBuffers(v *planView, train bool) error {
	pl := v.plan
	v.vars = make([]string, len(pl.Buffers))
	v.views, v.stateViews = nil, nil
	paramName := map[planner.BufID]string{}
	for _, p := range pl.Params {
		paramName[p.Buf] = p.Name
	}
	g.p("// Buffers of the %s plan (batch %d).", map[bool]string{true: "training", false: "inference"}[train], pl.Batch)
	g.p("var (")
	for i, b := range pl.Buffers {
		if b.ID != planner.BufID(i) {
			return fmt.Errorf("emit: buffer %d has id %d", i, b.ID)
		}
		name := fmt.Sprintf("%sb%d", v.prefix, i)
		arena := v.prefix + "Work"
		if b.Arena == planner.ArenaFolded {
			shared, err := g.foldedVar(b)
			if err != nil {
				return err
			}
			v.vars[i] = shared
			continue
		}
		if b.Arena == "state" {
			pname, ok := paramName[b.ID]
			if !ok && b.AliasOf != planner.NoBuf {
				// a view of a param (a conv1d's weight seen as 2-D) has
				// the param's size, and so its variable
				pname, ok = paramName[b.AliasOf]
			}
			if !train {
				if !ok {
					return fmt.Errorf("emit: inference buffer %s is in the state arena but is no param", b.Name)
				}
				shared, ok := g.trainState[pname]
				if !ok {
					return fmt.Errorf("emit: inference param %s has no training counterpart", pname)
				}
				v.vars[i] = shared
				continue
			}
			name = fmt.Sprintf("s%d", i)
			if ok {
				g.trainState[pname] = name
			}
			arena = "state"
		}
		g.p("%s *[%d]float32 // %s %s", name, b.Size, comment(b.Name), shapeText(b.Shape))
		view := fmt.Sprintf("%s = (*[%d]float32)(%s[%d:%d])", name, b.Size, arena, b.Offset, b.Offset+b.Size)
		if arena == "state" {
			v.stateViews = append(v.stateViews, view)
		} else {
			v.views = append(v.views, view)
		}
		v.vars[i] = name
	}
	g.p(")")
	g.p("")
	return nil
}

// foldedVar returns the variable of a folded weight b of an inference
// plan, declaring it for the first plan that has it and checking that a
// later plan places it alike.
func (g *generator) foldedVar(b planner.Buffer) (string, error) {
	if g.folded == nil {
		g.folded = map[string]foldedVar{}
	}
	if f, ok := g.folded[b.Name]; ok {
		if f.offset != b.Offset || f.size != b.Size || b.AliasOf != planner.NoBuf {
			return "", fmt.Errorf("emit: the inference plans place the folded %s apart (a bug in mlbuild's planner)", b.Name)
		}
		return f.name, nil
	}
	if b.AliasOf != planner.NoBuf {
		return "", fmt.Errorf("emit: the folded %s is a view", b.Name)
	}
	f := foldedVar{name: fmt.Sprintf("f%d", len(g.folded)), offset: b.Offset, size: b.Size}
	g.folded[b.Name] = f
	g.p("%s *[%d]float32 // %s %s", f.name, b.Size, comment(b.Name), shapeText(b.Shape))
	g.foldedViews = append(g.foldedViews, fmt.Sprintf("%s = (*[%d]float32)(folded[%d:%d])", f.name, b.Size, b.Offset, b.Offset+b.Size))
	return f.name, nil
}

// useArenas writes the functions that make each phase's arenas on first
// use and point its buffers into them: useState for the weights alone
// (loading or initialising them), useTrain, useInfer and useOne for a
// plan's steps. Each checks, through app.Allocate, everything it is about
// to make at once, so a program that only predicts never makes (nor
// checks) the training arena.
func (g *generator) useArenas(t, e, o *planView) {
	stateArena := `app.Arena{Name: "state", Size: stateSize, Data: &state}`
	g.p("// viewState points the state arena's buffers into it.")
	g.p("func viewState() {")
	for _, s := range t.stateViews {
		g.p("%s", s)
	}
	g.p("}")
	g.p("")
	g.p("// useState makes the state arena, for the weights alone.")
	g.p("func useState() {")
	g.p("if state == nil {")
	g.p("app.Allocate(&meta, %s, 0, %s)", quote("the weights"), stateArena)
	g.p("viewState()")
	g.p("}")
	g.p("}")
	g.p("")
	for _, u := range []struct {
		v     *planView
		fn    string
		phase string
		name  string
	}{
		{t, "useTrain", "training", "training work"},
		{e, "useInfer", "inference", "inference work"},
		{o, "useOne", "one-sample inference", "one-sample work"},
	} {
		v := u.v
		g.p("// %s makes the arenas of the %s plan (batch %d) on its first call", u.fn, u.phase, v.plan.Batch)
		g.p("// and points the plan's buffers into them.")
		g.p("func %s() {", u.fn)
		g.p("if %sWork != nil {", v.prefix)
		g.p("return")
		g.p("}")
		arenas := []string{stateArena, fmt.Sprintf("app.Arena{Name: %s, Size: %sWorkSize, Data: &%sWork}", quote(u.name), v.prefix, v.prefix)}
		if v == t {
			arenas = append(arenas, `app.Arena{Name: "training prediction", Size: tLogitsSize, Data: &tLogits}`)
		}
		if v != t && v.plan.FoldedSize > 0 {
			arenas = append(arenas, `app.Arena{Name: "folded weights", Size: foldedSize, Data: &folded}`)
		}
		g.p("app.Allocate(&meta, %s, %d, %s)", quote(u.phase), v.plan.Batch, strings.Join(arenas, ", "))
		g.p("viewState()")
		if v != t && v.plan.FoldedSize > 0 {
			for _, s := range g.foldedViews {
				g.p("%s", s)
			}
		}
		for _, s := range v.views {
			g.p("%s", s)
		}
		if v == t {
			g.p("trainLogits = (*[tLogitsSize]float32)(tLogits)")
		}
		g.p("}")
		g.p("")
	}
}

// renderPhases writes one function per step and one per phase.
func (g *generator) renderPhases(t, e, o *planView) error {
	if err := g.renderPhase(t, "Forward", t.plan.Forward, true); err != nil {
		return err
	}
	if err := g.renderPhase(t, "Backward", t.plan.Backward, true); err != nil {
		return err
	}
	if err := g.renderPhase(t, "Update", t.plan.Update, true); err != nil {
		return err
	}
	if err := g.renderPhase(e, "Forward", e.plan.Forward, false); err != nil {
		return err
	}
	return g.renderPhase(o, "Forward", o.plan.Forward, false)
}

// stepCall is a rendered step: its function and how to call it.
type stepCall struct {
	fn   string
	args []string // argument variables, for the call
	loss bool     // returns the loss
	lr   bool     // takes lr and step
	out  string   // the variable of its first output, for tracing
}

func (g *generator) renderPhase(v *planView, phase string, steps planner.Phase, training bool) error {
	g.view = v.prefix
	var calls []stepCall
	for i, st := range steps {
		c, err := g.renderStep(v, phase, i, st, training)
		if err != nil {
			return fmt.Errorf("emit: %s step %d (%s, layer %s): %v", strings.ToLower(phase), i, st.Kernel, st.Layer, err)
		}
		calls = append(calls, c)
	}
	if phase == "Forward" {
		v.forward = calls
	}
	if folds := v.plan.FoldSteps(); phase == "Forward" && !training && folds > 0 {
		// The fold steps run apart from the forward pass: only when the
		// weights may have changed since they last ran (renderModel's
		// weightsFolded).
		g.p("// %sFold runs the fold steps of the %s plan: each batch norm folded", v.prefix, map[string]string{"e": "inference", "o": "one-sample inference"}[v.prefix])
		g.p("// into the weights and bias of the layer before it, in the folded arena")
		g.p("// the inference plans share; weightsFolded says they are current.")
		g.p("func %sFold() {", v.prefix)
		for _, c := range calls[:folds] {
			g.p("%s(%s)", c.fn, strings.Join(c.args, ", "))
		}
		g.p("}")
		g.p("")
		calls = calls[folds:]
	}
	switch phase {
	case "Backward":
		g.p("func %sBackward() (loss float32) {", v.prefix)
	case "Update":
		g.p("func %sUpdate(lr float32, step int) {", v.prefix)
	default:
		g.p("func %s%s() {", v.prefix, phase)
	}
	for _, c := range calls {
		args := strings.Join(c.args, ", ")
		switch {
		case c.loss:
			g.p("loss = %s(%s)", c.fn, args)
		case c.lr:
			g.p("%s(%s, lr, step)", c.fn, args)
		default:
			g.p("%s(%s)", c.fn, args)
		}
	}
	if phase == "Backward" {
		g.p("return loss")
	}
	g.p("}")
	g.p("")
	if v.prefix == "t" && phase == "Forward" {
		g.p("// tTraceForward runs the training forward pass step by step for NaN hunting.")
		g.p("func tTraceForward(visit func(layer string, out []float32) bool) {")
		for i, c := range calls {
			g.p("%s(%s)", c.fn, strings.Join(c.args, ", "))
			g.p("if !visit(%s, %s[:]) { return }", quote(steps[i].Layer), c.out)
		}
		g.p("}")
		g.p("")
	}
	return nil
}

// operand is one buffer argument of a step function.
type operand struct {
	param string // parameter name inside the step function ("" when absent)
	buf   planner.Buffer
}

func (o operand) slice() string {
	if o.param == "" {
		return "nil"
	}
	if strings.ContainsAny(o.param, "[(") {
		return o.param // already a slice expression (the Metal selftest's references)
	}
	return o.param + "[:]"
}

func (g *generator) renderStep(v *planView, phase string, i int, st planner.Step, training bool) (stepCall, error) {
	pl := v.plan
	c := stepCall{fn: fmt.Sprintf("%s%s%d", v.prefix, map[string]string{"Forward": "Fwd", "Backward": "Bwd", "Update": "Upd"}[phase], i)}
	var params []string
	mk := func(role string, ids []planner.BufID) []operand {
		ops := make([]operand, len(ids))
		for k, id := range ids {
			if id == planner.NoBuf {
				continue
			}
			b := pl.Buffers[id]
			name := fmt.Sprintf("%s%d", role, k)
			ops[k] = operand{param: name, buf: b}
			params = append(params, fmt.Sprintf("%s *[%d]float32", name, b.Size))
			c.args = append(c.args, v.vars[id])
		}
		return ops
	}
	in := mk("in", st.In)
	out := mk("out", st.Out)
	if len(out) > 0 && out[0].param != "" {
		c.out = v.vars[st.Out[0]]
	}
	body, err := g.kernelCall(st, in, out, training, &c)
	if err != nil {
		return c, err
	}
	sig := strings.Join(params, ", ")
	if c.lr {
		sig += ", lr float32, step int"
	}
	result := ""
	if c.loss {
		result = " float32"
	}
	note := comment(st.Layer) + ": " + string(st.Kernel)
	if len(st.Fused) > 0 {
		note += " (fused " + comment(strings.Join(st.Fused, " + ")) + ")"
	}
	g.p("// %s", note)
	g.p("func %s(%s)%s {", c.fn, sig, result)
	g.p("%s", body)
	g.p("}")
	g.p("")
	return c, nil
}

func need(ops []operand, n int, what string) error {
	if len(ops) < n {
		return fmt.Errorf("needs %d %s operands, has %d", n, what, len(ops))
	}
	return nil
}

// full returns the shape padded on the left with ones to rank r.
func full(s []int, r int) []int {
	out := make([]int, 0, r)
	for i := len(s); i < r; i++ {
		out = append(out, 1)
	}
	return append(out, s...)
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func act(name string) (string, error) {
	switch name {
	case "":
		return "cpu.ActNone", nil
	case "relu":
		return "cpu.ActReLU", nil
	case "leakyrelu":
		return "cpu.ActLeakyReLU", nil
	case "sigmoid":
		return "cpu.ActSigmoid", nil
	case "tanh":
		return "cpu.ActTanh", nil
	case "relu6":
		return "cpu.ActReLU6", nil
	case "silu":
		return "cpu.ActSiLU", nil
	}
	return "", fmt.Errorf("unknown fused activation %q", name)
}

var unaryKinds = map[string]string{
	"relu": "cpu.UReLU", "leakyrelu": "cpu.ULeakyReLU", "sigmoid": "cpu.USigmoid", "tanh": "cpu.UTanh",
	"gelu": "cpu.UGELU", "exp": "cpu.UExp", "log": "cpu.ULog", "addconst": "cpu.UAddConst", "mulconst": "cpu.UMulConst",
	"sqrt": "cpu.USqrt", "powconst": "cpu.UPowConst", "erf": "cpu.UErf", "relu6": "cpu.UReLU6", "silu": "cpu.USiLU",
}

var binOps = map[string]string{"add": "cpu.BAdd", "sub": "cpu.BSub", "mul": "cpu.BMul", "div": "cpu.BDiv"}

func (g *generator) chain(ch []planner.UnaryOp) (string, error) {
	parts := make([]string, len(ch))
	for i, u := range ch {
		k, ok := unaryKinds[u.Op]
		if !ok {
			return "", fmt.Errorf("unknown element-wise op %q", u.Op)
		}
		parts[i] = fmt.Sprintf("{Kind: %s, Alpha: %s}", k, float(u.Alpha))
	}
	return g.sharedVar("chain", "[]cpu.Unary{"+strings.Join(parts, ", ")+"}"), nil
}

func (g *generator) shape(s []int) string { return g.sharedVar("shape", ints(s)) }

func convLit(c *planner.ConvGeom) string {
	exclude := ""
	if c.ExcludePad {
		exclude = ", ExcludePad: true" // an average pool's divisor; a rounded-up pool needs no field (its OH, OW say it)
	}
	return fmt.Sprintf("cpu.Conv{N: %d, C: %d, H: %d, W: %d, OC: %d, OH: %d, OW: %d, KH: %d, KW: %d, SH: %d, SW: %d, PH: %d, PW: %d, DH: %d, DW: %d, Groups: %d%s}",
		c.N, c.C, c.H, c.W, c.OC, c.OH, c.OW, c.KH, c.KW, c.SH, c.SW, c.PH, c.PW, c.DH, c.DW, c.Groups, exclude)
}

// cpuConvKernels are the rt/cpu kernels of each CPU convolution method
// (planner.CPU's choices), forward and backward ("" would mark a pass
// the method has no kernel for, which the CPU rule must never choose it
// for). None takes scratch. rt/cpu's Winograd F(2×2,5×5) kernels are no
// longer among them: F(4×4,5×5) took every layer the CPU rule gave F(2×2).
var cpuConvKernels = map[string]struct{ fwd, bwd string }{
	planner.ConvDirect:     {"Conv2DDirectFwd", "Conv2DDirectBwd"},
	planner.ConvIm2colGemm: {"Conv2DIm2colFwd", "Conv2DIm2colBwd"},
	planner.ConvWinogradF4: {"Conv2DWinogradF4Fwd", "Conv2DWinogradF4Bwd"},
	planner.ConvWinograd3:  {"Conv2DWinograd3Fwd", "Conv2DWinograd3Bwd"},
	planner.ConvPointwise:  {"Conv2DPointwiseFwd", "Conv2DPointwiseBwd"},
	planner.ConvDepthwise:  {"Conv2DDepthwiseFwd", "Conv2DDepthwiseBwd"},
	planner.ConvPhase:      {"Conv2DPhaseFwd", ""},
	planner.ConvGrouped:    {"Conv2DGroupedFwd", ""},
}

// cpuDenseKernels are the rt/cpu functions of a dense step in each
// precision (planner.Attr.Precision): forward and backward in the training
// plan, and forward in the inference plans. FP32's are the package's
// GemmFwd and GemmBwd; BF16's in training the methods of the program's
// bf16Dense, which is cpu.BF16 (bfloat16 operands, float32 accumulation)
// save while SelfTest's gradient check runs (renderModelMethods), and in
// inference cpu.BF16Inference, which keeps the packed weights between
// calls while they are unchanged.
var cpuDenseKernels = map[string]denseKernels{
	planner.PrecisionF32:  {"cpu.GemmFwd", "cpu.GemmBwd", "cpu.FP32.GemmBwdAdd", "cpu.GemmFwd"},
	planner.PrecisionBF16: {"bf16Dense.GemmFwd", "bf16Dense.GemmBwd", "bf16Dense.GemmBwdAdd", "cpu.BF16Inference.GemmFwd"},
}

// denseKernels are a precision's rt/cpu functions of a dense layer: its
// training forward, backward, backward adding dx into a gradient sum
// (planner.Attr.AccumulateDx), and inference forward.
type denseKernels struct{ fwd, bwd, bwdAdd, infer string }

// cpuDenseKernel returns the rt/cpu functions of a dense step whose plan
// recorded precision ("" in a plan built by hand: f32). A step of another
// backend's plan (reference) runs in f32, the arithmetic it checks.
func cpuDenseKernel(precision string, reference bool) (denseKernels, error) {
	if precision == "" || reference {
		precision = planner.PrecisionF32
	}
	k, ok := cpuDenseKernels[precision]
	if !ok {
		return k, fmt.Errorf("the CPU has no dense kernels in the precision %q", precision)
	}
	return k, nil
}

// cpuConvKernel returns the rt/cpu kernels of a convolution step whose
// plan recorded method: a CPU plan records one of the CPU's methods, and
// the program calls it with no choice left for run time. A step of
// another backend's plan (reference: the CPU reference of a GPU program's
// step, which checks the GPU; its method may share a CPU method's name)
// runs what the CPU's rule chooses for its geometry, save Winograd.
func cpuConvKernel(g planner.ConvGeom, pass planner.ConvPass, method string, reference bool) (struct{ fwd, bwd string }, error) {
	k, ok := cpuConvKernels[method]
	if !ok || reference {
		// A reference should not add Winograd's larger rounding error:
		// where the CPU would run it, the reference runs the direct
		// method (stride 1 holds), or im2col past the direct method's
		// padding.
		method = planner.CPU.Conv(g, pass).Method
		if method == planner.ConvWinograd || method == planner.ConvWinogradF4 || method == planner.ConvWinograd3 {
			method = planner.ConvDirect
			if g.PH > g.KH-1 || g.PW > g.KW-1 {
				method = planner.ConvIm2colGemm
			}
		}
		k = cpuConvKernels[method]
	}
	missing := k.fwd == ""
	if pass != planner.ConvForward {
		missing = k.bwd == ""
	}
	if missing {
		return k, fmt.Errorf("the CPU has no %s kernel for the convolution method %q", pass, method)
	}
	return k, nil
}

// cpuConvBF16 are the convolution methods whose rt/cpu kernels have bf16
// twins, methods of cpu.Precision of the same names (planner's
// cpuConvPrecision gives only these bf16).
var cpuConvBF16 = map[string]bool{planner.ConvIm2colGemm: true, planner.ConvPointwise: true}

// cpuConvFunc returns the function a convolution step calls for the
// rt/cpu kernel fn of method in the precision its plan recorded: cpu.fn,
// or in bf16 the program's bf16Dense's method fn (cpu.BF16's, cpu.FP32's
// while SelfTest's gradient check runs). A reference step runs in f32,
// as cpuDenseKernel's.
func cpuConvFunc(fn, method, precision string, reference bool) (string, error) {
	if precision == "" || precision == planner.PrecisionF32 || reference {
		return "cpu." + fn, nil
	}
	if precision != planner.PrecisionBF16 || !cpuConvBF16[method] {
		return "", fmt.Errorf("the CPU has no %s kernel for the convolution method %q", precision, method)
	}
	return "bf16Dense." + fn, nil
}

// axisSplit returns outer, axis length and inner sizes of shape around axis.
func axisSplit(shape []int, axis int) (int, int, int, error) {
	if axis < 0 || axis >= len(shape) {
		return 0, 0, 0, fmt.Errorf("axis %d out of range for shape %v", axis, shape)
	}
	return prod(shape[:axis]), shape[axis], prod(shape[axis+1:]), nil
}

// kernelCall renders the body of one step function. Each case is one call
// into its kernel family's file (cpu_dense.go, cpu_conv.go, cpu_pool.go, …):
// a new kernel adds a case here and a function there.
func (g *generator) kernelCall(st planner.Step, in, out []operand, training bool, c *stepCall) (string, error) {
	switch st.Kernel {
	case planner.KGemm:
		return g.gemmCall(st, in, out, training)
	case planner.KGemmBwd:
		return g.gemmBwdCall(st, in, out)
	case planner.KConv2D:
		return g.conv2DCall(st, in, out)
	case planner.KConv2DBwd:
		return g.conv2DBwdCall(st, in, out)
	case planner.KMaxPool2D, planner.KAvgPool2D:
		return g.poolCall(st, in, out)
	case planner.KMaxPool2DBwd:
		return g.maxPoolBwdCall(st, in, out)
	case planner.KMaxPool2DArgmaxBwd:
		return g.maxPoolArgmaxBwdCall(st, in, out)
	case planner.KAvgPool2DBwd:
		return g.avgPoolBwdCall(st, in, out)
	case planner.KGlobalAvgPool:
		return g.globalAvgPoolCall(st, in, out)
	case planner.KGlobalAvgPoolBwd:
		return g.globalAvgPoolBwdCall(st, in, out)
	case planner.KResize, planner.KResizeBwd:
		return resizeCall(st, in, out)
	case planner.KUnary, planner.KUnaryBwd:
		return g.unaryCall(st, in, out)
	case planner.KBinary, planner.KBinaryBwd:
		return g.binaryCall(st, in, out)
	case planner.KSoftmax, planner.KLogSoftmax:
		return g.softmaxCall(st, in, out)
	case planner.KSoftmaxBwd, planner.KLogSoftmaxBwd:
		return g.softmaxBwdCall(st, in, out)
	case planner.KDropout:
		return g.dropoutCall(st, in, out, training)
	case planner.KAttention:
		return g.attentionCall(st, in, out, training)
	case planner.KAttentionBwd:
		return g.attentionBwdCall(st, in, out)
	case planner.KDropoutBwd:
		return g.dropoutBwdCall(st, in, out)
	case planner.KFoldBatchNorm:
		return g.foldBatchNormCall(st, in, out)
	case planner.KBatchNorm:
		return g.batchNormCall(st, in, out, training)
	case planner.KBatchNormBwd:
		return g.batchNormBwdCall(st, in, out)
	case planner.KLayerNorm, planner.KLayerNormBwd:
		return g.layerNormCall(st, in, out)
	case planner.KReduceMean:
		return g.reduceMeanCall(st, in, out)
	case planner.KReduceMeanBwd:
		return g.reduceMeanBwdCall(st, in, out)
	case planner.KMatMul:
		return g.matMulCall(st, in, out)
	case planner.KMatMulBwd:
		return g.matMulBwdCall(st, in, out)
	case planner.KTranspose:
		return g.transposeCall(st, in, out)
	case planner.KCast: // a GPU plan's (cast_input.go); the reference computes on float32 copies in NCHW order
		return fmt.Sprintf("copy(%s, %s)", out[0].slice(), in[0].slice()), nil
	case planner.KSlice, planner.KSliceBwd:
		return sliceCall(st, in, out)
	case planner.KConcat, planner.KConcatBwd:
		return g.concatCall(st, in, out)
	case planner.KSoftmaxXent:
		return g.softmaxXentCall(st, in, out, c)
	case planner.KMSE:
		return g.mseCall(st, in, out, c)
	case planner.KMAE:
		return g.maeCall(st, in, out, c)
	case planner.KHuber:
		return g.huberCall(st, in, out, c)
	case planner.KEmbedding, planner.KEmbeddingBwd:
		return g.embeddingCall(st, in, out)
	case planner.KDecodeEmbedding:
		return g.decodeEmbeddingCall(st, in, out)
	case planner.KAttendCached:
		return g.attendCachedCall(st, in, out)
	case planner.KAccumulate:
		return g.accumulateCall(st, in, out)
	case planner.KSGD, planner.KSGDMulti: // one call per (param, velocity)
		return g.sgdCall(st, in, out, c)
	case planner.KAdam, planner.KAdamMulti: // one call per (param, m, v)
		return g.adamCall(st, in, out, c)
	case planner.KClipGradNorm:
		return g.clipCall(st, in, out)
	case planner.KGradMean:
		return g.gradMeanCall(st, in, out)
	}
	return "", fmt.Errorf("the CPU emitter has no kernel %q", st.Kernel)
}

// foldStale is the statement that marks the inference plans' folded
// weights stale, or "" when neither plan folds (the program then has no
// such flags).
func foldStale(e, o *planView) string {
	if e.plan.FoldSteps() == 0 && o.plan.FoldSteps() == 0 {
		return ""
	}
	return "weightsFolded = false"
}

// renderModel writes the app.Model implementation.
func (g *generator) renderModel(t, e, o *planView) {
	tp := t.plan
	g.p("// model implements app.Model over the buffers above.")
	g.p("type model struct{}")
	g.p("")
	g.p("func (model) Meta() *app.Meta { return &meta }")
	g.p("")
	stale := foldStale(e, o)
	if stale != "" {
		g.p("// weightsFolded says the folded weights (eFold's and oFold's outputs,")
		g.p("// the same values) are current with the state arena. Every call that")
		g.p("// may change the weights or the running statistics clears it: State,")
		g.p("// whose caller may write the arena, and the training passes, which")
		g.p("// update both.")
		g.p("var weightsFolded bool")
		g.p("")
	}
	g.p("func (model) State() []float32 {")
	g.p("useState()")
	if stale != "" {
		g.p("%s", stale)
	}
	g.p("return state")
	g.p("}")
	g.p("")
	g.p("func (model) TrainInput() []float32 {")
	g.p("useTrain()")
	g.p("return %s[:]", t.vars[tp.Input])
	g.p("}")
	g.p("")
	g.p("func (model) TrainLabels() []float32 {")
	g.p("useTrain()")
	g.p("return %s[:]", t.vars[tp.Labels])
	g.p("}")
	g.p("")
	g.p("func (model) TrainOutput() []float32 {")
	g.p("useTrain()")
	g.p("return trainLogits[:]")
	g.p("}")
	g.p("")
	g.p("func (model) TrainStep(lr float32, step int) float32 {")
	g.p("useTrain()")
	if stale != "" {
		g.p("%s", stale)
	}
	g.p("tForward()")
	g.p("copy(trainLogits[:], %s[:])", t.vars[tp.Output])
	g.p("loss := tBackward()")
	g.p("// A non-finite loss leaves the weights as they were, so that the")
	g.p("// training loop can trace the divergence without a copy of them.")
	g.p("if cpu.Finite(loss) {")
	g.p("tUpdate(lr, step)")
	g.p("}")
	g.p("return loss")
	g.p("}")
	g.p("")
	g.p("func (model) SkipsUpdateOnNonFiniteLoss() {}")
	g.p("")
	g.p("func (model) Gradients() float32 {")
	g.p("useTrain()")
	if stale != "" {
		g.p("%s", stale)
	}
	g.p("tForward()")
	if tp.Accumulate > 1 {
		// a micro-batch of the training loop: its prediction counts
		g.p("copy(trainLogits[:], %s[:])", t.vars[tp.Output])
	}
	g.p("return tBackward()")
	g.p("}")
	g.p("")
	g.p("func (model) InferInput(one bool) []float32 {")
	g.p("if one {")
	g.p("useOne()")
	g.p("return %s[:]", o.vars[o.plan.Input])
	g.p("}")
	g.p("useInfer()")
	g.p("return %s[:]", e.vars[e.plan.Input])
	g.p("}")
	g.p("")
	g.p("func (model) Infer(one bool) []float32 {")
	g.p("if one {")
	g.p("useOne()")
	if o.plan.FoldSteps() > 0 {
		g.p("if !weightsFolded {")
		g.p("oFold()")
		g.p("weightsFolded = true")
		g.p("}")
	}
	g.p("oForward()")
	g.p("return %s[:]", o.vars[o.plan.Output])
	g.p("}")
	g.p("useInfer()")
	if e.plan.FoldSteps() > 0 {
		g.p("if !weightsFolded {")
		g.p("eFold()")
		g.p("weightsFolded = true")
		g.p("}")
	}
	g.p("eForward()")
	g.p("return %s[:]", e.vars[e.plan.Output])
	g.p("}")
	g.p("")
	g.p("func (model) TraceTrainForward(visit func(layer string, out []float32) bool) {")
	g.p("useTrain()")
	if stale != "" {
		g.p("%s", stale)
	}
	g.p("tTraceForward(visit)")
	g.p("}")
	g.p("")
	g.p("func (model) SetRand(seed uint64) { dropoutRand = cpu.NewRand(seed) }")
	g.p("")
	g.p("// SelfTest checks the fast GEMM against the reference on this model's")
	g.p("// shapes, and the whole backward pass against finite differences.")
	g.p("func (m model) SelfTest() []app.SelfTestRow {")
	gradCheck := "app.GradCheck"
	if usesBF16(t, e, o) {
		gradCheck = "gradCheckF32"
	}
	g.p("return append(%s(m), []app.SelfTestRow{", gradCheck)
	for _, st := range tp.Forward {
		switch st.Kernel {
		case planner.KGemm:
			w := tp.Buffers[st.In[1]].Shape
			b := tp.Buffers[st.In[0]].Size / w[1]
			g.p("app.GemmCheck(%s, %d, %d, %d, false, true),", quote(st.Layer+" forward"), b, w[0], w[1])
			g.p("app.GemmCheck(%s, %d, %d, %d, true, false),", quote(st.Layer+" weight gradient"), w[0], w[1], b)
			if st.Attr.Precision == planner.PrecisionBF16 {
				g.p("app.DenseCheck(%s, cpu.BF16, cpu.RoundBF16, %d, %d, %d),", quote(st.Layer), b, w[1], w[0])
			}
		case planner.KConv2D:
			c := st.Attr.Conv
			g.p("app.GemmCheck(%s, %d, %d, %d, false, false),", quote(st.Layer+" forward"), c.OC/c.Groups, c.OH*c.OW, c.C/c.Groups*c.KH*c.KW)
		}
	}
	// Each convolution method a plan chose, once per layer and pass,
	// against float64 sums.
	checked := map[string]bool{}
	for _, pv := range []*planView{t, e, o} {
		for _, st := range append(slices.Clone(pv.plan.Forward), pv.plan.Backward...) {
			pass, call := planner.ConvForward, "ConvCheck"
			switch {
			case st.Kernel == planner.KConv2DBwd:
				pass, call = planner.ConvBackward, "ConvBwdCheck"
			case st.Kernel != planner.KConv2D:
				continue
			}
			key := st.Layer + " " + pass.String() + " " + st.Attr.Method
			if checked[key] {
				continue
			}
			checked[key] = true
			k, err := cpuConvKernel(*st.Attr.Conv, pass, st.Attr.Method, false)
			if err != nil {
				continue // kernelCall has reported it
			}
			fn := k.fwd
			if pass != planner.ConvForward {
				fn = k.bwd
			}
			g.p("app.%s(%s, cpu.%s, %s),", call, quote(st.Layer+" "+pass.String()+" by "+st.Attr.Method), fn, convLit(st.Attr.Conv))
		}
	}
	g.p("}...)")
	g.p("}")
	g.p("")
	if usesBF16(t, e, o) {
		// Only a program with bf16 steps says how they run, so that f32
		// programs are as they were.
		g.p("// bf16Dense multiplies the steps the plan put in bf16 (dense layers and")
		g.p("// convolutions): cpu.BF16,")
		g.p("// or cpu.FP32 while SelfTest's gradient check runs.")
		g.p("var bf16Dense = cpu.BF16")
		g.p("")
		g.p("// gradCheckF32 is app.GradCheck with the bf16 steps in float32:")
		g.p("// finite differences cannot see a weight's small step through")
		g.p("// bfloat16 rounding, and the differentiation they check is the same.")
		g.p("func gradCheckF32(m model) []app.SelfTestRow {")
		g.p("bf16Dense = cpu.FP32")
		g.p("defer func() { bf16Dense = cpu.BF16 }()")
		g.p("rows := app.GradCheck(m)")
		g.p("for i := range rows {")
		g.p("rows[i].Name += \", bf16 steps in f32\"")
		g.p("}")
		g.p("return rows")
		g.p("}")
		g.p("")
		g.p("// DeviceFacts tells `info` how this CPU runs the dense layers' bf16")
		g.p("// products: natively on Intel AMX or AVX512-BF16, or emulated in")
		g.p("// float32 on bfloat16-rounded operands (the same numbers, at float32's speed).")
		g.p("func (model) DeviceFacts() [][2]string {")
		g.p("how := \"emulated (neither AMX nor AVX512-BF16 on this CPU): float32 arithmetic on bfloat16-rounded operands\"")
		g.p("if hw := cpu.BF16Hardware(); hw != \"\" {")
		g.p("how = \"native (\" + hw + \")\"")
		g.p("}")
		g.p("return [][2]string{{\"bf16 products\", how}}")
		g.p("}")
		g.p("")
	}
}

// usesBF16 reports whether a step of the plans multiplies in bf16.
func usesBF16(plans ...*planView) bool {
	for _, pv := range plans {
		for _, st := range append(slices.Clone(pv.plan.Forward), pv.plan.Backward...) {
			if st.Attr.Precision == planner.PrecisionBF16 {
				return true
			}
		}
	}
	return false
}
