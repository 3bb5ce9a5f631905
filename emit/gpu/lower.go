package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// Binding is what a runtime binds at one kernel parameter: a plan buffer
// from an element offset on, or (StepArgs) the per-step argument buffer.
type Binding struct {
	Buf    planner.BufID `json:"buf"`
	Offset int           `json:"offset"` // in elements
	// Size is the number of elements the kernel touches from Offset on, so
	// a runtime (or a recording fake) can check the bound buffer is large
	// enough.
	Size     int  `json:"size"`
	Mutable  bool `json:"mutable,omitempty"`
	StepArgs bool `json:"stepArgs,omitempty"` // bind the StepArgs buffer; Buf is NoBuf
}

// Launch dispatches kernel Kernel as Groups threadgroups of Threadgroup
// threads (Metal: dispatchThreadgroups; CUDA: <<<Groups, Threadgroup>>>),
// binding Bindings[i] at buffer index i.
type Launch struct {
	Kernel      string    `json:"kernel"`
	Bindings    []Binding `json:"bindings"`
	Groups      int       `json:"groups"`
	Threadgroup int       `json:"threadgroup"`
	// Precision is the rounding of the kernel's products where it
	// multiplies on tensor tiles (Dialect.Tiles' Precision, "tf32"); ""
	// where it multiplies float32 exactly.
	Precision string `json:"precision,omitempty"`
}

// Matrix is a row-major GEMM operand: Rows×Cols elements of Buf from Offset
// on with leading dimension LD (elements between row starts).
type Matrix struct {
	Buf    planner.BufID `json:"buf"`
	Offset int           `json:"offset"`
	Rows   int           `json:"rows"`
	Cols   int           `json:"cols"`
	LD     int           `json:"ld"`
}

// Gemm is C = Alpha·op(A)·op(B) + Beta·C with op(X) = Xᵀ when the flag is
// set; op(A) is M×K, op(B) K×N, C M×N. A, B and C are given as stored
// (before transposition), which is what MPSMatrixMultiplication takes.
//
// With Batch above 1 it is Batch products, the i-th on the matrices
// Stride[0]·i, Stride[1]·i and Stride[2]·i elements after A, B and C: one
// strided batched GEMM (the Winograd convolution's 36 products).
type Gemm struct {
	TransA, TransB bool
	M, N, K        int
	Alpha, Beta    float32
	A, B, C        Matrix
	Batch          int    `json:"batch,omitempty"`
	Stride         [3]int `json:"stride,omitzero"`
	// Precision is the products' arithmetic, the plan step's
	// Attr.Precision ("bf16", "tf32"); "" is exact float32 (an f32 step's,
	// and every step's of a plan that names none).
	Precision string `json:"precision,omitempty"`
	// Elem is A's and B's element type: "" for float32, or
	// planner.ElemBF16 when both are bfloat16 twins (their buffers'
	// Elem; offsets, LD and strides then count bfloat16 elements).
	Elem string `json:"elem,omitempty"`
}

// Op is one entry of a phase: exactly one of Launch, Gemm and Conv is
// set (or Sum). Layer
// names the spec node of the plan step it came from, for error messages.
type Op struct {
	Layer  string  `json:"layer"`
	Kernel string  `json:"planKernel"` // the planner.Kernel of the step
	Launch *Launch `json:"launch,omitempty"`
	Gemm   *Gemm   `json:"gemm,omitempty"`
	// Conv is a library convolution (conv_library.go).
	Conv *Conv `json:"conv,omitempty"`
	// Sum, in a replica lowered with synchronised batch norm, is a
	// collective point: these buffers are summed over the replicas
	// before the next op (gpuhost.Op.Sum).
	Sum []Binding `json:"sum,omitempty"`
}

// Program is a plan lowered for a GPU: the kernel source of one dialect and
// the phases as ordered ops. A training step runs Forward, Backward, Update
// into one command buffer; Infer is the forward pass in evaluation mode
// (dropout off, batch norm on running statistics).
type Program struct {
	Dialect  string    `json:"dialect"`
	Source   string    `json:"-"`
	Kernels  []*Kernel `json:"-"` // in name order, as printed in Source
	Forward  []Op      `json:"forward"`
	Backward []Op      `json:"backward"`
	Update   []Op      `json:"update"`
	Infer    []Op      `json:"infer"`
	// The same ops grouped per plan step (the i-th group is the ops of the
	// phase's i-th step; a step may lower to none).
	ForwardSteps, BackwardSteps, UpdateSteps, InferSteps [][]Op `json:"-"`
}

// KernelPrefix starts every generated kernel name; the rest is a counter in
// plan order and the kind of kernel ("mlb003_softmax").
const KernelPrefix = "mlb"

// Lower maps every step of p to kernel launches and GEMMs, generating and
// deduplicating kernels, and prints them in dialect d.
func Lower(p *planner.Plan, d *Dialect) (*Program, error) {
	lib := NewLibrary(d)
	prog, err := LowerInto(lib, p)
	if err != nil {
		return nil, err
	}
	prog.Kernels = lib.Kernels
	if prog.Source, err = lib.Source(); err != nil {
		return nil, err
	}
	return prog, nil
}

// LowerInto lowers p with its kernels added to lib, so that the plans of
// one program share one library; the returned Program's Kernels and Source
// are left empty (they are lib's).
func LowerInto(lib *Library, p *planner.Plan) (*Program, error) {
	return LowerShareInto(lib, p, 1)
}

// LowerShareInto is LowerInto for one of shares replicas of a
// data-parallel run, each planned at its share of the global batch: the
// loss kernels divide the loss and its gradient by the global batch's
// count, so that the sum of every replica's gradients (the all-reduce) is
// the gradient of the global mean, and the sum of their losses the global
// mean loss.
func LowerShareInto(lib *Library, p *planner.Plan, shares int) (*Program, error) {
	return lowerInto(&lowering{p: p, d: lib.Dialect(), lib: lib, share: max(shares, 1)})
}

// LowerSyncBNInto is LowerShareInto with synchronised batch norm: in
// training each batch norm's statistics, and in its backward pass its
// sums, are the global batch's, summed over the replicas at collective
// points (Op.Sum) between two kernels (kernels_syncbn.go). Only the batch
// norm steps differ from LowerShareInto's.
func LowerSyncBNInto(lib *Library, p *planner.Plan, shares int) (*Program, error) {
	return lowerInto(&lowering{p: p, d: lib.Dialect(), lib: lib, share: max(shares, 1), syncBN: true})
}

func lowerInto(l *lowering) (*Program, error) {
	p, d := l.p, l.d
	prog := &Program{Dialect: d.Name}
	phases := []struct {
		steps    planner.Phase
		training bool
		dst      *[]Op
		grouped  *[][]Op
	}{
		{p.Forward, p.Training, &prog.Forward, &prog.ForwardSteps},
		{p.Backward, true, &prog.Backward, &prog.BackwardSteps},
		{p.Update, true, &prog.Update, &prog.UpdateSteps},
		{p.Forward, false, &prog.Infer, &prog.InferSteps},
	}
	for _, ph := range phases {
		for i := range ph.steps {
			st := &ph.steps[i]
			l.ops = nil
			l.step = st
			if err := l.lowerStep(st, ph.training); err != nil {
				return nil, fmt.Errorf("gpu: lowering step %d (%s) of layer %q: %w", i, st.Kernel, st.Layer, err)
			}
			*ph.dst = append(*ph.dst, l.ops...)
			*ph.grouped = append(*ph.grouped, l.ops)
		}
	}
	return prog, nil
}

type lowering struct {
	p    *planner.Plan
	d    *Dialect
	step *planner.Step
	ops  []Op
	lib  *Library
	// share is how many replicas share the global batch (1: none).
	share int
	// syncBN: batch norm's statistics are the global batch's
	// (LowerSyncBNInto).
	syncBN bool
}

// sum adds a collective point summing the whole of each buffer over the
// replicas.
func (l *lowering) sum(ids ...planner.BufID) error {
	var binds []Binding
	for _, id := range ids {
		b, err := l.buf(id)
		if err != nil {
			return err
		}
		binds = append(binds, Binding{Buf: id, Size: b.Size, Mutable: true})
	}
	l.ops = append(l.ops, Op{Layer: l.step.Layer, Kernel: string(l.step.Kernel), Sum: binds})
	return nil
}

// shares is how many replicas share the global batch.
func (l *lowering) shares() int { return max(l.share, 1) }

// operand is a buffer and element offset to bind; args marks StepArgs.
type operand struct {
	buf  planner.BufID
	off  int
	args bool
}

func at(b planner.BufID, off int) operand { return operand{buf: b, off: off} }
func whole(b planner.BufID) operand       { return operand{buf: b} }

var stepArgs = operand{buf: planner.NoBuf, args: true}

// kernelName adds k to the program's library and returns its name.
func (l *lowering) kernelName(k *Kernel, kind string) (string, error) {
	return l.lib.Add(k, kind)
}

// launch appends a launch of k binding ops in parameter order, checking
// that each bound buffer holds what the kernel touches.
func (l *lowering) launch(kind string, k *Kernel, err error, ops ...operand) error {
	if err != nil {
		return err
	}
	if len(ops) != len(k.Params) {
		return fmt.Errorf("kernel %s takes %d buffers, %d bound", kind, len(k.Params), len(ops))
	}
	if l.d.MaxBuffers > 0 && len(k.Params) > l.d.MaxBuffers {
		return fmt.Errorf("kernel %s binds %d buffers; %s allows %d", kind, len(k.Params), l.d.Name, l.d.MaxBuffers)
	}
	var stored []string // the float parameters bound to buffers the plan stores in bfloat16
	for i, o := range ops {
		if b, err := l.buf(o.buf); err == nil && !o.args && b.Elem == planner.ElemBF16 && k.Params[i].Elem == Float {
			stored = append(stored, k.Params[i].Name)
		}
	}
	if len(stored) > 0 {
		if k, err = storedBF16(k, stored); err != nil {
			return err
		}
	}
	var binds []Binding
	for i, o := range ops {
		prm := k.Params[i]
		b := Binding{Buf: o.buf, Offset: o.off, Size: prm.Size, Mutable: prm.Mutable, StepArgs: o.args}
		if !o.args {
			buf, err := l.buf(o.buf)
			if err != nil {
				return err
			}
			if o.off+prm.Size > buf.Size {
				return fmt.Errorf("kernel %s parameter %s needs %d elements from offset %d of buffer %q, which has %d",
					kind, prm.Name, prm.Size, o.off, buf.Name, buf.Size)
			}
		}
		binds = append(binds, b)
	}
	name, err := l.kernelName(k, kind)
	if err != nil {
		return err
	}
	ln := &Launch{Kernel: name, Bindings: binds, Groups: k.Groups, Threadgroup: k.Threadgroup}
	if usesTiles(k.Body) && l.d.Tiles != nil {
		ln.Precision = l.d.Tiles.Precision
	}
	if usesFrags(k.Body) && l.d.Fragments != nil {
		ln.Precision = l.d.Fragments.Precision
	}
	l.ops = append(l.ops, Op{Layer: l.step.Layer, Kernel: string(l.step.Kernel), Launch: ln})
	return nil
}

// gemm appends a GEMM after checking that its operands have the shapes
// its M, N, K and transpositions say and lie inside their buffers.
func (l *lowering) gemm(g Gemm) error {
	ar, ac := g.M, g.K
	if g.TransA {
		ar, ac = ac, ar
	}
	br, bc := g.K, g.N
	if g.TransB {
		br, bc = bc, br
	}
	for _, m := range []struct {
		name       string
		x          Matrix
		rows, cols int
	}{{"A", g.A, ar, ac}, {"B", g.B, br, bc}, {"C", g.C, g.M, g.N}} {
		if m.x.Rows != m.rows || m.x.Cols != m.cols {
			return fmt.Errorf("GEMM %dx%dx%d operand %s is %dx%d, want %dx%d", g.M, g.N, g.K, m.name, m.x.Rows, m.x.Cols, m.rows, m.cols)
		}
		buf, err := l.buf(m.x.Buf)
		if err != nil {
			return err
		}
		if m.x.LD < m.x.Cols || m.x.Offset < 0 || m.x.Offset+(m.x.Rows-1)*m.x.LD+m.x.Cols > buf.Size {
			return fmt.Errorf("GEMM operand %s, %dx%d from offset %d with leading dimension %d, does not fit buffer %q of %d elements",
				m.name, m.x.Rows, m.x.Cols, m.x.Offset, m.x.LD, buf.Name, buf.Size)
		}
	}
	if g.Batch > 1 {
		for i, x := range []Matrix{g.A, g.B, g.C} {
			buf, _ := l.buf(x.Buf)
			if s := g.Stride[i]; s < 0 || x.Offset+(g.Batch-1)*s+(x.Rows-1)*x.LD+x.Cols > buf.Size {
				return fmt.Errorf("batched GEMM operand %s: %d matrices %d elements apart from offset %d do not fit buffer %q of %d elements",
					"ABC"[i:i+1], g.Batch, s, x.Offset, buf.Name, buf.Size)
			}
		}
	}
	g.Precision = l.fastPrecision()
	bf16 := func(x Matrix) bool { b, _ := l.buf(x.Buf); return b.Elem == planner.ElemBF16 }
	switch a, b := bf16(g.A), bf16(g.B); {
	case a && b && g.Precision == planner.PrecisionBF16 && !bf16(g.C):
		g.Elem = planner.ElemBF16
	case a || b || bf16(g.C):
		return fmt.Errorf("GEMM %dx%dx%d in precision %q reads bfloat16 operands where only A and B of a bf16 GEMM may be (a bug in mlbuild)", g.M, g.N, g.K, g.Precision)
	}
	l.ops = append(l.ops, Op{Layer: l.step.Layer, Kernel: string(l.step.Kernel), Gemm: &g})
	return nil
}

// fastPrecision is the step's precision when its GEMMs may round their
// operands (bf16, tf32), "" when they multiply in exact float32. A step
// in a fast precision runs every product as a GEMM of that precision:
// the generated kernels that would replace a GEMM (dense_dot, the
// Winograd products kernel) multiply in float32, so they are not chosen
// for it, and the plan's precision is what runs.
func (l *lowering) fastPrecision() string {
	if p := l.step.Attr.Precision; p != planner.PrecisionF32 {
		return p
	}
	return ""
}

// channelsLast says, for each of ids, whether the plan stores its
// storage channels last (planner.LayoutNHWC); false for NoBuf.
func (l *lowering) channelsLast(ids ...planner.BufID) []bool {
	out := make([]bool, len(ids))
	for i, id := range ids {
		if b, err := l.buf(id); err == nil && present(id) {
			out[i] = b.Layout == planner.LayoutNHWC
		}
	}
	return out
}

func (l *lowering) buf(id planner.BufID) (*planner.Buffer, error) {
	if id < 0 || int(id) >= len(l.p.Buffers) {
		return nil, fmt.Errorf("buffer id %d out of range (plan has %d buffers)", id, len(l.p.Buffers))
	}
	return &l.p.Buffers[id], nil
}

func (l *lowering) shape(id planner.BufID) ([]int, error) {
	b, err := l.buf(id)
	if err != nil {
		return nil, err
	}
	return b.Shape, nil
}

func (l *lowering) operands(st *planner.Step, nin, nout int) error {
	if len(st.In) < nin || len(st.Out) < nout {
		return fmt.Errorf("want at least %d inputs and %d outputs, have %d and %d", nin, nout, len(st.In), len(st.Out))
	}
	return nil
}

func present(b planner.BufID) bool { return b != planner.NoBuf }

// splitAxis views shape as [outer, shape[axis], inner].
func splitAxis(shape []int, axis int) (outer, l, inner int, err error) {
	if axis < 0 || axis >= len(shape) {
		return 0, 0, 0, fmt.Errorf("axis %d out of range for shape %v", axis, shape)
	}
	return prod(shape[:axis]), shape[axis], prod(shape[axis+1:]), nil
}

// UnsupportedError is a layer the GPU backends have no kernel for: a
// limit of mlbuild that the spec meets, not a bug, so `mlbuild compile`
// exits 1 with it (errors.As finds it through the lowering's wrapping).
// Every kernel of the planner has a GPU lowering today; a new kernel
// refuses with it until its GPU kernels are written.
type UnsupportedError struct {
	Layer  string
	Kernel planner.Kernel
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("layer %s: an %s step has no GPU kernel yet: build this model for the CPU backend", e.Layer, e.Kernel)
}

// lowerStep appends the ops of one step. Each case is one call into its
// kernel family's file (lower_dense.go, conv.go, lower_pool.go, …): a new
// kernel adds a case here and a function there.
func (l *lowering) lowerStep(st *planner.Step, training bool) error {
	switch st.Kernel {
	case planner.KGemm:
		return l.dense(st)
	case planner.KGemmBwd:
		return l.denseBwd(st)
	case planner.KConv2D:
		return l.conv(st, false)
	case planner.KConv2DBwd:
		return l.convBwd(st)
	case planner.KMaxPool2D, planner.KAvgPool2D:
		return l.pool(st)
	case planner.KMaxPool2DBwd:
		return l.maxPoolBwd(st)
	case planner.KMaxPool2DArgmaxBwd:
		return l.maxPoolArgmaxBwd(st)
	case planner.KAvgPool2DBwd:
		return l.avgPoolBwd(st)
	case planner.KGlobalAvgPool, planner.KGlobalAvgPoolBwd:
		return l.globalAvgPool(st)
	case planner.KUnary:
		return l.unary(st)
	case planner.KUnaryBwd:
		return l.unaryBwd(st)
	case planner.KBinary, planner.KBinaryBwd:
		return l.binary(st)
	case planner.KSoftmax, planner.KLogSoftmax, planner.KSoftmaxBwd, planner.KLogSoftmaxBwd:
		return l.softmax(st)
	case planner.KDropout:
		return l.dropout(st, training)
	case planner.KDropoutBwd:
		return l.dropoutBwd(st)
	case planner.KBatchNorm:
		return l.batchNorm(st, training)
	case planner.KBatchNormBwd:
		return l.batchNormBwd(st)
	case planner.KFoldBatchNorm:
		return l.foldBatchNorm(st)
	case planner.KMatMul, planner.KMatMulBwd:
		return l.matmul(st)
	case planner.KLayerNorm, planner.KLayerNormBwd:
		return l.layerNorm(st)
	case planner.KReduceMean, planner.KReduceMeanBwd:
		return l.reduceMean(st)
	case planner.KTranspose:
		return l.transpose(st)
	case planner.KCast:
		return l.cast(st)
	case planner.KConcat, planner.KConcatBwd:
		return l.concat(st)
	case planner.KSlice, planner.KSliceBwd:
		return l.slice(st)
	case planner.KResize, planner.KResizeBwd:
		return l.resize(st)
	case planner.KAccumulate:
		return l.accumulate(st)
	case planner.KEmbedding, planner.KEmbeddingBwd:
		return l.embedding(st)
	case planner.KDecodeEmbedding:
		return l.decodeEmbedding(st)
	case planner.KAttendCached:
		return l.attendCached(st)
	case planner.KSoftmaxXent:
		return l.softmaxXent(st)
	case planner.KMSE:
		return l.mse(st)
	case planner.KMAE, planner.KHuber:
		return l.maeOrHuber(st)
	case planner.KSGD:
		return l.sgd(st)
	case planner.KAdam:
		return l.adam(st)
	case planner.KAdamMulti:
		return l.adamMulti(st)
	case planner.KSGDMulti:
		return l.sgdMulti(st)
	case planner.KClipGradNorm:
		return l.clipGradNorm(st)
	case planner.KGradMean:
		return l.gradMean(st)
	case planner.KAttention:
		return l.attention(st, training)
	case planner.KAttentionBwd:
		return l.attentionBwd(st)
	}
	return fmt.Errorf("no GPU lowering for kernel %q", st.Kernel)
}
