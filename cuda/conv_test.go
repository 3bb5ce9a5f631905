package cuda_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// convDevice opens a device on a fake and three buffers holding g's x, w
// and y.
func convDevice(t *testing.T, fopts fakecuda.Options, opts cuda.Options, g gpuhost.ConvGeom) (*cuda.Device, *fakecuda.Fake, gpuhost.Conv) {
	t.Helper()
	fopts.WorkDir = fakeWorkDir
	f := fakecuda.New(fopts)
	opts.Libraries, opts.KernelCacheDir = f.Libraries(), t.TempDir()
	d, err := cuda.OpenDevice(opts)
	if err != nil {
		t.Fatal(err)
	}
	xs, ws, ys := g.Sizes()
	c := gpuhost.Conv{Geom: g, Alpha: 1}
	for i, n := range []int{xs, ws, ys} {
		b, err := d.Alloc("xwy"[i:i+1], 4*n)
		if err != nil {
			t.Fatal(err)
		}
		*[]*gpuhost.Tensor{&c.X, &c.W, &c.Y}[i] = gpuhost.Tensor{Buf: b}
	}
	return d, f, c
}

var geom3x3 = gpuhost.ConvGeom{N: 2, C: 3, H: 5, W: 5, OC: 4, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1, OH: 5, OW: 5}

// TestConvCapturedAfterPreparing: a sequence of the three products is
// captured as one graph (cuDNN's set-up, and a trial run of each product
// on scratch tensors, ran before the capture: the fake invalidates a
// capture that creates a handle or asks the heuristics), the products
// run when the graph is launched, once a launch, and the workspace is one
// allocation that grows for a larger need.
func TestConvCapturedAfterPreparing(t *testing.T) {
	d, f, c := convDevice(t, fakecuda.Options{}, cuda.Options{}, geom3x3)
	live := func() int { s := f.Stats(); return s.Allocs - s.Frees }
	before := live()
	seq, err := d.Record("convs", func(e gpuhost.Encoder) error {
		for _, p := range []gpuhost.ConvProduct{gpuhost.ConvForward, gpuhost.ConvInputGrad, gpuhost.ConvWeightGrad} {
			c.Product = p
			if err := e.Conv(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each product ran once before the capture, on scratch tensors.
	s := f.Stats()
	if s.Captures != 1 || s.Convs != 3 || s.ConvRuns != 3 {
		t.Errorf("after recording: %d captures, %d direct convolutions, %d run; want 1, 3 trial runs, 3", s.Captures, s.Convs, s.ConvRuns)
	}
	if n := live() - before; n != 1 {
		t.Errorf("recording three products of one geometry left %d allocations, want 1 (one workspace)", n)
	}
	for range 2 {
		if err := seq.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if s := f.Stats(); s.ConvRuns != 3+6 {
		t.Errorf("two launches ran %d convolutions, want 6", s.ConvRuns-3)
	}
	// A geometry whose filter is larger needs more workspace: one more
	// allocation, the first kept for the graph that uses it.
	big := c
	big.Geom.OC, big.Geom.C = 8, 6
	xs, ws, ys := big.Geom.Sizes()
	for i, n := range []int{xs, ws, ys} {
		b, err := d.Alloc("big", 4*n)
		if err != nil {
			t.Fatal(err)
		}
		*[]*gpuhost.Tensor{&big.X, &big.W, &big.Y}[i] = gpuhost.Tensor{Buf: b}
	}
	before = live()
	if _, err := d.Record("big", func(e gpuhost.Encoder) error { return e.Conv(big) }); err != nil {
		t.Fatal(err)
	}
	if n := live() - before; n != 1 {
		t.Errorf("a larger workspace left %d more allocations, want 1", n)
	}
	if err := seq.Launch(); err != nil {
		t.Fatal(err)
	}
	// The heuristics' first proposal that succeeds is of the Winograd or
	// FFT family (not float32 products summed in float32), the next
	// over the workspace limit (or FFT again, backward) and the next not
	// deterministic: every f32 call used the deterministic one after them
	// (the fake's algorithm 1).
	if algos := f.ConvAlgorithms(); len(algos) != 1 || algos[1] == 0 {
		t.Errorf("calls per cuDNN algorithm %v, want algorithm 1 only", algos)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if faults := f.Faults(); len(faults) > 0 {
		t.Errorf("faults: %v", faults)
	}
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("after Close the fake still holds: %v", leaks)
	}
}

// slowAlgo makes the fake's runs of cuDNN algorithm a 2 ms slower.
func slowAlgo(a int32) map[int32]time.Duration {
	return map[int32]time.Duration{a: 2 * time.Millisecond}
}

// TestConvF32TakesFloat32Algorithms: in f32 each of the three products
// never tries the heuristics' first proposal, a deterministic algorithm
// of the FFT or Winograd family that succeeds within the workspace limit
// (the fake's 4), however fast the fake makes it, and runs a GEMM-family
// one (1), untimed and captured once, as it is the only candidate; in
// tf32 both are candidates, as tf32 may run any algorithm: each is timed
// in a graph (two captures more), the slow one at no less than the
// fake's delay a call, and the faster is chosen, 4 where the fake makes
// 1 slow and 1 where it makes 4 slow. The enum values are cuDNN's:
// DNNFloat32Algo says which algorithm of which product is a float32 sum
// of float32 products.
func TestConvF32TakesFloat32Algorithms(t *testing.T) {
	products := []gpuhost.ConvProduct{gpuhost.ConvForward, gpuhost.ConvInputGrad, gpuhost.ConvWeightGrad}
	for _, c := range []struct {
		prec       gpuhost.Precision
		slow, algo int32
	}{{gpuhost.PrecisionF32, 1, 1}, {gpuhost.PrecisionF32, 4, 1}, {gpuhost.PrecisionTF32, 1, 4}, {gpuhost.PrecisionTF32, 4, 1}} {
		for _, p := range products {
			d, f, conv := convDevice(t, fakecuda.Options{ConvAlgoDelay: slowAlgo(c.slow)}, cuda.Options{ConvTrials: 4}, geom3x3)
			conv.Product, conv.Precision = p, c.prec
			live := func() int { s := f.Stats(); return s.Allocs - s.Frees }
			before := live()
			if _, err := d.Record("conv", func(e gpuhost.Encoder) error { return e.Conv(conv) }); err != nil {
				t.Fatalf("%v %v: %v", c.prec, p, err)
			}
			// One allocation stays, the workspace, of the chosen
			// algorithm's size (the fake's 4 needs twice 1's 1456 bytes):
			// the scratch tensors, and the scratch workspace 4 ran on
			// before 1 was chosen, are freed.
			ws := map[int32]string{1: "workspace 1.4 KiB", 4: "workspace 2.8 KiB"}[c.algo]
			if n, line := live()-before, d.Engine().ConvAlgorithms(); n != 1 || !strings.HasSuffix(line, ws) {
				t.Errorf("%v %v: %d allocations left and %q, want 1, the %s", c.prec, p, n, line, ws)
			}
			choices := d.Engine().ConvChoices()
			if len(choices) != 1 || choices[0].Algo != c.algo {
				t.Fatalf("%v %v, algorithm %d slow: the engine chose %v, want algorithm %d", c.prec, p, c.slow, choices, c.algo)
			}
			trials, captures := choices[0].Trials, f.Stats().Captures
			if c.prec == gpuhost.PrecisionF32 {
				if algos := f.ConvAlgorithms(); len(algos) != 1 || algos[1] == 0 {
					t.Errorf("%v %v: calls per cuDNN algorithm %v, want algorithm 1 only", c.prec, p, algos)
				}
				if len(trials) != 1 || trials[0].PerCall != 0 || captures != 1 {
					t.Errorf("%v %v: trials %v and %d captures, want algorithm 1 alone, untimed, and the sequence's one capture", c.prec, p, choices[0], captures)
				}
			} else {
				if len(trials) != 2 || trials[0].Algo != 4 || trials[1].Algo != 1 || trials[0].Err != nil || trials[1].Err != nil || captures != 3 {
					t.Fatalf("%v %v: trials %v and %d captures, want 4 and 1 timed, in the heuristics' order, and three captures", c.prec, p, choices[0], captures)
				}
				slow, fast := trials[0].PerCall, trials[1].PerCall
				if c.slow == 1 {
					slow, fast = fast, slow
				}
				if slow < 2*time.Millisecond || fast <= 0 || fast >= slow {
					t.Errorf("%v %v: algorithm %d (slow) %v a call, the other %v: want the slow one at least the fake's 2ms, the other faster", c.prec, p, c.slow, slow, fast)
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if leaks := f.Leaks(); len(leaks) > 0 {
				t.Errorf("%v %v: after Close the fake still holds %v", c.prec, p, leaks)
			}
		}
	}
	// TestRealConvResNet's check of info's line: the three f32 products
	// on one device pass it, the three tf32 ones (algorithm 4: FFT
	// forward, WINOGRAD backward, the faster here) fail it.
	for _, c := range []struct {
		prec gpuhost.Precision
		ok   bool
	}{{gpuhost.PrecisionF32, true}, {gpuhost.PrecisionTF32, false}} {
		d, _, conv := convDevice(t, fakecuda.Options{ConvAlgoDelay: slowAlgo(1)}, cuda.Options{}, geom3x3)
		conv.Precision = c.prec
		if _, err := d.Record("convs", func(e gpuhost.Encoder) error {
			for _, p := range products {
				conv.Product = p
				if err := e.Conv(conv); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		line := d.Engine().ConvAlgorithms()
		if err := f32Algorithms(line); (err == nil) != c.ok {
			t.Errorf("%v: f32Algorithms(%q) = %v, want ok %v", c.prec, line, err, c.ok)
		}
		d.Close()
	}
	// cuDNN's enums: forward IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM,
	// DIRECT, FFT, FFT_TILING, WINOGRAD, WINOGRAD_NONFUSED; input
	// gradient ALGO_0, ALGO_1, FFT, FFT_TILING, WINOGRAD,
	// WINOGRAD_NONFUSED; weight gradient ALGO_0, ALGO_1, FFT, ALGO_3,
	// WINOGRAD, WINOGRAD_NONFUSED, FFT_TILING.
	want := map[gpuhost.ConvProduct][]bool{
		gpuhost.ConvForward:    {true, true, true, true, false, false, false, false},
		gpuhost.ConvInputGrad:  {true, true, false, false, false, false},
		gpuhost.ConvWeightGrad: {true, true, false, true, false, false, false},
	}
	counts := map[gpuhost.ConvProduct]int{gpuhost.ConvForward: cuda.DNNFwdAlgoCount, gpuhost.ConvInputGrad: cuda.DNNBwdDataAlgoCount, gpuhost.ConvWeightGrad: cuda.DNNBwdFilterAlgoCount}
	for _, p := range products {
		if len(want[p]) != counts[p] {
			t.Fatalf("%v: %d algorithms listed here, cuDNN has %d", p, len(want[p]), counts[p])
		}
		for a := -1; a <= counts[p]; a++ {
			w := a >= 0 && a < counts[p] && want[p][a]
			if got := cuda.DNNFloat32Algo(p, int32(a)); got != w {
				t.Errorf("DNNFloat32Algo(%v, %d) = %v, want %v", p, a, got, w)
			}
		}
	}
}

// TestConvNotPreparedInCapture: the engine refuses a convolution in an
// open capture whose set-up did not run first, rather than letting cuDNN
// allocate inside it.
func TestConvNotPreparedInCapture(t *testing.T) {
	d, _, c := convDevice(t, fakecuda.Options{}, cuda.Options{}, geom3x3)
	defer d.Close()
	e := d.Engine()
	ptr := func(b gpuhost.Buffer) cuda.DevicePtr {
		p, err := d.Pointer(b)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := e.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	err := e.Conv(cuda.ConvArgs{Geom: c.Geom, X: ptr(c.X.Buf), W: ptr(c.W.Buf), Y: ptr(c.Y.Buf), Alpha: 1})
	if exec, endErr := e.EndCapture(); endErr == nil {
		e.DestroyGraph(exec)
	}
	if err == nil || !strings.Contains(err.Error(), "not prepared before the capture") {
		t.Fatalf("an unprepared convolution in a capture: %v", err)
	}
}

// TestConvWithoutDNN: a sequence with a convolution on a machine without
// cuDNN fails when it is recorded, with the missing-library message (its
// fix, the variable that names its path), wrapping ErrNoDevice; a
// sequence without one records, as cuDNN is loaded only for a Conv.
func TestConvWithoutDNN(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		d, f, c := convDevice(t, fakecuda.Options{NoDNN: true}, cuda.Options{Blocking: blocking}, geom3x3)
		if _, err := d.Record("no convolution", func(gpuhost.Encoder) error { return nil }); err != nil {
			t.Fatalf("a sequence without convolutions on a machine without cuDNN: %v", err)
		}
		_, err := d.Record("convs", func(e gpuhost.Encoder) error { return e.Conv(c) })
		var missing *cuda.MissingLibraryError
		if !errors.As(err, &missing) || !errors.Is(err, gpuhost.ErrNoDevice) {
			t.Fatalf("blocking %v: a convolution without cuDNN: %v, want the missing-library error", blocking, err)
		}
		for _, want := range []string{"cuDNN: not found", "pip install nvidia-cudnn-cu13", "MLBUILD_CUDNN_LIB"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the message lacks %q:\n%v", want, err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if leaks := f.Leaks(); len(leaks) > 0 {
			t.Errorf("after Close the fake still holds: %v", leaks)
		}
	}
}

// TestConvFacts: info names cuDNN's file and version, the math of each
// precision, and the algorithms chosen, once a convolution loaded it.
func TestConvFacts(t *testing.T) {
	d, _, c := convDevice(t, fakecuda.Options{}, cuda.Options{}, geom3x3)
	defer d.Close()
	if _, err := d.Record("conv", func(e gpuhost.Encoder) error { return e.Conv(c) }); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range d.Facts() {
		lines = append(lines, f.Key+": "+f.Value)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"cuDNN: fakecuda (Go), version 9.10.0", "CUDNN_FMA_MATH", "CUDNN_DEFAULT_MATH", "cuDNN algorithms: forward: 1 ×1; workspace 1.4 KiB"} {
		if !strings.Contains(all, want) {
			t.Errorf("info lacks %q:\n%s", want, all)
		}
	}
}

// fakeDNN is the fake's cuDNN with a current context on the test's
// thread (locked to it until the test ends), for tests that call cuDNN's
// API directly.
func fakeDNN(t *testing.T) *cuda.DNNAPI {
	t.Helper()
	f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir})
	lib := f.Libraries()
	drv := lib.Driver
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	var ctx cuda.Context
	if drv.Init(0) != 0 || drv.DevicePrimaryCtxRetain(&ctx, 0) != 0 || drv.CtxSetCurrent(ctx) != 0 {
		t.Fatal("setting up a context failed")
	}
	t.Cleanup(func() { drv.DevicePrimaryCtxRelease(0) })
	dnn, _, err := lib.DNNLoad()
	if err != nil {
		t.Fatal(err)
	}
	return dnn
}

// TestFakeDNNDataTypes holds the fake cuDNN to the data types cuDNN
// takes for a convolution: the tensors and the filter all float or all
// bfloat16 with a float compute type (FLOAT_CONFIG and
// PSEUDO_BFLOAT16_CONFIG); data types that differ among them are
// CUDNN_STATUS_BAD_PARAM, and a data or compute type the fake does not
// compute CUDNN_STATUS_NOT_SUPPORTED, from the heuristics of each
// product as from its call. So are the formats: NCHW tensors with an
// NCHW (KCRS) filter or NHWC tensors with an NHWC (KRSC) filter, of
// either data type; an NHWC filter with NCHW tensors, an NCHW filter
// with NHWC tensors (cuDNN 9.14 proposes no gradient algorithm for it),
// tensors of two formats or NCHW_VECT_C ones are
// CUDNN_STATUS_NOT_SUPPORTED (mlbuild passes none of them).
func TestFakeDNNDataTypes(t *testing.T) {
	dnn := fakeDNN(t)
	var h cuda.DNNHandle
	var x, y cuda.TensorDesc
	var w cuda.FilterDesc
	var conv cuda.ConvDesc
	if dnn.Create(&h) != 0 || dnn.CreateTensor(&x) != 0 || dnn.CreateTensor(&y) != 0 || dnn.CreateFilter(&w) != 0 || dnn.CreateConv(&conv) != 0 {
		t.Fatal("creating the handle and descriptors failed")
	}
	defer func() {
		dnn.DestroyTensor(x)
		dnn.DestroyTensor(y)
		dnn.DestroyFilter(w)
		dnn.DestroyConv(conv)
		dnn.Destroy(h)
	}()
	const half int32 = 2  // CUDNN_DATA_HALF
	const vectC int32 = 2 // CUDNN_TENSOR_NCHW_VECT_C
	fl, bf := cuda.DNNDataFloat, cuda.DNNDataBFloat16
	nchw, nhwc := cuda.DNNTensorNCHW, cuda.DNNTensorNHWC
	g := geom3x3
	for _, c := range []struct {
		name             string
		x, w, y, compute int32
		want             cuda.DNNStatus
		xf, wf, yf       int32 // the formats of x, w and y
	}{
		{"float", fl, fl, fl, fl, cuda.DNNSuccess, nchw, nchw, nchw},
		{"bfloat16 in float compute", bf, bf, bf, fl, cuda.DNNSuccess, nchw, nchw, nchw},
		{"a float filter among bfloat16 tensors", bf, fl, bf, fl, cuda.DNNBadParam, nchw, nchw, nchw},
		{"a bfloat16 output of float tensors", fl, fl, bf, fl, cuda.DNNBadParam, nchw, nchw, nchw},
		{"a bfloat16 input beside float ones", bf, fl, fl, fl, cuda.DNNBadParam, nchw, nchw, nchw},
		{"bfloat16 in bfloat16 compute", bf, bf, bf, bf, cuda.DNNNotSupported, nchw, nchw, nchw},
		{"half", half, half, half, fl, cuda.DNNNotSupported, nchw, nchw, nchw},
		{"float NHWC tensors, an NHWC filter", fl, fl, fl, fl, cuda.DNNSuccess, nhwc, nhwc, nhwc},
		{"bfloat16 NHWC tensors, an NHWC filter", bf, bf, bf, fl, cuda.DNNSuccess, nhwc, nhwc, nhwc},
		{"NHWC tensors, an NCHW filter", bf, bf, bf, fl, cuda.DNNNotSupported, nhwc, nchw, nhwc},
		{"float NHWC tensors, an NCHW filter", fl, fl, fl, fl, cuda.DNNNotSupported, nhwc, nchw, nhwc},
		{"NCHW tensors, an NHWC filter", bf, bf, bf, fl, cuda.DNNNotSupported, nchw, nhwc, nchw},
		{"an NHWC input, an NCHW output", bf, bf, bf, fl, cuda.DNNNotSupported, nhwc, nhwc, nchw},
		{"an NCHW input, an NHWC output", fl, fl, fl, fl, cuda.DNNNotSupported, nchw, nchw, nhwc},
		{"NCHW_VECT_C tensors", fl, fl, fl, fl, cuda.DNNNotSupported, vectC, nchw, vectC},
	} {
		if dnn.SetTensor4d(x, c.xf, c.x, int32(g.N), int32(g.C), int32(g.H), int32(g.W)) != 0 ||
			dnn.SetTensor4d(y, c.yf, c.y, int32(g.N), int32(g.OC), int32(g.OH), int32(g.OW)) != 0 ||
			dnn.SetFilter4d(w, c.w, c.wf, int32(g.OC), int32(g.C), int32(g.KH), int32(g.KW)) != 0 ||
			dnn.SetConv2d(conv, 1, 1, 1, 1, 1, 1, cuda.DNNCrossCorrelation, c.compute) != 0 {
			t.Fatalf("%s: setting the descriptors failed", c.name)
		}
		var perf [8]cuda.ConvAlgoPerf
		var n int32
		for _, p := range []struct {
			name string
			s    cuda.DNNStatus
		}{
			{"forward heuristics", dnn.FwdAlgo(h, x, w, conv, y, 8, &n, &perf[0])},
			{"input gradient heuristics", dnn.BwdDataAlgo(h, w, y, conv, x, 8, &n, &perf[0])},
			{"weight gradient heuristics", dnn.BwdFilterAlgo(h, x, y, conv, w, 8, &n, &perf[0])},
			{"forward", dnn.Forward(h, new(float32), x, 0, w, 0, conv, 9, 0, 0, new(float32), y, 0)},
		} {
			// The forward call's algorithm 9 is none of the fake's: past
			// the descriptors' checks it is refused as a bad parameter.
			want := c.want
			if p.name == "forward" && want == cuda.DNNSuccess {
				want = cuda.DNNBadParam
			}
			if p.s != want {
				t.Errorf("%s: %s returned %d, want %d", c.name, p.name, p.s, want)
			}
		}
	}
}

// TestConvEpilogueAlgorithms: a plain forward, a fused one with ReLU and
// Z, and a fused one without an activation, of one bf16 NHWC geometry,
// are captured in one graph (each prepared, its candidates run and
// timed, before the capture: the fake invalidates a capture that asks
// the heuristics) and each keeps its own algorithm. The plain forward and
// the ReLU one time both candidates, the fake's 4 and 1, and take the
// faster, whichever the fake makes slow; the one without an activation
// tries 4 first, which the fake refuses with 3003 (cuDNN documents the
// identity activation as IMPLICIT_PRECOMP_GEMM only), passes it over and
// takes 1, untimed, even where 1 is the slow one. info lists the three.
func TestConvEpilogueAlgorithms(t *testing.T) {
	for _, c := range []struct {
		slow int32
		want string
	}{
		{1, "forward: 4 ×1; forward+bias+relu: 4 ×1; forward+bias: 1 ×1"},
		{4, "forward: 1 ×1; forward+bias+relu: 1 ×1; forward+bias: 1 ×1"},
	} {
		d, f, conv := convDevice(t, fakecuda.Options{ConvAlgoDelay: slowAlgo(c.slow)}, cuda.Options{ConvTrials: 4}, geom3x3)
		for _, x := range []*gpuhost.Tensor{&conv.X, &conv.W, &conv.Y} {
			x.Elem = gpuhost.ElemBF16
		}
		conv.Precision, conv.NHWC = gpuhost.PrecisionBF16, true
		_, _, ys := geom3x3.Sizes()
		bias, err := d.Alloc("bias", 2*geom3x3.OC)
		if err != nil {
			t.Fatal(err)
		}
		z, err := d.Alloc("z", 2*ys)
		if err != nil {
			t.Fatal(err)
		}
		relu, plain := conv, conv
		relu.Bias, relu.Z, relu.Act = gpuhost.Tensor{Buf: bias, Elem: gpuhost.ElemBF16}, gpuhost.Tensor{Buf: z, Elem: gpuhost.ElemBF16}, gpuhost.ConvActReLU
		plain.Bias = relu.Bias
		seq, err := d.Record("convs", func(e gpuhost.Encoder) error {
			for _, cv := range []gpuhost.Conv{conv, relu, plain} {
				if err := e.Conv(cv); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := seq.Launch(); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		if got := d.Engine().ConvAlgorithms(); !strings.HasPrefix(got, c.want) {
			t.Errorf("algorithm %d slow: the algorithms chosen: %q, want %q", c.slow, got, c.want)
		}
		choices := d.Engine().ConvChoices()
		if len(choices) != 3 {
			t.Fatalf("algorithm %d slow: choices %v, want three", c.slow, choices)
		}
		for _, ch := range choices[:2] {
			if tr := ch.Trials; len(tr) != 2 || tr[0].Algo != 4 || tr[1].Algo != 1 || tr[0].PerCall <= 0 || tr[1].PerCall <= 0 {
				t.Errorf("algorithm %d slow: %v, want 4 and 1 timed", c.slow, ch)
			}
		}
		identity := choices[2]
		var refused *cuda.Error
		if tr := identity.Trials; identity.Call != "forward+bias" || len(tr) != 2 || tr[0].Algo != 4 || !errors.As(tr[0].Err, &refused) || refused.Code != 3003 ||
			tr[1].Algo != 1 || tr[1].Err != nil || tr[1].PerCall != 0 {
			t.Errorf("algorithm %d slow: %v, want 4 passed over with status 3003, then 1 untimed", c.slow, identity)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if leaks := f.Leaks(); len(leaks) > 0 {
			t.Errorf("after Close the fake still holds %v", leaks)
		}
	}
}

// TestConvTrialsOff: Options.ConvTrials 1, MLBUILD_CUDNN_TRIALS=1 and a
// blocking engine take the heuristics' first candidate that runs (the
// fake's 4 in tf32), untimed, however slow the fake makes it, and
// capture nothing more than the sequence (a blocking one nothing); by
// default the two candidates are timed. OpenHostDevice refuses a value
// of MLBUILD_CUDNN_TRIALS that is not a count, naming it.
func TestConvTrialsOff(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "MLBUILD_CUDNN_TRIALS" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name     string
		opts     cuda.Options
		algo     int32
		captures int
	}{
		{"ConvTrials 1", cuda.Options{ConvTrials: 1}, 4, 1},
		{"MLBUILD_CUDNN_TRIALS=1", cuda.Options{Getenv: env("1")}, 4, 1},
		{"blocking", cuda.Options{Blocking: true, Getenv: env("")}, 4, 0},
		{"the default", cuda.Options{Getenv: env("")}, 1, 3},
		{"MLBUILD_CUDNN_TRIALS=2, blocking", cuda.Options{Blocking: true, Getenv: env("2")}, 1, 2},
	} {
		d, f, conv := convDevice(t, fakecuda.Options{ConvAlgoDelay: slowAlgo(4)}, c.opts, geom3x3)
		conv.Precision = gpuhost.PrecisionTF32
		if _, err := d.Record("conv", func(e gpuhost.Encoder) error { return e.Conv(conv) }); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		choices := d.Engine().ConvChoices()
		if len(choices) != 1 || choices[0].Algo != c.algo {
			t.Errorf("%s: the engine chose %v, want algorithm %d", c.name, choices, c.algo)
		} else if timed := choices[0].Trials[0].PerCall > 0; timed != (c.algo == 1) {
			t.Errorf("%s: %v: want the trials timed only where 1 is chosen", c.name, choices[0])
		}
		if s := f.Stats(); s.Captures != c.captures {
			t.Errorf("%s: %d captures, want %d", c.name, s.Captures, c.captures)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("MLBUILD_CUDNN_TRIALS", "off")
	if _, err := cuda.OpenHostDevice(); err == nil || !strings.Contains(err.Error(), `MLBUILD_CUDNN_TRIALS="off"`) {
		t.Errorf("OpenHostDevice with MLBUILD_CUDNN_TRIALS=off: %v, want the variable named", err)
	}
}

// TestFakeDNNEpilogue holds the fake cuDNN's fused forward to what
// cuDNN checks of an epilogue: the bias of the tensors' data type (3003
// for a float bias on bfloat16 data, as cuDNN 9.19 on an H200, and for
// the reverse), the identity activation with IMPLICIT_PRECOMP_GEMM only
// (3003 for another), and ReLU or identity only (NOT_SUPPORTED for
// sigmoid). A call that passes them is refused past them, for its
// algorithm 9 (none of the fake's) or its missing workspace, as a bad
// parameter.
func TestFakeDNNEpilogue(t *testing.T) {
	dnn := fakeDNN(t)
	var h cuda.DNNHandle
	var x, y, b cuda.TensorDesc
	var w cuda.FilterDesc
	var conv cuda.ConvDesc
	var act cuda.ActivationDesc
	if dnn.Create(&h) != 0 || dnn.CreateTensor(&x) != 0 || dnn.CreateTensor(&y) != 0 || dnn.CreateTensor(&b) != 0 ||
		dnn.CreateFilter(&w) != 0 || dnn.CreateConv(&conv) != 0 || dnn.CreateActivation(&act) != 0 {
		t.Fatal("creating the handle and descriptors failed")
	}
	defer func() {
		for _, d := range []cuda.TensorDesc{x, y, b} {
			dnn.DestroyTensor(d)
		}
		dnn.DestroyFilter(w)
		dnn.DestroyConv(conv)
		dnn.DestroyActivation(act)
		dnn.Destroy(h)
	}()
	const sigmoid int32 = 0 // CUDNN_ACTIVATION_SIGMOID
	fl, bf := cuda.DNNDataFloat, cuda.DNNDataBFloat16
	g := geom3x3
	for _, c := range []struct {
		name       string
		data, bias int32
		mode, algo int32
		want       cuda.DNNStatus
	}{
		{"a bfloat16 bias on bfloat16 data", bf, bf, cuda.DNNActivationReLU, 9, cuda.DNNBadParam},
		{"a float bias on bfloat16 data", bf, fl, cuda.DNNActivationReLU, 9, 3003},
		{"a float bias on float data", fl, fl, cuda.DNNActivationReLU, 9, cuda.DNNBadParam},
		{"a bfloat16 bias on float data", fl, bf, cuda.DNNActivationReLU, 9, 3003},
		{"identity with IMPLICIT_PRECOMP_GEMM", bf, bf, cuda.DNNActivationIdentity, cuda.DNNFwdAlgoImplicitPrecompGemm, cuda.DNNBadParam},
		{"identity with another algorithm", bf, bf, cuda.DNNActivationIdentity, 4, 3003},
		{"sigmoid", bf, bf, sigmoid, 9, cuda.DNNNotSupported},
	} {
		nhwc := cuda.DNNTensorNHWC
		if dnn.SetTensor4d(x, nhwc, c.data, int32(g.N), int32(g.C), int32(g.H), int32(g.W)) != 0 ||
			dnn.SetTensor4d(y, nhwc, c.data, int32(g.N), int32(g.OC), int32(g.OH), int32(g.OW)) != 0 ||
			dnn.SetTensor4d(b, nhwc, c.bias, 1, int32(g.OC), 1, 1) != 0 ||
			dnn.SetFilter4d(w, c.data, nhwc, int32(g.OC), int32(g.C), int32(g.KH), int32(g.KW)) != 0 ||
			dnn.SetConv2d(conv, 1, 1, 1, 1, 1, 1, cuda.DNNCrossCorrelation, fl) != 0 ||
			dnn.SetActivation(act, c.mode, cuda.DNNNotPropagateNaN, 0) != 0 {
			t.Fatalf("%s: setting the descriptors failed", c.name)
		}
		s := dnn.BiasActivationForward(h, new(float32), x, 0, w, 0, conv, c.algo, 0, 0, new(float32), y, 0, b, 0, act, y, 0)
		if s != c.want {
			t.Errorf("%s: cudnnConvolutionBiasActivationForward returned %d, want %d", c.name, s, c.want)
		}
	}
}

// TestConvTrialFailures: a candidate that fails is passed over, and the
// scratch, graphs and events of the trials are freed either way. Where
// the fake refuses every call with both of a tf32 forward's candidates,
// recording fails naming each and why, and leaves no allocation behind;
// where it lets 4's trial run and refuses it in the graph that times it,
// 4 is passed over with the timing's error, 1 is chosen, and a sequence
// records and runs after (the failed capture was ended).
func TestConvTrialFailures(t *testing.T) {
	const refused cuda.DNNStatus = 3000 // CUDNN_STATUS_NOT_SUPPORTED
	d, f, conv := convDevice(t, fakecuda.Options{}, cuda.Options{ConvTrials: 4}, geom3x3)
	conv.Precision = gpuhost.PrecisionTF32
	live := func() int { s := f.Stats(); return s.Allocs - s.Frees }
	before := live()
	f.RefuseConvAlgo(4, refused, 0)
	f.RefuseConvAlgo(1, refused, 0)
	_, err := d.Record("conv", func(e gpuhost.Encoder) error { return e.Conv(conv) })
	if err == nil {
		t.Fatal("recording a convolution whose every candidate is refused succeeded")
	}
	for _, want := range []string{"none of the 2 algorithms tried for the forward", "algorithm 4: cuda: cudnnConvolutionForward", "algorithm 1: cuda: cudnnConvolutionForward", "CUDNN_STATUS_NOT_SUPPORTED"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if n := live() - before; n != 0 {
		t.Errorf("the failed choice left %d allocations, want none", n)
	}
	f.RefuseConvAlgo(1, 0, 0)
	f.RefuseConvAlgo(4, refused, 1)
	seq, err := d.Record("conv", func(e gpuhost.Encoder) error { return e.Conv(conv) })
	if err != nil {
		t.Fatal(err)
	}
	choices := d.Engine().ConvChoices()
	if len(choices) != 1 || choices[0].Algo != 1 {
		t.Fatalf("choices %v, want algorithm 1", choices)
	}
	if tr := choices[0].Trials; len(tr) != 2 || tr[0].Algo != 4 || tr[0].Err == nil || !strings.Contains(tr[0].Err.Error(), "timing the forward") || tr[1].Err != nil {
		t.Errorf("%v: want 4 passed over by its timing, 1 chosen", choices[0])
	}
	if err := seq.Launch(); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("after Close the fake still holds %v", leaks)
	}
}
