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
}

// Op is one entry of a phase: exactly one of Launch and Gemm is set. Layer
// names the spec node of the plan step it came from, for error messages.
type Op struct {
	Layer  string  `json:"layer"`
	Kernel string  `json:"planKernel"` // the planner.Kernel of the step
	Launch *Launch `json:"launch,omitempty"`
	Gemm   *Gemm   `json:"gemm,omitempty"`
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
	d := lib.Dialect()
	l := &lowering{p: p, d: d, lib: lib}
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
}

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
	l.ops = append(l.ops, Op{Layer: l.step.Layer, Kernel: string(l.step.Kernel),
		Launch: &Launch{Kernel: name, Bindings: binds, Groups: k.Groups, Threadgroup: k.Threadgroup}})
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
	l.ops = append(l.ops, Op{Layer: l.step.Layer, Kernel: string(l.step.Kernel), Gemm: &g})
	return nil
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

func (l *lowering) lowerStep(st *planner.Step, training bool) error {
	a := st.Attr
	alpha := float32(a.Alpha)
	switch st.Kernel {
	case planner.KGemm:
		if err := l.operands(st, 3, 1); err != nil {
			return err
		}
		x, w, b, y := st.In[0], st.In[1], st.In[2], st.Out[0]
		ws, err := l.shape(w)
		if err != nil || len(ws) != 2 {
			return fmt.Errorf("weight shape %v: want [out, in] (%v)", ws, err)
		}
		n, k := ws[0], ws[1]
		xb, _ := l.buf(x)
		batch := xb.Size / k
		if denseDotFits(batch, n, k) {
			kk, err := denseDotKernel(batch, n, k, present(b), a.Act, alpha)
			ops := []operand{whole(x), whole(w), whole(y)}
			if present(b) {
				ops = append(ops, whole(b))
			}
			return l.launch("dense_dot", kk, err, ops...)
		}
		if err := l.gemm(Gemm{TransB: true, M: batch, N: n, K: k, Alpha: 1,
			A: Matrix{x, 0, batch, k, k}, B: Matrix{w, 0, n, k, k}, C: Matrix{y, 0, batch, n, n}}); err != nil {
			return err
		}
		if present(b) || a.Act != "" {
			kk, err := biasActKernel(batch*n, n, 1, present(b), a.Act, alpha)
			ops := []operand{whole(y)}
			if present(b) {
				ops = append(ops, whole(b))
			}
			return l.launch("bias_act", kk, err, ops...)
		}
		return nil
	case planner.KGemmBwd:
		if err := l.operands(st, 4, 3); err != nil {
			return err
		}
		x, w, y, dy := st.In[0], st.In[1], st.In[2], st.In[3]
		dx, dw, db := st.Out[0], st.Out[1], st.Out[2]
		ws, err := l.shape(w)
		if err != nil || len(ws) != 2 {
			return fmt.Errorf("weight shape %v: want [out, in] (%v)", ws, err)
		}
		n, k := ws[0], ws[1]
		xb, _ := l.buf(x)
		batch := xb.Size / k
		if a.Act != "" {
			kk, err := actBwdKernel(batch*n, a.Act, alpha)
			if err := l.launch("act_bwd", kk, err, whole(y), whole(dy)); err != nil {
				return err
			}
		}
		if present(dw) {
			if err := l.gemm(Gemm{TransA: true, M: n, N: k, K: batch, Alpha: 1,
				A: Matrix{dy, 0, batch, n, n}, B: Matrix{x, 0, batch, k, k}, C: Matrix{dw, 0, n, k, k}}); err != nil {
				return err
			}
		}
		if present(db) {
			if err := l.launch("bias_grad", channelSumKernel(batch, n, 1), nil, whole(dy), whole(db)); err != nil {
				return err
			}
		}
		if present(dx) {
			if err := l.gemm(Gemm{M: batch, N: k, K: n, Alpha: 1,
				A: Matrix{dy, 0, batch, n, n}, B: Matrix{w, 0, n, k, k}, C: Matrix{dx, 0, batch, k, k}}); err != nil {
				return err
			}
		}
		return nil
	case planner.KConv2D:
		return l.conv(st, false)
	case planner.KConv2DBwd:
		if a.ActApplied {
			// dy carries the activation's derivative (the max pool's
			// backward applied it): lower the step without one.
			plain := *st
			plain.Attr.Act, plain.Attr.Alpha, plain.Attr.ActApplied = "", 0, false
			return l.conv(&plain, true)
		}
		return l.conv(st, true)
	case planner.KMaxPool2D, planner.KAvgPool2D:
		if err := l.operands(st, 1, 1); err != nil || a.Conv == nil {
			return fmt.Errorf("pooling needs x, y and Attr.Conv (%v)", err)
		}
		return l.launch(string(st.Kernel), poolKernel(*a.Conv, st.Kernel == planner.KMaxPool2D), nil, whole(st.In[0]), whole(st.Out[0]))
	case planner.KMaxPool2DBwd:
		if err := l.operands(st, 3, 1); err != nil || a.Conv == nil {
			return fmt.Errorf("max pool backward needs x, y, dy, dx and Attr.Conv (%v)", err)
		}
		k, err := maxPoolBwdKernel(*a.Conv, a.Act, float32(a.Alpha))
		return l.launch("maxpool2d_bwd", k, err, whole(st.In[0]), whole(st.In[2]), whole(st.Out[0]))
	case planner.KMaxPool2DArgmaxBwd:
		if err := l.operands(st, 3, 1); err != nil || a.Conv == nil {
			return fmt.Errorf("max pool backward from the argmax needs argmax, y, dy, dx and Attr.Conv (%v)", err)
		}
		k, err := maxPoolArgmaxBwdKernel(*a.Conv, a.Act, float32(a.Alpha))
		ops := []operand{whole(st.In[0]), whole(st.In[2])}
		if a.Act != "" {
			ops = append(ops, whole(st.In[1]))
		}
		return l.launch("maxpool2d_argmax_bwd", k, err, append(ops, whole(st.Out[0]))...)
	case planner.KAvgPool2DBwd:
		if err := l.operands(st, 1, 1); err != nil || a.Conv == nil {
			return fmt.Errorf("average pool backward needs dy, dx and Attr.Conv (%v)", err)
		}
		return l.launch("avgpool2d_bwd", poolBwdKernel(*a.Conv, false, nil), nil, whole(st.In[0]), whole(st.Out[0]))
	case planner.KGlobalAvgPool, planner.KGlobalAvgPoolBwd:
		if err := l.operands(st, 1, 1); err != nil {
			return err
		}
		xid := st.In[0]
		if st.Kernel == planner.KGlobalAvgPoolBwd {
			xid = st.Out[0]
		}
		xs, err := l.shape(xid)
		if err != nil || len(xs) < 2 {
			return fmt.Errorf("global average pool input shape %v: want [N, C, ...] (%v)", xs, err)
		}
		planes, spatial := xs[0]*xs[1], prod(xs[2:])
		if st.Kernel == planner.KGlobalAvgPool {
			return l.launch("globalavgpool", globalAvgPoolKernel(planes, spatial), nil, whole(st.In[0]), whole(st.Out[0]))
		}
		return l.launch("globalavgpool_bwd", globalAvgPoolBwdKernel(planes, spatial), nil, whole(st.In[0]), whole(st.Out[0]))
	case planner.KUnary:
		if err := l.operands(st, 1, 1); err != nil {
			return err
		}
		xb, err := l.buf(st.In[0])
		if err != nil {
			return err
		}
		k, err := unaryKernel(xb.Size, a.Chain)
		return l.launch("unary", k, err, whole(st.In[0]), whole(st.Out[0]))
	case planner.KUnaryBwd:
		if err := l.operands(st, 2, 1); err != nil {
			return err
		}
		xb, err := l.buf(st.In[0])
		if err != nil {
			return err
		}
		k, err := unaryBwdKernel(xb.Size, a.Chain)
		return l.launch("unary_bwd", k, err, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
	case planner.KBinary, planner.KBinaryBwd:
		return l.binary(st)
	case planner.KSoftmax, planner.KLogSoftmax, planner.KSoftmaxBwd, planner.KLogSoftmaxBwd:
		if err := l.operands(st, 1, 1); err != nil {
			return err
		}
		xs, err := l.shape(st.In[0])
		if err != nil {
			return err
		}
		outer, n, inner, err := splitAxis(xs, a.Axis)
		if err != nil {
			return err
		}
		log := st.Kernel == planner.KLogSoftmax || st.Kernel == planner.KLogSoftmaxBwd
		if st.Kernel == planner.KSoftmax || st.Kernel == planner.KLogSoftmax {
			return l.launch(string(st.Kernel), softmaxKernel(outer, n, inner, log), nil, whole(st.In[0]), whole(st.Out[0]))
		}
		if err := l.operands(st, 2, 1); err != nil {
			return err
		}
		return l.launch(string(st.Kernel), softmaxBwdKernel(outer, n, inner, log), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
	case planner.KDropout:
		if err := l.operands(st, 1, 1); err != nil {
			return err
		}
		yb, err := l.buf(st.Out[0])
		if err != nil {
			return err
		}
		if !training || a.Rate == 0 {
			return l.launch("copy", copyKernel(yb.Size), nil, whole(st.In[0]), whole(st.Out[0]))
		}
		if err := l.operands(st, 1, 2); err != nil {
			return err
		}
		return l.launch("dropout", dropoutKernel(yb.Size, float32(a.Rate)), nil, stepArgs, whole(st.In[0]), whole(st.Out[0]), whole(st.Out[1]))
	case planner.KDropoutBwd:
		if err := l.operands(st, 2, 1); err != nil {
			return err
		}
		xb, err := l.buf(st.Out[0])
		if err != nil {
			return err
		}
		return l.launch("dropout_bwd", dropoutBwdKernel(xb.Size), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
	case planner.KBatchNorm:
		if err := l.operands(st, 5, 3); err != nil {
			return err
		}
		outer, c, inner, err := l.channels(st.In[0])
		if err != nil {
			return err
		}
		in := st.In
		if !training {
			return l.launch("batchnorm_eval", batchNormEvalKernel(outer, c, inner, float32(a.Eps)), nil,
				whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]))
		}
		return l.launch("batchnorm", batchNormKernel(outer, c, inner, float32(a.Eps), float32(a.Momentum)), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
	case planner.KBatchNormBwd:
		if err := l.operands(st, 5, 3); err != nil {
			return err
		}
		outer, c, inner, err := l.channels(st.In[0])
		if err != nil {
			return err
		}
		if !present(st.Out[0]) || !present(st.Out[1]) || !present(st.Out[2]) {
			return fmt.Errorf("batch norm backward computes dx, dgamma and dbeta together; an absent one is not supported yet")
		}
		in := st.In
		return l.launch("batchnorm_bwd", batchNormBwdKernel(outer, c, inner), nil,
			whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
	case planner.KMatMul, planner.KMatMulBwd:
		return l.matmul(st)
	case planner.KLayerNorm, planner.KLayerNormBwd:
		return l.layerNorm(st)
	case planner.KReduceMean, planner.KReduceMeanBwd:
		if err := l.operands(st, 1, 1); err != nil {
			return err
		}
		xid, yid := st.In[0], st.Out[0]
		if st.Kernel == planner.KReduceMeanBwd {
			xid, yid = yid, xid
		}
		xs, err := l.shape(xid)
		if err != nil {
			return err
		}
		ys, err := l.shape(yid)
		if err != nil {
			return err
		}
		if st.Kernel == planner.KReduceMean {
			k, err := reduceMeanKernel(xs, ys)
			return l.launch("reducemean", k, err, whole(st.In[0]), whole(st.Out[0]))
		}
		k, err := reduceMeanBwdKernel(xs, ys)
		return l.launch("reducemean_bwd", k, err, whole(st.In[0]), whole(st.Out[0]))
	case planner.KTranspose:
		if err := l.operands(st, 1, 1); err != nil {
			return err
		}
		xs, err := l.shape(st.In[0])
		if err != nil {
			return err
		}
		k, err := transposeKernel(xs, a.Perm)
		return l.launch("transpose", k, err, whole(st.In[0]), whole(st.Out[0]))
	case planner.KConcat, planner.KConcatBwd:
		return l.concat(st)
	case planner.KSlice, planner.KSliceBwd:
		return l.slice(st)
	case planner.KAccumulate:
		if err := l.operands(st, 2, 1); err != nil {
			return err
		}
		yb, err := l.buf(st.Out[0])
		if err != nil {
			return err
		}
		return l.launch("accumulate", accumulateKernel(yb.Size), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
	case planner.KSoftmaxXent:
		if err := l.operands(st, 2, 2); err != nil {
			return err
		}
		zs, err := l.shape(st.In[0])
		if err != nil || len(zs) != 2 {
			return fmt.Errorf("logits shape %v: want [batch, classes] (%v)", zs, err)
		}
		return l.launch("softmax_xent", softmaxXentKernel(zs[0], zs[1]), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]), whole(st.Out[1]))
	case planner.KMSE:
		if err := l.operands(st, 2, 2); err != nil {
			return err
		}
		pb, err := l.buf(st.In[0])
		if err != nil {
			return err
		}
		return l.launch("mse", mseKernel(pb.Size), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]), whole(st.Out[1]))
	case planner.KMAE, planner.KHuber:
		if err := l.operands(st, 2, 2); err != nil {
			return err
		}
		pb, err := l.buf(st.In[0])
		if err != nil {
			return err
		}
		name, k := "mae", maeKernel(pb.Size)
		if st.Kernel == planner.KHuber {
			name, k = "huber", huberKernel(pb.Size, float32(st.Attr.Delta))
		}
		return l.launch(name, k, nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]), whole(st.Out[1]))
	case planner.KSGD:
		if err := l.operands(st, 1, 1); err != nil {
			return err
		}
		pb, err := l.buf(st.Out[0])
		if err != nil {
			return err
		}
		ops := []operand{stepArgs, whole(st.In[0])}
		if a.Momentum != 0 {
			if len(st.In) < 2 || !present(st.In[1]) {
				return fmt.Errorf("sgd with momentum %g needs a velocity buffer", a.Momentum)
			}
			ops = append(ops, whole(st.In[1]))
		}
		ops = append(ops, whole(st.Out[0]))
		return l.launch("sgd", sgdKernel(pb.Size, float32(a.Momentum), float32(a.WeightDecay)), nil, ops...)
	case planner.KAdam:
		if err := l.operands(st, 3, 1); err != nil {
			return err
		}
		pb, err := l.buf(st.Out[0])
		if err != nil {
			return err
		}
		kind := "adam"
		if a.Decoupled {
			kind = "adamw"
		}
		return l.launch(kind, adamKernel(pb.Size, float32(a.Beta1), float32(a.Beta2), float32(a.Eps), float32(a.WeightDecay), a.Decoupled), nil,
			stepArgs, whole(st.In[0]), whole(st.In[1]), whole(st.In[2]), whole(st.Out[0]))
	case planner.KAdamMulti:
		if len(st.In)%3 != 0 || len(st.Out) != len(st.In) {
			return fmt.Errorf("multi-tensor Adam with %d inputs and %d outputs", len(st.In), len(st.Out))
		}
		var sizes []int
		ops := []operand{stepArgs}
		for i := 0; i < len(st.In); i += 3 {
			pb, err := l.buf(st.Out[i])
			if err != nil {
				return err
			}
			sizes = append(sizes, pb.Size)
			ops = append(ops, whole(st.In[i]), whole(st.In[i+1]), whole(st.In[i+2]), whole(st.Out[i]))
		}
		kind := "adam_multi"
		if a.Decoupled {
			kind = "adamw_multi"
		}
		return l.launch(kind, adamMultiKernel(sizes, float32(a.Beta1), float32(a.Beta2), float32(a.Eps), float32(a.WeightDecay), a.Decoupled), nil, ops...)
	}
	return fmt.Errorf("no GPU lowering for kernel %q", st.Kernel)
}

// channels views a tensor [N, C, rest...] as [N, C, prod(rest)].
func (l *lowering) channels(id planner.BufID) (outer, c, inner int, err error) {
	s, err := l.shape(id)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(s) < 2 {
		return 0, 0, 0, fmt.Errorf("shape %v has no channel axis", s)
	}
	return s[0], s[1], prod(s[2:]), nil
}

// binary lowers broadcasting add/sub/mul and their gradients (one gather
// kernel per wanted operand gradient).
func (l *lowering) binary(st *planner.Step) error {
	op := st.Attr.BinOp
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	as, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	bs, err := l.shape(st.In[1])
	if err != nil {
		return err
	}
	if st.Kernel == planner.KBinary {
		ys, err := l.shape(st.Out[0])
		if err != nil {
			return err
		}
		k, err := binaryKernel(op, as, bs, ys)
		return l.launch("binary_"+op, k, err, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0]))
	}
	if err := l.operands(st, 3, 2); err != nil {
		return err
	}
	ys, err := l.shape(st.In[2])
	if err != nil {
		return err
	}
	for side, out := range st.Out[:2] {
		if !present(out) {
			continue
		}
		k, err := binaryBwdKernel(op, side == 1, as, bs, ys)
		ops := []operand{whole(st.In[2])}
		if op == "mul" || op == "div" {
			ops = append(ops, whole(st.In[1-side]))
		}
		if op == "div" && side == 1 {
			ops = append(ops, whole(st.In[1]))
		}
		if err := l.launch("binary_bwd_"+op, k, err, append(ops, whole(out))...); err != nil {
			return err
		}
	}
	return nil
}

// layerNorm lowers layer normalisation: one threadgroup per row forward;
// backward, the parameter gradients (one thread per column, summing the
// rows) before dx, which may overwrite dy.
func (l *lowering) layerNorm(st *planner.Step) error {
	xs, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	ax := st.Attr.Axis
	if ax < 1 || ax >= len(xs) {
		return fmt.Errorf("layer norm axis %d out of range for %v", ax, xs)
	}
	rows, cols := prod(xs[:ax]), prod(xs[ax:])
	in := st.In
	if st.Kernel == planner.KLayerNorm {
		if err := l.operands(st, 3, 3); err != nil {
			return err
		}
		ops := []operand{whole(in[0]), whole(in[1])}
		if present(in[2]) {
			ops = append(ops, whole(in[2]))
		}
		ops = append(ops, whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
		return l.launch("layernorm", layerNormKernel(rows, cols, float32(st.Attr.Eps), present(in[2])), nil, ops...)
	}
	if err := l.operands(st, 5, 3); err != nil {
		return err
	}
	dgamma, dbeta := st.Out[1], st.Out[2]
	if present(dgamma) || present(dbeta) {
		ops := []operand{whole(in[0]), whole(in[2]), whole(in[3]), whole(in[4])}
		for _, g := range []planner.BufID{dgamma, dbeta} {
			if present(g) {
				ops = append(ops, whole(g))
			}
		}
		k := layerNormParamGradKernel(rows, cols, present(dgamma), present(dbeta))
		if err := l.launch("layernorm_bwd_params", k, nil, ops...); err != nil {
			return err
		}
	}
	if !present(st.Out[0]) {
		return nil
	}
	return l.launch("layernorm_bwd", layerNormBwdKernel(rows, cols), nil,
		whole(in[0]), whole(in[1]), whole(in[2]), whole(in[3]), whole(in[4]), whole(st.Out[0]))
}

// concat lowers concatenation and its backward to one slice copy per
// operand.
func (l *lowering) concat(st *planner.Step) error {
	axis := st.Attr.Axis
	parts, wide := st.In, st.Out[0]
	if st.Kernel == planner.KConcatBwd {
		parts, wide = st.Out, st.In[0]
	}
	ws, err := l.shape(wide)
	if err != nil {
		return err
	}
	outer, total, inner, err := splitAxis(ws, axis)
	if err != nil {
		return err
	}
	off := 0
	for _, part := range parts {
		if !present(part) {
			return fmt.Errorf("concat operands must all be present (their lengths place the slices)")
		}
		ps, err := l.shape(part)
		if err != nil {
			return err
		}
		n := ps[axis]
		if st.Kernel == planner.KConcat {
			err = l.launch("concat", sliceCopyKernel(outer, n, inner, total, off, true), nil, whole(part), whole(wide))
		} else {
			err = l.launch("split", sliceCopyKernel(outer, n, inner, total, off, false), nil, whole(wide), whole(part))
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// matmul lowers a batched matrix product to one GEMM per output matrix;
// leading axes broadcast, and a broadcast operand's gradient accumulates
// (Beta 1 after its first contribution).
func (l *lowering) matmul(st *planner.Step) error {
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	as, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	bs, err := l.shape(st.In[1])
	if err != nil {
		return err
	}
	if len(as) < 2 || len(bs) < 2 {
		return fmt.Errorf("matmul operands %v and %v need two axes", as, bs)
	}
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	lead := len(as) - 2
	if len(bs)-2 > lead {
		lead = len(bs) - 2
	}
	al, bl := alignShape(as[:len(as)-2], lead), alignShape(bs[:len(bs)-2], lead)
	yl := make([]int, lead)
	for i := range yl {
		yl[i] = max(al[i], bl[i])
	}
	ast, bst := stridesOf(al), stridesOf(bl)
	index := func(t int, shape, st []int) int {
		yst := stridesOf(yl)
		idx := 0
		for i := range yl {
			c := t / yst[i] % yl[i]
			if shape[i] != 1 {
				idx += c * st[i]
			}
		}
		return idx
	}
	written := map[[2]int]bool{}
	beta := func(buf, mat int) float32 {
		key := [2]int{buf, mat}
		if written[key] {
			return 1
		}
		written[key] = true
		return 0
	}
	for t := 0; t < prod(yl); t++ {
		ai, bi := index(t, al, ast), index(t, bl, bst)
		A := Matrix{st.In[0], ai * m * k, m, k, k}
		B := Matrix{st.In[1], bi * k * n, k, n, n}
		if st.Kernel == planner.KMatMul {
			if err := l.gemm(Gemm{M: m, N: n, K: k, Alpha: 1, A: A, B: B, C: Matrix{st.Out[0], t * m * n, m, n, n}}); err != nil {
				return err
			}
			continue
		}
		if err := l.operands(st, 3, 2); err != nil {
			return err
		}
		dy := Matrix{st.In[2], t * m * n, m, n, n}
		if present(st.Out[0]) {
			if err := l.gemm(Gemm{TransB: true, M: m, N: k, K: n, Alpha: 1, Beta: beta(0, ai),
				A: dy, B: B, C: Matrix{st.Out[0], ai * m * k, m, k, k}}); err != nil {
				return err
			}
		}
		if present(st.Out[1]) {
			if err := l.gemm(Gemm{TransA: true, M: k, N: n, K: m, Alpha: 1, Beta: beta(1, bi),
				A: A, B: dy, C: Matrix{st.Out[1], bi * k * n, k, n, n}}); err != nil {
				return err
			}
		}
	}
	return nil
}
