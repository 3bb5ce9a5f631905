package planner

import "fmt"

// Target is what the planner needs to know about the backend a plan is
// for: how that backend computes each convolution, and in which precision
// it multiplies each dense layer's matrices. A backend
// supplies its Target beside its emitter and Build records the Target's
// choices in the plan, so that the emitted program calls the chosen
// kernel directly and `mlbuild plan` shows what will run. The planner
// imports no runtime: a Target is planning knowledge held as a value.
type Target struct {
	// Name is the backend's name, for messages.
	Name string
	// Conv chooses how the backend computes one convolution step.
	Conv ConvRule
	// Dense chooses the precision of one dense step's products where the
	// spec asks for another than f32. nil: the backend multiplies in f32
	// only, and every dense step stays f32 (`mlbuild plan` says so).
	Dense DenseRule
	// ConvPrecision chooses the precision of one conv2d or conv2d_bwd
	// step's products, from the method chosen for it, where the spec asks
	// for another than f32. nil: the backend's convolutions multiply in
	// f32 only.
	ConvPrecision func(method, want string) DenseChoice
	// AttentionPrecision chooses the precision of a fused attention
	// step's products (KAttention, KAttentionBwd) of head dimension
	// headDim where the spec asks for another than f32. nil: the
	// backend's attention multiplies in f32, and its steps keep no
	// precision (as an f32 plan's convolutions).
	AttentionPrecision func(headDim int, want string) DenseChoice
	// F32Why says why a step stays f32 on a backend that has no rule for
	// it (Dense or ConvPrecision nil), for `mlbuild plan`; "" says the
	// backend has no such products.
	F32Why string
	// UpdateTensors is the most params one optimizer step may update: a
	// GPU backend's multi-tensor kernel, bounded by the buffers one kernel
	// may bind (fuse_update.go). 0 or 1: one step per param.
	UpdateTensors int
	// PoolBwdAct says the backend's max pool backward multiplies its dx
	// by an activation's derivative (Attr.Act of maxpool2d_bwd) and its
	// conv2d_bwd honours Attr.ActApplied: fuse_act_bwd.go then folds a
	// convolution's activation derivative into the pool's backward.
	PoolBwdAct bool
	// PoolEpilogue says whether the backend's method for a forward
	// convolution of geometry g can take a max pool of geometry pool
	// (which reads g's output) into its epilogue: compute a window's
	// convolution outputs and write only their maximum (fuse_pool.go,
	// inference plans; training plans too with PoolArgmax). nil: no
	// method pools.
	PoolEpilogue func(g ConvGeom, method string, pool ConvGeom) bool
	// PoolArgmax says the methods that PoolEpilogue accepts also write
	// each pool window's argmax (conv2d's third output in a training
	// plan) and the backend has KMaxPool2DArgmaxBwd: fuse_pool.go then
	// pools in the epilogue of training plans' convolutions too, where
	// their backward needs no full-size output.
	PoolArgmax bool
	// LossRows says the backend's softmax cross-entropy writes each row's
	// loss into a scratch of one float32 per row and then sums them:
	// choose_loss_rows.go gives each softmax_xent step that scratch as its
	// third output.
	LossRows bool
	// Attention says the backend has fused attention kernels
	// (KAttention, KAttentionBwd): fuse_attention.go then replaces each
	// attention's matmul, scale, softmax, dropout and matmul by one step,
	// so the scores [..., T, T] are never in memory.
	Attention bool
	// ConvLibrary, where set, offers the backend's library convolutions
	// (cuDNN on CUDA) to chooseMethods: given a step's geometry, the Conv
	// rule's choice for it and the plan's precision, it returns the choice that runs
	// (the library's method, with no scratch, or the rule's own) and,
	// for `mlbuild plan`, why. nil: the backend has no library
	// convolutions (Metal, the CPU).
	ConvLibrary func(g ConvGeom, c ConvChoice, precision string) (ConvChoice, LibraryWhy)
	// GemmAccumulate says the backend's dense backward can add its input
	// gradient into an existing sum at no cost beyond reading it (a GEMM
	// with beta 1, Attr.AccumulateDx): fuse_accumulate_gemm.go then
	// folds the accumulate steps that add such a contribution into its
	// gemm_bwd.
	GemmAccumulate bool
	// LayerNormAccumulate says the backend's layer norm backward can add
	// its dx into an existing sum at no cost beyond reading it
	// (Attr.AccumulateDx): fuse_accumulate_norm.go then folds the
	// accumulate steps that add such a contribution (a transformer's
	// residual stream) into its layernorm_bwd.
	LayerNormAccumulate bool
	// FusedReLU says the backend's batch norm and binary add kernels
	// apply a ReLU that follows them (Attr.Act "relu" of batchnorm,
	// batchnorm_bwd and binary): fuse_norm_act.go and fuse_sum_act.go
	// then fold such a ReLU into the step before it.
	FusedReLU bool
	// SumReLU says the backend's binary add kernel applies a ReLU that
	// follows it (Attr.Act "relu" of binary), where its batch norm
	// kernels do not (FusedReLU says both): fuse_sum_act.go then folds
	// such a ReLU into the sum.
	SumReLU bool
	// AccumulateAct says the backend's unary_bwd kernel from an
	// activation's output adds a second dy (In[2]) to the first before
	// applying the derivative: fuse_accumulate_act.go then folds an
	// accumulate step whose sum only such a step reads into it.
	AccumulateAct bool
	// ShareSumGrads lets share_sum_grads.go pass a sum's dy on to its
	// operands as their gradient instead of copying it. Any backend's
	// buffers allow it; the GPU targets set it, and the CPU target, whose
	// programs are not yet measured with it, does not.
	ShareSumGrads bool
	// ConvSum names the convolution methods (Attr.Method) whose forward
	// adds a residual tensor z before its activation, y = act(conv(x, W)
	// + b + z), in one pass (cuDNN's fused call on CUDA): fuse_conv_sum.go
	// then folds the sum after such a convolution into it, in inference
	// plans. A method needs a bias for it (the library's fused call takes
	// one); nil folds none.
	ConvSum map[string]bool
	// NormSum names the plan precisions in which the backend's training
	// batch norm kernels add a residual tensor z before their activation,
	// y = act(bn(x) + z), in one pass: fuse_norm_sum.go then folds the
	// sum after such a batch norm into it. nil folds none.
	NormSum map[string]bool
	// FoldBatchNorm says the backend runs KFoldBatchNorm steps and its
	// programs run an inference plan's fold steps only when the weights
	// changed (Plan.FoldSteps): fold_batchnorm.go then folds each
	// inference batch norm into the convolution before it.
	FoldBatchNorm bool
	// NoFoldWhy says, for `mlbuild plan`, why a backend without
	// FoldBatchNorm keeps its inference batch norms; "" says nothing.
	NoFoldWhy string
	// SiLU says the backend's unary chains have silu, x·sigmoid(x) in one
	// op: fuse_silu.go then fuses a sigmoid and the product of its input
	// by its output into it.
	SiLU bool
	// ReLU6Epilogue says the backend's gemm and conv2d kernels clamp to
	// [0, 6] in their epilogues (Attr.Act "relu6") and their backward
	// kernels take its derivative from the output: fuse_relu6.go then
	// folds a relu6 step into the step before it.
	ReLU6Epilogue bool
	// SiLUEpilogue says the backend's gemm and conv2d kernels apply silu
	// in their forward epilogues (Attr.Act "silu"; no backward kernel
	// takes it, since its derivative needs the pre-activation):
	// fuse_silu_epilogue.go then folds a silu step into the step before
	// it in inference plans.
	SiLUEpilogue bool
	// BF16 says the backend's bf16 GEMMs read bfloat16 operands that
	// their producers write (twin_operands.go), and which producers can;
	// nil: its GEMMs read float32 operands only.
	BF16 *BF16Twins
	// BF16Storage says which steps of a bf16 plan can keep their
	// activations and gradients in bfloat16 memory (store_bf16.go); nil:
	// every buffer a step names stays float32.
	BF16Storage *BF16Storage
}

// BF16Storage is what a backend's kernels can do with activations and
// gradients stored in bfloat16: which kernels read and write any of
// those operands in bfloat16, and which convolution method multiplies
// bfloat16 tensors.
type BF16Storage struct {
	// Kernels are the kernels whose lowering reads and writes each of
	// its activation and gradient operands in bfloat16 where the plan
	// stores it so (emit/gpu rewrites their loads and stores), in float32
	// elsewhere. A conv2d or conv2d_bwd is never among them: Library
	// says which convolutions take bfloat16.
	Kernels map[Kernel]bool
	// Library is the convolution method (Attr.Method) that multiplies in
	// bf16 only on bfloat16 tensors: its steps in precision bf16 need x
	// and y (the forward), x, dy and dx (the backward) stored in
	// bfloat16 and W's bfloat16 twin, and the backward writes dW in
	// bfloat16 to its workspace, from which the step's lowering widens
	// it into dW. A library step whose tensors cannot all be bfloat16
	// runs in tf32 on float32 ones instead.
	Library string
	// Direct is the convolution method (Attr.Method) whose kernels, a
	// forward and a weight gradient without dx, read x and write y (read
	// x, dy and y) in whatever element type and layout the plan stores
	// each: the direct convolution of an image model's first layer.
	// Such a step without a pool in its epilogue neither keeps a tensor
	// float32 nor asks any layout of it. "" : no such method.
	Direct string
	// BatchNormScratch, where set, says the backend keeps stored 4-D
	// tensors channels last (Buffer.Layout LayoutNHWC) where every step
	// that names them can: its library convolutions take x and y (dy and
	// dx) channels last together, its element-wise kernels take every
	// operand of one shape in one layout, and its batch norm and global
	// average pool kernels take each operand in its own. A training
	// batch norm, forward or backward, that names a channels-last tensor
	// then gets a float32 scratch of BatchNormScratch(outer, c, inner)
	// elements for its partial sums (Out[3]).
	BatchNormScratch func(outer, c, inner int) int
	// Sampled, where set, names the channels-last library convolutions
	// that run on a copy of the pixels their window reads (a 1×1 stride-2
	// projection's every other pixel: emit/gpu's SampledConv): such a
	// forward copies them into its workspace (Out[1], from
	// SampledOffset), and its backward, whose In[4] that workspace is too
	// (KeptCols), computes dW from the copy (store_channels_last.go).
	Sampled func(g ConvGeom) bool
}

// LibraryWhy is why a ConvLibrary rule chose as it did, for `mlbuild
// plan`: Taken when the library runs the step, and the reason either way
// ("" when the library was never in question, as for a direct kernel).
type LibraryWhy struct {
	Taken  bool
	Reason string
}

// BF16Twins is what a backend's kernels can do for bfloat16 GEMM
// operands: which steps write a bfloat16 twin of an output in the same
// kernel as the float32 value, and which update steps write the twin of
// each param they update.
type BF16Twins struct {
	// Producers maps a kernel to the outputs (indexes into Step.Out)
	// whose twin the backend's lowering of that step writes.
	Producers map[Kernel][]int
	// Updates are the optimizer kernels that write the twin of every
	// param they update (their param outputs).
	Updates map[Kernel]bool
}

// direct reports whether st is a convolution of s's Direct method that
// takes each tensor as the plan stores it (one without an epilogue pool,
// whose argmax is NCHW float32).
func (s *BF16Storage) direct(st *Step) bool {
	return s.Direct != "" && (st.Kernel == KConv2D || st.Kernel == KConv2DBwd) && st.Attr.Method == s.Direct && st.Attr.Pool == nil
}

// bf16Library reports whether st is a library convolution of s in
// precision bf16: one that multiplies bfloat16 tensors.
func (s *BF16Storage) bf16Library(st *Step) bool {
	return (st.Kernel == KConv2D || st.Kernel == KConv2DBwd) && st.Attr.Method == s.Library && st.Attr.Precision == PrecisionBF16
}

// ConvRule is a backend's rule for convolutions: for the geometry of one
// step and the pass it belongs to, the method the backend runs and the
// scratch that method needs from the plan.
type ConvRule func(g ConvGeom, pass ConvPass) ConvChoice

// ConvPass says which computation of a convolution a method is chosen for.
type ConvPass int

// Convolution passes.
const (
	ConvForward      ConvPass = iota // conv2d: y from x, W and b
	ConvBackward                     // conv2d_bwd: dx, dW and db
	ConvBackwardNoDx                 // conv2d_bwd without dx (the model input's layer): dW and db only
)

// String names the pass for messages.
func (p ConvPass) String() string {
	switch p {
	case ConvForward:
		return "forward"
	case ConvBackward:
		return "backward"
	case ConvBackwardNoDx:
		return "backward without dx"
	}
	return "unknown pass"
}

// ConvChoice is how a backend computes one convolution step.
type ConvChoice struct {
	// Method names the backend's kernel (Attr.Method); the emitter turns it
	// into a call of that kernel and nothing chooses again at run time.
	Method string
	// Scratch is the number of float32s of workspace the method needs; the
	// step gets a scratch buffer of that size, or none when it is 0.
	Scratch int
	// SharesForward, for a backward pass, asks for the forward step's
	// workspace instead of a new one: the backend's forward method leaves
	// the im2col columns of the whole batch there, so the backward reads
	// them instead of gathering them again. The planner grants it when the
	// layer's forward step has a workspace at least Scratch long, and
	// records it in Attr.KeptCols; the workspace then stays live from the
	// forward to the backward (assign_buffers.go).
	SharesForward bool
}

// DenseRule is a backend's rule for dense layers' products: for one gemm
// or gemm_bwd step, with rows rows in its batch (the batch times any
// leading axes of the layer's input), and the precision the spec asks
// for, the precision the backend runs the step in.
type DenseRule func(rows int, want string) DenseChoice

// DenseChoice is the precision of one dense step's products.
type DenseChoice struct {
	// Precision is PrecisionF32 or the precision asked for
	// (Attr.Precision).
	Precision string
	// Why says, when Precision is not the one asked for, why not, for
	// `mlbuild plan` ("1 row, fewer than ...").
	Why string
}

// The CPU backend's convolution methods (rt/cpu's Conv2DDirect* and
// Conv2DIm2col* kernels).
const (
	// ConvDirect convolves shifted, zero-padded input planes with no
	// columns; it needs stride 1 and padding within the filter's reach
	// ((KH-1)·DH rows, (KW-1)·DW columns: its planes share their padding
	// between rows, and dx is the direct convolution of dy padded by the
	// reach less the padding).
	ConvDirect = "direct"
	// ConvIm2colGemm gathers packed columns straight into the GEMM
	// microkernels' layout; it handles every geometry.
	ConvIm2colGemm = "im2col+gemm"
	// ConvWinograd computes 2×2 output tiles of a 5×5, stride-1,
	// undilated, ungrouped convolution from 6×6 input tiles by Winograd's
	// minimal filtering, F(2×2,5×5): 36 matrix products of transformed
	// tiles instead of 100 multiply-adds per output pair. Its rounding
	// error is a few times the direct sum's (rt/cpu's TestConvWinogradFwd).
	ConvWinograd = "winograd F(2x2,5x5)"
	// ConvWinogradF4 is Winograd F(4×4,5×5) for the same layers: 4×4
	// output tiles from 8×8 input tiles, 64 matrix products instead of 36
	// but 2.25 times fewer multiply-adds in them a pixel, larger transforms,
	// and a rounding error about twice F(2×2)'s (rt/cpu's
	// winogradMethods); dw by F(5×5,4×4).
	ConvWinogradF4 = "winograd F(4x4,5x5)"
	// ConvWinograd3 is Winograd F(4×4,3×3) for 3×3, stride-1,
	// undilated, ungrouped layers: 4×4 output tiles from 6×6 input tiles,
	// 36 matrix products instead of 144 multiply-adds a tile and channel
	// pair, and a rounding error a few times the direct sum's (rt/cpu's
	// winogradMethods); dw by F(3×3,4×4).
	ConvWinograd3 = "winograd F(4x4,3x3)"
	// ConvPointwise multiplies the filters by each image's input as it
	// lies in memory, one matrix product per image and group (and two
	// for the backward, dx and dw): a 1×1 convolution of stride 1
	// without padding, which needs no columns and no padded planes.
	ConvPointwise = "pointwise gemm"
	// ConvDepthwise convolves each channel's plane with its own filter
	// (groups = input = output channels), a block of flat outputs in
	// vector registers while the taps stream, from the plane rearranged
	// into zero-padded phase planes (one per stride phase), so that any
	// stride, padding and dilation reads contiguous vectors; with
	// AVX-512 the blocks are whole output rows written straight into
	// the output. Its backward computes dw by dot products over the same
	// planes and dx by the same kernel run the other way.
	ConvDepthwise = "depthwise"
	// ConvGrouped runs the forward pass of a convolution of at most 16
	// input channels a group as the depthwise method's kernel does, each
	// output channel one filter of C/G·KH·KW taps over its group's
	// phase planes laid end to end; the backward passes keep another
	// method.
	ConvGrouped = "grouped"
	// ConvPhase runs a strided, undilated, ungrouped convolution's forward
	// pass as the direct method's stride-1 convolution over the SH·SW
	// stride phases of its input, the filters split alike (taps past the
	// filter's edge zero): no columns gathered, for products the zeros
	// make ⌈KH/SH⌉·⌈KW/SW⌉·SH·SW / (KH·KW) times as many.
	ConvPhase = "phase direct"
)

// CPU is the CPU backend's Target, the default of Options.Target.
var CPU = Target{Name: "cpu", Conv: cpuConv, Dense: cpuDense, ConvPrecision: cpuConvPrecision, AttentionPrecision: cpuAttentionPrecision, Attention: true, FoldBatchNorm: true, SiLU: true, ReLU6Epilogue: true, SiLUEpilogue: true, GemmAccumulate: true, LayerNormAccumulate: true,
	SumReLU: true}

// cpuBF16Rows is the fewest rows of a dense step that the CPU multiplies
// in bf16: Intel AMX's bf16 tiles hold 16 rows, and below that (batch-1
// inference above all) float32 dot products are faster than rounding the
// operands for a product that fills a fraction of a tile.
const cpuBF16Rows = 16

// cpuDense is the CPU backend's rule for dense steps: bf16 where the spec
// asks for it and the step has at least cpuBF16Rows rows, f32 otherwise.
// rt/cpu's BF16 runs on AMX where the CPU has it, else on AVX512-BF16,
// else emulates the same products in float32, so the plan does not
// depend on the machine the program runs on.
//
// A spec's tf32 keeps every CPU step f32 (and `mlbuild plan` says why)
// rather than being an error: TF32 is NVIDIA's tensor-core format, a spec
// names the precision it wants wherever a backend has it, and the same
// spec built for the CPU should build, as a bf16 spec builds for Metal.
func cpuDense(rows int, want string) DenseChoice {
	if want == PrecisionTF32 {
		return DenseChoice{Precision: PrecisionF32, Why: cpuNoTF32}
	}
	if want == PrecisionBF16 && rows < cpuBF16Rows {
		unit := "rows"
		if rows == 1 {
			unit = "row"
		}
		return DenseChoice{Precision: PrecisionF32, Why: fmt.Sprintf("%d %s, fewer than the %d of a bf16 tile: float32 dot products are faster", rows, unit, cpuBF16Rows)}
	}
	return DenseChoice{Precision: want}
}

// cpuNoTF32 says why the CPU keeps a tf32 plan's steps in f32.
const cpuNoTF32 = "the CPU has no TF32 arithmetic (a format of NVIDIA's tensor cores; tf32 runs on --backend cuda): float32 products"

// cpuAttentionPrecision is the CPU backend's rule for the fused
// attention's products (rt/cpu's Attention.BF16): a bf16 plan's run in
// bf16 at any head dimension (on one thread's AMX tiles, whose packing pads
// every edge, else emulated in float32 on rounded copies), its softmax and
// dropout in float32; tf32 stays f32, as everywhere on the CPU.
func cpuAttentionPrecision(_ int, want string) DenseChoice {
	if want == PrecisionTF32 {
		return DenseChoice{Precision: PrecisionF32, Why: cpuNoTF32}
	}
	return DenseChoice{Precision: want}
}

// cpuConvPrecision is the CPU backend's rule for convolutions' precision:
// the methods that multiply by GEMMs, im2col + GEMM and the pointwise
// method, run a bf16 plan's convolutions in bf16 (rt/cpu's
// Precision.Conv2DIm2col* and Conv2DPointwise*: bfloat16 operands
// through the dense layers' AVX512-BF16 path, float32 accumulation, or
// emulated in float32 where the CPU has no bf16 products); the direct
// method, Winograd and the depthwise method multiply in float32, and
// their steps stay f32 with the reason.
//
// On the shared 2-core Zen 4 (AVX512-BF16, no AMX), one thread, CPU ms a
// pass (rt/cpu's BenchmarkConvBF16, 3 iterations), forward and backward
// with dx, the f32 direct method and f32 im2col against bf16 im2col on
// ResNet-18's stride-1 3×3 layers:
//
//	64→64, 56², batch 32:   direct 74.5, 152;  im2col 110, 205;  bf16 58.1, 125
//	64→64, 32², batch 128:  direct 100, 200;   im2col 139, 280;  bf16 84.0, 179
//	128→128, 16², b 128:    direct 107, 428;   im2col 125, 237;  bf16 77.8, 154
//	256→256, 8², b 128:     direct 132, 1108;  im2col 112, 226;  bf16 93.5, 162
//	512→512, 4², b 128:     direct 224, 3860;  im2col 211, 484;  bf16 164, 343
//	32→64, 32², b 128:      direct 54.8, 96.3; im2col 70.7, 143; bf16 43.3, 94.5
//	32→32, 32², b 128:      direct 28.1, 52.1; im2col 45.8, 93.4; bf16 31.4, 69.7
//	16→16, 32², b 128:      direct 8.9, 15.5;  im2col 18.9, 39.5; bf16 12.5, 28.9
//
// (bf16 im2col at 100-127 GFLOP per CPU-second on 64 channels and more
// down to 8² images, its forward gathering the columns of up to 8
// panels at once; 4² images fill a third of its 48-column tiles: 58-60).
// It beats the direct method wherever the layer has 64 output channels
// or more (and 32 input channels), but cpuConv chooses the method before
// the precision and without it; those layers now take Winograd
// F(4×4,3×3) (cpuWinograd3Pays), in f32 in a bf16 plan too, which beat
// bf16 im2col on them (64 at 56², batch 32: 35.0 and 65.5 ms forward and
// backward with dx, against 58.1 and 125). Before Winograd took them,
// CIFAR ResNet-18's training step (bench/models, batch 128, 428 GFLOP;
// `bench --threads 1 --iters 3`, CPU seconds a step from the process's
// CPU time less that of `bench --infer-only`, two or three rounds
// alternating) was f32 17.0 (25 GFLOP per CPU-second), bf16 16.8 (its
// strided and 1×1 convolutions and the head in bf16); with its stride-1
// 3×3 layers of 64 channels and more on bf16 im2col 6.1 (70 GFLOP/s),
// and on f32 im2col in an f32 plan 8.5 (51): the direct method's
// backward is slow on small images, as the table shows.
func cpuConvPrecision(method, want string) DenseChoice {
	if want == PrecisionTF32 {
		return DenseChoice{Precision: PrecisionF32, Why: cpuNoTF32}
	}
	switch method {
	case ConvIm2colGemm, ConvPointwise:
		return DenseChoice{Precision: want}
	case ConvDirect:
		return DenseChoice{Precision: PrecisionF32, Why: "the direct method multiplies in float32"}
	}
	return DenseChoice{Precision: PrecisionF32, Why: fmt.Sprintf("the %s method multiplies in float32 (the CPU's bf16 convolutions are im2col and pointwise)", method)}
}

// cpuConv is the CPU backend's convolution rule: Winograd F(4×4,5×5) for
// the forward and backward passes of the 5×5 layers where it pays
// (cpuWinogradPays; the backward needs padding up to 4, as dx is the
// convolution of dy padded by 4 less the padding), Winograd F(4×4,3×3)
// for the 3×3 layers where it pays (cpuWinograd3Pays; the backward with
// padding up to 2), the direct method
// wherever it applies (on the stride-1 layers measured it beats im2col +
// GEMM, see rt/cpu's conv_direct.go), im2col + GEMM elsewhere. None needs
// scratch from the plan: each keeps its work buffers to itself, one per
// worker.
//
// F(4×4) replaced F(2×2,5×5) (ConvWinograd, whose kernels remain) on
// every layer where that paid: on one thread of the shared 2-core Zen 4
// (load average 70-85), batch 250, CPU ms a pass, median of 3 (rt/cpu's
// BenchmarkConvWinograd), forward and backward with dx:
//
//	32→64, 14×14: F(2×2) 26.2, 55.4; F(4×4) 19.6, 44.6; direct 47.2, 109.7
//	16→32, 14×14: F(2×2) 8.4, 27.9;  F(4×4) 6.5, 21.4;  direct 13.2, 25.7
//	8→16, 14×14:  F(2×2) 10.3, 21.3; F(4×4) 7.4, 15.0;  direct 3.1, 6.7
//
// F(2×2) lost the backward with dx of 16→32 to the direct method, so it
// took it only where dx's own geometry (32→16) paid too; F(4×4) wins it.
//
// A 1×1 convolution of stride 1 without padding is a matrix product on
// the tensors in place (ConvPointwise), in every pass: on the 1×1 layers
// of mobilenet_v2 and resnet50 at 224×224, batch 1, one thread of the
// loaded 2-core machine, CPU ms forward and backward with dx (rt/cpu's
// BenchmarkConvMobile, median of 3), pointwise against the direct method
// and im2col + GEMM:
//
//	16→96, 112²:  1.45, 4.00 against 1.58, 4.48 and 3.44, 5.21
//	144→24, 56²:  0.50, 1.04 against 1.01, 1.77 and 1.17, 1.76
//	960→320, 7²:  0.53, 1.24 against 1.00, 10.0 and 0.63, 1.92
//	256→64, 56²:  1.31, 2.61 against 6.29, 7.19 and 3.10, 3.94
//
// On 1×1 images (efficientnet_b0's squeeze-and-excitation, 1152→48 at
// batch 32) it is one dense layer for the batch: 0.085, 0.050 against
// 1.86, 8.84 and 1.59, 2.49.
//
// A depthwise layer (groups = input = output channels) takes the
// depthwise method in every pass; same benchmark, CPU ms, median of 5 on
// AVX-512, forward and backward with dx, depthwise against the direct
// method (stride 1) or im2col + GEMM (stride 2, which ran it as one-row
// products of gathered columns):
//
//	mobilenet_v2 32, 3×3, 112²:             0.26, 1.11 against 0.39, 1.15
//	mobilenet_v2 144, 3×3, 56²:             0.38, 1.22 against 0.51, 1.62
//	mobilenet_v2 384, 3×3, 14²:             0.08, 0.29 against 0.09, 0.30
//	mobilenet_v2 960, 3×3, 7²:              0.14, 0.37 against 0.13, 0.62
//	efficientnet_b0 240, 5×5, 28²:          0.24, 0.99 against 0.45, 1.11
//	efficientnet_b0 672, 5×5, 14²:          0.28, 1.49 against 0.27, 1.73
//	mobilenet_v2 96, 3×3 stride 2, 112²:    1.20, 3.94 against 10.9, 32.6
//	efficientnet_b0 144, 5×5 stride 2, 56²: 0.61, 1.72 against 9.1, 18.6
//
// (the AVX2 kernels forward, median of 3: 1.19 against 1.33 on 32 at
// 112², 0.27 against 0.35 on 384 at 14², 0.65 against 0.73 on 672 5×5
// at 14²).
func cpuConv(g ConvGeom, pass ConvPass) ConvChoice {
	if g.KH == 1 && g.KW == 1 && max(g.SH, 1) == 1 && max(g.SW, 1) == 1 && g.PH == 0 && g.PW == 0 {
		return ConvChoice{Method: ConvPointwise}
	}
	stride1 := max(g.SH, 1) == 1 && max(g.SW, 1) == 1
	direct := stride1 && g.PH <= (g.KH-1)*max(g.DH, 1) && g.PW <= (g.KW-1)*max(g.DW, 1)
	if g.Groups > 1 && g.Groups == g.C && g.OC == g.C {
		return ConvChoice{Method: ConvDepthwise}
	}
	if pass == ConvForward && cpuWinogradPays(g) {
		return ConvChoice{Method: ConvWinogradF4}
	}
	if pass != ConvForward && g.PH <= 4 && g.PW <= 4 && cpuWinogradPays(g) {
		return ConvChoice{Method: ConvWinogradF4}
	}
	if (pass == ConvForward || g.PH <= 2 && g.PW <= 2) && cpuWinograd3Pays(g, pass) {
		return ConvChoice{Method: ConvWinograd3}
	}
	if direct {
		return ConvChoice{Method: ConvDirect}
	}
	if pass == ConvForward && cpuGroupedPays(g) {
		return ConvChoice{Method: ConvGrouped}
	}
	if pass == ConvForward && cpuPhasePays(g) {
		return ConvChoice{Method: ConvPhase}
	}
	return ConvChoice{Method: ConvIm2colGemm}
}

// cpuGroupedPays reports whether the CPU's grouped method takes the
// forward pass of g, which the direct method does not take (strided, or
// padded past the filter's reach): more than one group, at most 16 input
// channels a group (rt/cpu's groupedMaxChannels), and not depthwise.
// regnet_y_400mf's stride-2 layers of 8 channels a group, batch 1, one
// thread of the loaded 2-core Zen 4, ms (rt/cpu's BenchmarkConvGrouped):
// 48 channels on 112² 0.65 against im2col's 2.16, 104 on 56² 0.46
// against 1.54, 440 on 14² 0.21 against 0.61. Where the direct method
// applies it stays (104 on 28², stride 1: 0.17 against 0.25). It takes a
// stem too, one group of at most 4 input channels (rt/cpu's
// groupedStemChannels), a 3×3 filter at stride 2 undilated (the geometry
// measured; the 7×7 stems keep the phase method): mobilenet_v2's and regnet_y_400mf's 3→32 3×3
// stride-2 layer at 224², same benchmark, CPU ms: batch 1 0.39-0.41
// against im2col's 0.97-1.06, batch 8 4.3 against 10.1-12.2. With the
// kernel of several output channels a pass (rt/cpu's filterRows) the
// stem takes 0.23 (phase method 0.35-0.36), regnet's stride-2 layers
// 0.33, 0.20 and 0.12; on the stride-1 ones the direct method still wins
// or ties (104 on 28² 0.14 both, 208 on 14² 0.085 against 0.11).
func cpuGroupedPays(g ConvGeom) bool {
	groups := max(g.Groups, 1)
	if groups == 1 {
		return g.C <= 4 && g.KH == 3 && g.KW == 3 && g.SH == 2 && g.SW == 2 && max(g.DH, 1) == 1 && max(g.DW, 1) == 1
	}
	return g.C/groups <= 16 && !(groups == g.C && g.OC == g.C)
}

// cpuPhasePays reports whether the CPU's phase method takes the forward
// pass of strided g: undilated and ungrouped, and either a filter whose
// stride phases once needed at most 4/3 of its products (a 7×7 stride-2
// filter: 64 taps for 49; a 3×3 one would take 16 for 9), or a batch of
// at most 1024 output positions (one-sample inference at 224²: the 3×3
// and 1×1 stride-2 layers of ResNet). The method now runs the filter's
// own taps over the phase planes, as many products as im2col. ResNet's
// stem (3→64 channels, 7×7, stride 2, 224²), batch 8, one thread of the
// loaded 2-core Zen 4, ms (rt/cpu's BenchmarkConvPhaseStem, alternating):
// the phase method with its zero taps 57-61, im2col + GEMM 82-85, whose
// 147 rows of columns are gathered a value at a time; at batch 1 without
// them 2.6-3.0 against 4.2-4.6 with. Batch 1, CPU ms forward (rt/cpu's
// BenchmarkConvBatch1), phase against im2col: 3×3 64→128 at 56² 1.49,
// 1.64; 128→256 at 28² 1.55, 1.80; 256→512 at 14² 1.74, 2.14; 1×1 64→128
// at 56² 0.18, 0.28; 1×1 512→1024 at 28² 2.6-3.0, 2.65-2.70. It won at
// batch 32 too (3×3 128→256 at 28² 45.0 against 52.3), but a bf16 plan's
// im2col multiplies in bf16 there, and cpuConv chooses the method before
// the precision. A 1×1 layer without padding (the pointwise products over
// the gathered phase, rt/cpu's phasePointwise) takes it up to 4096 output
// positions: regnet_y_400mf's 32→48 at 112², batch 1 (3136 outputs), 0.16
// against im2col's 0.42-0.49. The backward passes keep im2col.
func cpuPhasePays(g ConvGeom) bool {
	sh, sw := max(g.SH, 1), max(g.SW, 1)
	if sh*sw == 1 || max(g.DH, 1) != 1 || max(g.DW, 1) != 1 || max(g.Groups, 1) != 1 {
		return false
	}
	taps := ((g.KH + sh - 1) / sh) * ((g.KW + sw - 1) / sw) * sh * sw
	pointwise := g.KH == 1 && g.KW == 1 && g.PH == 0 && g.PW == 0
	return 3*taps < 4*g.KH*g.KW || g.N*g.OH*g.OW <= 1024 || pointwise && g.N*g.OH*g.OW <= 4096
}

// cpuWinogradPays reports whether the CPU's Winograd kernels take g (a 5×5
// filter, stride 1, no dilation, one group) and beat the direct method
// there. Their matrix products have the input channels as their shared
// dimension and the output channels as their width, and their filter
// transform costs the same for any batch, so they need at least 16 input
// and 32 output channels and 1024 blocks of 2×2 outputs in the batch (and
// images within cpuWinogradImageLimit). The thresholds were set on
// F(2×2,5×5); F(4×4,5×5) was measured faster than F(2×2) on the layers
// below (cpuConv).
// Measured on one core of a Xeon with AVX-512, batch 250: 32→64 channels
// on 14×14 (models/mnist.cue's second layer) 31 ms against 46 ms direct,
// 16→32 even, 1→32 on 28×28 29 against 4 ms, 6→16 (LeNet-5) 6.4 against
// 1.7 ms; batch 1 of 32→64 0.87 against 0.21 ms.
func cpuWinogradPays(g ConvGeom) bool {
	one := func(v int) bool { return max(v, 1) == 1 }
	if g.KH != 5 || g.KW != 5 || !one(g.SH) || !one(g.SW) || !one(g.DH) || !one(g.DW) || !one(g.Groups) {
		return false
	}
	perImage := ((g.OH + 1) / 2) * ((g.OW + 1) / 2)
	return g.C >= 16 && g.OC >= 32 && g.N*perImage >= 1024 && perImage*(g.C+g.OC) <= cpuWinogradImageLimit
}

// cpuWinograd3Pays reports whether Winograd F(4×4,3×3) takes g (a 3×3
// filter, stride 1, no dilation, one group) and beats the direct method
// there, in every pass. Its filter transform costs the same for any batch
// and its matrix products have the batch's 4×4 tiles as their rows, so it
// needs 48 tiles in the batch, and 32 input and output channels. On one
// thread of the shared 2-core Zen 4, CPU ms a pass, the better of 2,
// forward and backward with dx (rt/cpu's BenchmarkConvWinograd3),
// F(4×4,3×3) against the direct method:
//
//	ResNet-18 64 at 56², batch 32:   35.0, 65.5 against 74.0, 151
//	ResNet-18 128 at 28², batch 32:  29.3, 61.0 against 73.5, 179
//	ResNet-18 256 at 14², batch 32:  39.0, 73.7 against 76.1, 298
//	ResNet-18 512 at 7², batch 32:   40.7, 78.0 against 93.5, 817
//	CIFAR 64 at 32², batch 128:      40.0, 78.4 against 105, 198
//	CIFAR 128 at 16², batch 128:     40.3, 98.5 against 103, 345
//	CIFAR 256 at 8², batch 128:      35.6, 76.3 against 134, 889
//	CIFAR 512 at 4², batch 128:      38.4, 77.4 against 255, 2788
//	32 at 56², batch 32:             11.0, 22.2 against 20.0, 37.2
//	16 at 56², batch 32:             6.36, 10.7 against 5.21, 10.1
//
// At batch 1 the filter transform weighs more: 64 at 56² (196 tiles)
// 1.15, 2.78 against 2.27, 5.32; 128 at 28² (49 tiles) 1.33, 2.83 against
// 2.66, 5.95; 256 at 14² (16 tiles) 3.39, 7.11 against 2.96, 10.1; 512 at
// 7² (4 tiles) 14.5, 26.4 against 4.63, 28.9. Forward, 32 tiles (256 at
// 14² batch 2, 512 at 7² batch 8) won by 10-20%, 48 (256 at 14² batch 3,
// 512 at 7² batch 12) by 25-50%.
//
// The forward pass of 16 tiles or more takes it too where rt/cpu keeps the
// transformed filters from call to call (conv_winograd_cache.go: at most
// 256 tiles, and 36·C·OC floats within 4 Mi), as one-sample inference
// calls it on the same weights: batch 1, CPU ms forward (rt/cpu's
// BenchmarkConvBatch1), F(4×4,3×3) with the kept filters against the
// direct method: ResNet's 256 at 14² 1.95 against 2.40 (4.1 transforming
// them each call), DenseNet-121's 128→32 at 14² 0.14 against 0.16; 4
// tiles lose (128→32 at 7²: 0.075 against 0.050). A batch of one that
// trains transforms its changed filters each step, as before the cache.
func cpuWinograd3Pays(g ConvGeom, pass ConvPass) bool {
	one := func(v int) bool { return max(v, 1) == 1 }
	if g.KH != 3 || g.KW != 3 || !one(g.SH) || !one(g.SW) || !one(g.DH) || !one(g.DW) || !one(g.Groups) {
		return false
	}
	perImage := ((g.OH + 3) / 4) * ((g.OW + 3) / 4)
	tiles := g.N * perImage
	kept := pass == ConvForward && tiles >= 16 && tiles <= 256 && 36*g.C*g.OC <= 4<<20
	return g.C >= 32 && g.OC >= 32 && (tiles >= 48 || kept) && perImage*(g.C+g.OC) <= cpuWinogradImageLimit
}

// cpuWinogradImageLimit bounds tiles × (C + OC) of one image: the CPU
// kernel transforms and multiplies whole images at a time, with work
// buffers of 36·4 bytes per tile and channel for each thread, here at
// most 16 MiB (a 64×64 image of 32 and 64 channels takes 14 MiB).
// F(4×4,5×5)'s buffers are 64·4 bytes per 4×4 tile, less than half as
// large a pixel. Larger images keep the direct method.
const cpuWinogradImageLimit = 16 << 20 / (36 * 4)
