package cuda

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// dnnWorkspaceLimit is the most workspace one cuDNN algorithm may take:
// the _v7 heuristics' first algorithm that needs no more is chosen.
const dnnWorkspaceLimit = 1 << 30

// convMath is the cuDNN math and data type of each precision a library
// convolution runs in (gpuhost.Conv takes float32 tensors in f32 and
// tf32, bfloat16 ones in bf16). f32 restricts cuDNN to FMA kernels
// (float32 products: cuDNN's default math takes TF32 tensor cores on
// float data) and prepareConv to the algorithms that sum them in float32
// (DNNFloat32Algo); tf32 is that default math, which permits TF32 tensor
// cores on float data (TF32 operands, float32 sums; PyTorch's choice for
// allow_tf32). bf16 is cuDNN's PSEUDO_BFLOAT16_CONFIG: bfloat16 tensors
// and filter (CUDNN_DATA_BFLOAT16), a float compute type (products
// summed in float32, the output rounded to bfloat16 when it is stored),
// and CUDNN_TENSOR_OP_MATH, which asks for the tensor cores a bf16
// convolution is made for and converts nothing on bfloat16 data (the
// down-conversion its name warns of concerns float data; PyTorch sets
// the same math for its bfloat16 convolutions); any algorithm the
// heuristics offer may run, as in tf32.
var convMath = map[gpuhost.Precision]struct {
	math int32
	name string
	data int32        // the cudnnDataType_t of X, W and Y
	elem gpuhost.Elem // their element type
}{
	gpuhost.PrecisionF32:  {DNNFMAMath, "CUDNN_FMA_MATH", DNNDataFloat, gpuhost.ElemF32},
	gpuhost.PrecisionTF32: {DNNDefaultMath, "CUDNN_DEFAULT_MATH", DNNDataFloat, gpuhost.ElemF32},
	gpuhost.PrecisionBF16: {DNNTensorOpMath, "CUDNN_TENSOR_OP_MATH on bfloat16", DNNDataBFloat16, gpuhost.ElemBF16},
}

// convKey is the descriptors of one geometry in one precision (which
// sets their data type, convMath) and one layout (NHWC and KRSC, or
// NCHW and KCRS, which sets their format).
type convKey struct {
	g    gpuhost.ConvGeom
	p    gpuhost.Precision
	nhwc bool
}

// The slots of a convPlan, each with its own algorithm and workspace:
// one for each product (gpuhost.ConvProduct's values), and two for a
// forward with an epilogue, which cuDNN runs as another call
// (cudnnConvolutionBiasActivationForward): with ReLU, chosen as the
// plain forward's algorithm is, and without an activation, which cuDNN
// runs with IMPLICIT_PRECOMP_GEMM only (CUDNN_ACTIVATION_IDENTITY's
// rule), so that a plain forward of the same geometry keeps its own.
const (
	slotFusedReLU = int(gpuhost.ConvWeightGrad) + 1 + iota
	slotFused
	convSlots
)

// convSlotNames name the slots in `info` and errors.
var convSlotNames = [convSlots]string{"forward", "input gradient", "weight gradient", "forward+bias+relu", "forward+bias"}

// convPlan is what cuDNN needs for one geometry and precision: the
// descriptors of X, W, Y and the convolution, those of an epilogue (the
// bias, 1×OC×1×1 of the tensors' data type and format, and an activation
// descriptor of each gpuhost.ConvAct, indexed by it), made with the
// first fused forward, and for each slot the algorithm chosen and its
// workspace.
type convPlan struct {
	x, y   TensorDesc
	w      FilterDesc
	conv   ConvDesc
	bias   TensorDesc
	act    [2]ActivationDesc
	chosen [convSlots]bool
	algo   [convSlots]int32
	ws     [convSlots]uintptr
}

// ConvArgs is one library convolution on device addresses: the product
// of Conv's contract (gpuhost.Conv) on packed NCHW tensors and a KCRS
// filter, or with NHWC channels-last X and Y and a KRSC filter,
// bfloat16 in precision bf16 and float32 in the others (convMath). A
// forward with Bias (not 0) has Conv's epilogue: Bias is OC values of
// the tensors' element type, Z (0: none) a tensor of Y's shape, layout
// and type, Act the activation, and Beta is 0.
type ConvArgs struct {
	Geom      gpuhost.ConvGeom
	Product   gpuhost.ConvProduct
	X, W, Y   DevicePtr
	Alpha     float32
	Beta      float32
	Precision gpuhost.Precision
	NHWC      bool
	Bias, Z   DevicePtr
	Act       gpuhost.ConvAct
}

// slot is the convPlan slot of a's call, or an error for an epilogue
// Conv's contract forbids (gpuhost.Conv.Check refuses it first on a
// Device; this guards the Engine's own callers).
func (a *ConvArgs) slot() (int, error) {
	switch {
	case a.Product > gpuhost.ConvWeightGrad:
		return 0, fmt.Errorf("cuda: convolution product %d, which is none of forward, input gradient and weight gradient", a.Product)
	case a.Act > gpuhost.ConvActReLU:
		return 0, fmt.Errorf("cuda: a convolution epilogue with %v, which cuDNN's fused forward does not apply here (none or relu)", a.Act)
	case a.Bias == 0 && (a.Z != 0 || a.Act != gpuhost.ConvActNone):
		return 0, fmt.Errorf("cuda: a convolution epilogue with Z or %v but no bias", a.Act)
	case a.Bias == 0:
		return int(a.Product), nil
	case a.Product != gpuhost.ConvForward || a.Beta != 0:
		return 0, fmt.Errorf("cuda: a convolution epilogue on the %v with Beta %g: only a forward with Beta 0 has one", a.Product, a.Beta)
	case a.Act == gpuhost.ConvActReLU:
		return slotFusedReLU, nil
	}
	return slotFused, nil
}

// PrepareConv readies what a's convolution (its geometry, product,
// precision, layout, and epilogue: whether it has a bias, and its
// activation; its addresses are not read) needs before it can be
// captured: cuDNN loaded, its handle on the engine's stream, the
// descriptors (kept per geometry, precision and layout; convMath gives
// their data type; an epilogue's with them), the algorithm (the _v7
// heuristics' first deterministic one whose status is success and whose
// workspace is within dnnWorkspaceLimit, else their first such one of
// any kind; in f32 only among those of the GEMM and direct families,
// DNNFloat32Algo; for a forward with a bias and no activation only
// IMPLICIT_PRECOMP_GEMM, the one cuDNN runs it with) and a workspace that
// holds it (one for the engine, grown when a product needs more; an
// outgrown one stays allocated, as graphs captured before use it). It
// allocates and may synchronise, so it runs outside a capture:
// Device.Record calls it for every Conv before it captures.
func (e *Engine) PrepareConv(a ConvArgs) error {
	if e.closed {
		return errClosed
	}
	return e.do(func() error { _, err := e.prepareConv(a); return err })
}

// prepareConv is PrepareConv on the engine's thread.
func (e *Engine) prepareConv(a ConvArgs) (*convPlan, error) {
	g, p, prec, nhwc := a.Geom, a.Product, a.Precision, a.NHWC
	slot, err := a.slot()
	if err != nil {
		return nil, err
	}
	if e.capturing {
		return nil, fmt.Errorf("cuda: a %v convolution (%v) was not prepared before the capture (cuDNN's set-up allocates; a bug in mlbuild)", p, g)
	}
	m, ok := convMath[prec]
	if !ok {
		return nil, fmt.Errorf("cuda: a %v convolution in precision %v, which cuDNN does not compute here (f32 or tf32 on float32 tensors, bf16 on bfloat16 ones)", p, prec)
	}
	if err := e.lib.loadDNN(); err != nil {
		return nil, err
	}
	l, d := e.lib, e.lib.DNN
	if e.dnn == 0 {
		if err := l.dnnError("cudnnCreate", d.Create(&e.dnn), ""); err != nil {
			return nil, err
		}
		if err := l.dnnError("cudnnSetStream", d.SetStream(e.dnn, e.stream), ""); err != nil {
			return nil, err
		}
	}
	key := convKey{g, prec, nhwc}
	format, layout := DNNTensorNCHW, ""
	if nhwc {
		format, layout = DNNTensorNHWC, ", NHWC"
	}
	cp := e.convs[key]
	if cp == nil {
		cp = &convPlan{}
		if err := e.convDescriptors(cp, g, m.data, m.math, format); err != nil {
			e.destroyConv(cp)
			return nil, fmt.Errorf("%w (convolution %v%s, %s)", err, g, layout, m.name)
		}
		if e.convs == nil {
			e.convs = map[convKey]*convPlan{}
		}
		e.convs[key] = cp
	}
	if cp.chosen[slot] {
		return cp, nil
	}
	if slot >= slotFusedReLU {
		if err := e.epilogueDescriptors(cp, g, m.data, format, a.Act); err != nil {
			return nil, fmt.Errorf("%w (the epilogue of convolution %v%s, %s)", err, g, layout, m.name)
		}
	}
	var perf [8]ConvAlgoPerf
	var n int32
	var s DNNStatus
	var call string
	switch p {
	case gpuhost.ConvForward:
		call, s = "cudnnGetConvolutionForwardAlgorithm_v7", d.FwdAlgo(e.dnn, cp.x, cp.w, cp.conv, cp.y, DNNFwdAlgoCount, &n, &perf[0])
	case gpuhost.ConvInputGrad:
		call, s = "cudnnGetConvolutionBackwardDataAlgorithm_v7", d.BwdDataAlgo(e.dnn, cp.w, cp.y, cp.conv, cp.x, DNNBwdDataAlgoCount, &n, &perf[0])
	case gpuhost.ConvWeightGrad:
		call, s = "cudnnGetConvolutionBackwardFilterAlgorithm_v7", d.BwdFilterAlgo(e.dnn, cp.x, cp.y, cp.conv, cp.w, DNNBwdFilterAlgoCount, &n, &perf[0])
	default:
		return nil, fmt.Errorf("cuda: convolution product %d, which is none of forward, input gradient and weight gradient", p)
	}
	what := fmt.Sprintf("%s of %v%s, %s", convSlotNames[slot], g, layout, m.name)
	if err := l.dnnError(call, s, what); err != nil {
		return nil, err
	}
	// The heuristics' first deterministic algorithm that succeeds within
	// the limit (a training run gives the same weights twice), else their
	// first that succeeds within it; in f32, of the algorithms that
	// compute float32 products summed in float32 only (DNNFloat32Algo);
	// for a forward with a bias and no activation, IMPLICIT_PRECOMP_GEMM
	// only.
	found, skipped, precomp := -1, 0, false
	for i := range int(min(max(n, 0), int32(len(perf)))) {
		if slot == slotFused && perf[i].Algo != DNNFwdAlgoImplicitPrecompGemm {
			continue
		}
		precomp = precomp || slot == slotFused
		if perf[i].Status != DNNSuccess || perf[i].Memory > dnnWorkspaceLimit {
			continue
		}
		if prec == gpuhost.PrecisionF32 && !DNNFloat32Algo(p, perf[i].Algo) {
			skipped++
			continue
		}
		if perf[i].Determinism == DNNDeterministic {
			found = i
			break
		}
		if found < 0 {
			found = i
		}
	}
	if found < 0 && slot == slotFused {
		offered := "does not propose it"
		if precomp {
			offered = fmt.Sprintf("proposes it, but not as one that succeeds within %d bytes of workspace", dnnWorkspaceLimit)
		}
		return nil, fmt.Errorf("cuda: a %s runs only with IMPLICIT_PRECOMP_GEMM (algorithm %d: cuDNN's identity activation takes no other), and %s %s (of %d proposed); fuse a ReLU, or run the bias as a kernel after a plain forward",
			what, DNNFwdAlgoImplicitPrecompGemm, call, offered, n)
	}
	if found < 0 {
		f32 := ""
		if skipped > 0 {
			f32 = fmt.Sprintf(" and computes float32 products summed in float32 (%d that transform their operands, FFT or Winograd, skipped)", skipped)
		}
		return nil, fmt.Errorf("cuda: %s proposes no algorithm for the %s that succeeds within %d bytes of workspace%s (of %d proposed)", call, what, dnnWorkspaceLimit, f32, n)
	}
	algo := perf[found].Algo
	var ws uintptr
	switch p {
	case gpuhost.ConvForward: // with an epilogue too
		call, s = "cudnnGetConvolutionForwardWorkspaceSize", d.FwdWorkspace(e.dnn, cp.x, cp.w, cp.conv, cp.y, algo, &ws)
	case gpuhost.ConvInputGrad:
		call, s = "cudnnGetConvolutionBackwardDataWorkspaceSize", d.BwdDataWorkspace(e.dnn, cp.w, cp.y, cp.conv, cp.x, algo, &ws)
	case gpuhost.ConvWeightGrad:
		call, s = "cudnnGetConvolutionBackwardFilterWorkspaceSize", d.BwdFilterWorkspace(e.dnn, cp.x, cp.y, cp.conv, cp.w, algo, &ws)
	}
	if err := l.dnnError(call, s, fmt.Sprintf("%s, algorithm %d", what, algo)); err != nil {
		return nil, err
	}
	if ws > e.dnnWorkBytes {
		var p DevicePtr
		if err := e.alloc(&p, ws, "cuDNN's workspace"); err != nil {
			return nil, err
		}
		e.dnnWork, e.dnnWorkBytes = p, ws
	}
	cp.chosen[slot], cp.algo[slot], cp.ws[slot] = true, algo, ws
	if err := e.warmConv(cp, a, m.elem.Size(), m.name); err != nil {
		cp.chosen[slot] = false
		return nil, err
	}
	return cp, nil
}

// warmConv runs a's call (its product, layout and epilogue, in the
// precision cp was made for) once on scratch tensors of es bytes an
// element and waits, on the engine's thread outside any capture: cuDNN
// may load or compile a kernel, or set it up, at its first call, none of
// which a capture allows, and an algorithm that fails to run fails here,
// named, rather than inside a graph. A fused forward runs twice, with a
// scratch Z and without one, as either may be captured. The scratch is
// freed after.
func (e *Engine) warmConv(cp *convPlan, a ConvArgs, es int, math string) error {
	g := a.Geom
	xs, ws, ys := g.Sizes()
	fused := a.Bias != 0
	sizes := []int{xs, ws, ys}
	if fused {
		sizes = append(sizes, g.OC, ys)
	}
	ptrs := make([]DevicePtr, len(sizes))
	defer func() {
		for _, q := range ptrs {
			if q != 0 {
				delete(e.allocs, q)
				e.lib.Driver.MemFree(q)
			}
		}
	}()
	for i, n := range sizes {
		if err := e.alloc(&ptrs[i], uintptr(es*n), "a trial run of cuDNN"); err != nil {
			return err
		}
	}
	trial := ConvArgs{Geom: g, Product: a.Product, X: ptrs[0], W: ptrs[1], Y: ptrs[2], Alpha: 1, Precision: a.Precision, NHWC: a.NHWC, Act: a.Act}
	runs := []ConvArgs{trial}
	if fused {
		trial.Bias = ptrs[3]
		withZ := trial
		withZ.Z = ptrs[4]
		runs = []ConvArgs{withZ, trial}
	}
	for _, r := range runs {
		if err := e.convCall(r, cp, math); err != nil {
			return fmt.Errorf("%w (a trial run before the graph is recorded)", err)
		}
	}
	slot, _ := a.slot()
	return e.lib.driverError("cuStreamSynchronize", e.lib.Driver.StreamSynchronize(e.stream), fmt.Sprintf("after a trial run of cuDNN's %s of %v", convSlotNames[slot], g))
}

// epilogueDescriptors makes the descriptors of cp's epilogue that it
// lacks: the bias, 1×OC×1×1 of data type data (the tensors': cuDNN 9.19
// refuses a float bias on bfloat16 data) in the tensors' format, and
// the activation descriptor of act (CUDNN_ACTIVATION_RELU, or
// CUDNN_ACTIVATION_IDENTITY for none), NaNs not propagated; on the
// engine's thread. destroyConv destroys them with the rest.
func (e *Engine) epilogueDescriptors(cp *convPlan, g gpuhost.ConvGeom, data, format int32, act gpuhost.ConvAct) error {
	l, d := e.lib, e.lib.DNN
	if cp.bias == 0 {
		if err := l.dnnError("cudnnCreateTensorDescriptor", d.CreateTensor(&cp.bias), "the bias"); err != nil {
			return err
		}
		if err := l.dnnError("cudnnSetTensor4dDescriptor", d.SetTensor4d(cp.bias, format, data, 1, int32(g.OC), 1, 1), "the bias"); err != nil {
			d.DestroyTensor(cp.bias) // a descriptor that is not set is none
			cp.bias = 0
			return err
		}
	}
	if cp.act[act] != 0 {
		return nil
	}
	mode := DNNActivationIdentity
	if act == gpuhost.ConvActReLU {
		mode = DNNActivationReLU
	}
	if err := l.dnnError("cudnnCreateActivationDescriptor", d.CreateActivation(&cp.act[act]), ""); err != nil {
		return err
	}
	if err := l.dnnError("cudnnSetActivationDescriptor", d.SetActivation(cp.act[act], mode, DNNNotPropagateNaN, 0), fmt.Sprintf("activation %v", act)); err != nil {
		d.DestroyActivation(cp.act[act])
		cp.act[act] = 0
		return err
	}
	return nil
}

// convDescriptors makes cp's descriptors for g: X, W and Y of data type
// data, all three in format format: NCHW (W KCRS) or NHWC (W KRSC; the
// filter descriptor's k, c, h and w are the same, only its format says
// how they are stored), the convolution's compute type float (the only
// one of float and bfloat16 data) and its math math; on the engine's
// thread. cuDNN 9.14 proposes no input- or weight-gradient algorithm for
// NHWC tensors with an NCHW filter (on an H200, in bf16 and f32), so the
// filter follows the tensors.
func (e *Engine) convDescriptors(cp *convPlan, g gpuhost.ConvGeom, data, math, format int32) error {
	l, d := e.lib, e.lib.DNN
	for _, c := range []struct {
		call string
		s    func() DNNStatus
	}{
		{"cudnnCreateTensorDescriptor", func() DNNStatus { return d.CreateTensor(&cp.x) }},
		{"cudnnCreateTensorDescriptor", func() DNNStatus { return d.CreateTensor(&cp.y) }},
		{"cudnnCreateFilterDescriptor", func() DNNStatus { return d.CreateFilter(&cp.w) }},
		{"cudnnCreateConvolutionDescriptor", func() DNNStatus { return d.CreateConv(&cp.conv) }},
		{"cudnnSetTensor4dDescriptor", func() DNNStatus {
			return d.SetTensor4d(cp.x, format, data, int32(g.N), int32(g.C), int32(g.H), int32(g.W))
		}},
		{"cudnnSetTensor4dDescriptor", func() DNNStatus {
			return d.SetTensor4d(cp.y, format, data, int32(g.N), int32(g.OC), int32(g.OH), int32(g.OW))
		}},
		{"cudnnSetFilter4dDescriptor", func() DNNStatus {
			return d.SetFilter4d(cp.w, data, format, int32(g.OC), int32(g.C/g.Groups), int32(g.KH), int32(g.KW))
		}},
		{"cudnnSetConvolution2dDescriptor", func() DNNStatus {
			return d.SetConv2d(cp.conv, int32(g.PH), int32(g.PW), int32(g.SH), int32(g.SW), int32(g.DH), int32(g.DW), DNNCrossCorrelation, DNNDataFloat)
		}},
		{"cudnnSetConvolutionGroupCount", func() DNNStatus { return d.SetConvGroups(cp.conv, int32(g.Groups)) }},
		{"cudnnSetConvolutionMathType", func() DNNStatus { return d.SetConvMath(cp.conv, math) }},
	} {
		if err := l.dnnError(c.call, c.s(), ""); err != nil {
			return err
		}
	}
	return nil
}

// destroyConv destroys what cp holds and returns the first error.
func (e *Engine) destroyConv(cp *convPlan) error {
	l, d := e.lib, e.lib.DNN
	var errs []error
	if cp.x != 0 {
		errs = append(errs, l.dnnError("cudnnDestroyTensorDescriptor", d.DestroyTensor(cp.x), ""))
	}
	if cp.y != 0 {
		errs = append(errs, l.dnnError("cudnnDestroyTensorDescriptor", d.DestroyTensor(cp.y), ""))
	}
	if cp.w != 0 {
		errs = append(errs, l.dnnError("cudnnDestroyFilterDescriptor", d.DestroyFilter(cp.w), ""))
	}
	if cp.conv != 0 {
		errs = append(errs, l.dnnError("cudnnDestroyConvolutionDescriptor", d.DestroyConv(cp.conv), ""))
	}
	if cp.bias != 0 {
		errs = append(errs, l.dnnError("cudnnDestroyTensorDescriptor", d.DestroyTensor(cp.bias), "the bias"))
	}
	for _, a := range cp.act {
		if a != 0 {
			errs = append(errs, l.dnnError("cudnnDestroyActivationDescriptor", d.DestroyActivation(a), ""))
		}
	}
	*cp = convPlan{}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// releaseDNN destroys the descriptors and the handle, on the engine's
// thread (release calls it before the stream goes); the workspaces are
// allocations that release frees.
func (e *Engine) releaseDNN() error {
	if e.lib.DNN == nil {
		return nil
	}
	var errs []error
	keys := make([]convKey, 0, len(e.convs))
	for k := range e.convs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b convKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, k := range keys {
		errs = append(errs, e.destroyConv(e.convs[k]))
	}
	e.convs = nil
	if e.dnn != 0 {
		errs = append(errs, e.lib.dnnError("cudnnDestroy", e.lib.DNN.Destroy(e.dnn), ""))
		e.dnn = 0
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Conv queues one library convolution on the engine's stream: the
// product's cuDNN call (cudnnConvolutionBiasActivationForward for a
// forward with an epilogue) with the algorithm and workspace PrepareConv
// chose (outside a capture it prepares them itself).
func (e *Engine) Conv(a ConvArgs) error {
	if e.closed {
		return errClosed
	}
	return e.doHere(func() error {
		cp, err := e.prepareOrFind(a)
		if err != nil {
			return err
		}
		return e.convCall(a, cp, convMath[a.Precision].name)
	})
}

// convCall makes a's cuDNN call with cp's descriptors and algorithm and
// the engine's workspace; on a thread with the context current. A fused
// forward without Z passes Y as z with alpha2 0 (cuDNN wants a valid z).
func (e *Engine) convCall(a ConvArgs, cp *convPlan, math string) error {
	slot, err := a.slot()
	if err != nil {
		return err
	}
	d, alpha, beta := e.lib.DNN, a.Alpha, a.Beta
	p, ws := a.Product, e.dnnWork
	layout := ""
	if a.NHWC {
		layout = ", NHWC"
	}
	what := fmt.Sprintf("%s of %v%s, algorithm %d, %s", convSlotNames[slot], a.Geom, layout, cp.algo[slot], math)
	switch {
	case slot >= slotFusedReLU:
		alpha2, z := float32(0), a.Y
		if a.Z != 0 {
			alpha2, z = 1, a.Z
		}
		return e.lib.dnnError("cudnnConvolutionBiasActivationForward", d.BiasActivationForward(e.dnn, &alpha, cp.x, a.X, cp.w, a.W, cp.conv, cp.algo[slot], ws, cp.ws[slot],
			&alpha2, cp.y, z, cp.bias, a.Bias, cp.act[a.Act], cp.y, a.Y), what)
	}
	switch p {
	case gpuhost.ConvForward:
		return e.lib.dnnError("cudnnConvolutionForward", d.Forward(e.dnn, &alpha, cp.x, a.X, cp.w, a.W, cp.conv, cp.algo[p], ws, cp.ws[p], &beta, cp.y, a.Y), what)
	case gpuhost.ConvInputGrad:
		return e.lib.dnnError("cudnnConvolutionBackwardData", d.BackwardData(e.dnn, &alpha, cp.w, a.W, cp.y, a.Y, cp.conv, cp.algo[p], ws, cp.ws[p], &beta, cp.x, a.X), what)
	default:
		return e.lib.dnnError("cudnnConvolutionBackwardFilter", d.BackwardFilter(e.dnn, &alpha, cp.x, a.X, cp.y, a.Y, cp.conv, cp.algo[p], ws, cp.ws[p], &beta, cp.w, a.W), what)
	}
}

// prepareOrFind returns the prepared plan of a's convolution, preparing
// it when no capture is open.
func (e *Engine) prepareOrFind(a ConvArgs) (*convPlan, error) {
	slot, err := a.slot()
	if err != nil {
		return nil, err
	}
	if cp := e.convs[convKey{a.Geom, a.Precision, a.NHWC}]; cp != nil && cp.chosen[slot] {
		return cp, nil
	}
	if e.capturing {
		return nil, fmt.Errorf("cuda: a %s convolution (%v) was not prepared before the capture (a bug in mlbuild)", convSlotNames[slot], a.Geom)
	}
	// doHere runs on the caller's thread with the context current: the
	// set-up may run there too (cuDNN's handle is per context).
	return e.prepareConv(a)
}

// ConvAlgorithms says, for `info`, which cuDNN algorithm each product
// (and each fused forward) runs with, over how many geometries, and the
// workspace: "forward: 1 ×12; input gradient: 1 ×10, 0 ×1; …;
// forward+bias+relu: 1 ×8; workspace 35.2 MiB"; "" when no convolution
// was prepared.
func (e *Engine) ConvAlgorithms() string {
	var parts []string
	for p := range convSlots {
		count := map[int32]int{}
		for _, cp := range e.convs {
			if cp.chosen[p] {
				count[cp.algo[p]]++
			}
		}
		if len(count) == 0 {
			continue
		}
		algos := make([]int32, 0, len(count))
		for a := range count {
			algos = append(algos, a)
		}
		slices.SortFunc(algos, func(a, b int32) int { return count[b] - count[a] })
		var each []string
		for _, a := range algos {
			each = append(each, fmt.Sprintf("%d ×%d", a, count[a]))
		}
		parts = append(parts, convSlotNames[p]+": "+strings.Join(each, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	ws := fmt.Sprintf("%.1f MiB", float64(e.dnnWorkBytes)/(1<<20))
	if e.dnnWorkBytes < 1<<20 {
		ws = fmt.Sprintf("%.1f KiB", float64(e.dnnWorkBytes)/(1<<10))
	}
	return strings.Join(parts, "; ") + "; workspace " + ws
}

// DNNVersion is the loaded cuDNN's version, "" when none is loaded.
func (e *Engine) DNNVersion() string {
	if e.lib.DNN == nil {
		return ""
	}
	return dnnVersionString(e.lib.DNN.GetVersion())
}
