package planner

import (
	"fmt"
	"slices"
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
	if err := verifyTwins(p); err != nil {
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
	KindGradSum: true, KindParamBF16: true, KindFolded: true,
}

// verifyTwins checks the bfloat16 twins (twin_operands.go): each pairs a
// float32 buffer that owns its storage with a bfloat16 buffer of its
// shape that is twin of nothing else, of the same kind (KindParamBF16
// for a param), and that no step names; a layout only on a buffer stored
// in bfloat16 or a weight's twin (KRSC: store_channels_last.go).
func verifyTwins(p *Plan) error {
	twin := map[BufID]bool{}
	of := map[BufID]bool{}
	for _, t := range p.Twins {
		if !p.validID(t.Of) || !p.validID(t.Twin) {
			return fmt.Errorf("twin %d of %d: no such buffer", t.Twin, t.Of)
		}
		a, b := p.Buffers[t.Of], p.Buffers[t.Twin]
		kind := a.Kind
		if kind == KindParam {
			kind = KindParamBF16
		}
		switch {
		case a.AliasOf != NoBuf || b.AliasOf != NoBuf:
			return fmt.Errorf("twin %s of %s: a twin pairs two storage owners", b.Name, a.Name)
		case a.Elem != "" || b.Elem != ElemBF16:
			return fmt.Errorf("twin %s of %s: want a bfloat16 twin of a float32 buffer, have %q and %q", b.Name, a.Name, b.Elem, a.Elem)
		case !equalShapes(a.Shape, b.Shape) || b.Kind != kind:
			return fmt.Errorf("twin %s of %s: shape %s and kind %s, want %s and %s", b.Name, a.Name, shapeString(b.Shape), b.Kind, shapeString(a.Shape), kind)
		case twin[t.Twin] || of[t.Of] || twin[t.Of] || of[t.Twin]:
			return fmt.Errorf("twin %s of %s: a buffer in two twins", b.Name, a.Name)
		}
		if n := len(p.Forward) + len(p.Backward) + len(p.Update); t.LastRead < 0 || t.LastRead >= n {
			return fmt.Errorf("twin %s of %s: last read by step %d of %d", b.Name, a.Name, t.LastRead, n)
		}
		twin[t.Twin], of[t.Of] = true, true
	}
	stored := map[BufID]bool{}
	for _, id := range p.Stored {
		if !p.validID(id) {
			return fmt.Errorf("stored buffer %d: no such buffer", id)
		}
		b := p.Buffers[id]
		switch {
		case b.AliasOf != NoBuf || twin[id] || of[id] || stored[id]:
			return fmt.Errorf("stored buffer %s: want a storage owner that is no twin, has none, and is listed once", b.Name)
		case b.Kind != KindActivation && b.Kind != KindGrad && b.Kind != KindScratch && b.Kind != KindFolded:
			return fmt.Errorf("stored buffer %s: kind %s, want activation, grad, scratch or folded", b.Name, b.Kind)
		}
		stored[id] = true
	}
	for i, b := range p.Buffers {
		id := BufID(i)
		switch {
		case b.AliasOf != NoBuf && p.validID(b.AliasOf) && p.Buffers[p.root(id)].Layout != "":
			return fmt.Errorf("buffer %s views %s, which is stored channels last", b.Name, p.Buffers[p.root(id)].Name)
		case b.Layout != "" && (b.Layout != LayoutNHWC || !stored[id] && !(twin[id] && b.Kind == KindParamBF16) || b.AliasOf != NoBuf || len(b.Shape) != 4):
			// (a folded filter stored so, or a weight's twin, is KRSC: [OC, KH, KW, C/G])
			return fmt.Errorf("buffer %s: layout %q, want %q on a 4-D storage owner stored in bfloat16 or a weight's bfloat16 twin", b.Name, b.Layout, LayoutNHWC)
		case stored[p.root(id)] && b.Elem != ElemBF16:
			return fmt.Errorf("buffer %s: element type %q, but its storage %s is stored in bfloat16", b.Name, b.Elem, p.Buffers[p.root(id)].Name)
		case b.Elem != "" && !twin[id] && !stored[p.root(id)]:
			return fmt.Errorf("buffer %s: element type %q, but it is no twin and is not stored in bfloat16", b.Name, b.Elem)
		}
	}
	for _, s := range p.allSteps() {
		for _, ids := range [][]BufID{s.In, s.Out} {
			for _, id := range ids {
				if id != NoBuf && p.validID(id) && twin[p.root(id)] {
					return fmt.Errorf("step %s of %s names the twin %s: twins are the emitter's to write and read", s.Kernel, s.Layer, p.Buffers[id].Name)
				}
			}
		}
	}
	return nil
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
		step := len(s.Out) // one param per step, or one per triple of KAdamMulti or pair of KSGDMulti
		switch s.Kernel {
		case KAdamMulti:
			step = 3
		case KSGDMulti:
			step = 2
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
	KLogSoftmax: "forward", KDropout: "forward", KBatchNorm: "forward", KFoldBatchNorm: "forward", KMatMul: "forward",
	KConcat: "forward", KLayerNorm: "forward", KReduceMean: "forward", KSlice: "forward", KResize: "forward", KEmbedding: "forward", KAttention: "forward",
	KSoftmaxXent: "loss", KMSE: "loss", KMAE: "loss", KHuber: "loss",
	KGemmBwd: "backward", KConv2DBwd: "backward", KMaxPool2DBwd: "backward", KMaxPool2DArgmaxBwd: "backward", KAvgPool2DBwd: "backward",
	KGlobalAvgPoolBwd: "backward", KUnaryBwd: "backward", KBinaryBwd: "backward", KSoftmaxBwd: "backward",
	KLogSoftmaxBwd: "backward", KDropoutBwd: "backward", KBatchNormBwd: "backward", KMatMulBwd: "backward",
	KConcatBwd: "backward", KSliceBwd: "backward", KResizeBwd: "backward", KAccumulate: "backward", KLayerNormBwd: "backward", KReduceMeanBwd: "backward", KEmbeddingBwd: "backward", KAttentionBwd: "backward",
	KSGD: "update", KAdam: "update", KAdamMulti: "update", KSGDMulti: "update", KClipGradNorm: "update", KGradMean: "update",
	KTranspose: "any", // its own gradient
	KCast:      "forward",
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
	KFoldBatchNorm:      {6, 2, []int{1}, nil},
	KMatMul:             {2, 1, nil, nil},
	KTranspose:          {1, 1, nil, nil},
	KCast:               {1, 1, nil, nil},
	KConcat:             {-1, 1, nil, nil},
	KSlice:              {1, 1, nil, nil},
	KResize:             {1, 1, nil, nil},
	KLayerNorm:          {3, 3, []int{2}, nil},
	KReduceMean:         {1, 1, nil, nil},
	KEmbedding:          {3, 1, []int{2}, nil},
	KEmbeddingBwd:       {2, 2, nil, []int{0, 1}},
	KAttention:          {3, 2, nil, nil},
	KAttentionBwd:       {6, 4, nil, []int{0, 1, 2}},
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
	KBinaryBwd:          {3, 2, []int{0, 1}, []int{0, 1}}, // a, b: see keep_less.go
	KSoftmaxBwd:         {2, 1, nil, nil},
	KLogSoftmaxBwd:      {2, 1, nil, nil},
	KDropoutBwd:         {2, 1, nil, nil},
	KBatchNormBwd:       {5, 3, nil, []int{0}},
	KMatMulBwd:          {3, 2, nil, []int{0, 1}},
	KConcatBwd:          {1, -1, nil, nil},
	KSliceBwd:           {1, 1, nil, nil},
	KResizeBwd:          {1, 1, nil, nil},
	KLayerNormBwd:       {5, 3, nil, []int{0, 1, 2}},
	KReduceMeanBwd:      {1, 1, nil, nil},
	KAccumulate:         {2, 1, nil, nil},
	KSGD:                {2, 2, nil, nil},
	KAdam:               {3, 3, nil, nil},
	KAdamMulti:          {-1, -1, nil, nil},
	KSGDMulti:           {-1, -1, nil, nil},
	KClipGradNorm:       {-1, -1, nil, nil},
	KGradMean:           {1, 2, nil, nil},
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
	case s.Attr.Precision != "" && !hasPrecision(s.Kernel):
		return fmt.Errorf("%s step with a precision (only gemm, gemm_bwd, conv2d, conv2d_bwd, attention and attention_bwd have one)", s.Kernel)
	case s.Attr.AccumulateDx && (s.Kernel != KGemmBwd && s.Kernel != KLayerNormBwd || len(s.Out) == 0 || s.Out[0] == NoBuf):
		return fmt.Errorf("a %s step that adds into dx (only a gemm_bwd or layernorm_bwd with dx does)", s.Kernel)
	case s.Attr.AccumulateDx && slices.ContainsFunc(s.In, func(id BufID) bool { return id != NoBuf && p.root(id) == p.root(s.Out[0]) }):
		return fmt.Errorf("adds into dx %s, whose storage it also reads as an input", p.Buffers[s.Out[0]].Name)
	case s.Attr.Precision != "" && !knownPrecision(s.Attr.Precision):
		return fmt.Errorf("unknown precision %q (f32, bf16 or tf32)", s.Attr.Precision)
	}
	if s.Kernel == KConv2D && s.Attr.Pool != nil && p.Training {
		// the argmax of each pool window, for the pool's backward
		if len(s.Out) != 3 || s.Out[2] == NoBuf || !p.validID(s.Out[2]) {
			return fmt.Errorf("an epilogue pool in a training plan writes no argmax (want a third output)")
		}
	}
	if s.Kernel == KFoldBatchNorm && (p.Training || phase != "forward" || index >= p.FoldSteps()) {
		return fmt.Errorf("a fold step outside the head of an inference plan's forward pass (fold steps run before every other step, and only when the weights changed)")
	}
	if len(s.Fused) > 0 && s.Fused[0] != s.Layer {
		return fmt.Errorf("fused layers %v do not start with the step's layer", s.Fused)
	}
	ops := operands[s.Kernel]
	if s.Attr.Padding && (s.Kernel == KSoftmax || s.Kernel == KAttention || s.Kernel == KAttentionBwd) {
		ops.in++ // the token ids, last
	}
	if s.Attr.Act != "" && s.Kernel == KBatchNormBwd { // beta, for the fused ReLU's mask (fuse_norm_act.go)
		ops.in++
	}
	if s.Kernel == KUnaryBwd && len(s.In) == 3 { // a second dy (fuse_accumulate_act.go)
		ops.in = 3
		if !s.Attr.FromOutput {
			return fmt.Errorf("a second dy on an element-wise backward that is not from its output")
		}
	}
	if s.Kernel == KBatchNorm && len(s.In) == 6 { // z, a residual summed after the normalisation (fuse_norm_sum.go)
		ops.in = 6
		if !p.Training || s.In[5] == NoBuf || !p.validID(s.In[5]) || !p.validID(s.Out[0]) || !equalShapes(p.Buffers[s.In[5]].Shape, p.Buffers[s.Out[0]].Shape) {
			return fmt.Errorf("a batch norm's sixth input is no residual of its output's shape in a training plan")
		}
	}
	if s.Kernel == KConv2D && len(s.In) == 4 { // z, a residual summed in the epilogue (fuse_conv_sum.go)
		ops.in = 4
		if p.Training || s.In[3] == NoBuf || !p.validID(s.In[3]) || !p.validID(s.Out[0]) || !equalShapes(p.Buffers[s.In[3]].Shape, p.Buffers[s.Out[0]].Shape) {
			return fmt.Errorf("a convolution's fourth input is no residual of its output's shape in an inference plan")
		}
	}
	if ops.in >= 0 && len(s.In) != ops.in || ops.in < 0 && len(s.In) < 1 {
		return fmt.Errorf("%d inputs, want %d", len(s.In), ops.in)
	}
	if s.Kernel == KConv2D && s.Attr.Pool != nil && p.Training {
		ops.out = 3
	}
	if s.Kernel == KSoftmaxXent && len(s.Out) == 3 { // the loss rows (choose_loss_rows.go)
		ops.out = 3
	}
	if (s.Kernel == KBatchNorm || s.Kernel == KBatchNormBwd) && len(s.Out) == 4 { // channels-last partial sums (store_channels_last.go)
		ops.out = 4
		if s.Out[3] == NoBuf || !p.validID(s.Out[3]) || p.Buffers[s.Out[3]].Kind != KindScratch || !p.Training {
			return fmt.Errorf("a batch norm's fourth output is no scratch of a training plan")
		}
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

// checkShapes applies each kernel's shape rule. The rules live with their
// family, in verify_FAMILY.go (dense, conv, pool, elementwise, norm,
// layout, loss, update): a new kernel adds a case here and a rule there.
func checkShapes(p *Plan, s *Step) error {
	r := shapeRules{p}
	switch s.Kernel {
	case KGemm, KGemmBwd:
		return r.gemm(s)
	case KConv2D, KConv2DBwd:
		return r.conv(s)
	case KMaxPool2D, KAvgPool2D, KMaxPool2DBwd, KMaxPool2DArgmaxBwd, KAvgPool2DBwd:
		return r.pool(s)
	case KGlobalAvgPool:
		return r.globalAvgPool(s)
	case KGlobalAvgPoolBwd:
		return r.globalAvgPoolBwd(s)
	case KUnary, KUnaryBwd:
		return r.unary(s)
	case KBinary, KBinaryBwd:
		return r.binary(s)
	case KSoftmax, KLogSoftmax, KSoftmaxBwd, KLogSoftmaxBwd:
		return r.softmax(s)
	case KDropout, KDropoutBwd:
		return r.dropout(s)
	case KFoldBatchNorm:
		return r.foldBatchNorm(s)
	case KBatchNorm, KBatchNormBwd:
		return r.batchNorm(s)
	case KLayerNorm, KLayerNormBwd:
		return r.layerNorm(s)
	case KReduceMean, KReduceMeanBwd:
		return r.reduceMean(s)
	case KMatMul, KMatMulBwd:
		return r.matMul(s)
	case KTranspose:
		return r.transpose(s)
	case KConcat, KConcatBwd:
		return r.concat(s)
	case KSlice, KSliceBwd:
		return r.slice(s)
	case KResize, KResizeBwd:
		return r.resize(s)
	case KEmbedding, KEmbeddingBwd:
		return r.embedding(s)
	case KAccumulate:
		return r.accumulate(s)
	case KCast:
		return r.same("y", s.Out[0], s.In[0])
	case KAttention, KAttentionBwd:
		return r.attention(s)
	case KSoftmaxXent, KMSE, KMAE, KHuber:
		return r.loss(s)
	case KAdamMulti:
		return r.adamMulti(s)
	case KSGDMulti:
		return r.sgdMulti(s)
	case KClipGradNorm:
		return r.clipGradNorm(s)
	case KGradMean:
		return r.gradMean(s)
	case KSGD, KAdam:
		return r.optimizer(s)
	}
	return fmt.Errorf("no shape rule for kernel %s", s.Kernel)
}

// shapeRules holds the checks the shape rules share, over one plan's
// buffers.
type shapeRules struct{ p *Plan }

// sh is the shape of buffer id, or nil for NoBuf.
func (r shapeRules) sh(id BufID) []int {
	if id == NoBuf {
		return nil
	}
	return r.p.shapeOf(id)
}

// same checks that two operands (either may be NoBuf) have one shape.
func (r shapeRules) same(what string, a, b BufID) error {
	if a == NoBuf || b == NoBuf || equalShapes(r.sh(a), r.sh(b)) {
		return nil
	}
	return fmt.Errorf("%s: %s (%s) and %s (%s) differ", what, r.p.Buffers[a].Name, shapeString(r.sh(a)), r.p.Buffers[b].Name, shapeString(r.sh(b)))
}

// is checks that operand id (or NoBuf) has shape want.
func (r shapeRules) is(what string, id BufID, want []int) error {
	if id == NoBuf || equalShapes(r.sh(id), want) {
		return nil
	}
	return fmt.Errorf("%s %s has shape %s, want %s", what, r.p.Buffers[id].Name, shapeString(r.sh(id)), shapeString(want))
}

// kindIs checks that operand id's storage (or NoBuf) is of one of kinds.
func (r shapeRules) kindIs(id BufID, kinds ...BufKind) error {
	if id == NoBuf {
		return nil
	}
	k := r.p.Buffers[r.p.root(id)].Kind
	for _, want := range kinds {
		if k == want {
			return nil
		}
	}
	return fmt.Errorf("%s is a %s buffer, want %v", r.p.Buffers[id].Name, k, kinds)
}

// first returns the first non-nil error of errs.
func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// checkAct checks a gemm or conv2d step's fused activation.
func checkAct(a Attr) error {
	switch a.Act {
	case "", "relu", "sigmoid", "tanh", "relu6", "silu":
		return nil
	case "leakyrelu":
		if a.Alpha > 0 {
			return nil
		}
		return fmt.Errorf("fused leakyrelu needs a positive slope, got %g", a.Alpha)
	}
	return fmt.Errorf("activation %q cannot be fused", a.Act)
}

// verifyDataFlow checks that every operand is written before it is read
// (params, statistics, optimizer state, the input and the labels are
// written by the program before the first step), and that activations,
// gradients and the loss are each written by one step only (clipping
// rescales the param gradients in place, after the step that wrote them;
// a gemm_bwd or layernorm_bwd with AccumulateDx adds into a gradient
// that an earlier step wrote and that no step has read yet, so every
// reader sees the whole sum: fuse_accumulate_gemm.go,
// fuse_accumulate_norm.go).
func verifyDataFlow(p *Plan) error {
	written := make([]bool, len(p.Buffers))
	read := make([]bool, len(p.Buffers))
	writes := make([]int, len(p.Buffers))
	for i, b := range p.Buffers {
		switch b.Kind {
		case KindParam, KindStat, KindOptState, KindGradSum, KindInput, KindLabels:
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
				read[p.root(id)] = true
			}
			for k, id := range s.Out {
				if id == NoBuf {
					continue
				}
				r := p.root(id)
				if k == 0 && s.Attr.AccumulateDx {
					switch {
					case !written[r]:
						return fail("adds dx into %s before any step writes it", p.Buffers[id].Name)
					case read[r]:
						return fail("adds dx into %s after a step read it: that step saw a partial sum", p.Buffers[id].Name)
					}
					continue // one more term of the sum the first writer began
				}
				written[r] = true
				if s.Kernel == KClipGradNorm && p.Buffers[r].Kind == KindParamGrad {
					continue // scales the gradient in place (verify_update.go checks In = Out)
				}
				if s.Kernel == KGradMean && p.Buffers[r].Kind == KindParamGrad {
					continue // the mean of the micro-batches' gradients replaces the last one's (accumulate.go)
				}
				writes[r]++
				if p.Buffers[r].Kind == KindFolded && s.Kernel != KFoldBatchNorm {
					return fail("writes the folded %s, which only its fold step writes", p.Buffers[r].Name)
				}
				switch p.Buffers[r].Kind {
				case KindActivation, KindGrad, KindParamGrad, KindLoss, KindFolded:
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
	size := map[string]int{ArenaState: p.StateSize, ArenaWork: p.WorkSize, ArenaFolded: p.FoldedSize}
	if p.NaiveWorkSize < p.WorkSize {
		return fmt.Errorf("work arena %d is larger than the naive %d", p.WorkSize, p.NaiveWorkSize)
	}
	for _, b := range p.Buffers {
		r := p.Buffers[p.root(b.ID)]
		if b.Arena != arenaOf(r.Kind) || b.Offset != r.Offset {
			return fmt.Errorf("buffer %s: in arena %s at %d, its storage %s is a %s at %d", b.Name, b.Arena, b.Offset, r.Name, r.Kind, r.Offset)
		}
		if b.Offset%Align != 0 || b.Offset < 0 || b.Offset+b.Slots() > size[b.Arena] {
			return fmt.Errorf("buffer %s: offset %d size %d is unaligned or outside the %s arena (%d)", b.Name, b.Offset, b.Slots(), b.Arena, size[b.Arena])
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
			if a.Offset < b.Offset+b.Slots() && b.Offset < a.Offset+a.Slots() {
				return fmt.Errorf("buffers %s [%d,%d) and %s [%d,%d) overlap in the %s arena while both are live",
					a.Name, a.Offset, a.Offset+a.Slots(), b.Name, b.Offset, b.Offset+b.Slots(), a.Arena)
			}
		}
	}
	return nil
}
