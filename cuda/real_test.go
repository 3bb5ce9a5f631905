package cuda_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

// The TestReal tests run on the machine's NVIDIA GPU when MLBUILD_CUDA_REAL
// is 1, and then fail (never skip) if there is none. They are the GPU
// evidence: build the test binary here and run it there (no Go needed):
//
//	CGO_ENABLED=0 go test -c -o .gpu/cudatest ./cuda/
//	MLBUILD_CUDA_REAL=1 .gpu/cudatest -test.v -test.run Real
//
// cuda/testdata/real-gpu.txt keeps the output of the last such run.

func realOn(t *testing.T) {
	t.Helper()
	if os.Getenv("MLBUILD_CUDA_REAL") != "1" {
		t.Skip("set MLBUILD_CUDA_REAL=1 to run on this machine's NVIDIA GPU")
	}
}

// openReal opens GPU 0 with its kernel cache in cacheDir.
func openReal(t *testing.T, cacheDir string) *cuda.Device {
	t.Helper()
	d, err := cuda.OpenDevice(cuda.Options{KernelCacheDir: cacheDir})
	if err != nil {
		t.Fatalf("MLBUILD_CUDA_REAL=1 but the GPU cannot be opened: %v", err)
	}
	return d
}

func TestRealConformance(t *testing.T) {
	realOn(t)
	cache := t.TempDir()
	gpuhosttest.Run(t, gpuhosttest.Suite{
		Language:     gpuhosttest.CUDA,
		Open:         func(t *testing.T) gpuhost.Device { return openReal(t, cache) },
		Caller:       true,
		Precisions:   []gpuhost.Precision{gpuhost.PrecisionBF16, gpuhost.PrecisionTF32},
		BF16Operands: true,
		// cuDNN's convolutions, each product against the float64
		// reference: f32 (CUDNN_FMA_MATH) within 1e-5, tf32 within its
		// bound, float32 tensors in bf16 refused; bfloat16 tensors in bf16
		// (PSEUDO_BFLOAT16_CONFIG, CUDNN_TENSOR_OP_MATH) within half a
		// bfloat16 unit of the product of the stored values; each of them
		// on channels-last tensors too (CUDNN_TENSOR_NHWC, KRSC filters).
		Conv:           true,
		ConvPrecisions: []gpuhost.Precision{gpuhost.PrecisionTF32},
		ConvBF16:       true,
		ConvNHWC:       true,
		// cuDNN's fused forward (cudnnConvolutionBiasActivationForward),
		// in each of those element types and layouts.
		ConvEpilogue: true,
	})
}

// TestRealConvResNet times cuDNN's three products on a layer of CIFAR
// ResNet-18 at batch 128 (64→64 channels, 3×3, 32×32), each a CUDA graph
// of 20 calls, in f32 and tf32, after checking one output channel of each
// product against a float64 reference computed here, and that the f32
// products ran algorithms of float32 products summed in float32.
func TestRealConvResNet(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	defer d.Close()
	g := gpuhost.ConvGeom{N: 128, C: 64, H: 32, W: 32, OC: 64, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1, OH: 32, OW: 32}
	xs, ws, ys := g.Sizes()
	vals := [3][]float32{}
	var c gpuhost.Conv
	for i, n := range []int{xs, ws, ys} {
		b, err := d.Alloc("xwy"[i:i+1], 4*n)
		if err != nil {
			t.Fatal(err)
		}
		vals[i] = make([]float32, n)
		for j := range vals[i] {
			vals[i][j] = float32((j*7919+i*31)%2001)/1000 - 1
		}
		if err := d.Upload(b, 0, f32bytes(vals[i])); err != nil {
			t.Fatal(err)
		}
		*[]*gpuhost.Tensor{&c.X, &c.W, &c.Y}[i] = gpuhost.Tensor{Buf: b}
	}
	x, w, y := vals[0], vals[1], vals[2]
	c.Geom, c.Alpha = g, 1
	for _, prec := range []gpuhost.Precision{gpuhost.PrecisionF32, gpuhost.PrecisionTF32} {
		if prec == gpuhost.PrecisionTF32 { // the f32 products' algorithms
			line := d.Engine().ConvAlgorithms()
			if err := f32Algorithms(line); err != nil {
				t.Error(err)
			}
			t.Logf("f32 cuDNN algorithms: %s", line)
		}
		for _, p := range []gpuhost.ConvProduct{gpuhost.ConvForward, gpuhost.ConvInputGrad, gpuhost.ConvWeightGrad} {
			c.Product, c.Precision = p, prec
			per := timeConv(t, d, c, "resnet conv")
			// One channel of the output against float64 sums.
			out := map[gpuhost.ConvProduct]gpuhost.Buffer{gpuhost.ConvForward: c.Y.Buf, gpuhost.ConvInputGrad: c.X.Buf, gpuhost.ConvWeightGrad: c.W.Buf}[p]
			got := download32(t, d, out, map[gpuhost.ConvProduct]int{gpuhost.ConvForward: ys, gpuhost.ConvInputGrad: xs, gpuhost.ConvWeightGrad: ws}[p])
			maxErr, scale := resnetChannelError(g, p, x, w, y, got)
			// Sums of K = 576 (y, dx) or 131072 (dw) products of values
			// within 1. f32 is float32 products summed in float32 (the
			// algorithms DNNFloat32Algo admits), whose rounding errors
			// add up like a random walk: within 4u·√K of the channel's
			// largest sum (u = 2^-24), as rt/gpuhost's selftest
			// tolerance. This data's sums are far from random (the
			// weight gradient's reach 3.2e4); one float32 accumulator
			// over all K terms in order (computed on a CPU; a GEMM's
			// blocked sums round less) is 9.5e-6 off forward (bound
			// 3.5e-5; the H200's f32 cuDNN 8.6e-6) and 1.02 off for dw
			// (bound 2.8): a wrong operand or layout is off by the
			// sums' own size. tf32 rounds each operand to 2^-11 of itself,
			// and this data's terms share their signs, so its errors add
			// up linearly: within 8·2^-11 of the largest sum (the H200's
			// cuDNN 9.14: 0.0034 of 6.1 forward, 0.0047 of 13.9 for dx,
			// 30 of 4.4e4 for dw; the bound √K-free, 2.7 times the last).
			k := 576.0
			if p == gpuhost.ConvWeightGrad {
				k = 131072
			}
			bound := 4 * 0x1p-24 * math.Sqrt(k) * max(1, scale)
			if prec == gpuhost.PrecisionTF32 {
				bound = 8 * 0x1p-11 * max(1, scale)
			}
			if maxErr > bound {
				t.Errorf("%v %v: largest error %.3g, want at most %.3g (largest sum %.3g)", prec, p, maxErr, bound, scale)
			}
			t.Logf("%v %v of %v: %.1f µs a call (largest error %.2g, largest sum %.3g)", prec, p, g, float64(per.Nanoseconds())/1e3, maxErr, scale)
			// The next product reads the tensors as they were.
			for i, v := range vals {
				if err := d.Upload([]gpuhost.Buffer{c.X.Buf, c.W.Buf, c.Y.Buf}[i], 0, f32bytes(v)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, f := range d.Facts() {
		if f.Key == "cuDNN" || f.Key == "convolutions" || f.Key == "cuDNN algorithms" {
			t.Logf("%s: %s", f.Key, f.Value)
		}
	}
}

// resnetChannelError compares one channel of product p's output got
// (the image 5's channel 7 of y or dx, the filter 7 of dw) with float64
// sums of the 3×3, pad 1 convolution g of x, w, y, and returns the
// largest error and the largest |sum|.
func resnetChannelError(g gpuhost.ConvGeom, p gpuhost.ConvProduct, x, w, y, got []float32) (maxErr, scale float64) {
	at := func(v []float32, a, b, h, wd, B, H, W int) float32 {
		if h < 0 || h >= H || wd < 0 || wd >= W {
			return 0
		}
		return v[((a*B+b)*H+h)*W+wd]
	}
	switch p {
	case gpuhost.ConvForward:
		for i := range g.OH {
			for j := range g.OW {
				var s float64
				for ci := range g.C {
					for kh := range 3 {
						for kw := range 3 {
							s += float64(at(x, 5, ci, i+kh-1, j+kw-1, g.C, g.H, g.W)) * float64(w[((7*g.C+ci)*3+kh)*3+kw])
						}
					}
				}
				maxErr = max(maxErr, abs64(float64(got[((5*g.OC+7)*g.OH+i)*g.OW+j])-s))
				scale = max(scale, abs64(s))
			}
		}
	case gpuhost.ConvInputGrad:
		for i := range g.H {
			for j := range g.W {
				var s float64
				for o := range g.OC {
					for kh := range 3 {
						for kw := range 3 {
							s += float64(at(y, 5, o, i-kh+1, j-kw+1, g.OC, g.OH, g.OW)) * float64(w[((o*g.C+7)*3+kh)*3+kw])
						}
					}
				}
				maxErr = max(maxErr, abs64(float64(got[((5*g.C+7)*g.H+i)*g.W+j])-s))
				scale = max(scale, abs64(s))
			}
		}
	default:
		for ci := range g.C {
			for kh := range 3 {
				for kw := range 3 {
					var s float64
					for n := range g.N {
						for i := range g.OH {
							for j := range g.OW {
								s += float64(y[((n*g.OC+7)*g.OH+i)*g.OW+j]) * float64(at(x, n, ci, i+kh-1, j+kw-1, g.C, g.H, g.W))
							}
						}
					}
					maxErr = max(maxErr, abs64(float64(got[((7*g.C+ci)*3+kh)*3+kw])-s))
					scale = max(scale, abs64(s))
				}
			}
		}
	}
	return maxErr, scale
}

// TestRealConvResNetBF16 times cuDNN's three products on TestRealConvResNet's
// layer with bfloat16 tensors in precision bf16 (PSEUDO_BFLOAT16_CONFIG,
// CUDNN_TENSOR_OP_MATH), each a CUDA graph of 20 calls, after checking
// one output channel of each against float64 sums of the stored
// bfloat16 values: within half a bfloat16 unit of the channel's largest
// sum (the output's rounding) plus TestRealConvResNet's f32 bound
// (float32 sums).
func TestRealConvResNetBF16(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	defer d.Close()
	realConvResNetBF16(t, d, resnetLayer, false)
}

// TestRealConvResNetBF16NHWC is TestRealConvResNetBF16 on channels-last
// X and Y with a KRSC filter (CUDNN_TENSOR_NHWC, all three): the layout
// bf16 plans store CNN activations in (cuDNN ran ResNet-18's layers
// faster on it in PyTorch, bench/gpu/conv_nhwc.py; with a KCRS filter
// cuDNN 9.14 proposes no algorithm for the two gradients), checked on
// the same values and channel, transposed.
func TestRealConvResNetBF16NHWC(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	defer d.Close()
	realConvResNetBF16(t, d, resnetLayer, true)
}

// TestConvResNetBF16OnFake runs the two tests above on the fake, on a
// 3×3, pad 1 layer small enough for its Go loops (6 images of 8
// channels 5×4, 9 filters), so that their checks, the NHWC one's
// transposes included, are tested before they run on a GPU.
func TestConvResNetBF16OnFake(t *testing.T) {
	g := gpuhost.ConvGeom{N: 6, C: 8, H: 5, W: 4, OC: 9, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1, OH: 5, OW: 4}
	for _, nhwc := range []bool{false, true} {
		d, f := openFake(t, cuda.Options{})
		realConvResNetBF16(t, d, g, nhwc)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if faults := f.Faults(); len(faults) > 0 {
			t.Errorf("NHWC %v: faults %v", nhwc, faults)
		}
	}
}

// resnetLayer is the layer of CIFAR ResNet-18 the real tests time at
// batch 128: 64→64 channels, 3×3, 32×32.
var resnetLayer = gpuhost.ConvGeom{N: 128, C: 64, H: 32, W: 32, OC: 64, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1, OH: 32, OW: 32}

// realConvResNetBF16 is TestRealConvResNetBF16 on d and the 3×3, pad 1
// layer g (at least 6 images and 8 channels and filters: the checked
// channel is image 5's channel 7), with X and Y channels-last and W KRSC
// where nhwc is set: the values are those of the NCHW run, stored
// transposed, and the output is transposed back before its channel is
// checked.
func realConvResNetBF16(t *testing.T, d *cuda.Device, g gpuhost.ConvGeom, nhwc bool) {
	t.Helper()
	xs, ws, ys := g.Sizes()
	// stored is tensor i's values (NCHW, W KCRS) as the device holds
	// them.
	stored := func(i int, v []float32) []float32 {
		switch {
		case !nhwc:
			return v
		case i == 0:
			return gpuhosttest.NCHWToNHWC(v, g.N, g.C, g.H, g.W)
		case i == 1:
			return gpuhosttest.KCRSToKRSC(v, g)
		}
		return gpuhosttest.NCHWToNHWC(v, g.N, g.OC, g.OH, g.OW)
	}
	layout := "NCHW"
	if nhwc {
		layout = "NHWC"
	}
	vals, raws := [3][]float32{}, [3][]byte{}
	c := gpuhost.Conv{Geom: g, Alpha: 1, Precision: gpuhost.PrecisionBF16, NHWC: nhwc}
	for i, n := range []int{xs, ws, ys} {
		b, err := d.Alloc("xwy"[i:i+1], 2*n)
		if err != nil {
			t.Fatal(err)
		}
		vals[i], raws[i] = make([]float32, n), make([]byte, 2*n)
		for j := range vals[i] {
			vals[i][j] = math.Float32frombits(uint32(gpuhost.BF16Bits(float32((j*7919+i*31)%2001)/1000-1)) << 16)
		}
		for j, v := range stored(i, vals[i]) {
			binary.LittleEndian.PutUint16(raws[i][2*j:], gpuhost.BF16Bits(v)) // exact: v is a bfloat16 value
		}
		if err := d.Upload(b, 0, raws[i]); err != nil {
			t.Fatal(err)
		}
		*[]*gpuhost.Tensor{&c.X, &c.W, &c.Y}[i] = gpuhost.Tensor{Buf: b, Elem: gpuhost.ElemBF16}
	}
	for _, p := range []gpuhost.ConvProduct{gpuhost.ConvForward, gpuhost.ConvInputGrad, gpuhost.ConvWeightGrad} {
		c.Product = p
		per := timeConv(t, d, c, "resnet bf16 conv")
		oi := map[gpuhost.ConvProduct]int{gpuhost.ConvForward: 2, gpuhost.ConvInputGrad: 0, gpuhost.ConvWeightGrad: 1}[p]
		raw := make([]byte, len(raws[oi]))
		if err := d.Download(raw, []gpuhost.Buffer{c.X.Buf, c.W.Buf, c.Y.Buf}[oi], 0); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(raw)/2)
		for j := range got {
			got[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*j:])) << 16)
		}
		switch {
		case nhwc && oi == 0:
			got = gpuhosttest.NHWCToNCHW(got, g.N, g.C, g.H, g.W)
		case nhwc && oi == 1:
			got = gpuhosttest.KRSCToKCRS(got, g)
		case nhwc && oi == 2:
			got = gpuhosttest.NHWCToNCHW(got, g.N, g.OC, g.OH, g.OW)
		}
		maxErr, scale := resnetChannelError(g, p, vals[0], vals[1], vals[2], got)
		k := 576.0
		if p == gpuhost.ConvWeightGrad {
			k = 131072
		}
		bound := (0x1p-8 + 4*0x1p-24*math.Sqrt(k)) * max(1, scale)
		if maxErr > bound {
			t.Errorf("bf16 %s %v: largest error %.3g, want at most %.3g (largest sum %.3g)", layout, p, maxErr, bound, scale)
		}
		t.Logf("bf16 %s %v of %v: %.1f µs a call (largest error %.2g, largest sum %.3g)", layout, p, g, float64(per.Nanoseconds())/1e3, maxErr, scale)
		// The next product reads the tensors as they were.
		for i, b := range []gpuhost.Buffer{c.X.Buf, c.W.Buf, c.Y.Buf} {
			if err := d.Upload(b, 0, raws[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, f := range d.Facts() {
		if f.Key == "convolutions" || f.Key == "cuDNN algorithms" {
			t.Logf("%s: %s", f.Key, f.Value)
		}
	}
}

// f32Algorithms checks that the algorithms of info's "cuDNN algorithms"
// line (cuda.Engine.ConvAlgorithms: "forward: 1 ×1; input gradient: 1
// ×1; weight gradient: 1 ×1; workspace …"), all of them f32 products',
// are float32 products summed in float32 (cuda.DNNFloat32Algo), for each
// of the three products: on the H200 FMA math alone let the heuristics
// take WINOGRAD_NONFUSED for a weight gradient.
func f32Algorithms(line string) error {
	products := map[string]gpuhost.ConvProduct{"forward": gpuhost.ConvForward, "input gradient": gpuhost.ConvInputGrad, "weight gradient": gpuhost.ConvWeightGrad}
	seen := 0
	for _, part := range strings.Split(line, "; ") {
		name, algos, ok := strings.Cut(part, ": ")
		p, known := products[name]
		if !ok || !known {
			continue
		}
		seen++
		for _, a := range strings.Split(algos, ", ") {
			var algo, n int32
			if _, err := fmt.Sscanf(a, "%d ×%d", &algo, &n); err != nil {
				return fmt.Errorf("cuDNN algorithms %q: %v", line, err)
			}
			if !cuda.DNNFloat32Algo(p, algo) {
				return fmt.Errorf("f32 %v ran cuDNN algorithm %d, not float32 products summed in float32 (%s)", p, algo, line)
			}
		}
	}
	if seen != len(products) {
		return fmt.Errorf("cuDNN algorithms %q: %d products, want 3", line, seen)
	}
	return nil
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func download32(t *testing.T, d gpuhost.Device, b gpuhost.Buffer, n int) []float32 {
	t.Helper()
	raw := make([]byte, 4*n)
	if err := d.Download(raw, b, 0); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

func abs64(v float64) float64 { return math.Abs(v) }

func TestRealFactsAndStartup(t *testing.T) {
	realOn(t)
	cache := t.TempDir()
	src, infos, err := gpuhosttest.Source(gpuhosttest.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true} {
		start := time.Now()
		d := openReal(t, cache)
		opened := time.Since(start)
		if err := d.LoadKernels(src, infos); err != nil {
			t.Fatal(err)
		}
		loads := d.Engine().KernelLoads()
		if loads[0].FromCache != want {
			t.Errorf("load %d: from cache %v, want %v", i+1, loads[0].FromCache, want)
		}
		t.Logf("open %d: Open %v, kernels %s from cache=%v in %v", i+1, opened.Round(time.Microsecond), loads[0].Arch, loads[0].FromCache, loads[0].Took.Round(time.Microsecond))
		if i == 0 {
			for _, f := range d.Facts() {
				t.Logf("  %s: %s", f.Key, f.Value)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRealGraphVersusDirect times the same work launched op by op and as
// one CUDA graph: a small kernel plus a 256³ SGEMM, and a chain of 20 small
// kernels.
func TestRealGraphVersusDirect(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	defer d.Close()
	loadSuite(t, d)
	e := d.Engine()
	fn, err := e.Function("conf_accumulate")
	if err != nil {
		t.Fatal(err)
	}
	const n = 256
	bufs := make([]gpuhost.Buffer, 5)
	for i := range bufs {
		if bufs[i], err = d.Alloc(fmt.Sprint("m", i), 4*n*n); err != nil {
			t.Fatal(err)
		}
	}
	ptrs := make([]cuda.DevicePtr, len(bufs))
	for i, b := range bufs {
		if ptrs[i], err = d.Pointer(b); err != nil {
			t.Fatal(err)
		}
	}
	gemm := gpuhost.Gemm{M: n, N: n, K: n, Alpha: 1, A: gpuhost.Operand{Buf: bufs[2]}, B: gpuhost.Operand{Buf: bufs[3]}, C: gpuhost.Operand{Buf: bufs[4]}}
	acc := []gpuhost.Arg{{Buf: bufs[0], Bytes: 1024}, {Buf: bufs[1], Bytes: 1024}}
	for _, c := range []struct {
		name    string
		kernels int
		gemm    bool
	}{{"kernel + 256^3 SGEMM", 1, true}, {"20 small kernels", 20, false}} {
		direct := func() error {
			for range c.kernels {
				if err := e.Launch(fn, 4, 64, ptrs[:2]); err != nil {
					return err
				}
			}
			if c.gemm {
				return e.Gemm(cuda.GemmArgs{M: n, N: n, K: n, Alpha: 1, A: ptrs[2], B: ptrs[3], C: ptrs[4], LDA: n, LDB: n, LDC: n})
			}
			return nil
		}
		seq, err := d.Record(c.name, func(en gpuhost.Encoder) error {
			for range c.kernels {
				if err := en.Dispatch("conf_accumulate", acc, 4, 64); err != nil {
					return err
				}
			}
			if c.gemm {
				return en.Gemm(gemm)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		const reps = 2000
		timeIt := func(step func() error) time.Duration {
			for range 50 { // warm up
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for range reps {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			return time.Since(start) / reps
		}
		var td, tg time.Duration
		for range 3 { // alternate, keep the best of each
			a, b := timeIt(direct), timeIt(seq.Launch)
			if td == 0 || a < td {
				td = a
			}
			if tg == 0 || b < tg {
				tg = b
			}
		}
		t.Logf("%s: direct %.1f µs per step, one CUDA graph %.1f µs per step (%.2fx)", c.name,
			float64(td.Nanoseconds())/1e3, float64(tg.Nanoseconds())/1e3, float64(td)/float64(tg))
	}
}

// TestRealZFault runs last (it spoils the process's CUDA context): a
// kernel given an address outside its memory faults, and the error names
// the failing call and CUDA's status.
func TestRealZFault(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	loadSuite(t, d)
	e := d.Engine()
	fn, err := e.Function("conf_accumulate")
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Alloc(1024, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(fn, 4, 64, []cuda.DevicePtr{p, p + 1<<44}); err != nil {
		t.Logf("the launch itself failed: %v", err)
	}
	err = e.Synchronize()
	var ce *cuda.Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Name, "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("Synchronize after an out-of-bounds kernel: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
	}
	t.Logf("fault reported as: %v", err)
	t.Logf("Close after the fault: %v", d.Close())
}

// timeConv records c 20 times in one sequence, runs it once, then times
// 10 runs, and returns the time of one Conv.
func timeConv(t *testing.T, d gpuhost.Device, c gpuhost.Conv, name string) time.Duration {
	t.Helper()
	seq, err := d.Record(name, func(e gpuhost.Encoder) error {
		for range 20 {
			if err := e.Conv(c); err != nil {
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
	start := time.Now()
	const reps = 10
	for range reps {
		seq.Launch()
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start) / (20 * reps)
}

// resnet18Convs are CIFAR ResNet-18's cuDNN convolutions at batch 128
// (every one but the stem, which runs the direct kernel): the layers'
// geometries and how many of each a step has.
func resnet18Convs() []struct {
	g     gpuhost.ConvGeom
	count int
} {
	conv := func(c, hw, oc, k, s int) gpuhost.ConvGeom {
		p := k / 2
		o := (hw+2*p-k)/s + 1
		return gpuhost.ConvGeom{N: 128, C: c, H: hw, W: hw, OC: oc, KH: k, KW: k, PH: p, PW: p, SH: s, SW: s, DH: 1, DW: 1, Groups: 1, OH: o, OW: o}
	}
	type layer = struct {
		g     gpuhost.ConvGeom
		count int
	}
	ls := []layer{{conv(64, 32, 64, 3, 1), 4}}
	for _, st := range []struct{ c, hw int }{{64, 32}, {128, 16}, {256, 8}} {
		ls = append(ls, layer{conv(st.c, st.hw, 2*st.c, 3, 2), 1}, layer{conv(st.c, st.hw, 2*st.c, 1, 2), 1}, layer{conv(2*st.c, st.hw/2, 2*st.c, 3, 1), 3})
	}
	return ls
}

// TestRealConvResNet18Step times, on this machine's GPU, every cuDNN
// convolution of a CIFAR ResNet-18 bf16 training step as mlbuild's
// programs call it (channels-last bfloat16 tensors, KRSC filters, the
// algorithms cuda's Conv picks), forward, input and weight gradient, each
// a CUDA graph of 20 calls launched 10 times, and logs the step's sum:
// what the convolutions cost apart from everything around them, to set
// beside PyTorch's calls on the same shapes (bench/gpu/conv_nhwc.py).
// Before the calls are timed, each product is prepared alone and the
// time its preparation took is logged (cuDNN's set-up, and the timing of
// its candidate algorithms in graphs), with the algorithm chosen and
// each candidate's time. It fails if a layer's forward leaves y all
// zeros, a time is not positive, or a product has no choice to log.
func TestRealConvResNet18Step(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	defer d.Close()
	var sums [3]time.Duration
	var prepared time.Duration
	for _, l := range resnet18Convs() {
		g := l.g
		xs, ws, ys := g.Sizes()
		c := gpuhost.Conv{Geom: g, Alpha: 1, Precision: gpuhost.PrecisionBF16, NHWC: true}
		for i, n := range []int{xs, ws, ys} {
			b, err := d.Alloc("xwy"[i:i+1], 2*n)
			if err != nil {
				t.Fatal(err)
			}
			raw := make([]byte, 2*n)
			for j := 0; j < n; j++ {
				binary.LittleEndian.PutUint16(raw[2*j:], gpuhost.BF16Bits(float32((j*7919+i*31)%2001)/1000-1))
			}
			if err := d.Upload(b, 0, raw); err != nil {
				t.Fatal(err)
			}
			*[]*gpuhost.Tensor{&c.X, &c.W, &c.Y}[i] = gpuhost.Tensor{Buf: b, Elem: gpuhost.ElemBF16}
		}
		var per [3]time.Duration
		var prep [3]time.Duration
		for k, p := range []gpuhost.ConvProduct{gpuhost.ConvForward, gpuhost.ConvInputGrad, gpuhost.ConvWeightGrad} {
			c.Product = p
			start := time.Now()
			if err := d.Engine().PrepareConv(cuda.ConvArgs{Geom: g, Product: p, Precision: c.Precision, NHWC: true}); err != nil {
				t.Fatalf("%v %v: %v", g, p, err)
			}
			prep[k] = time.Since(start)
			prepared += prep[k]
			per[k] = timeConv(t, d, c, "resnet18 step conv")
			if per[k] <= 0 {
				t.Errorf("%v %v: %v a call", g, p, per[k])
			}
			sums[k] += time.Duration(l.count) * per[k]
			if p == gpuhost.ConvForward {
				raw := make([]byte, 2*ys)
				if err := d.Download(raw, c.Y.Buf, 0); err != nil {
					t.Fatal(err)
				}
				if slices.Max(raw) == 0 {
					t.Errorf("%v: the forward left y all zeros", g)
				}
			}
		}
		t.Logf("%dx%d s%d %d->%d at %dx%d (x%d): forward %.1f, input gradient %.1f, weight gradient %.1f µs a call; prepared in %.1f, %.1f, %.1f ms",
			g.KH, g.KW, g.SH, g.C, g.OC, g.H, g.W, l.count, us(per[0]), us(per[1]), us(per[2]), us(prep[0])/1e3, us(prep[1])/1e3, us(prep[2])/1e3)
		if n := logConvChoices(t, d, g); n != 3 {
			t.Errorf("%v: %d choices of cuDNN algorithms logged, want 3 (the products)", g, n)
		}
		for _, b := range []gpuhost.Buffer{c.X.Buf, c.W.Buf, c.Y.Buf} {
			d.Free(b)
		}
	}
	t.Logf("a ResNet-18 step's cuDNN convolutions: forward %.0f, input gradient %.0f, weight gradient %.0f µs; %.3f ms in all; their preparation %.0f ms",
		us(sums[0]), us(sums[1]), us(sums[2]), float64((sums[0]+sums[1]+sums[2]).Microseconds())/1e3, us(prepared)/1e3)
}

// logConvChoices logs how d's engine chose the cuDNN algorithm of each
// prepared call of geometry g (cuda.Engine.ConvChoices: the algorithm,
// and each candidate's GPU time a call in a graph or why it was passed
// over) and returns how many it logged.
func logConvChoices(t *testing.T, d *cuda.Device, g gpuhost.ConvGeom) int {
	t.Helper()
	n := 0
	for _, c := range d.Engine().ConvChoices() {
		if c.Geom == g {
			t.Logf("  cuDNN %v%s %v", c.Precision, map[bool]string{true: " NHWC"}[c.NHWC], c)
			n++
		}
	}
	return n
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// TestRealConvEpilogue runs cuDNN's fused forward
// (cudnnConvolutionBiasActivationForward) on every forward geometry of
// CIFAR ResNet-18 at batch 128, bfloat16 NHWC tensors and KRSC filters
// as mlbuild's programs call it, in the three epilogues a folded batch
// norm gives (bias and ReLU; bias, residual Z and ReLU; bias alone, with
// the identity activation, which cuDNN documents as IMPLICIT_PRECOMP_GEMM
// only and 9.19 ran with IMPLICIT_GEMM too: each candidate is tried),
// checks 2048 elements of each output against a float64 reference on the
// same bfloat16 values (realEpilogueBound's tolerance), and times each, a
// CUDA graph of 20 calls, beside the plain forward: the µs a call and
// what the epilogue adds, and logs the algorithm chosen for each call and
// each candidate's time (logConvChoices). An identity epilogue for which
// no algorithm runs fails its layer, saying so.
func TestRealConvEpilogue(t *testing.T) {
	realOn(t)
	d := openReal(t, t.TempDir())
	defer d.Close()
	var layers []gpuhost.ConvGeom
	for _, l := range resnet18Convs() {
		layers = append(layers, l.g)
	}
	realConvEpilogue(t, d, layers)
}

// TestConvEpilogueOnFake runs TestRealConvEpilogue's body on the fake
// with two small layers (a 3×3 and a 1×1 of stride 2), so that its
// reference, its sampling and its bounds are tested before they run on a
// GPU.
func TestConvEpilogueOnFake(t *testing.T) {
	d, f := openFake(t, cuda.Options{})
	defer d.Close()
	conv := func(c, hw, oc, k, s int) gpuhost.ConvGeom {
		p, o := k/2, (hw+2*(k/2)-k)/s+1
		return gpuhost.ConvGeom{N: 3, C: c, H: hw, W: hw, OC: oc, KH: k, KW: k, PH: p, PW: p, SH: s, SW: s, DH: 1, DW: 1, Groups: 1, OH: o, OW: o}
	}
	realConvEpilogue(t, d, []gpuhost.ConvGeom{conv(8, 6, 8, 3, 1), conv(8, 6, 16, 1, 2)})
	if faults := f.Faults(); len(faults) > 0 {
		t.Errorf("faults %v", faults)
	}
}

// realConvEpilogue is TestRealConvEpilogue on d and the layers.
func realConvEpilogue(t *testing.T, d *cuda.Device, layers []gpuhost.ConvGeom) {
	t.Helper()
	var sums [4]time.Duration
	for _, g := range layers {
		xs, ws, ys := g.Sizes()
		// The tensors' values as stored (X and Z NHWC, W KRSC): the
		// pattern of the other real tests, bfloat16 values in [-1, 1],
		// the bias and Z scaled to the sums' size.
		vals := make([][]float32, 5)
		bufs := make([]gpuhost.Buffer, 5)
		for i, n := range []int{xs, ws, ys, g.OC, ys} {
			b, err := d.Alloc([]string{"x", "w", "y", "bias", "z"}[i], 2*n)
			if err != nil {
				t.Fatal(err)
			}
			vals[i] = make([]float32, n)
			raw := make([]byte, 2*n)
			for j := range vals[i] {
				v := float32((j*7919+i*31)%2001)/1000 - 1
				if i >= 3 {
					v *= 4
				}
				bits := gpuhost.BF16Bits(v)
				vals[i][j] = math.Float32frombits(uint32(bits) << 16)
				binary.LittleEndian.PutUint16(raw[2*j:], bits)
			}
			if err := d.Upload(b, 0, raw); err != nil {
				t.Fatal(err)
			}
			bufs[i] = b
		}
		tensor := func(i int) gpuhost.Tensor { return gpuhost.Tensor{Buf: bufs[i], Elem: gpuhost.ElemBF16} }
		plain := gpuhost.Conv{Geom: g, Alpha: 1, Precision: gpuhost.PrecisionBF16, NHWC: true, X: tensor(0), W: tensor(1), Y: tensor(2)}
		relu, reluZ, identity := plain, plain, plain
		relu.Bias, relu.Act = tensor(3), gpuhost.ConvActReLU
		reluZ.Bias, reluZ.Z, reluZ.Act = tensor(3), tensor(4), gpuhost.ConvActReLU
		identity.Bias = tensor(3)
		var per [4]time.Duration
		for k, c := range []gpuhost.Conv{plain, relu, reluZ, identity} {
			name := []string{"plain", "bias+relu", "bias+z+relu", "bias"}[k]
			// Recorded once alone first, so that a refusal (an identity
			// epilogue whose algorithm the heuristics do not offer)
			// fails this case, and timeConv's t.Fatal does not end the
			// test.
			if _, err := d.Record("epilogue "+name, func(e gpuhost.Encoder) error { return e.Conv(c) }); err != nil {
				t.Errorf("%v, %s: %v", g, name, err)
				continue
			}
			per[k] = timeConv(t, d, c, "epilogue "+name)
			sums[k] += per[k]
			raw := make([]byte, 2*ys)
			if err := d.Download(raw, bufs[2], 0); err != nil {
				t.Fatal(err)
			}
			if slices.Max(raw) == 0 {
				t.Errorf("%v, %s: y is all zeros", g, name)
			}
			worst, bad := 0.0, 0
			for s := range 2048 {
				idx := s * 7919 % ys
				got := math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*idx:])) << 16)
				want, bound := realEpilogueRef(g, vals, c, idx)
				if err := math.Abs(float64(got) - want); !(err <= bound) {
					if bad < 5 {
						t.Errorf("%v, %s: y[%d] = %g, want %g within %.3g", g, name, idx, got, want, bound)
					}
					bad++
				} else {
					worst = max(worst, err/bound)
				}
			}
			if bad > 0 {
				t.Errorf("%v, %s: %d of 2048 sampled elements out of bounds", g, name, bad)
			}
			if per[k] <= 0 {
				t.Errorf("%v, %s: %v a call", g, name, per[k])
			}
			t.Logf("%dx%d s%d %d->%d at %dx%d, %s: %.1f µs a call (+%.1f), largest error %.2f of its bound",
				g.KH, g.KW, g.SH, g.C, g.OC, g.H, g.W, name, us(per[k]), us(per[k]-per[0]), worst)
		}
		// The plain forward, the ReLU slot (with Z and without) and the
		// identity one.
		if n := logConvChoices(t, d, g); n != 3 {
			t.Errorf("%v: %d choices of cuDNN algorithms logged, want 3 (forward, forward+bias+relu, forward+bias)", g, n)
		}
		for _, b := range bufs {
			d.Free(b)
		}
	}
	t.Logf("the layers' sum (one each): plain %.1f, bias+relu %.1f, bias+z+relu %.1f, bias %.1f µs",
		us(sums[0]), us(sums[1]), us(sums[2]), us(sums[3]))
	for _, f := range d.Facts() {
		if f.Key == "cuDNN algorithms" {
			t.Logf("%s: %s", f.Key, f.Value)
		}
	}
}

// realEpilogueRef is element idx of c's output (bfloat16 NHWC tensors of
// geometry g, one group; vals are X, W, Y, the bias and Z as stored,
// KRSC W) in float64, and the tolerance of a bfloat16 result: half a
// bfloat16 unit (2⁻⁸) of each of |y|, |conv| and |conv + z|, the values
// the contract lets a device round (gpuhost.Conv's epilogue), plus
// 4·2⁻²⁴·√K of the sum of the products' magnitudes, for float32 sums of
// K products in any order, plus 1e-6.
func realEpilogueRef(g gpuhost.ConvGeom, vals [][]float32, c gpuhost.Conv, idx int) (want, bound float64) {
	o, j, i, n := idx%g.OC, idx/g.OC%g.OW, idx/(g.OC*g.OW)%g.OH, idx/(g.OC*g.OW*g.OH)
	var sum, mag float64
	for kh := range g.KH {
		h := i*g.SH - g.PH + kh*g.DH
		if h < 0 || h >= g.H {
			continue
		}
		for kw := range g.KW {
			w := j*g.SW - g.PW + kw*g.DW
			if w < 0 || w >= g.W {
				continue
			}
			for ci := range g.C {
				p := float64(vals[0][((n*g.H+h)*g.W+w)*g.C+ci]) * float64(vals[1][((o*g.KH+kh)*g.KW+kw)*g.C+ci])
				sum += p
				mag += math.Abs(p)
			}
		}
	}
	conv := float64(c.Alpha) * sum
	if c.Bias.Buf == nil {
		return conv, 0x1p-8*math.Abs(conv) + 4*0x1p-24*math.Sqrt(float64(g.C*g.KH*g.KW))*mag + 1e-6
	}
	convZ := conv
	if c.Z.Buf != nil {
		convZ += float64(vals[4][idx])
	}
	want = convZ + float64(vals[3][o])
	if c.Act == gpuhost.ConvActReLU {
		want = max(want, 0)
	}
	return want, 0x1p-8*(math.Abs(want)+math.Abs(conv)+math.Abs(convZ)) + 4*0x1p-24*math.Sqrt(float64(g.C*g.KH*g.KW))*mag + 1e-6
}
