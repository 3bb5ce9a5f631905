package emit

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// TestCUDAConvChoice: CUDA's rules run an im2col convolution through cuDNN
// in tf32 and bf16 plans, a bf16 plan's in tf32 (cuDNN multiplies bf16
// only on bfloat16 tensors), and keep it on im2col and cuBLAS in f32
// plans, each with the H200's measurement as the reason; a direct
// convolution is never the library's.
func TestCUDAConvChoice(t *testing.T) {
	tg := CUDA.Target
	im2col := planner.ConvChoice{Method: cudaIm2col, Scratch: 1024}
	for _, c := range []struct {
		plan, method, precision, reason string
	}{
		{planner.PrecisionF32, cudaIm2col, planner.PrecisionF32, "15.0 ms on an H200, 19.08 ms with cuDNN"},
		{planner.PrecisionTF32, gpu.ConvLibraryMethod, planner.PrecisionTF32, "6.24 ms on an H200, 8.6 ms with tf32 im2col"},
		{planner.PrecisionBF16, gpu.ConvLibraryMethod, planner.PrecisionBF16, "4.17 ms on an H200, 6.25 ms with cuDNN's tf32 on float32 tensors, 7.58 ms with bf16 im2col"},
	} {
		got, why := tg.ConvLibrary(planner.ConvGeom{N: 1, C: 16, H: 8, W: 8, OC: 16, KH: 3, KW: 3, Groups: 1}, im2col, c.plan)
		if got.Method != c.method || why.Taken != (c.method == gpu.ConvLibraryMethod) || !strings.Contains(why.Reason, c.reason) {
			t.Errorf("%s plan: method %q, taken %v, reason %q; want %q and a reason with %q", c.plan, got.Method, why.Taken, why.Reason, c.method, c.reason)
		}
		if got.Method == gpu.ConvLibraryMethod && got.Scratch != 0 {
			t.Errorf("%s plan: cuDNN's choice asks %d float32s of scratch from the plan, want none", c.plan, got.Scratch)
		}
		if c.plan == planner.PrecisionF32 {
			continue // an f32 plan's convolutions keep no precision
		}
		if p := tg.ConvPrecision(got.Method, c.plan); p.Precision != c.precision {
			t.Errorf("%s plan: the %s convolution in %q (%s), want %q", c.plan, got.Method, p.Precision, p.Why, c.precision)
		}
	}
	// The direct convolution stays, but for an RGB image's 3×3 first
	// layer in bf16, which cuDNN takes on the input cast to bfloat16; an
	// MNIST image's 5×5 one stays in every precision.
	direct := planner.ConvChoice{Method: gpu.ConvDirectMethod}
	rgb := planner.ConvGeom{N: 128, C: 3, H: 32, W: 32, OC: 64, KH: 3, KW: 3, Groups: 1}
	mnist := planner.ConvGeom{N: 64, C: 1, H: 28, W: 28, OC: 32, KH: 5, KW: 5, Groups: 1}
	for _, prec := range []string{planner.PrecisionF32, planner.PrecisionTF32, planner.PrecisionBF16} {
		if got, why := tg.ConvLibrary(mnist, direct, prec); got.Method != gpu.ConvDirectMethod || why != (planner.LibraryWhy{}) {
			t.Errorf("%s plan: MNIST's direct convolution became %q (%+v)", prec, got.Method, why)
		}
		got, why := tg.ConvLibrary(rgb, direct, prec)
		if want := map[bool]string{true: gpu.ConvLibraryMethod, false: gpu.ConvDirectMethod}[prec == planner.PrecisionBF16]; got.Method != want || why.Taken != (want == gpu.ConvLibraryMethod) {
			t.Errorf("%s plan: the RGB stem's direct convolution became %q (%+v), want %q", prec, got.Method, why, want)
		}
	}
}

// TestGPUWinogradChoice: CUDA's rule runs CIFAR ResNet-18's 3×3 stride-1
// layers at batch 128 (64 to 512 channels, 32×32 to 4×4 images) as
// Winograd F(4×4,3×3) in f32 plans, their backward transforming the input
// again (the workspace is past what the forward keeps), a small layer's
// backward reading the forward's; in tf32 and bf16 plans cuDNN takes them
// as it takes im2col's. A strided 3×3 layer and one of 8 channels stay on
// im2col, MNIST's 5×5 layer stays F(4×4,5×5) sharing its forward's
// workspace, and Metal (no Winograd budget) runs them all as im2col.
func TestGPUWinogradChoice(t *testing.T) {
	conv3 := func(n, c, hw, oc, stride int) planner.ConvGeom {
		return planner.ConvGeom{N: n, C: c, H: hw, W: hw, OC: oc, OH: (hw-1)/stride + 1, OW: (hw-1)/stride + 1, KH: 3, KW: 3, SH: stride, SW: stride, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1}
	}
	for _, c := range []struct {
		name   string
		g      planner.ConvGeom
		method string
		shares bool
	}{
		{"64 channels 32x32", conv3(128, 64, 32, 64, 1), gpu.Winograd3F4.Method, false},
		{"128 channels 16x16", conv3(128, 128, 16, 128, 1), gpu.Winograd3F4.Method, false},
		{"256 channels 8x8", conv3(128, 256, 8, 256, 1), gpu.Winograd3F4.Method, false},
		{"512 channels 4x4", conv3(128, 512, 4, 512, 1), gpu.Winograd3F4.Method, false},
		{"small", conv3(16, 24, 10, 24, 1), gpu.Winograd3F4.Method, true},
		{"batch 8", conv3(8, 512, 4, 512, 1), gpu.Winograd3F4.Method, false},
		{"batch 1", conv3(1, 64, 32, 64, 1), cudaIm2col, false}, // winograd3MinBatch
		{"stride 2", conv3(128, 64, 32, 128, 2), cudaIm2col, false},
		{"8 channels", conv3(128, 8, 32, 8, 1), cudaIm2col, false},
		{"MNIST 5x5", planner.ConvGeom{N: 250, C: 32, H: 14, W: 14, OC: 64, OH: 14, OW: 14, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1}, gpu.WinogradF4.Method, true},
	} {
		fwd, bwd := CUDA.Target.Conv(c.g, planner.ConvForward), CUDA.Target.Conv(c.g, planner.ConvBackward)
		if fwd.Method != c.method || bwd.Method != c.method {
			t.Errorf("%s: forward %q, backward %q, want %q", c.name, fwd.Method, bwd.Method, c.method)
			continue
		}
		if wa := gpu.WinogradByMethod(c.method); wa != nil && (fwd.Scratch != wa.Scratch(c.g) || bwd.SharesForward != c.shares) {
			t.Errorf("%s: scratch %d (the method's %d), backward shares the forward's %v, want %v", c.name, fwd.Scratch, wa.Scratch(c.g), bwd.SharesForward, c.shares)
		}
		if c.method != gpu.Winograd3F4.Method {
			continue
		}
		for _, prec := range []string{planner.PrecisionF32, planner.PrecisionTF32, planner.PrecisionBF16} {
			got, why := CUDA.Target.ConvLibrary(c.g, fwd, prec)
			want := map[bool]string{true: c.method, false: gpu.ConvLibraryMethod}[prec == planner.PrecisionF32]
			if got.Method != want || why.Taken == (want == c.method) || why.Reason == "" {
				t.Errorf("%s, %s plan: %q (%+v), want %q", c.name, prec, got.Method, why, want)
			}
		}
		if m := Metal.Target.Conv(c.g, planner.ConvForward).Method; m != "im2col+mps" {
			t.Errorf("%s: Metal runs %q, want im2col+mps", c.name, m)
		}
	}
}

// TestCUDABF16ConvsInTF32: the CUDA program of a bf16 spec with
// convolutions whose tensors cannot be stored in bfloat16 (the last one's
// output goes to an average pool, which reads float32 only:
// planner/store_bf16.go's fallback, down the chain) calls cuDNN for all
// three (the first on the input's cast copy, which then stays float32)
// with the precision TF32 on every ConvOp (what the device runs and what
// selftest's tolerance reads), never bf16, while its dense layer's GEMMs
// stay bf16; the f32 ResNet-18's program has no ConvOp (Winograd and im2col).
func TestCUDABF16ConvsInTF32(t *testing.T) {
	src, err := CUDA.RenderGPU(backendInput(t, CUDA, "../testdata/specs/bf16/convnet_bf16.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	main := string(src.Main)
	convs := regexp.MustCompile(`\{Conv: &gpuhost\.ConvOp\{[^\n]*\}\}`).FindAllString(main, -1)
	if len(convs) == 0 {
		t.Fatal("the bf16 convolutional network's program has no library convolution")
	}
	for _, c := range convs {
		if !strings.Contains(c, "Precision: gpuhost.PrecisionTF32") || strings.Contains(c, "PrecisionBF16") {
			t.Errorf("a library convolution not in tf32: %s", c)
			break
		}
	}
	if !strings.Contains(main, "Precision: gpuhost.PrecisionBF16") {
		t.Error("the program's dense GEMMs are not bf16")
	}
	f32, err := CUDA.RenderGPU(backendInput(t, CUDA, "../bench/models/resnet18_cifar.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(f32.Main), "gpuhost.ConvOp{") {
		t.Error("the f32 ResNet-18's CUDA program calls cuDNN; f32 plans keep Winograd and im2col")
	}
}

// TestCUDABF16ConvsOnBF16Tensors: the CUDA program of the tiny bf16
// ResNet, whose activations the planner stores in bfloat16 and channels
// last (planner/store_bf16.go, store_channels_last.go), calls cuDNN in
// bf16 on channels-last bfloat16 tensors for every convolution past the
// stem (5 layers: 5 forward, 5 input and 5 weight gradients a training
// step), widens each weight gradient from its bfloat16 workspace, runs
// its batch norms and pool on the channels-last kernels, and compares
// the stored outputs in selftest as bfloat16 (CheckBF16); its CPU
// references widen and narrow them, transposed; and its replicas carry
// the reason synchronised batch norm is refused (NoSyncBN). Its inference
// plans' convolutions take the folded batch norms' biases, ReLUs and
// residuals into cuDNN's fused call.
func TestCUDABF16ConvsOnBF16Tensors(t *testing.T) {
	src, err := CUDA.RenderGPU(backendInput(t, CUDA, "../testdata/specs/bf16/resnet_tiny_bf16.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	main := string(src.Main)
	convs := regexp.MustCompile(`\{Conv: &gpuhost\.ConvOp\{[^\n]*\}\}`).FindAllString(main, -1)
	bf16, fused := 0, 0
	for _, c := range convs {
		if strings.Contains(c, "Elem: gpuhost.ElemBF16, NHWC: true, Precision: gpuhost.PrecisionBF16") {
			bf16++
		} else {
			t.Errorf("a library convolution not in bf16 on bfloat16 tensors: %s", c)
		}
		if strings.Contains(c, ", Bias: &bind{") {
			fused++
		}
	}
	// the training plan's 15, and the inference plans' forward convolutions
	if bf16 < 15 {
		t.Errorf("%d bf16 library convolutions, want at least 15", bf16)
	}
	// the inference plans' convolutions take their folded batch norm's
	// bias (and ReLU, and residual) into cuDNN's fused call
	if fused < 8 {
		t.Errorf("%d library convolutions with an epilogue, want the inference plans' (at least 8)", fused)
	}
	// its data-parallel tables (the tiny ResNet's batch of 16 holds 2, 4,
	// 8 and 16 GPUs' shares) say why --sync-bn is refused
	for _, want := range []string{"CheckBF16: []region{", "gpuhost.WidenBF16NHWC(", "gpuhost.NarrowBF16NHWC(", "NoSyncBN: \"batch norm stem_bn reads or writes"} {
		if !strings.Contains(main, want) {
			t.Errorf("the program has no %s", want)
		}
	}
	for _, k := range []string{"batchnorm_stats_nhwc", "batchnorm_nhwc", "batchnorm_bwd_sums_nhwc", "batchnorm_bwd_nhwc", "globalavgpool_nhwc", "globalavgpool_bwd_nhwc"} {
		if !strings.Contains(string(src.Kernels), "_"+k+"(") {
			t.Errorf("the program has no %s kernel", k)
		}
	}
	if n := strings.Count(string(src.Kernels), "in bfloat16 memory"); n < 5 {
		t.Errorf("%d kernels read or write bfloat16 memory, want the batch norms, ReLUs, sums and the pool around the convolutions", n)
	}
}
