package planner

import (
	"fmt"
	"strings"
)

// StepError is an invariant a step of the plan breaks; it says which step.
type StepError struct {
	Phase  string // "forward", "backward" or "update"
	Index  int    // index of the step in its phase
	Kernel Kernel
	Layer  string
	Msg    string
}

// Error prints the step and what is wrong with it.
func (e *StepError) Error() string {
	return fmt.Sprintf("%s step %d (%s, layer %s): %s", e.Phase, e.Index, e.Kernel, e.Layer, e.Msg)
}

// Verify checks every invariant of a plan, so that a pass that breaks one
// is caught where it runs and an emitter can trust what it reads: buffers
// well formed and uniquely named; views of same-sized owners; params and
// their gradients and state consistent; each kernel's operand count and
// shapes; each step's kernel in the right phase; every buffer written
// before it is read, and activations and gradients written once; and,
// once buffers are assigned, arenas sized and no two buffers that are live
// at the same time overlapping. It is cheap (quadratic only in the number
// of work buffers) and runs after every pass of Build.
func Verify(p *Plan) error {
	if p == nil {
		return fmt.Errorf("no plan")
	}
	if p.Batch < 1 {
		return fmt.Errorf("batch size %d", p.Batch)
	}
	if err := verifyBuffers(p); err != nil {
		return err
	}
	if err := verifyParams(p); err != nil {
		return err
	}
	for _, ph := range []struct {
		name  string
		steps Phase
	}{{"forward", p.Forward}, {"backward", p.Backward}, {"update", p.Update}} {
		for i := range ph.steps {
			s := &ph.steps[i]
			if err := verifyStep(p, ph.name, i, s); err != nil {
				return &StepError{Phase: ph.name, Index: i, Kernel: s.Kernel, Layer: s.Layer, Msg: err.Error()}
			}
		}
	}
	if err := verifyDataFlow(p); err != nil {
		return err
	}
	return verifyMemory(p)
}

// validID reports whether id names a buffer.
func (p *Plan) validID(id BufID) bool { return id >= 0 && int(id) < len(p.Buffers) }

var bufKinds = map[BufKind]bool{
	KindInput: true, KindLabels: true, KindParam: true, KindStat: true, KindParamGrad: true,
	KindOptState: true, KindActivation: true, KindGrad: true, KindScratch: true, KindLoss: true,
}

// verifyBuffers checks each buffer on its own and the plan's special ones.
func verifyBuffers(p *Plan) error {
	names := map[string]bool{}
	for i, b := range p.Buffers {
		if b.ID != BufID(i) {
			return fmt.Errorf("buffer %d (%s) has ID %d", i, b.Name, b.ID)
		}
		if b.Name == "" || strings.ContainsAny(b.Name, " \t\n") || names[b.Name] {
			return fmt.Errorf("buffer %d: name %q is empty, has spaces, or is taken", i, b.Name)
		}
		names[b.Name] = true
		if !bufKinds[b.Kind] {
			return fmt.Errorf("buffer %s: unknown kind %q", b.Name, b.Kind)
		}
		for _, d := range b.Shape {
			if d < 1 {
				return fmt.Errorf("buffer %s: shape %s has an empty axis", b.Name, shapeString(b.Shape))
			}
		}
		if b.Size != numElements(b.Shape) {
			return fmt.Errorf("buffer %s: size %d but shape %s", b.Name, b.Size, shapeString(b.Shape))
		}
		if b.AliasOf != NoBuf {
			if !p.validID(b.AliasOf) || b.AliasOf == b.ID {
				return fmt.Errorf("buffer %s: views buffer %d, which does not exist", b.Name, b.AliasOf)
			}
			t := p.Buffers[b.AliasOf]
			if t.AliasOf != NoBuf {
				return fmt.Errorf("buffer %s: views %s, itself a view (views must name the storage owner)", b.Name, t.Name)
			}
			if t.Size != b.Size {
				return fmt.Errorf("buffer %s: views %s of another size (%d, %d)", b.Name, t.Name, b.Size, t.Size)
			}
		}
	}
	check := func(what string, id BufID, kind BufKind, want bool) error {
		if !want {
			if id != NoBuf {
				return fmt.Errorf("plan %s is set in an inference plan", what)
			}
			return nil
		}
		if !p.validID(id) {
			return fmt.Errorf("plan %s is buffer %d, which does not exist", what, id)
		}
		if kind != "" && p.Buffers[p.root(id)].Kind != kind {
			return fmt.Errorf("plan %s %s is a %s buffer", what, p.Buffers[id].Name, p.Buffers[p.root(id)].Kind)
		}
		return nil
	}
	if err := check("input", p.Input, KindInput, true); err != nil {
		return err
	}
	if err := check("output", p.Output, "", true); err != nil {
		return err
	}
	trainingSoFar := p.Training && len(p.Backward) > 0
	if err := check("labels", p.Labels, KindLabels, trainingSoFar); err != nil {
		return err
	}
	if err := check("loss", p.Loss, KindLoss, trainingSoFar); err != nil {
		return err
	}
	if !p.Training && (len(p.Backward) > 0 || len(p.Update) > 0) {
		return fmt.Errorf("an inference plan has backward or update steps")
	}
	if p.Loss != NoBuf && !equalShapes(p.shapeOf(p.Loss), []int{1}) {
		return fmt.Errorf("the loss has shape %s, not [1]", shapeString(p.shapeOf(p.Loss)))
	}
	return nil
}

// verifyParams checks params against their buffers and update steps.
func verifyParams(p *Plan) error {
	names := map[string]bool{}
	updates := map[BufID]int{}
	for _, s := range p.Update {
		step := len(s.Out) // one param per step, or one per triple of KAdamMulti
		if s.Kernel == KAdamMulti {
			step = 3
		}
		for i := 0; i < len(s.Out); i += step {
			if p.validID(s.Out[i]) {
				updates[s.Out[i]]++
			}
		}
	}
	for _, pr := range p.Params {
		if names[pr.Name] {
			return fmt.Errorf("param %s is declared twice", pr.Name)
		}
		names[pr.Name] = true
		if !p.validID(pr.Buf) || p.Buffers[pr.Buf].Name != pr.Name {
			return fmt.Errorf("param %s: buffer %d does not carry its name", pr.Name, pr.Buf)
		}
		b := p.Buffers[pr.Buf]
		if b.Kind != KindParam && b.Kind != KindStat || pr.Trainable && b.Kind != KindParam {
			return fmt.Errorf("param %s: a %s buffer (trainable %v)", pr.Name, b.Kind, pr.Trainable)
		}
		switch pr.Init {
		case "uniform":
			if pr.Bound <= 0 {
				return fmt.Errorf("param %s: uniform init with bound %g", pr.Name, pr.Bound)
			}
		case "ones", "zeros":
		default:
			return fmt.Errorf("param %s: unknown init %q", pr.Name, pr.Init)
		}
		related := []BufID{pr.Grad}
		related = append(related, pr.State...)
		for k, id := range related {
			if id == NoBuf && k == 0 {
				continue
			}
			want := KindOptState
			if k == 0 {
				want = KindParamGrad
			}
			if !p.validID(id) || p.Buffers[id].Kind != want || !equalShapes(p.Buffers[id].Shape, b.Shape) {
				return fmt.Errorf("param %s: buffer %d is not a %s of shape %s", pr.Name, id, want, shapeString(b.Shape))
			}
		}
		if !pr.Trainable && (pr.Grad != NoBuf || len(pr.State) > 0 || updates[pr.Buf] > 0) {
			return fmt.Errorf("param %s is not trainable but has a gradient, state or update", pr.Name)
		}
		if pr.Trainable && len(p.Update) > 0 && (pr.Grad == NoBuf || updates[pr.Buf] != 1) {
			return fmt.Errorf("param %s is trainable but has no gradient or not exactly one update step (%d)", pr.Name, updates[pr.Buf])
		}
	}
	return nil
}

// kernelPhase says in which phase each kernel may appear.
var kernelPhase = map[Kernel]string{
	KGemm: "forward", KConv2D: "forward", KMaxPool2D: "forward", KAvgPool2D: "forward",
	KGlobalAvgPool: "forward", KUnary: "forward", KBinary: "forward", KSoftmax: "forward",
	KLogSoftmax: "forward", KDropout: "forward", KBatchNorm: "forward", KMatMul: "forward",
	KConcat: "forward", KLayerNorm: "forward", KReduceMean: "forward",
	KSoftmaxXent: "loss", KMSE: "loss", KMAE: "loss", KHuber: "loss",
	KGemmBwd: "backward", KConv2DBwd: "backward", KMaxPool2DBwd: "backward", KMaxPool2DArgmaxBwd: "backward", KAvgPool2DBwd: "backward",
	KGlobalAvgPoolBwd: "backward", KUnaryBwd: "backward", KBinaryBwd: "backward", KSoftmaxBwd: "backward",
	KLogSoftmaxBwd: "backward", KDropoutBwd: "backward", KBatchNormBwd: "backward", KMatMulBwd: "backward",
	KConcatBwd: "backward", KAccumulate: "backward", KLayerNormBwd: "backward", KReduceMeanBwd: "backward",
	KSGD: "update", KAdam: "update", KAdamMulti: "update",
	KTranspose: "any", // its own gradient
}

// operands gives each kernel's In and Out counts (-1: one or more) and
// which operands may be NoBuf.
var operands = map[Kernel]struct {
	in, out       int
	optIn, optOut []int
}{
	KGemm:               {3, 1, []int{2}, nil},
	KConv2D:             {3, 2, []int{2}, []int{1}},
	KMaxPool2D:          {1, 1, nil, nil},
	KAvgPool2D:          {1, 1, nil, nil},
	KGlobalAvgPool:      {1, 1, nil, nil},
	KUnary:              {1, 1, nil, nil},
	KBinary:             {2, 1, nil, nil},
	KSoftmax:            {1, 1, nil, nil},
	KLogSoftmax:         {1, 1, nil, nil},
	KDropout:            {1, 2, nil, nil},
	KBatchNorm:          {5, 3, nil, nil},
	KMatMul:             {2, 1, nil, nil},
	KTranspose:          {1, 1, nil, nil},
	KConcat:             {-1, 1, nil, nil},
	KLayerNorm:          {3, 3, []int{2}, nil},
	KReduceMean:         {1, 1, nil, nil},
	KSoftmaxXent:        {2, 2, nil, nil},
	KMSE:                {2, 2, nil, nil},
	KMAE:                {2, 2, nil, nil},
	KHuber:              {2, 2, nil, nil},
	KGemmBwd:            {4, 3, nil, []int{0, 2}},
	KConv2DBwd:          {5, 3, []int{2, 4}, []int{0, 2}}, // y: see checkShapes
	KMaxPool2DBwd:       {3, 1, nil, nil},
	KMaxPool2DArgmaxBwd: {3, 1, nil, nil},
	KAvgPool2DBwd:       {1, 1, nil, nil},
	KGlobalAvgPoolBwd:   {1, 1, nil, nil},
	KUnaryBwd:           {2, 1, nil, nil},
	KBinaryBwd:          {3, 2, nil, []int{0, 1}},
	KSoftmaxBwd:         {2, 1, nil, nil},
	KLogSoftmaxBwd:      {2, 1, nil, nil},
	KDropoutBwd:         {2, 1, nil, nil},
	KBatchNormBwd:       {5, 3, nil, []int{0}},
	KMatMulBwd:          {3, 2, nil, []int{0, 1}},
	KConcatBwd:          {1, -1, nil, nil},
	KLayerNormBwd:       {5, 3, nil, []int{0, 1, 2}},
	KReduceMeanBwd:      {1, 1, nil, nil},
	KAccumulate:         {2, 1, nil, nil},
	KSGD:                {2, 2, nil, nil},
	KAdam:               {3, 3, nil, nil},
	KAdamMulti:          {-1, -1, nil, nil},
}

// verifyStep checks one step: phase, operand counts, and shapes.
func verifyStep(p *Plan, phase string, index int, s *Step) error {
	want, ok := kernelPhase[s.Kernel]
	if !ok {
		return fmt.Errorf("unknown kernel")
	}
	isLoss := phase == "backward" && index == 0
	switch {
	case isLoss && want != "loss":
		return fmt.Errorf("the first backward step must be the loss")
	case !isLoss && want == "loss":
		return fmt.Errorf("a loss kernel outside the first backward step")
	case want == "any" && phase == "update", want != "any" && want != "loss" && want != phase:
		return fmt.Errorf("a %s kernel in the %s phase", want, phase)
	}
	switch {
	case s.Attr.Pool != nil && s.Kernel != KConv2D:
		return fmt.Errorf("an epilogue pool on a %s step (only conv2d pools)", s.Kernel)
	case s.Attr.Precision != "" && s.Kernel != KGemm && s.Kernel != KGemmBwd:
		return fmt.Errorf("%s step with a precision (only gemm and gemm_bwd have one)", s.Kernel)
	case s.Attr.Precision != "" && s.Attr.Precision != PrecisionF32 && s.Attr.Precision != PrecisionBF16:
		return fmt.Errorf("unknown precision %q (f32 or bf16)", s.Attr.Precision)
	}
	if s.Kernel == KConv2D && s.Attr.Pool != nil && p.Training {
		// the argmax of each pool window, for the pool's backward
		if len(s.Out) != 3 || s.Out[2] == NoBuf || !p.validID(s.Out[2]) {
			return fmt.Errorf("an epilogue pool in a training plan writes no argmax (want a third output)")
		}
	}
	if len(s.Fused) > 0 && s.Fused[0] != s.Layer {
		return fmt.Errorf("fused layers %v do not start with the step's layer", s.Fused)
	}
	ops := operands[s.Kernel]
	if ops.in >= 0 && len(s.In) != ops.in || ops.in < 0 && len(s.In) < 1 {
		return fmt.Errorf("%d inputs, want %d", len(s.In), ops.in)
	}
	if s.Kernel == KConv2D && s.Attr.Pool != nil && p.Training {
		ops.out = 3
	}
	if ops.out >= 0 && len(s.Out) != ops.out || ops.out < 0 && len(s.Out) < 1 {
		return fmt.Errorf("%d outputs, want %d", len(s.Out), ops.out)
	}
	optional := func(list []int, i int) bool {
		for _, j := range list {
			if j == i {
				return true
			}
		}
		return s.Kernel == KConcatBwd
	}
	present := 0
	for i, id := range s.In {
		if id == NoBuf && !optional(ops.optIn, i) || id != NoBuf && !p.validID(id) {
			return fmt.Errorf("input %d is buffer %d", i, id)
		}
	}
	for i, id := range s.Out {
		if id == NoBuf && !optional(ops.optOut, i) || id != NoBuf && !p.validID(id) {
			return fmt.Errorf("output %d is buffer %d", i, id)
		}
		if id != NoBuf {
			present++
		}
	}
	if present == 0 {
		return fmt.Errorf("computes nothing: every output is NoBuf")
	}
	return checkShapes(p, s)
}

// checkShapes applies each kernel's shape rule.
func checkShapes(p *Plan, s *Step) error {
	sh := func(id BufID) []int {
		if id == NoBuf {
			return nil
		}
		return p.shapeOf(id)
	}
	same := func(what string, a, b BufID) error {
		if a == NoBuf || b == NoBuf || equalShapes(sh(a), sh(b)) {
			return nil
		}
		return fmt.Errorf("%s: %s (%s) and %s (%s) differ", what, p.Buffers[a].Name, shapeString(sh(a)), p.Buffers[b].Name, shapeString(sh(b)))
	}
	is := func(what string, id BufID, want []int) error {
		if id == NoBuf || equalShapes(sh(id), want) {
			return nil
		}
		return fmt.Errorf("%s %s has shape %s, want %s", what, p.Buffers[id].Name, shapeString(sh(id)), shapeString(want))
	}
	first := func(errs ...error) error {
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
		return nil
	}
	kindIs := func(id BufID, kinds ...BufKind) error {
		if id == NoBuf {
			return nil
		}
		k := p.Buffers[p.root(id)].Kind
		for _, want := range kinds {
			if k == want {
				return nil
			}
		}
		return fmt.Errorf("%s is a %s buffer, want %v", p.Buffers[id].Name, k, kinds)
	}
	in, out := s.In, s.Out
	switch s.Kernel {
	case KGemm, KGemmBwd:
		x, w := sh(in[0]), sh(in[1])
		if len(x) != 2 || len(w) != 2 || x[1] != w[1] {
			return fmt.Errorf("x %s and W %s do not fit (want [B,K] and [N,K])", shapeString(x), shapeString(w))
		}
		y := []int{x[0], w[0]}
		if err := checkAct(s.Attr); err != nil {
			return err
		}
		if err := kindIs(in[1], KindParam); err != nil {
			return err
		}
		if s.Kernel == KGemm {
			return first(is("b", in[2], []int{w[0]}), is("y", out[0], y), kindIs(out[0], KindActivation))
		}
		return first(is("y", in[2], y), is("dy", in[3], y), same("dx", out[0], in[0]), is("dW", out[1], w),
			is("db", out[2], []int{w[0]}), kindIs(out[1], KindParamGrad), kindIs(out[2], KindParamGrad))
	case KConv2D, KConv2DBwd:
		g := s.Attr.Conv
		if g == nil {
			return fmt.Errorf("no convolution geometry")
		}
		if err := checkWindow(g, true); err != nil {
			return err
		}
		if err := checkAct(s.Attr); err != nil {
			return err
		}
		x := []int{g.N, g.C, g.H, g.W}
		w := []int{g.OC, g.C / g.Groups, g.KH, g.KW}
		y := []int{g.N, g.OC, g.OH, g.OW}
		common := first(is("x", in[0], x), is("W", in[1], w), kindIs(in[1], KindParam))
		if s.Kernel == KConv2D {
			if pg := s.Attr.Pool; pg != nil {
				if err := checkWindow(pg, false); err != nil {
					return fmt.Errorf("epilogue pool: %w", err)
				}
				if pg.N != g.N || pg.C != g.OC || pg.H != g.OH || pg.W != g.OW {
					return fmt.Errorf("epilogue pool reads [%d,%d,%d,%d], the convolution writes %s", pg.N, pg.C, pg.H, pg.W, shapeString(y))
				}
				y = []int{g.N, g.OC, pg.OH, pg.OW}
			}
			argmax := NoBuf
			if len(out) > 2 {
				argmax = out[2]
			}
			return first(common, is("b", in[2], []int{g.OC}), is("y", out[0], y), kindIs(out[1], KindScratch),
				is("argmax", argmax, y), kindIs(argmax, KindScratch))
		}
		if in[2] == NoBuf && s.Attr.Act != "" && !s.Attr.ActApplied {
			return fmt.Errorf("no y, but the step applies %s's derivative", s.Attr.Act)
		}
		return first(common, is("y", in[2], y), is("dy", in[3], y), kindIs(in[4], KindScratch),
			is("dx", out[0], x), is("dW", out[1], w), is("db", out[2], []int{g.OC}))
	case KMaxPool2D, KAvgPool2D, KMaxPool2DBwd, KMaxPool2DArgmaxBwd, KAvgPool2DBwd:
		g := s.Attr.Conv
		if g == nil {
			return fmt.Errorf("no window geometry")
		}
		if err := checkWindow(g, false); err != nil {
			return err
		}
		x := []int{g.N, g.C, g.H, g.W}
		y := []int{g.N, g.C, g.OH, g.OW}
		if s.Kernel == KMaxPool2DBwd || s.Kernel == KMaxPool2DArgmaxBwd {
			if err := checkAct(s.Attr); err != nil {
				return err
			}
		} else if s.Attr.Act != "" {
			return fmt.Errorf("activation %q on a %s step: only the max pool backward steps apply one", s.Attr.Act, s.Kernel)
		}
		switch s.Kernel {
		case KMaxPool2DBwd:
			return first(is("x", in[0], x), is("y", in[1], y), is("dy", in[2], y), is("dx", out[0], x))
		case KMaxPool2DArgmaxBwd:
			return first(is("argmax", in[0], y), kindIs(in[0], KindScratch), is("y", in[1], y), is("dy", in[2], y), is("dx", out[0], x))
		case KAvgPool2DBwd:
			return first(is("dy", in[0], y), is("dx", out[0], x))
		}
		return first(is("x", in[0], x), is("y", out[0], y))
	case KGlobalAvgPool:
		x := sh(in[0])
		if len(x) < 3 {
			return fmt.Errorf("x %s has no spatial axes", shapeString(x))
		}
		return is("y", out[0], x[:2])
	case KGlobalAvgPoolBwd:
		dy, dx := sh(in[0]), sh(out[0])
		if len(dy) != 2 || len(dx) < 3 || !equalShapes(dx[:2], dy) {
			return fmt.Errorf("dy %s and dx %s do not fit", shapeString(dy), shapeString(dx))
		}
		return nil
	case KUnary, KUnaryBwd:
		if len(s.Attr.Chain) == 0 {
			return fmt.Errorf("empty chain")
		}
		for _, u := range s.Attr.Chain {
			if !unaryChainOps[u.Op] {
				return fmt.Errorf("unknown element-wise op %q", u.Op)
			}
		}
		if s.Kernel == KUnary {
			return same("y", out[0], in[0])
		}
		return first(same("dy", in[1], in[0]), same("dx", out[0], in[0]))
	case KBinary, KBinaryBwd:
		if s.Attr.BinOp != "add" && s.Attr.BinOp != "sub" && s.Attr.BinOp != "mul" && s.Attr.BinOp != "div" {
			return fmt.Errorf("unknown binary op %q", s.Attr.BinOp)
		}
		y, err := broadcast(sh(in[0]), sh(in[1]))
		if err != nil {
			return err
		}
		if s.Kernel == KBinary {
			return is("y", out[0], y)
		}
		return first(is("dy", in[2], y), same("da", out[0], in[0]), same("db", out[1], in[1]))
	case KSoftmax, KLogSoftmax, KSoftmaxBwd, KLogSoftmaxBwd:
		if s.Attr.Axis < 1 || s.Attr.Axis >= len(sh(in[0])) {
			return fmt.Errorf("axis %d is the batch axis or out of range for %s", s.Attr.Axis, shapeString(sh(in[0])))
		}
		if s.Kernel == KSoftmax || s.Kernel == KLogSoftmax {
			return same("y", out[0], in[0])
		}
		return first(same("dy", in[1], in[0]), same("dx", out[0], in[0]))
	case KDropout, KDropoutBwd:
		if s.Attr.Rate < 0 || s.Attr.Rate >= 1 {
			return fmt.Errorf("dropout rate %g is not in [0, 1)", s.Attr.Rate)
		}
		if s.Kernel == KDropout {
			return first(same("y", out[0], in[0]), same("mask", out[1], in[0]), kindIs(out[1], KindScratch))
		}
		return first(same("dy", in[1], in[0]), same("dx", out[0], in[0]), kindIs(in[0], KindScratch))
	case KBatchNorm, KBatchNormBwd:
		x := sh(in[0])
		if len(x) < 2 {
			return fmt.Errorf("x %s has no channel axis", shapeString(x))
		}
		if s.Attr.Eps <= 0 {
			return fmt.Errorf("eps %g", s.Attr.Eps)
		}
		c := []int{x[1]}
		if s.Kernel == KBatchNorm {
			return first(is("gamma", in[1], c), is("beta", in[2], c), is("running mean", in[3], c),
				is("running var", in[4], c), kindIs(in[3], KindStat), kindIs(in[4], KindStat),
				same("y", out[0], in[0]), is("saved mean", out[1], c), is("saved inverse std", out[2], c))
		}
		return first(is("gamma", in[1], c), is("saved mean", in[2], c), is("saved inverse std", in[3], c),
			same("dy", in[4], in[0]), same("dx", out[0], in[0]), is("dgamma", out[1], c), is("dbeta", out[2], c))
	case KLayerNorm, KLayerNormBwd:
		x := sh(in[0])
		ax := s.Attr.Axis
		if ax < 1 || ax >= len(x) {
			return fmt.Errorf("axis %d is the batch axis or out of range for %s", ax, shapeString(x))
		}
		norm, rows := x[ax:], []int{numElements(x[:ax])}
		if s.Kernel == KLayerNorm {
			if s.Attr.Eps <= 0 {
				return fmt.Errorf("eps %g", s.Attr.Eps)
			}
			return first(is("gamma", in[1], norm), is("beta", in[2], norm), kindIs(in[1], KindParam), kindIs(in[2], KindParam),
				same("y", out[0], in[0]), is("saved mean", out[1], rows), is("saved inverse std", out[2], rows),
				kindIs(out[1], KindScratch), kindIs(out[2], KindScratch))
		}
		return first(is("gamma", in[1], norm), is("saved mean", in[2], rows), is("saved inverse std", in[3], rows),
			same("dy", in[4], in[0]), same("dx", out[0], in[0]), is("dgamma", out[1], norm), is("dbeta", out[2], norm),
			kindIs(out[1], KindParamGrad), kindIs(out[2], KindParamGrad))
	case KReduceMean, KReduceMeanBwd:
		x, y := sh(in[0]), sh(out[0])
		if s.Kernel == KReduceMeanBwd {
			x, y = y, x
		}
		if len(x) != len(y) || len(x) < 2 || y[0] != x[0] {
			return fmt.Errorf("x %s and y %s do not fit (want one rank, the batch kept)", shapeString(x), shapeString(y))
		}
		for i := range x {
			if y[i] != x[i] && y[i] != 1 {
				return fmt.Errorf("y %s is not x %s with some axes reduced to 1", shapeString(y), shapeString(x))
			}
		}
		return nil
	case KMatMul, KMatMulBwd:
		a, b := sh(in[0]), sh(in[1])
		if len(a) != len(b) || len(a) < 3 || a[len(a)-1] != b[len(b)-2] {
			return fmt.Errorf("a %s and b %s do not fit (want [...,M,K] and [...,K,N] of one rank)", shapeString(a), shapeString(b))
		}
		lead, err := broadcast(a[:len(a)-2], b[:len(b)-2])
		if err != nil {
			return err
		}
		y := append(lead, a[len(a)-2], b[len(b)-1])
		if s.Kernel == KMatMul {
			return is("y", out[0], y)
		}
		return first(is("dy", in[2], y), same("da", out[0], in[0]), same("db", out[1], in[1]))
	case KTranspose:
		x, perm := sh(in[0]), s.Attr.Perm
		if len(perm) != len(x) || len(perm) == 0 || perm[0] != 0 {
			return fmt.Errorf("perm %v does not fit %s (and must keep the batch axis first)", perm, shapeString(x))
		}
		seen := make([]bool, len(perm))
		y := make([]int, len(perm))
		for i, a := range perm {
			if a < 0 || a >= len(perm) || seen[a] {
				return fmt.Errorf("perm %v is not a permutation", perm)
			}
			seen[a] = true
			y[i] = x[a]
		}
		return is("y", out[0], y)
	case KConcat, KConcatBwd:
		parts, whole := in, out[0]
		if s.Kernel == KConcatBwd {
			parts, whole = out, in[0]
		}
		y := sh(whole)
		ax := s.Attr.Axis
		if ax < 1 || ax >= len(y) {
			return fmt.Errorf("axis %d is the batch axis or out of range for %s", ax, shapeString(y))
		}
		sum, all := 0, true
		for _, id := range parts {
			if id == NoBuf {
				all = false
				continue
			}
			x := sh(id)
			if len(x) != len(y) {
				return fmt.Errorf("%s %s and %s differ in rank", p.Buffers[id].Name, shapeString(x), shapeString(y))
			}
			for k := range x {
				if k != ax && x[k] != y[k] {
					return fmt.Errorf("%s %s and %s differ off the concatenation axis", p.Buffers[id].Name, shapeString(x), shapeString(y))
				}
			}
			sum += x[ax]
		}
		if all && sum != y[ax] {
			return fmt.Errorf("parts add up to %d along axis %d, the whole has %d", sum, ax, y[ax])
		}
		return nil
	case KAccumulate:
		return first(same("b", in[1], in[0]), same("y", out[0], in[0]), kindIs(out[0], KindGrad))
	case KSoftmaxXent, KMSE, KMAE, KHuber:
		x := sh(in[0])
		if s.Kernel == KHuber && !(s.Attr.Delta > 0) {
			return fmt.Errorf("huber delta %v is not positive", s.Attr.Delta)
		}
		if s.Kernel == KSoftmaxXent && len(x) != 2 {
			return fmt.Errorf("logits %s are not [B,C]", shapeString(x))
		}
		return first(same("labels", in[1], in[0]), is("loss", out[0], []int{1}), same("dpred", out[1], in[0]),
			kindIs(in[1], KindLabels), kindIs(out[0], KindLoss), kindIs(out[1], KindGrad))
	case KAdamMulti:
		if len(in)%3 != 0 || len(out) != len(in) || len(in) < 6 {
			return fmt.Errorf("%d inputs and %d outputs: want two or more (grad, m, v) and (param, m, v) triples", len(in), len(out))
		}
		for i := 0; i < len(in); i += 3 {
			t := *s
			t.Kernel, t.In, t.Out = KAdam, in[i:i+3:i+3], out[i:i+3:i+3] // capped: the rule appends to them
			if err := checkShapes(p, &t); err != nil {
				return fmt.Errorf("param %d: %w", i/3+1, err)
			}
		}
		return nil
	case KSGD, KAdam:
		for i := 1; i < len(in); i++ {
			if in[i] != out[i] {
				return fmt.Errorf("optimizer state %d is read from %d and written to %d", i, in[i], out[i])
			}
		}
		for _, id := range append(in, out...) {
			if err := same("operand", id, out[0]); err != nil {
				return err
			}
		}
		return first(kindIs(in[0], KindParamGrad), kindIs(out[0], KindParam))
	}
	return fmt.Errorf("no shape rule for kernel %s", s.Kernel)
}

// unaryChainOps are the ops a KUnary chain may hold.
var unaryChainOps = map[string]bool{
	"relu": true, "leakyrelu": true, "sigmoid": true, "tanh": true, "gelu": true,
	"exp": true, "log": true, "addconst": true, "mulconst": true, "sqrt": true, "powconst": true, "erf": true, "relu6": true,
}

// checkAct checks a gemm or conv2d step's fused activation.
func checkAct(a Attr) error {
	switch a.Act {
	case "", "relu", "sigmoid", "tanh":
		return nil
	case "leakyrelu":
		if a.Alpha > 0 {
			return nil
		}
		return fmt.Errorf("fused leakyrelu needs a positive slope, got %g", a.Alpha)
	}
	return fmt.Errorf("activation %q cannot be fused", a.Act)
}

// checkWindow checks the output size of a convolution or pooling window:
// OH = (H + 2·PH − DH·(KH−1) − 1) / SH + 1 (rounded down), likewise OW.
func checkWindow(g *ConvGeom, conv bool) error {
	if g.N < 1 || g.C < 1 || g.KH < 1 || g.KW < 1 || g.SH < 1 || g.SW < 1 || g.DH < 1 || g.DW < 1 || g.Groups < 1 || g.PH < 0 || g.PW < 0 {
		return fmt.Errorf("geometry %+v has a non-positive size, stride, dilation or group count", *g)
	}
	if conv && (g.C%g.Groups != 0 || g.OC%g.Groups != 0) {
		return fmt.Errorf("%d input and %d output channels do not split into %d groups", g.C, g.OC, g.Groups)
	}
	if !conv && g.OC != g.C {
		return fmt.Errorf("pooling changes the channels from %d to %d", g.C, g.OC)
	}
	oh := (g.H+2*g.PH-g.DH*(g.KH-1)-1)/g.SH + 1
	ow := (g.W+2*g.PW-g.DW*(g.KW-1)-1)/g.SW + 1
	if oh != g.OH || ow != g.OW || oh < 1 || ow < 1 {
		return fmt.Errorf("output %dx%d, but the window rule gives %dx%d", g.OH, g.OW, oh, ow)
	}
	return nil
}

// broadcast applies numpy's broadcasting rule to two shapes of one rank.
func broadcast(a, b []int) ([]int, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("shapes %s and %s differ in rank", shapeString(a), shapeString(b))
	}
	y := make([]int, len(a))
	for i := range a {
		switch {
		case a[i] == b[i], b[i] == 1:
			y[i] = a[i]
		case a[i] == 1:
			y[i] = b[i]
		default:
			return nil, fmt.Errorf("shapes %s and %s do not broadcast", shapeString(a), shapeString(b))
		}
	}
	return y, nil
}

// verifyDataFlow checks that every operand is written before it is read
// (params, statistics, optimizer state, the input and the labels are
// written by the program before the first step), and that activations,
// gradients and the loss are each written by one step only.
func verifyDataFlow(p *Plan) error {
	written := make([]bool, len(p.Buffers))
	writes := make([]int, len(p.Buffers))
	for i, b := range p.Buffers {
		switch b.Kind {
		case KindParam, KindStat, KindOptState, KindInput, KindLabels:
			written[i] = true
		}
	}
	for _, ph := range []struct {
		name  string
		steps Phase
	}{{"forward", p.Forward}, {"backward", p.Backward}, {"update", p.Update}} {
		for i, s := range ph.steps {
			fail := func(format string, args ...any) error {
				return &StepError{Phase: ph.name, Index: i, Kernel: s.Kernel, Layer: s.Layer, Msg: fmt.Sprintf(format, args...)}
			}
			for k, id := range s.In {
				if id == NoBuf || s.Kernel == KConv2DBwd && k == 4 { // the backward's columns are a workspace
					continue
				}
				if !written[p.root(id)] {
					return fail("reads %s before any step writes it", p.Buffers[id].Name)
				}
			}
			for _, id := range s.Out {
				if id == NoBuf {
					continue
				}
				r := p.root(id)
				written[r] = true
				writes[r]++
				switch p.Buffers[r].Kind {
				case KindActivation, KindGrad, KindParamGrad, KindLoss:
					if writes[r] > 1 {
						return fail("writes %s a second time", p.Buffers[r].Name)
					}
				}
			}
		}
	}
	return nil
}

// verifyMemory checks the memory plan once assignBuffers has run: every
// buffer in its kind's arena and inside it, aligned, views at their
// owner's offset, state buffers disjoint, and work buffers disjoint
// whenever their live ranges overlap.
func verifyMemory(p *Plan) error {
	assigned := 0
	for _, b := range p.Buffers {
		if b.Arena != "" {
			assigned++
		}
	}
	if assigned == 0 {
		return nil
	}
	if assigned != len(p.Buffers) {
		return fmt.Errorf("only %d of %d buffers have an arena", assigned, len(p.Buffers))
	}
	size := map[string]int{ArenaState: p.StateSize, ArenaWork: p.WorkSize}
	if p.NaiveWorkSize < p.WorkSize {
		return fmt.Errorf("work arena %d is larger than the naive %d", p.WorkSize, p.NaiveWorkSize)
	}
	for _, b := range p.Buffers {
		r := p.Buffers[p.root(b.ID)]
		if b.Arena != arenaOf(r.Kind) || b.Offset != r.Offset {
			return fmt.Errorf("buffer %s: in arena %s at %d, its storage %s is a %s at %d", b.Name, b.Arena, b.Offset, r.Name, r.Kind, r.Offset)
		}
		if b.Offset%Align != 0 || b.Offset < 0 || b.Offset+b.Size > size[b.Arena] {
			return fmt.Errorf("buffer %s: offset %d size %d is unaligned or outside the %s arena (%d)", b.Name, b.Offset, b.Size, b.Arena, size[b.Arena])
		}
	}
	first, last := liveRanges(p)
	for i, a := range p.Buffers {
		if a.AliasOf != NoBuf || a.Size == 0 {
			continue
		}
		for _, b := range p.Buffers[i+1:] {
			if b.AliasOf != NoBuf || b.Size == 0 || a.Arena != b.Arena {
				continue
			}
			if a.Arena == ArenaWork && (first[a.ID] > last[b.ID] || first[b.ID] > last[a.ID]) {
				continue // never live at the same time
			}
			if a.Offset < b.Offset+b.Size && b.Offset < a.Offset+a.Size {
				return fmt.Errorf("buffers %s [%d,%d) and %s [%d,%d) overlap in the %s arena while both are live",
					a.Name, a.Offset, a.Offset+a.Size, b.Name, b.Offset, b.Offset+b.Size, a.Arena)
			}
		}
	}
	return nil
}
