package emit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// Backend is one kind of program `mlbuild compile` can make: what the
// planner needs from it, which targets it builds for, and how its program
// is written. A new backend is a new value in Backends; nothing else in
// mlbuild tests a backend's name.
type Backend struct {
	// Name is the --backend value and app.Meta's Backend.
	Name string
	// Doc is one line for `mlbuild compile --help`.
	Doc string
	// CheckTarget returns an error, for the user, when the backend cannot
	// build for goos/goarch.
	CheckTarget func(goos, goarch string) error
	// Target is what the planner needs to know about this backend: how
	// it computes each convolution and with how much scratch.
	Target planner.Target
	// program writes the program's module.
	program func(in *Input) ([]File, error)
	// gpu is the GPU family of a GPU backend, nil for the CPU.
	gpu *gpuDevice
}

// RenderGPU renders the generated sources of a GPU backend's program (the
// runtime it carries aside), for goldens and tests.
func (b *Backend) RenderGPU(in *Input) (*GPUSources, error) {
	if b.gpu == nil {
		return nil, fmt.Errorf("emit: backend %s is not a GPU backend", b.Name)
	}
	return b.gpu.render(in)
}

// DevicePackage is the device package a GPU backend's programs carry
// ("mps", "cuda"), "" for the CPU.
func (b *Backend) DevicePackage() string {
	if b.gpu == nil {
		return ""
	}
	return b.gpu.pkg
}

func gpuBackend(b *Backend, d *gpuDevice) *Backend {
	d.backend, b.Target.Name = b.Name, b.Name
	b.gpu, b.program = d, d.program
	d.target = b.Target
	return b
}

// PlanOptions returns o with the backend's planning rules set.
func (b *Backend) PlanOptions(o planner.Options) planner.Options {
	o.Target = b.Target
	return o
}

// gpuTarget is a GPU backend's planning rules (gpuBackend names them):
// every convolution, forward or backward, runs as im2col and the device's
// GEMM (method), with scratch(g) of workspace (gpu.ConvScratch), the im2col columns and
// output rows of a round of images (emit/gpu lowers a convolution a round
// at a time).
// A backward pass shares its forward's workspace when one round holds the
// whole batch in at most keepCols float32s: the forward's columns are then
// still there for dW, at the price of keeping them in memory from the
// forward to the backward. Larger columns are gathered again: on an H200,
// CIFAR ResNet-18 at batch 128 then trains in 785 MiB instead of 3.0 GiB,
// 5% slower (docs/benchmarks.md), and below PyTorch's 879 MiB.
// Its optimizer updates up to updateTensors params in one multi-tensor
// kernel, as many as one kernel may bind buffers for (four a tensor).
//
// With a winograd budget (float32s; 0: never), a convolution that one of
// winogradMethods Fits and whose whole batch's workspace fits the budget
// runs as that Winograd algorithm instead: its products are one strided
// batched GEMM of the device (or the products kernel, winograd_products.go).
// A 5×5 layer's backward reads the forward's input transform, kept from the
// forward; a 3×3 layer's does where the workspace is at most keepCols, as
// im2col's columns are kept, and otherwise transforms the input again (one
// pass over x, the cheapest kernel of the step): CIFAR ResNet-18's thirteen
// 3×3 stride-1 layers would keep 1.7 GiB of workspace from the forward to
// the backward at batch 128, where the plan's peak is 0.8 GiB.
//
// With direct set, a forward convolution whose window holds few values
// (gpu.DirectFits: the first layer of an image model) runs as the direct
// kernel; so does its backward when it has no dx (the weight and bias
// gradients in one pass over dy), else its backward gathers its own
// columns.
//
// The direct and Winograd methods take the max pool after them into their
// epilogue where gpu.PoolEpilogue allows, in training plans too, where
// they also write each window's argmax for the pool's backward. The
// softmax cross-entropy computes its rows in parallel into a scratch of
// the rows' losses, which one threadgroup then sums (LossRows). A dense
// layer's backward adds its dx into a gradient sum with the GEMM's beta 1
// where an accumulate step would add it (GemmAccumulate: cuBLAS and MPS
// read C for it, as the accumulate step would have), and so does a layer
// norm's backward, whose kernel reads the sum where it writes dx
// (LayerNormAccumulate).
func gpuTarget(method string, scratch func(planner.ConvGeom) int, keepCols int, updateTensors int, winograd int, direct bool) planner.Target {
	return planner.Target{Conv: func(g planner.ConvGeom, pass planner.ConvPass) planner.ConvChoice {
		for _, wa := range winogradMethods {
			if !wa.Fits(g) || wa == gpu.Winograd3F4 && g.N < winograd3MinBatch {
				continue
			}
			if ws := wa.Scratch(g); ws <= winograd {
				keep := wa == gpu.WinogradF4 || ws <= keepCols
				return planner.ConvChoice{Method: wa.Method, Scratch: ws, SharesForward: pass != planner.ConvForward && keep}
			}
		}
		direct := direct && gpu.DirectFits(g)
		if direct && pass == planner.ConvForward {
			return planner.ConvChoice{Method: gpu.ConvDirectMethod}
		}
		if direct && pass == planner.ConvBackwardNoDx {
			return planner.ConvChoice{Method: gpu.ConvDirectMethod, Scratch: gpu.DirectBwdScratch(g)}
		}
		s := scratch(g)
		return planner.ConvChoice{Method: method, Scratch: s, SharesForward: pass != planner.ConvForward && !direct && s <= keepCols && gpu.ConvOneRound(g, s)}
	}, UpdateTensors: updateTensors, PoolBwdAct: true, PoolEpilogue: gpu.PoolEpilogue, PoolArgmax: true, LossRows: true, Attention: true, GemmAccumulate: true, LayerNormAccumulate: true,
		AccumulateAct: true, FusedReLU: true, ShareSumGrads: true, FoldBatchNorm: true}
}

// winogradMethods are the Winograd algorithms of the GPU targets, one a
// filter size: F(4×4, 5×5) and F(4×4, 3×3).
//
// F(4×4, 3×3) takes every 3×3 stride-1 layer of CIFAR ResNet-18 (64 to 512
// channels, 32×32 down to 4×4 images), the 4×4 images too, by arithmetic
// (the tiles are whole at every size: 4 divides 32, 16, 8 and 4). At batch
// 128 every such layer is 4.83 G multiply-adds a GEMM by im2col (N·H·W·C·
// OC·9, the same at each stage); F(4×4) does a quarter of them in its 36
// products and F(2×2, 3×3) 4/9. What F(4×4) pays for it is its transformed
// filters, 36·C·OC values (U in the forward and the input gradient, M2 in
// the weight gradient), against 16·C·OC for F(2×2); they weigh most at 512
// channels and 4×4 images, one tile an image (128 tiles): there F(4×4)'s
// forward, input and weight gradients do 3 × 36·512²·128 = 3.6 G
// multiply-adds and move about 8 × 38 MB of U-sized data, F(2×2)'s
// 3 × 16·512²·512 = 6.4 G and 8 × 17 MB, im2col's 14.5 G. At the H200's
// 67 TFLOP/s of float32 and 4.8 TB/s that is about 110 + 63 µs for
// F(4×4), 190 + 28 for F(2×2) and 430 for im2col: F(4×4) wherever the
// channels reach winogradMinChannels, and no F(2×2, 3×3). Measured on the
// H200 (docs/runs/gpu-fifteenth-b-2026-11-30.txt): the f32 training step
// 8.29–8.31 ms against im2col's 14.34–14.35, the inference at batch 128
// 2.46 ms against 4.22; but at batch 1 0.39 ms against 0.29, where a
// layer is 1 to 64 tiles (winograd3MinBatch).
var winogradMethods = []*gpu.Winograd{gpu.WinogradF4, gpu.Winograd3F4}

// winograd3MinBatch is the smallest batch whose 3×3 layers run as
// Winograd F(4×4, 3×3): a batch-1 CIFAR ResNet-18 inference took 0.39 ms
// with it and 0.29 with im2col on an H200, batch 128 2.46 against 4.22.
// Between the two it is not measured; 8 images make CIFAR's smallest
// layers 8 tiles.
const winograd3MinBatch = 8

// cudaPrecisions gives t CUDA's precision rules: every dense step, and
// every convolution whose method runs cuBLAS GEMMs (im2col and cuBLAS,
// Winograd's batched products) or cuDNN calls (cudaLibraryConvs), runs in
// the precision the spec asks for, bf16 or tf32, through cublasGemmEx's
// fast compute types (emit/gpu then lowers all its products to GEMMs) or
// cuDNN's (a bf16 plan's cuDNN calls on the bfloat16 tensors that
// gpu.BF16Storage lets the planner keep, tf32 where a tensor stays
// float32: planner/store_bf16.go); the direct convolution kernel runs
// no GEMM and stays f32. The fused attention's products run, in a bf16
// plan, on register fragments with bfloat16 operands
// (gpu.AttentionFragments: any head dimension the fused attention
// takes), in a tf32 plan on tensor tiles with TF32 operands where the
// head dimension allows (gpu.AttentionTiles), else f32. Its bf16 GEMMs read bfloat16
// operands where their producers write them (gpu.BF16Twins; cublasGemmEx
// on CUDA_R_16BF).
func cudaPrecisions(t planner.Target) planner.Target {
	t.BF16 = gpu.BF16Twins
	t.BF16Storage = gpu.BF16Storage
	t.Dense = func(_ int, want string) planner.DenseChoice { return planner.DenseChoice{Precision: want} }
	t.ConvPrecision = func(method, want string) planner.DenseChoice {
		if method == gpu.ConvDirectMethod {
			return planner.DenseChoice{Precision: planner.PrecisionF32, Why: "the direct convolution kernel runs no GEMM: float32 products"}
		}
		// cuDNN multiplies bf16 only on bfloat16 tensors: the planner
		// stores a bf16 plan's convolution tensors in bfloat16 where every
		// step around them can (gpu.BF16Storage), and runs the others'
		// cuDNN calls in tf32 (planner/store_bf16.go).
		return planner.DenseChoice{Precision: want}
	}
	t.AttentionPrecision = func(headDim int, want string) planner.DenseChoice {
		if want == planner.PrecisionBF16 && gpu.AttentionFragments(gpu.CUDA, headDim) {
			return planner.DenseChoice{Precision: want}
		}
		if !gpu.AttentionTiles(gpu.CUDA, headDim) {
			return planner.DenseChoice{Precision: planner.PrecisionF32, Why: fmt.Sprintf("head dimension %d is not a multiple of 8, the tensor tiles' depth: float32 products", headDim)}
		}
		return planner.DenseChoice{Precision: want}
	}
	return t
}

// cudaIm2col is the CUDA target's im2col and cuBLAS method.
const cudaIm2col = "im2col+cublas"

// cudaLibraryConvs gives t CUDA's library convolutions where they
// measured faster: a convolution that t's rule runs as im2col and cuBLAS
// GEMMs runs instead as cuDNN calls (gpu.ConvLibraryMethod, lowered by
// emit/gpu's conv_library.go), which read the tensors in place (no
// im2col columns, no col2im, no scratch from the plan), in tf32 and bf16
// plans, and stays on im2col in f32 plans. So does a 3×3 layer that the
// rule runs as Winograd F(4×4, 3×3): cuDNN in tf32 and bf16 plans (the
// layers and the reasons are im2col's: Winograd's products are float32),
// Winograd in f32. The direct and 5×5 Winograd methods stay (they fold a
// max pool into their epilogue, and the direct kernel takes the first
// layer's few channels), except in bf16 an RGB image's 3×3 first layer,
// which cuDNN runs faster on the input cast to bfloat16 channels last
// (docs/runs/gpu-fourteenth-stem-2026-11-30.txt). The library's choice
// comes before the max pool's fusion (planner/fuse_pool.go), so a pool
// after a 3×3 layer that cuDNN takes stays a step of its own.
//
// The choice is the measurement's (docs/cuda.md, "cuDNN or im2col"): a
// CIFAR ResNet-18 training step at batch 128 on an H200 took 15.0 ms with
// f32 im2col and cuBLAS against 19.08 ms with cuDNN in f32
// (CUDNN_FMA_MATH; float32 products, as im2col's), 8.6 ms with tf32
// im2col against 6.24 ms with cuDNN's tf32, and 7.58 ms with bf16
// im2col (cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF), when a bf16 plan's
// cuDNN calls ran in tf32 on float32 tensors. cuDNN multiplies bfloat16
// only on bfloat16 tensors, which the planner now keeps where it can
// (planner/store_bf16.go): 4.17 ms against 6.25 for the same program
// with its cuDNN calls in tf32 (docs/benchmarks.md, "Twelfth session");
// the others still run in tf32.
func cudaLibraryConvs(t planner.Target) planner.Target {
	// cuDNN's fused call adds the folded batch norm's bias, a residual
	// and the ReLU in the convolution's epilogue (emit/gpu's
	// conv_library.go).
	t.ConvSum = map[string]bool{gpu.ConvLibraryMethod: true}
	// A bf16 plan's channels-last batch norms add a ResNet block's
	// shortcut in their apply kernel (emit/gpu's batchNormSumNHWCKernel;
	// other layouts keep the sum's kernel, after the batch norm's).
	t.NormSum = map[string]bool{planner.PrecisionBF16: true}
	t.ConvLibrary = func(g planner.ConvGeom, c planner.ConvChoice, precision string) (planner.ConvChoice, planner.LibraryWhy) {
		if c.Method == gpu.ConvDirectMethod && precision == planner.PrecisionBF16 && g.C/max(g.Groups, 1) >= 3 && g.KH == 3 && g.KW == 3 {
			// an RGB image's first layer: the plan casts its input to
			// bfloat16 channels last for it (planner/cast_input.go)
			return planner.ConvChoice{Method: gpu.ConvLibraryMethod}, planner.LibraryWhy{Taken: true,
				Reason: "cuDNN's calls on the input cast to bfloat16: CIFAR ResNet-18's stem 43.8 µs forward and 56.6 weight gradient on an H200, 77 and 137 with the direct kernels"}
		}
		if c.Method == gpu.Winograd3F4.Method && precision == planner.PrecisionF32 {
			return c, planner.LibraryWhy{Reason: "Winograd F(4x4,3x3) does a quarter of im2col's float32 products (not yet measured against cuDNN's)"}
		}
		if c.Method != cudaIm2col && c.Method != gpu.Winograd3F4.Method {
			return c, planner.LibraryWhy{}
		}
		switch precision {
		case planner.PrecisionTF32:
			return planner.ConvChoice{Method: gpu.ConvLibraryMethod}, planner.LibraryWhy{Taken: true,
				Reason: "cuDNN's tf32 calls on the tensors in place (no im2col columns, no col2im): a CIFAR ResNet-18 step 6.24 ms on an H200, 8.6 ms with tf32 im2col"}
		case planner.PrecisionBF16:
			return planner.ConvChoice{Method: gpu.ConvLibraryMethod}, planner.LibraryWhy{Taken: true,
				Reason: "cuDNN's calls on the bfloat16 tensors the plan stores (tf32 where one stays float32): a CIFAR ResNet-18 step 4.17 ms on an H200, 6.25 ms with cuDNN's tf32 on float32 tensors, 7.58 ms with bf16 im2col"}
		}
		return c, planner.LibraryWhy{Reason: "im2col and cuBLAS measured faster in f32: a CIFAR ResNet-18 step 15.0 ms on an H200, 19.08 ms with cuDNN's float32 products"}
	}
	return t
}

// metalPrecisions says why every step of a Metal plan stays f32.
func metalPrecisions(t planner.Target) planner.Target {
	t.F32Why = "the Metal backend's MPS matrices are float32: float32 products"
	return t
}

// The backends.
var (
	CPU = &Backend{
		Name:        "cpu",
		Doc:         "a pure-Go program for the CPU of any Go target",
		CheckTarget: func(goos, goarch string) error { return nil },
		Target:      planner.CPU,
		program:     cpuProgram,
	}
	Metal = gpuBackend(&Backend{
		Name: "metal",
		Doc:  "Apple GPUs: MPS GEMMs and generated Metal kernels (darwin/arm64)",
		CheckTarget: func(goos, goarch string) error {
			if goos != "darwin" {
				return fmt.Errorf("--backend metal builds for Apple GPUs, which only macOS drives, but --target is %s/%s; use --target darwin/arm64 (from any OS), or --backend cpu for %s/%s", goos, goarch, goos, goarch)
			}
			return nil
		},
		Target: metalPrecisions(gpuTarget("im2col+mps", gpu.ConvScratch, 1<<22, gpu.UpdateTensors(gpu.Metal), 0, false)), // 64 MiB rounds: unified memory shared with the system; columns of 16 MiB kept for the backward
	}, &gpuDevice{dialect: gpu.Metal, pkg: "mps", fake: "fakemetal", about: []string{
		"the plans' GEMMs run on MPSMatrixMultiplication and every other op on a",
		"Metal kernel generated for its constant shapes (kernels.go), all recorded",
		"by rt/gpuhost into one command buffer per training step; each step also",
		"has its CPU reference, which selftest compares with the GPU. Run it with",
		"no arguments for its commands."}})
	CUDA = gpuBackend(&Backend{
		Name: "cuda",
		Doc:  "NVIDIA GPUs: cuBLAS GEMMs and generated CUDA kernels, one CUDA graph per training step (linux/amd64, linux/arm64)",
		CheckTarget: func(goos, goarch string) error {
			if goos != "linux" || (goarch != "amd64" && goarch != "arm64") {
				return fmt.Errorf("--backend cuda builds for NVIDIA GPUs on Linux, but --target is %s/%s; use --target linux/amd64 or linux/arm64, or --backend cpu for %s/%s", goos, goarch, goos, goarch)
			}
			return nil
		},
		Target: cudaLibraryConvs(cudaPrecisions(gpuTarget(cudaIm2col, gpu.ConvScratchWithin(1<<26), 1<<22, gpu.UpdateTensors(gpu.CUDA), 1<<27, true))), // 256 MiB rounds: a batch of MNIST images in one GEMM; columns of 16 MiB kept for the backward; Winograd 5×5 convolutions within 512 MiB
	}, &gpuDevice{dialect: gpu.CUDA, pkg: "cuda", fake: "fakecuda", replicas: []int{2, 4, 8}, openReplicas: "OpenHostReplicas", about: []string{
		"the plans' GEMMs run on cuBLAS and every other op on a CUDA kernel",
		"generated for its constant shapes (kernels.go, compiled by NVRTC at the",
		"first run and cached); rt/gpuhost records a training step as one CUDA",
		"graph and keeps the training set on the GPU. Each step also has its CPU",
		"reference, which selftest compares with the GPU. Run it with no arguments",
		"for its commands."}})
)

// Backends lists every backend, in the order help shows them.
var Backends = []*Backend{CPU, Metal, CUDA}

// LookupBackend finds a backend by name.
func LookupBackend(name string) (*Backend, error) {
	for _, b := range Backends {
		if b.Name == name {
			return b, nil
		}
	}
	return nil, fmt.Errorf("unknown --backend %q; available: %s", name, BackendNames())
}

// BackendNames lists the backends' names, for messages.
func BackendNames() string {
	var names []string
	for _, b := range Backends {
		names = append(names, b.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
