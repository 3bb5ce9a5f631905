// Package planner lowers a shaped spec.Model to a static Plan: every tensor a
// buffer with a constant shape, the forward pass, the loss, the backward pass
// derived by reverse-mode differentiation at plan time (no runtime tape), the
// optimizer's updates, a memory plan from liveness analysis, and fusion
// decisions. Emitters for every backend read the same Plan.
//
// The passes, one per file (lower.go turns spec nodes into forward
// steps, differentiate.go derives the backward pass, assign_buffers.go
// places the buffers, ...), run in the order of the table passes in
// build.go, which docs/architecture.md quotes.
// Verify checks the invariants that must hold between passes.
package planner

// BufID indexes Plan.Buffers. NoBuf marks an optional operand that is absent.
type BufID int

// NoBuf is an absent optional operand (a layer without bias, the gradient of
// the model's input, which nobody needs).
const NoBuf BufID = -1

// BufKind says what a buffer holds and so how long it lives.
type BufKind string

// Buffer kinds. Params, ParamGrads, OptState and Stats persist for the whole
// run and are never shared; the others are placed by the memory plan.
const (
	KindInput      BufKind = "input"      // the batch of images (double-buffered by the loader)
	KindLabels     BufKind = "labels"     // one-hot labels, [batch, classes]
	KindParam      BufKind = "param"      // trainable weights
	KindStat       BufKind = "stat"       // non-trainable saved state (batchnorm running mean/var)
	KindParamGrad  BufKind = "param_grad" // gradient of a param
	KindOptState   BufKind = "opt_state"  // optimizer moments
	KindActivation BufKind = "activation" // a forward value
	KindGrad       BufKind = "grad"       // gradient of a forward value
	KindScratch    BufKind = "scratch"    // workspace of one step (im2col columns, dropout mask, batchnorm saved statistics)
	KindLoss       BufKind = "loss"       // the scalar loss, shape [1]
	KindGradSum    BufKind = "grad_sum"   // a param gradient's sum over the micro-batches of one update (accumulate.go)
	KindParamBF16  BufKind = "param_bf16" // a weight's bfloat16 twin, written by its update step and by the program when it writes the weights (twin_operands.go)
	// KindFolded is a weight or bias an inference plan derives from params
	// and statistics alone (a batch norm folded into the convolution or
	// dense layer before it: fold_batchnorm.go). It lives in the work arena for the
	// whole run, in the folded arena (ArenaFolded), because the program
	// recomputes it only when the state has changed since it last did
	// (Plan.FoldSteps).
	KindFolded BufKind = "folded"
)

// Buffer is one tensor of the plan. Shapes include the batch dimension first
// for everything that is per sample; params and their state have no batch
// dimension. All data are float32, row-major (NCHW for images).
type Buffer struct {
	ID    BufID   `json:"id"`
	Name  string  `json:"name"` // e.g. "conv1.out", "conv1.out.grad", "fc1.weight", "fc1.weight.adam_m"
	Kind  BufKind `json:"kind"`
	Shape []int   `json:"shape"`
	Size  int     `json:"size"` // number of float32 elements (product of Shape)
	// AliasOf is the buffer whose storage this one views with another shape
	// (reshape, flatten, and their gradients); NoBuf when it owns storage.
	AliasOf BufID `json:"aliasOf"`
	// Offset is the element offset of the buffer's storage in its arena,
	// set by assign_buffers: params, stats, param grads and optimizer state
	// live in the "state" arena, everything else in the "work" arena.
	Offset int    `json:"offset"`
	Arena  string `json:"arena"` // "state" or "work"
	// Elem is the element type: "" for float32, ElemBF16 for a GEMM
	// operand's bfloat16 twin (Plan.Twins), whose Size elements take
	// Slots() float32 places of its arena.
	Elem string `json:"elem,omitempty"`
	// Layout is the order of a 4-D buffer's elements in memory: ""
	// for its shape's [N, C, H, W], LayoutNHWC for channels last, [N, H,
	// W, C] (a bfloat16 activation whose steps all take it so, where the
	// Target's library convolutions are faster on it: store_bf16.go); on
	// a folded filter or a weight's bfloat16 twin [OC, C, KH, KW], KRSC
	// order, [OC, KH, KW, C] (store_channels_last.go).
	Layout string `json:"layout,omitempty"`
}

// ElemBF16 is the Elem of a buffer of bfloat16 values (2 bytes each).
const ElemBF16 = "bf16"

// LayoutNHWC is the Layout of a 4-D buffer [N, C, H, W] stored channels
// last: element (n, c, h, w) at ((n·H + h)·W + w)·C + c.
const LayoutNHWC = "nhwc"

// Slots is the float32 places of its arena that b's storage takes: Size,
// or half of it rounded up for a bfloat16 buffer.
func (b *Buffer) Slots() int {
	if b.Elem == ElemBF16 {
		return (b.Size + 1) / 2
	}
	return b.Size
}

// Twin pairs a float32 buffer with its bfloat16 twin: the same values
// rounded to bfloat16 (to nearest, ties to even), which the step that
// writes Of writes beside it in the same kernel (a weight's, its update
// step and the program when it writes the weights), so that a bf16 GEMM
// reads half the bytes (twin_operands.go). Of owns its storage; a view
// of Of has Twin as its twin. A weight's twin of Layout LayoutNHWC holds
// the filter in KRSC order, the one channels-last library convolutions
// read (store_channels_last.go): element i of Of goes to its KRSC place.
type Twin struct {
	Of   BufID `json:"of"`
	Twin BufID `json:"twin"`
	// LastRead is the index in Forward ++ Backward ++ Update of the last
	// step whose GEMM reads the twin (an activation's twin is live from
	// its producer to it).
	LastRead int `json:"lastRead"`
	// Note says, for `mlbuild plan`, what writes the twin and which
	// GEMMs read it.
	Note string `json:"note,omitempty"`
}

// Param is a trainable tensor (or saved statistic) with the buffers that go
// with it. Names follow PyTorch's state_dict convention ("fc1.weight",
// "fc1.bias", "bn1.running_mean") so exported safetensors load into an
// equivalent torch.nn module.
type Param struct {
	Name      string  `json:"name"`
	Buf       BufID   `json:"buf"`
	Grad      BufID   `json:"grad"`      // NoBuf for statistics
	State     []BufID `json:"state"`     // optimizer state: sgd [velocity]; adam/adamw [m, v]
	Trainable bool    `json:"trainable"` //
	// Init is how the program fills it before training: "uniform" draws from
	// U(-Bound, Bound) (PyTorch's default for Linear and Conv2d weights and
	// biases, Bound = 1/sqrt(FanIn)), "ones", "zeros".
	Init  string  `json:"init"`
	Bound float64 `json:"bound,omitempty"`
	Layer string  `json:"layer"`
}

// Kernel names the operation a Step performs. Each kernel documents the
// order of its In and Out operands; a NoBuf operand is optional.
type Kernel string

// Forward kernels.
const (
	// KGemm: dense layer y = act(x·Wᵀ + b).
	// In: x [B,K], W [N,K], b [N] (optional). Out: y [B,N]. Attr: Act, Alpha, Precision.
	KGemm Kernel = "gemm"
	// KConv2D: y = act(conv(x, W) + b), by the backend's Attr.Method.
	// In: x [B,C,H,W], W [OC,C/G,KH,KW], b [OC] (optional), and in an
	// inference plan z [B,OC,OH,OW] (optional, none by default: a residual
	// the epilogue adds before the activation, y = act(conv(x, W) + b + z);
	// fuse_conv_sum.go).
	// Out: y [B,OC,OH,OW], cols (optional scratch: the method's workspace,
	// sized by the target; absent when the method needs none), and in a
	// training plan with Attr.Pool, argmax.
	// Attr: Conv, Act, Alpha, Method, Pool, Precision. With Attr.Pool (a max pool
	// folded into the step's epilogue, fuse_pool.go) y is the pool's
	// output [B,OC,Pool.OH,Pool.OW]; a training plan's step also writes
	// argmax (scratch shaped like y): for each pool window, the position
	// of its first maximum within the window, row-major from 0 to
	// Pool.KH·Pool.KW−1, as a float32 (the pool's backward reads it:
	// KMaxPool2DArgmaxBwd).
	KConv2D Kernel = "conv2d"
	// KMaxPool2D, KAvgPool2D: In: x [B,C,H,W]. Out: y [B,C,OH,OW]. Attr: Conv (kernel, stride, padding, dilation; Groups unused).
	KMaxPool2D Kernel = "maxpool2d"
	KAvgPool2D Kernel = "avgpool2d"
	// KGlobalAvgPool: In: x [B,C,H,W...]. Out: y [B,C].
	KGlobalAvgPool Kernel = "globalavgpool"
	// KUnary: y = chain(x), element-wise. In: x. Out: y (same shape). Attr: Chain.
	// A chain of more than one op is the result of element-wise fusion.
	KUnary Kernel = "unary"
	// KBinary: y = a ∘ b with numpy broadcasting. In: a, b. Out: y. Attr: BinOp.
	KBinary Kernel = "binary"
	// KSoftmax, KLogSoftmax: along Attr.Axis (an axis of the full shape, batch = 0).
	// In: x. Out: y. A softmax with Attr.Causal runs over the last axis of
	// scores [..., T, T] and gives query i keys 0..i only: y is 0 past
	// the diagonal, so its backward is the plain KSoftmaxBwd. With
	// Attr.Padding it runs over the last axis of scores [B, ..., Tk] and
	// reads a second input, ids [B, Tk] (the model input: token ids as
	// float32): key j of sample b gets y = 0 where ids[b, j] = Attr.PadID,
	// and a row without any key left is all 0 (PadRow in rt/cpu); its
	// backward is again the plain KSoftmaxBwd.
	KSoftmax    Kernel = "softmax"
	KLogSoftmax Kernel = "logsoftmax"
	// KDropout: In: x. Out: y, mask (scratch, same shape). Attr: Rate.
	// In evaluation mode y = x and mask is untouched.
	KDropout Kernel = "dropout"
	// KBatchNorm: normalise over every axis but 1 (channels/features).
	// In: x, gamma [C], beta [C], runningMean [C], runningVar [C], and in
	// a training plan optionally z (x's shape), a residual added before
	// the activation: y = act(bn(x) + z) (fuse_norm_sum.go).
	// Out: y, saveMean [C], saveInvStd [C] (scratch). Attr: Eps, Momentum,
	// Act (relu or none). Training mode uses batch statistics and updates
	// the running ones.
	KBatchNorm Kernel = "batchnorm"
	// KFoldBatchNorm: the weights and bias of a convolution or dense layer
	// followed by an inference batch norm, as one layer (fold_batchnorm.go): with
	// s = gamma/sqrt(runningVar + Eps) per output channel,
	// W' = W·s (each output channel's filter) and
	// b' = (b − runningMean)·s + beta (b = 0 when absent).
	// In: W [OC, ...], b [OC] (optional), gamma [OC], beta [OC],
	// runningMean [OC], runningVar [OC]. Out: W' (W's shape), b' [OC],
	// both KindFolded. Attr: Eps. Fold steps lead an inference plan's
	// Forward and read only params and statistics, so the program runs
	// them only when the state has changed (Plan.FoldSteps).
	KFoldBatchNorm Kernel = "fold_batchnorm"
	// KMatMul: batched y = a·b over the last two axes; leading axes broadcast.
	// In: a [..., M, K], b [..., K, N]. Out: y [..., M, N].
	KMatMul Kernel = "matmul"
	// KCast: y = x, read in x's element type and layout and written in
	// y's (a bf16 plan's input, float32 NCHW, as the bfloat16
	// channels-last tensor a library convolution reads: cast_input.go).
	// In: x. Out: y of x's shape.
	KCast Kernel = "cast"
	// KTranspose: y = x permuted by Attr.Perm (axes of the full shape; Perm[0] == 0).
	// It is also the backward of a transpose (with the inverse Perm).
	KTranspose Kernel = "transpose"
	// KConcat: In: x0, x1, ... Out: y. Attr: Axis (of the full shape).
	KConcat Kernel = "concat"
	// KSlice: y = positions Attr.Start to Attr.Start+len−1 of axis
	// Attr.Axis (of the full shape, ≥ 1) of x, len being y's size there.
	// In: x. Out: y.
	KSlice Kernel = "slice"
	// KLayerNorm: normalise each sample over the axes from Attr.Axis (of
	// the full shape, ≥ 1) to the last, viewed as [rows, cols]:
	// y = gamma·(x − mean)/sqrt(var + eps) + beta.
	// In: x, gamma [cols...], beta [cols...] (optional).
	// Out: y, saveMean [rows], saveInvStd [rows] (scratch). Attr: Axis, Eps.
	// Training and inference compute alike (the statistics are the sample's).
	KLayerNorm Kernel = "layernorm"
	// KReduceMean: y = mean of x over the axes where y has size 1 and x
	// does not (y keeps x's rank; a view drops the axes when asked).
	// In: x. Out: y.
	KReduceMean Kernel = "reducemean"
	// KEmbedding: y[b, t] = weight[ids[b, t]] (+ pos[t]): a row of the
	// table per token id. In: ids [B,T] (the model input: token ids as
	// float32 values that are exact integers, checked against V at run
	// time), weight [V,D], pos [T,D] (optional: learned positions).
	// Out: y [B,T,D].
	KEmbedding Kernel = "embedding"
	// KAttention: scaled dot-product attention in one step, for a
	// target whose kernels fuse it (Target.Attention, fuse_attention.go):
	// o = dropout(softmax(Scale·q·kᵀ))·v over the last two axes, the
	// leading axes (batch, heads) matched one to one, without the scores
	// [..., Tq, Tk] in memory. In: q [..., Tq, D], kt [..., D, Tk] (kᵀ, as
	// the matmul it replaces read it), v [..., Tk, D]. Out: o [..., Tq,
	// D], lse [..., Tq] (scratch: each query row's log-sum-exp of its
	// scaled scores, log Σ_j exp(s_j), which the backward reads).
	// Attr: Scale, Causal (query i sees keys 0..i; Tq = Tk), Rate (the
	// dropout of the probabilities in a training plan: the element
	// (m, i, j) of the probabilities [M, Tq, Tk] is kept, times
	// 1/(1−Rate), where the GPU programs' counter-based draw
	// (rt/gpuhost.DropoutUniform) of index (m·Tq + i)·Tk + j is at least
	// Rate, the mask a separate dropout step over the probabilities
	// would draw; 0: none), Perm (nil, or [0 2 1 3] in a training plan:
	// q, k in kᵀ's place, v and o token-major [B, T, H, D], lse still
	// [B, H, Tq]; fuse_attention_layout.go, AttentionHeadShapes), and
	// Padding with PadID (key j of sample b is masked where ids[b, j] =
	// PadID; the step then reads ids [B, Tk], the model input, as a
	// fourth input, and a query row that sees no key gets o = 0 and lse
	// = +Inf, so that the backward's exp(s − lse) is 0 there).
	KAttention Kernel = "attention"
	// KResize: y = x resampled to y's height and width, plane by plane
	// (rt/cpu.ResizeSource gives the source pixels and weights).
	// In: x [B,C,H,W]. Out: y [B,C,OH,OW]. Attr: Mode, AlignCorners.
	KResize Kernel = "resize"
)

// Loss kernels: the loss value and the gradient of the mean loss over the
// batch with respect to the prediction, in one step.
const (
	// KSoftmaxXent: In: logits [B,C], labels [B,C] one-hot. Out: loss [1], dlogits [B,C],
	// and for a Target with LossRows the loss of each row, scratch [B] (choose_loss_rows.go).
	// Logits per token [B,T,C] with labels [B,T,C] one-hot (a model that
	// reads token ids) average the loss over all B·T tokens.
	KSoftmaxXent Kernel = "softmax_xent"
	// KMSE: In: pred [B,...], target [B,...]. Out: loss [1], dpred.
	KMSE Kernel = "mse"
	// KMAE: mean absolute error (L1). In, Out: as KMSE.
	KMAE Kernel = "mae"
	// KHuber: Huber loss, ½d² for |d| <= Attr.Delta and Delta·(|d| − ½Delta)
	// above, averaged over all elements. In, Out: as KMSE.
	KHuber Kernel = "huber"
)

// Backward kernels. A backward kernel may overwrite its dy operand (nothing
// reads a value's gradient after the backward step of the op that made the
// value). An Out gradient of NoBuf is not computed.
const (
	// KGemmBwd: In: x, W, y, dy. Out: dx (optional), dW, db (optional). Attr: Act, Alpha
	// (the activation's derivative is taken from y), Precision, AccumulateDx
	// (dx += dy·W into dx's storage, which an earlier step wrote: the
	// GEMM's beta 1; fuse_accumulate_gemm.go).
	KGemmBwd Kernel = "gemm_bwd"
	// KConv2DBwd: In: x, W, y, dy, cols (optional scratch). Out: dx (optional), dW, db (optional).
	// Attr: Conv, Act, Alpha, Method, ActApplied, Precision. cols is a workspace of
	// the backward step's own (nothing is read from it), sized by the
	// target for the backward method; absent when the method needs none.
	// With ActApplied, dy already carries Act's derivative (the max pool
	// backward that wrote it applied it: fuse_act_bwd.go) and the step
	// applies none. y is absent (NoBuf) where the step needs no
	// derivative (ActApplied or no Act) and the forward step pooled its
	// output in its epilogue (fuse_pool.go): the full-size y is never
	// written then.
	KConv2DBwd Kernel = "conv2d_bwd"
	// KMaxPool2DBwd: In: x, y, dy. Out: dx. Attr: Conv, and Act, Alpha
	// when x is the output of that activation and dx goes to its layer's
	// backward alone: dx is then multiplied by the activation's derivative,
	// taken from x (fuse_act_bwd.go). KMaxPool2DArgmaxBwd: the backward of
	// a max pool folded into a training plan's conv2d (fuse_pool.go).
	// In: argmax (the conv2d's third output), y (the pooled output), dy,
	// all [B,C,OH,OW]. Out: dx [B,C,H,W]: each window's dy at the
	// argmax's position, multiplied by Act's derivative taken from y when
	// Attr.Act is set, and zero at every other position (a position in no
	// window too). Attr: Conv (the pool's geometry), Act, Alpha.
	// KAvgPool2DBwd: In: dy. Out: dx.
	// KGlobalAvgPoolBwd: In: dy [B,C]. Out: dx [B,C,H,W...].
	KMaxPool2DBwd       Kernel = "maxpool2d_bwd"
	KMaxPool2DArgmaxBwd Kernel = "maxpool2d_argmax_bwd"
	KAvgPool2DBwd       Kernel = "avgpool2d_bwd"
	KGlobalAvgPoolBwd   Kernel = "globalavgpool_bwd"
	// KUnaryBwd: In: x (the chain's input), dy. Out: dx. Attr: Chain.
	// Intermediate values of a fused chain are recomputed from x. With
	// Attr.FromOutput, In[0] is the chain's output y instead, and the
	// chain one op whose derivative y gives (keep_less.go); such a step
	// may read a second dy as In[2], dx = f'(y)·(dy + dy2)
	// (fuse_accumulate_act.go).
	KUnaryBwd Kernel = "unary_bwd"
	// KBinaryBwd: In: a, b, dy. Out: da (optional), db (optional), summed
	// over the axes that were broadcast. Attr: BinOp. The backward of add
	// and sub reads neither a nor b: both are NoBuf, and
	// Attr.OperandShapes holds their shapes (keep_less.go; read them with
	// Plan.BinaryShapes).
	KBinaryBwd Kernel = "binary_bwd"
	// KSoftmaxBwd, KLogSoftmaxBwd: In: y, dy. Out: dx. Attr: Axis.
	KSoftmaxBwd    Kernel = "softmax_bwd"
	KLogSoftmaxBwd Kernel = "logsoftmax_bwd"
	// KDropoutBwd: In: mask, dy. Out: dx. Attr: Rate.
	KDropoutBwd Kernel = "dropout_bwd"
	// KBatchNormBwd: In: x, gamma, saveMean, saveInvStd, dy. Out: dx, dgamma, dbeta.
	KBatchNormBwd Kernel = "batchnorm_bwd"
	// KMatMulBwd: In: a, b, dy. Out: da (optional), db (optional).
	KMatMulBwd Kernel = "matmul_bwd"
	// KConcatBwd: In: dy. Out: dx0, dx1, ... (optional each). Attr: Axis.
	KConcatBwd Kernel = "concat_bwd"
	// KSliceBwd: dx = dy placed at Attr.Start of axis Attr.Axis, zero
	// elsewhere (every element written). In: dy. Out: dx.
	KSliceBwd Kernel = "slice_bwd"
	// KLayerNormBwd: In: x, gamma, saveMean, saveInvStd, dy.
	// Out: dx (optional), dgamma, dbeta (optional). Attr: Axis,
	// AccumulateDx.
	KLayerNormBwd Kernel = "layernorm_bwd"
	// KEmbeddingBwd: In: ids, dy. Out: dweight (each dy row scatter-added
	// into the row of its id), dpos (optional: dy summed over the batch).
	KEmbeddingBwd Kernel = "embedding_bwd"
	// KResizeBwd: dx = each dy scatter-added to the pixels its output
	// read, with the weights it read them by (every element of dx
	// written). In: dy [B,C,OH,OW]. Out: dx [B,C,H,W]. Attr: Mode,
	// AlignCorners.
	KResizeBwd Kernel = "resize_bwd"
	// KAttentionBwd: the backward of KAttention, which recomputes the
	// probabilities from q, kᵀ and the forward's lse instead of reading
	// them (FlashAttention-2's scheme). In: q, kt, v, o, lse, do (do
	// shaped like o). Out: dq, dkt, dv (each optional), delta [..., Tq]
	// (scratch: rowsum(do∘o), computed first, which every probability's
	// gradient subtracts). Attr: as the forward step's (with Perm, do,
	// dq, dk and dv token-major as the operands).
	KAttentionBwd Kernel = "attention_bwd"
	// KReduceMeanBwd: In: dy (shaped like the forward y). Out: dx.
	KReduceMeanBwd Kernel = "reducemean_bwd"
	// KAccumulate: y = a + b for equal shapes: sums the gradient
	// contributions of a value read by several steps. In: a, b. Out: y.
	KAccumulate Kernel = "accumulate"
)

// Optimizer kernels, one step per trainable param. The learning rate and the
// step count are run-time values the program passes in (schedules change them).
const (
	// KSGD: In: grad, velocity. Out: param (updated in place), velocity. Attr: Momentum, WeightDecay.
	KSGD Kernel = "sgd"
	// KAdam: In: grad, m, v. Out: param, m, v. Attr: Beta1, Beta2, Eps, WeightDecay,
	// Decoupled (AdamW when true).
	KAdam Kernel = "adam"
	// KAdamMulti: Adam over several params in one step, for a backend that
	// updates them in one multi-tensor kernel (fuse_update.go). In: grad_1,
	// m_1, v_1, …, grad_k, m_k, v_k. Out: param_1, m_1, v_1, …, param_k,
	// m_k, v_k. Attr as KAdam, shared by all but the weight decay, which
	// Attr.Decays gives per param where it differs.
	KAdamMulti Kernel = "adam_multi"
	// KSGDMulti: SGD over several params in one step, for a backend that
	// updates them in one multi-tensor kernel (fuse_update.go). In:
	// grad_1, velocity_1, …, grad_k, velocity_k. Out: param_1,
	// velocity_1, …, param_k, velocity_k: KSGD's pairs in order, the
	// velocity read and written only when Momentum ≠ 0 (as KSGD's). Attr
	// as KSGD, shared by all but the weight decay, which Attr.Decays
	// gives per param where it differs.
	KSGDMulti Kernel = "sgd_multi"
	// KClipGradNorm: clipping by the global norm, the first update step:
	// every gradient g_j is scaled in place by
	// min(1, ClipNorm/(‖g‖+1e-6)), where ‖g‖ is the L2 norm over all of
	// them (torch.nn.utils.clip_grad_norm_). In: grad_1, …, grad_k. Out:
	// grad_1, …, grad_k (the same buffers), norms [k+1]: the sum of
	// squares of each gradient, then the scale applied. Attr: ClipNorm.
	KClipGradNorm Kernel = "clip_grad_norm"
	// KGradMean: the first update step of a plan that accumulates
	// gradients over micro-batches (accumulate.go), one per trainable
	// param: grad = sum·Scale (Scale = 1/Plan.Accumulate), then sum = 0
	// for the next update's micro-batches. In: sum. Out: grad, sum.
	// Attr: Scale.
	KGradMean Kernel = "grad_mean"
)

// UnaryOp is one element-wise function in a Chain.
type UnaryOp struct {
	Op    string  `json:"op"`              // relu, leakyrelu, sigmoid, tanh, gelu, exp, log, addconst, mulconst, sqrt, powconst, erf, relu6, silu (fuse_silu.go)
	Alpha float64 `json:"alpha,omitempty"` // leakyrelu's slope, addconst's and mulconst's constant, powconst's exponent
}

// ConvGeom is the static geometry of a convolution or pooling window.
type ConvGeom struct {
	N, C, H, W int // input: batch, channels, height, width
	OC, OH, OW int // output channels (= C for pooling), height, width
	KH, KW     int
	SH, SW     int // stride
	PH, PW     int // padding (both sides)
	DH, DW     int // dilation
	Groups     int
	// Ceil marks a pool whose output size rounds up (the spec's
	// rounding: "ceil", PyTorch's ceil_mode): its last window along an axis
	// may reach past the padded input, and the kernels skip those taps; an
	// average pool divides such a window by its taps inside the padded
	// input, as PyTorch does.
	Ceil bool `json:",omitempty"`
	// OneD marks the 2-D window of height 1 that a conv1d, maxpool1d or
	// avgpool1d runs as (H = OH = KH = SH = DH = 1, PH = 0): the plan
	// shows it as 1-D; the kernels need not know.
	OneD bool `json:",omitempty"`
	// ExcludePad marks an average pool whose divisor counts only the taps
	// inside the input (the spec's countIncludePad: false, PyTorch's
	// count_include_pad=False); otherwise padding zeros count too.
	ExcludePad bool `json:",omitempty"`
}

// Attr holds the static parameters of a step; only those of its Kernel are set.
type Attr struct {
	Act         string    `json:"act,omitempty"` // fused activation of gemm/conv2d: "", relu, leakyrelu, sigmoid, tanh
	Alpha       float64   `json:"alpha,omitempty"`
	Conv        *ConvGeom `json:"conv,omitempty"`
	Chain       []UnaryOp `json:"chain,omitempty"`
	BinOp       string    `json:"binop,omitempty"` // add, sub, mul, div
	Axis        int       `json:"axis,omitempty"`
	Perm        []int     `json:"perm,omitempty"`
	Rate        float64   `json:"rate,omitempty"`
	Eps         float64   `json:"eps,omitempty"`
	Momentum    float64   `json:"momentum,omitempty"`
	Beta1       float64   `json:"beta1,omitempty"`
	Beta2       float64   `json:"beta2,omitempty"`
	WeightDecay float64   `json:"weightDecay,omitempty"`
	Decoupled   bool      `json:"decoupled,omitempty"`
	// Decays is a KAdamMulti or KSGDMulti step's weight decay of each
	// param, in order, where they differ (then WeightDecay is 0); nil:
	// WeightDecay applies to every param of the step.
	Decays []float64 `json:"decays,omitempty"`
	// ClipNorm is the largest global L2 norm of the gradients
	// KClipGradNorm lets through.
	ClipNorm float64 `json:"clipNorm,omitempty"`
	// Scale multiplies a KGradMean step's gradient sum: 1/Plan.Accumulate;
	// in KAttention and KAttentionBwd it multiplies the scores q·kᵀ.
	Scale float64 `json:"scale,omitempty"`
	// Causal masks a softmax step's scores [..., T, T]: query i sees keys
	// 0..i (KSoftmax, KAttention, KAttentionBwd).
	Causal bool `json:"causal,omitempty"`
	// Padding masks the keys of a KSoftmax, KAttention or KAttentionBwd
	// step whose token id is PadID: the step reads the ids [B, Tk] as its
	// last input (after its other operands).
	Padding bool `json:"padding,omitempty"`
	PadID   int  `json:"padId,omitempty"`
	// Delta is where the Huber loss turns from quadratic to linear.
	Delta float64 `json:"delta,omitempty"`
	// Start is the first position along Axis a slice or slice_bwd step
	// keeps.
	Start int `json:"start,omitempty"`
	// Mode is how a resize or resize_bwd step samples: ResizeNearest or
	// ResizeBilinear; AlignCorners puts bilinear's corner samples on the
	// input's corner pixels (PyTorch's align_corners=True) instead of
	// half-pixel centres.
	Mode         string `json:"mode,omitempty"`
	AlignCorners bool   `json:"alignCorners,omitempty"`
	// Method is how the backend computes a conv2d or conv2d_bwd step
	// (ConvDirect or ConvIm2colGemm on the CPU), chosen by the plan's
	// Target in choose_methods.go; the emitter calls that method's kernel.
	Method string `json:"method,omitempty"`
	// Pool is the geometry of a max pool folded into a conv2d step's
	// epilogue (fuse_pool.go): the step writes the maximum over each of
	// the pool's windows of act(conv(x, W) + b), and its y is the pool's
	// output [N, OC, Pool.OH, Pool.OW], while Conv keeps the
	// convolution's own geometry (Pool.N, C, H, W are Conv.N, OC, OH,
	// OW); in a training plan it also writes each window's argmax.
	// nil: y is the convolution's output.
	Pool *ConvGeom `json:"pool,omitempty"`
	// KeptCols marks a conv2d_bwd whose workspace (In[4]) is its forward
	// step's (Out[1]), which still holds the forward's im2col columns of
	// the whole batch (ConvChoice.SharesForward): the backward reads them
	// instead of gathering them again; for a library convolution on
	// channels-last tensors whose weight has no KRSC twin, the forward's
	// KRSC filter (store_channels_last.go).
	KeptCols bool `json:"keptCols,omitempty"`
	// ActApplied marks a conv2d_bwd whose dy already carries its Act's
	// derivative (fuse_act_bwd.go).
	ActApplied bool `json:"actApplied,omitempty"`
	// Precision is the arithmetic of a GEMM-backed step's products,
	// PrecisionF32, PrecisionBF16 or PrecisionTF32, chosen by the plan's
	// Target in choose_precisions.go; the emitter calls that precision's
	// kernels (rt/cpu's bf16 dense kernels; on CUDA, cuBLAS's fast
	// compute types for every GEMM of the step). gemm and gemm_bwd steps
	// always have one; conv2d and conv2d_bwd steps have one only in a
	// plan that asks for another precision than f32, and so do attention
	// and attention_bwd steps on a target with a rule for them (CUDA's
	// tensor-tile attention kernels). Empty (an f32 plan's convolutions,
	// a plan built by hand) means f32.
	Precision string `json:"precision,omitempty"`
	// AccumulateDx marks a gemm_bwd or layernorm_bwd that adds its input
	// gradient to what dx's storage holds (dx += dy·W, a GEMM with beta
	// 1; dx += the layer norm's dx) instead of overwriting it: the
	// storage is a gradient sum that earlier steps wrote and no step has
	// read yet, and the step takes the place of the accumulate step that
	// added its contribution (fuse_accumulate_gemm.go,
	// fuse_accumulate_norm.go).
	AccumulateDx bool `json:"accumulateDx,omitempty"`
	// FromOutput marks a unary_bwd whose In[0] is its chain's output y,
	// not its input x: a one-op chain whose derivative y gives
	// (keep_less.go), so that x need not be kept for the backward.
	FromOutput bool `json:"fromOutput,omitempty"`
	// OperandShapes are the shapes of a binary_bwd's a and b when it reads
	// neither (add and sub: keep_less.go).
	OperandShapes [][]int `json:"operandShapes,omitempty"`
}

// The sampling modes of a resize step (Attr.Mode), the spec's mode.
const (
	ResizeNearest  = "nearest"
	ResizeBilinear = "bilinear"
)

// The precisions of matrix products: a spec's precision and a step's
// Attr.Precision, named as rt/cpu's and rt/gpuhost's Precision values.
const (
	// PrecisionF32 multiplies float32 operands.
	PrecisionF32 = "f32"
	// PrecisionBF16 rounds both operands of every product to bfloat16
	// and accumulates in float32; weights, activations and gradients
	// stay float32 in memory (float32 master weights).
	PrecisionBF16 = "bf16"
	// PrecisionTF32 rounds both operands of every product to TF32 (10
	// bits of mantissa) and accumulates in float32: NVIDIA tensor cores'
	// format, which only the CUDA target runs.
	PrecisionTF32 = "tf32"
)

// Step is one kernel call.
type Step struct {
	Kernel Kernel  `json:"kernel"`
	Layer  string  `json:"layer"` // the spec node it came from (for messages: "NaN first seen after conv2")
	In     []BufID `json:"in"`
	Out    []BufID `json:"out"`
	Attr   Attr    `json:"attr"`
	FLOPs  int64   `json:"flops"`
	Bytes  int64   `json:"bytes"` // bytes read and written
	// Fused lists the spec nodes folded into this step by fusion, in order.
	Fused []string `json:"fused,omitempty"`
}

// Phase is an ordered list of steps run together.
type Phase []Step

// Plan is the static program for one model at one batch size.
type Plan struct {
	Model    string `json:"model"`
	Batch    int    `json:"batch"`
	Training bool   `json:"training"` // has Backward and Update
	Fusion   bool   `json:"fusion"`
	// Precision is the arithmetic the spec asks for in matrix products
	// (PrecisionF32, PrecisionBF16 or PrecisionTF32); each GEMM-backed
	// step's Attr.Precision says what it runs.
	Precision string `json:"precision"`

	Buffers []Buffer `json:"buffers"`
	Params  []Param  `json:"params"` // in spec order; the safetensors order

	Input  BufID `json:"input"`
	Labels BufID `json:"labels"` // NoBuf when !Training
	Output BufID `json:"output"` // the model's prediction (logits for softmax_cross_entropy)
	Loss   BufID `json:"loss"`   // NoBuf when !Training

	Forward  Phase `json:"forward"`
	Backward Phase `json:"backward"` // the loss step first, then gradients in reverse order
	Update   Phase `json:"update"`
	// Accumulate is the number of micro-batches, of Batch samples each,
	// whose mean gradient makes one update; 0 or 1 updates every batch.
	// Above 1 Backward ends by adding each param gradient into its
	// KindGradSum buffer, and the program runs Forward and Backward on
	// Accumulate batches before each Update (accumulate.go).
	Accumulate int `json:"accumulate,omitempty"`

	// Memory plan: sizes of the two arenas in float32 elements, and the
	// naive size (every work buffer its own storage) to report the saving.
	StateSize int `json:"stateSize"`
	// FoldedSize is the folded arena's size: an inference plan's folded
	// weights (fold_batchnorm.go); 0 in a plan that folds nothing.
	FoldedSize    int `json:"foldedSize,omitempty"`
	WorkSize      int `json:"workSize"`
	NaiveWorkSize int `json:"naiveWorkSize"`

	// Fusions lists the fusion decisions for `mlbuild plan`.
	Fusions []string `json:"fusions,omitempty"`
	// Methods lists, for `mlbuild plan`, the convolution steps the
	// backend's library runs and why, and those it does not and why not
	// (Target.ConvLibrary; none without one).
	Methods []string `json:"methods,omitempty"`
	// Precisions lists, for `mlbuild plan`, the GEMM-backed steps that
	// run in another precision than the spec asks for, and why.
	Precisions []string `json:"precisions,omitempty"`
	// Twins are the bfloat16 twins of GEMM operands (twin_operands.go),
	// in the order they were made; none in a plan whose Target reads no
	// bfloat16 operands.
	Twins []Twin `json:"twins,omitempty"`
	// Stored are the storage owners kept in bfloat16 memory (Elem
	// ElemBF16, as are their views) that are no twins: a bf16 plan's
	// activations and gradients that only steps of its Target's
	// BF16Storage touch, and the workspaces where its library
	// convolutions write dW in bfloat16 (store_bf16.go); in order.
	Stored []BufID `json:"stored,omitempty"`
	// StoredNote says, for `mlbuild plan`, what Stored holds.
	StoredNote string `json:"storedNote,omitempty"`
}

// FoldSteps is the number of KFoldBatchNorm steps at the head of
// Forward (fold_batchnorm.go): steps that read only params and
// statistics and write only KindFolded buffers, which nothing else
// writes. A program may run them once and again only after the params or
// statistics changed, and the rest of Forward on every batch.
func (p *Plan) FoldSteps() int {
	n := 0
	for n < len(p.Forward) && p.Forward[n].Kernel == KFoldBatchNorm {
		n++
	}
	return n
}

// ChannelsLastOperand is the first operand of step s (In, then Out)
// whose storage the plan keeps channels last (store_channels_last.go),
// or NoBuf.
func (p *Plan) ChannelsLastOperand(s Step) BufID {
	for _, ids := range [][]BufID{s.In, s.Out} {
		for _, id := range ids {
			if id != NoBuf && p.validID(id) && p.Buffers[p.root(id)].Layout == LayoutNHWC {
				return id
			}
		}
	}
	return NoBuf
}

// TwinOf is the bfloat16 twin of id's storage (id itself or the buffer
// it views), or NoBuf when it has none.
func (p *Plan) TwinOf(id BufID) BufID {
	r := p.root(id)
	for _, t := range p.Twins {
		if t.Of == r && r != NoBuf {
			return t.Twin
		}
	}
	return NoBuf
}
