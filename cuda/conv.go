package cuda

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// dnnWorkspaceLimit is the most workspace one cuDNN algorithm may take:
// the _v7 heuristics' algorithms that need no more are the candidates.
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
// (cudnnConvolutionBiasActivationForward) whose own algorithm may be
// the faster: with ReLU, and without an activation, which cuDNN
// documents as IMPLICIT_PRECOMP_GEMM only (CUDNN_ACTIVATION_IDENTITY's
// rule; cuDNN 9.19 ran IMPLICIT_GEMM too, in 39.9 µs against 73.6 for
// CIFAR ResNet-18's 1×1 stride-2 64→128 projection), so that its
// candidates are tried and one refused is passed over.
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
// first fused forward, and for each slot the algorithm chosen, its
// workspace and the trials that chose it (chooseConvAlgo).
type convPlan struct {
	x, y   TensorDesc
	w      FilterDesc
	conv   ConvDesc
	bias   TensorDesc
	act    [2]ActivationDesc
	chosen [convSlots]bool
	algo   [convSlots]int32
	ws     [convSlots]uintptr
	trials [convSlots][]ConvTrial
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
// their data type; an epilogue's with them), the algorithm and a
// workspace that holds it (one for the engine, grown when a product
// needs more; an outgrown one stays allocated, as graphs captured before
// use it). The candidates are the _v7 heuristics' algorithms whose status
// is success and whose workspace is within dnnWorkspaceLimit, the
// deterministic ones alone where there are any, in f32 only those of the
// GEMM and direct families (DNNFloat32Algo); each runs once in the
// heuristics' order, one that fails is passed over, and of the first
// Options.ConvTrials that run the one fastest in a graph is chosen
// (chooseConvAlgo). It allocates, captures and synchronises, so it runs
// outside a capture: Device.Record calls it for every Conv before it
// captures.
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
	// The candidates: the heuristics' algorithms that succeed within the
	// limit, in their order, the deterministic ones alone where there are
	// any (a training run gives the same weights twice); in f32, of the
	// algorithms that compute float32 products summed in float32 only
	// (DNNFloat32Algo). chooseConvAlgo tries them, and times those that
	// run.
	var det, other []int32
	skipped := 0
	for i := range int(min(max(n, 0), int32(len(perf)))) {
		if perf[i].Status != DNNSuccess || perf[i].Memory > dnnWorkspaceLimit {
			continue
		}
		if prec == gpuhost.PrecisionF32 && !DNNFloat32Algo(p, perf[i].Algo) {
			skipped++
			continue
		}
		if perf[i].Determinism == DNNDeterministic {
			det = append(det, perf[i].Algo)
		} else {
			other = append(other, perf[i].Algo)
		}
	}
	cands := det
	if len(cands) == 0 {
		cands = other
	}
	if len(cands) == 0 {
		f32 := ""
		if skipped > 0 {
			f32 = fmt.Sprintf(" and computes float32 products summed in float32 (%d that transform their operands, FFT or Winograd, skipped)", skipped)
		}
		return nil, fmt.Errorf("cuda: %s proposes no algorithm for the %s that succeeds within %d bytes of workspace%s (of %d proposed)%s", call, what, dnnWorkspaceLimit, f32, n, convNoneFix(slot))
	}
	if err := e.chooseConvAlgo(cp, a, slot, m.elem.Size(), m.name, what, cands); err != nil {
		return nil, err
	}
	return cp, nil
}

// convTrials is how many of a slot's candidates that run prepareConv
// times, unless Options.ConvTrials or MLBUILD_CUDNN_TRIALS says. Timing
// is needed: on an H200 (cuDNN 9.19, in graphs) the heuristics' first,
// algorithm 1, ran CIFAR ResNet-18's 1×1 stride-2 64→128 bf16 NHWC
// forward in 55–57 µs a call and algorithm 0 in 37.5, but the 128→256
// one at 16×16 in 7.1 against 0's 34.4
// (docs/runs/gpu-fourteenth-probes-2026-11-30.txt), so no fixed rule
// takes the faster of both. Four is not measured: it bounds the start-up
// cost, and the heuristics rarely offer more deterministic algorithms.
const convTrials = 4

// A candidate is timed as convTimedCalls calls captured in one graph,
// launched once untimed, then convTimedLaunches times between two
// events. A legacy cuDNN call costs about 55 µs of host time, more than
// many of its kernels take, so calls made one by one between events time
// the host (e87eddc did, chose worse, and was reverted).
const (
	convTimedCalls    = 5
	convTimedLaunches = 3
)

// ConvTrial is one candidate algorithm of a prepared convolution call
// and what its trial gave: the GPU time of one call in a graph (0 where
// it was not timed: the one candidate that ran, or one passed over), or
// the error that passed it over.
type ConvTrial struct {
	Algo    int32
	PerCall time.Duration
	Err     error
}

// chooseConvAlgo gives cp's slot for a's call the fastest of cands (cuDNN
// algorithms in the heuristics' order) and its workspace, on the engine's
// thread outside any capture. The candidates run once each, in order, on
// scratch tensors (warmConv), until Options.ConvTrials of them have run:
// one whose workspace query, workspace or run fails is passed over
// (cuDNN documents the identity activation as IMPLICIT_PRECOMP_GEMM only,
// and may refuse another algorithm with it), and when none runs the error
// names each and why. When more than one ran, each is timed in a graph
// (timeConv) and the fastest is chosen, a tie going to the heuristics'
// order; one whose timing fails is passed over too. A candidate that
// needs more workspace than the engine's runs on a scratch one, so that
// one not chosen leaves no larger allocation behind; the engine's grows
// to the chosen one's. The scratch is freed on every path.
func (e *Engine) chooseConvAlgo(cp *convPlan, a ConvArgs, slot, es int, math, what string, cands []int32) error {
	var work DevicePtr // the scratch workspace, of workBytes
	var workBytes uintptr
	scratch, err := e.convScratch(a.Geom, a.Bias != 0, es)
	defer func() { e.freeScratch(append(scratch, work)...) }()
	if err != nil {
		return err
	}
	workFor := func(need uintptr) DevicePtr {
		if need > e.dnnWorkBytes {
			return work
		}
		return e.dnnWork
	}
	limit := e.opts.convTrials()
	var trials []ConvTrial
	var needs []uintptr // each trial's workspace
	var ran []int       // the trials that ran
	for _, algo := range cands {
		if len(ran) == limit {
			break
		}
		need, err := e.convWorkspace(cp, a.Product, algo, what)
		if err == nil && need > e.dnnWorkBytes && need > workBytes {
			e.freeScratch(work)
			work, workBytes = 0, 0
			if err = e.alloc(&work, need, "a trial of cuDNN's algorithms"); err == nil {
				workBytes = need
			}
		}
		if err == nil {
			cp.algo[slot], cp.ws[slot] = algo, need
			err = e.warmConv(cp, a, scratch, workFor(need), math)
		}
		if err == nil {
			ran = append(ran, len(trials))
		}
		trials, needs = append(trials, ConvTrial{Algo: algo, Err: err}), append(needs, need)
	}
	best := -1
	if len(ran) == 1 {
		best = ran[0]
	}
	if len(ran) > 1 {
		timed := convTrialArgs(a, scratch)
		for _, i := range ran {
			cp.algo[slot], cp.ws[slot] = trials[i].Algo, needs[i]
			per, err := e.timeConv(cp, timed, workFor(needs[i]), math, what)
			if err != nil {
				trials[i].Err = err
				continue
			}
			trials[i].PerCall = per
			if best < 0 || per < trials[best].PerCall {
				best = i
			}
		}
	}
	if best < 0 {
		var each []string
		for _, t := range trials {
			each = append(each, fmt.Sprintf("algorithm %d: %v", t.Algo, t.Err))
		}
		return fmt.Errorf("cuda: none of the %d algorithms tried for the %s ran (trial runs before the graph is recorded): %s%s", len(trials), what, strings.Join(each, "; "), convNoneFix(slot))
	}
	need := needs[best]
	if need > e.dnnWorkBytes {
		e.freeScratch(work)
		work = 0
		var p DevicePtr
		if err := e.alloc(&p, need, "cuDNN's workspace"); err != nil {
			return err
		}
		e.dnnWork, e.dnnWorkBytes = p, need
	}
	cp.chosen[slot], cp.algo[slot], cp.ws[slot], cp.trials[slot] = true, trials[best].Algo, need, trials
	return nil
}

// convNoneFix is the fix to suggest when no algorithm runs a slot's call:
// a fused forward's epilogue can run as a kernel after a plain forward.
func convNoneFix(slot int) string {
	if slot >= slotFusedReLU {
		return "; run the bias (and the activation) as a kernel after a plain forward"
	}
	return ""
}

// convWorkspace is the workspace of product p of cp with algorithm algo,
// as cuDNN answers it; what names the call in an error.
func (e *Engine) convWorkspace(cp *convPlan, p gpuhost.ConvProduct, algo int32, what string) (uintptr, error) {
	d := e.lib.DNN
	var ws uintptr
	var call string
	var s DNNStatus
	switch p {
	case gpuhost.ConvForward: // with an epilogue too
		call, s = "cudnnGetConvolutionForwardWorkspaceSize", d.FwdWorkspace(e.dnn, cp.x, cp.w, cp.conv, cp.y, algo, &ws)
	case gpuhost.ConvInputGrad:
		call, s = "cudnnGetConvolutionBackwardDataWorkspaceSize", d.BwdDataWorkspace(e.dnn, cp.w, cp.y, cp.conv, cp.x, algo, &ws)
	default:
		call, s = "cudnnGetConvolutionBackwardFilterWorkspaceSize", d.BwdFilterWorkspace(e.dnn, cp.x, cp.y, cp.conv, cp.w, algo, &ws)
	}
	return ws, e.lib.dnnError(call, s, fmt.Sprintf("%s, algorithm %d", what, algo))
}

// convScratch allocates the scratch tensors of a trial of g (in the order
// of convTrialArgs: X, W and Y, then a fused forward's bias and Z) of es
// bytes an element. On an error it returns those it allocated, for
// freeScratch.
func (e *Engine) convScratch(g gpuhost.ConvGeom, fused bool, es int) ([]DevicePtr, error) {
	xs, ws, ys := g.Sizes()
	sizes := []int{xs, ws, ys}
	if fused {
		sizes = append(sizes, g.OC, ys)
	}
	ptrs := make([]DevicePtr, 0, len(sizes))
	for _, n := range sizes {
		var p DevicePtr
		if err := e.alloc(&p, uintptr(es*n), "a trial run of cuDNN"); err != nil {
			return ptrs, err
		}
		ptrs = append(ptrs, p)
	}
	return ptrs, nil
}

// freeScratch frees allocations of the engine's thread that are no longer
// used; 0 is none.
func (e *Engine) freeScratch(ptrs ...DevicePtr) {
	for _, q := range ptrs {
		if q != 0 {
			delete(e.allocs, q)
			e.lib.Driver.MemFree(q)
		}
	}
}

// convTrialArgs is a's call on the scratch tensors of convScratch: the
// call to time, with a scratch Z where a has one.
func convTrialArgs(a ConvArgs, scratch []DevicePtr) ConvArgs {
	t := ConvArgs{Geom: a.Geom, Product: a.Product, X: scratch[0], W: scratch[1], Y: scratch[2], Alpha: 1, Precision: a.Precision, NHWC: a.NHWC, Act: a.Act}
	if a.Bias != 0 {
		t.Bias = scratch[3]
		if a.Z != 0 {
			t.Z = scratch[4]
		}
	}
	return t
}

// warmConv runs a's call (its product, layout and epilogue, in the
// precision cp was made for, with cp's algorithm for it) once on the
// scratch tensors of convScratch and the workspace work, and waits, on
// the engine's thread outside any capture: cuDNN may load or compile a
// kernel, or set it up, at its first call, none of which a capture
// allows, and an algorithm that fails to run fails here, named, rather
// than inside a graph. A fused forward runs twice, with a scratch Z and
// without one, as either may be captured.
func (e *Engine) warmConv(cp *convPlan, a ConvArgs, scratch []DevicePtr, work DevicePtr, math string) error {
	trial := convTrialArgs(a, scratch)
	runs := []ConvArgs{trial}
	if a.Bias != 0 {
		withZ, without := trial, trial
		withZ.Z, without.Z = scratch[4], 0
		runs = []ConvArgs{withZ, without}
	}
	for _, r := range runs {
		if err := e.convCall(r, cp, work, math); err != nil {
			return fmt.Errorf("%w (a trial run before the graph is recorded)", err)
		}
	}
	slot, _ := a.slot()
	return e.lib.driverError("cuStreamSynchronize", e.lib.Driver.StreamSynchronize(e.stream), fmt.Sprintf("after a trial run of cuDNN's %s of %v, algorithm %d", convSlotNames[slot], a.Geom, cp.algo[slot]))
}

// timeConv is the GPU time of one of a's calls with cp's algorithm and
// the workspace work: convTimedCalls of them captured on the engine's
// stream into a graph (thread-local, the engine's mode), launched once
// untimed, then convTimedLaunches times between two events; on the
// engine's thread outside any other capture, after warmConv. The graph
// and the events are destroyed on every path.
func (e *Engine) timeConv(cp *convPlan, a ConvArgs, work DevicePtr, math, what string) (time.Duration, error) {
	l, drv := e.lib, e.lib.Driver
	slot, _ := a.slot()
	where := fmt.Sprintf("timing the %s, algorithm %d", what, cp.algo[slot])
	var start, end Event
	var exec GraphExec
	defer func() {
		if exec != 0 {
			drv.GraphExecDestroy(exec)
		}
		for _, ev := range []Event{start, end} {
			if ev != 0 {
				drv.EventDestroy(ev)
			}
		}
	}()
	for _, ev := range []*Event{&start, &end} {
		if err := l.driverError("cuEventCreate", drv.EventCreate(ev, EventDefault), where); err != nil {
			return 0, err
		}
	}
	if err := l.driverError("cuStreamBeginCapture_v2", drv.StreamBeginCapture(e.stream, CaptureModeThreadLocal), where); err != nil {
		return 0, err
	}
	var err error
	for range convTimedCalls {
		if err = e.convCall(a, cp, work, math); err != nil {
			err = fmt.Errorf("%w (%s in a graph)", err, where)
			break
		}
	}
	var g Graph
	endErr := l.driverError("cuStreamEndCapture", drv.StreamEndCapture(e.stream, &g), where)
	if g != 0 {
		defer drv.GraphDestroy(g)
	}
	if err == nil {
		err = endErr
	}
	if err == nil {
		err = l.driverError("cuGraphInstantiateWithFlags", drv.GraphInstantiate(&exec, g, 0), where)
	}
	if err == nil {
		err = l.driverError("cuGraphLaunch", drv.GraphLaunch(exec, e.stream), where)
	}
	if err == nil {
		err = l.driverError("cuEventRecord", drv.EventRecord(start, e.stream), where)
	}
	for range convTimedLaunches {
		if err == nil {
			err = l.driverError("cuGraphLaunch", drv.GraphLaunch(exec, e.stream), where)
		}
	}
	if err == nil {
		err = l.driverError("cuEventRecord", drv.EventRecord(end, e.stream), where)
	}
	if err == nil {
		err = l.driverError("cuEventSynchronize", drv.EventSynchronize(end), where)
	}
	var ms float32
	if err == nil {
		err = l.driverError("cuEventElapsedTime", drv.EventElapsedTime(&ms, start, end), where)
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * 1e6 / (convTimedCalls * convTimedLaunches)), nil
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
		return e.convCall(a, cp, e.dnnWork, convMath[a.Precision].name)
	})
}

// convCall makes a's cuDNN call with cp's descriptors and algorithm and
// the workspace ws (the engine's, or a trial's scratch one of cp's
// bytes); on a thread with the context current. A fused forward without
// Z passes Y as z with alpha2 0 (cuDNN wants a valid z).
func (e *Engine) convCall(a ConvArgs, cp *convPlan, ws DevicePtr, math string) error {
	slot, err := a.slot()
	if err != nil {
		return err
	}
	d, alpha, beta := e.lib.DNN, a.Alpha, a.Beta
	p := a.Product
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

// ConvChoice is how one prepared convolution call got its cuDNN
// algorithm: its geometry, precision and layout, the call (a slot's
// name: "forward", "input gradient", "weight gradient",
// "forward+bias+relu" or "forward+bias"), the algorithm chosen, and the
// candidates tried, in the heuristics' order.
type ConvChoice struct {
	Geom      gpuhost.ConvGeom
	Precision gpuhost.Precision
	NHWC      bool
	Call      string
	Algo      int32
	Trials    []ConvTrial
}

// String is c in one line, each candidate with its time or why it was
// passed over: "forward: 0 (1 55.6 µs, 0 37.5 µs)".
func (c ConvChoice) String() string {
	var each []string
	for _, t := range c.Trials {
		switch {
		case t.Err != nil:
			each = append(each, fmt.Sprintf("%d passed over: %v", t.Algo, t.Err))
		case t.PerCall > 0:
			each = append(each, fmt.Sprintf("%d %.1f µs", t.Algo, float64(t.PerCall.Nanoseconds())/1e3))
		default:
			each = append(each, fmt.Sprintf("%d untimed", t.Algo))
		}
	}
	return fmt.Sprintf("%s: %d (%s)", c.Call, c.Algo, strings.Join(each, ", "))
}

// ConvChoices lists how each prepared convolution call got its
// algorithm, ordered by geometry, precision, layout and call: what
// ConvAlgorithms counts, with the candidates' times.
func (e *Engine) ConvChoices() []ConvChoice {
	keys := make([]convKey, 0, len(e.convs))
	for k := range e.convs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b convKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	var cs []ConvChoice
	for _, k := range keys {
		cp := e.convs[k]
		for slot := range convSlots {
			if cp.chosen[slot] {
				cs = append(cs, ConvChoice{Geom: k.g, Precision: k.p, NHWC: k.nhwc, Call: convSlotNames[slot], Algo: cp.algo[slot], Trials: slices.Clone(cp.trials[slot])})
			}
		}
	}
	return cs
}

// DNNVersion is the loaded cuDNN's version, "" when none is loaded.
func (e *Engine) DNNVersion() string {
	if e.lib.DNN == nil {
		return ""
	}
	return dnnVersionString(e.lib.DNN.GetVersion())
}
