package emit

import (
	"debug/macho"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// metalProgramSpecs are the specs whose Metal programs the evidence tests
// build: the flagship spec (with and without fusion) and every valid spec.
func metalProgramSpecs(t *testing.T) map[string]struct {
	file   string
	fusion bool
} {
	specs := map[string]struct {
		file   string
		fusion bool
	}{
		"mnist":         {"../models/mnist.cue", true},
		"mnist_unfused": {"../models/mnist.cue", false},
		// Mixed precision: CUDA runs its GEMMs in bf16 (Metal in f32).
		"bench_mlp_bf16": {"../bench/models/mlp_bf16.cue", true},
		// CUDA's dense layers read the bfloat16 twins that layer norm and
		// the optimizer write (planner/twin_operands.go).
		"gpt_tiny_bf16": {"../testdata/specs/bf16/gpt_tiny_bf16.cue", true},
		// CUDA runs its convolutions past the first through cuDNN in tf32
		// (f32 plans keep im2col): the generated program's library
		// convolutions on the fake cuDNN.
		"convnet_bf16": {"../testdata/specs/bf16/convnet_bf16.cue", true},
		// CUDA stores its activations and gradients in bfloat16 around
		// cuDNN convolutions in bf16 (planner/store_bf16.go): the rewritten
		// kernels and the fake cuDNN's bfloat16 products.
		"resnet_tiny_bf16": {"../testdata/specs/bf16/resnet_tiny_bf16.cue", true},
		// CUDA runs its 3×3 stride-1 convolutions past the stem as
		// Winograd F(4×4,3×3) in f32 (Metal as im2col).
		"resnet_tiny": {"testdata/resnet_tiny.cue", true},
		// Unfused, its inference plans fold no batch norm: their
		// channels-last convolutions read the weights' KRSC twins, which
		// the training plan's updates and the host write
		// (planner/store_channels_last.go).
		"resnet_tiny_bf16_unfused": {"../testdata/specs/bf16/resnet_tiny_bf16.cue", false},
		// The GPU plans' dense backward adds its dx into a gradient sum
		// (planner/fuse_accumulate_gemm.go), in place and moved down.
		"accumulate_gemm": {"testdata/accumulate_gemm.cue", true},
		// Attention unfused, its softmax masking padding: the padded
		// softmax kernel (the fused attention's is spec_gpt_tiny_pad).
		"gpt_tiny_pad_unfused": {"../testdata/specs/valid/gpt_tiny_pad.cue", false},
		// The padded attention in bf16: on CUDA the fragment kernels,
		// their twins bound after the token ids.
		"gpt_tiny_pad_bf16": {"../testdata/specs/bf16/gpt_tiny_pad_bf16.cue", true},
	}
	valid, err := filepath.Glob("../testdata/specs/valid/*.cue")
	if err != nil || len(valid) == 0 {
		t.Fatalf("no valid specs found (%v)", err)
	}
	for _, f := range valid {
		name := "spec_" + strings.TrimSuffix(filepath.Base(f), ".cue")
		specs[name] = struct {
			file   string
			fusion bool
		}{f, true}
	}
	return specs
}

// largeSpecs are specs gpuModule builds only when named (by
// MLBUILD_CUDA_FAKE_SPECS): models whose programs take minutes on a fake.
var largeSpecs = map[string]struct {
	file   string
	fusion bool
}{
	"bench_resnet18_cifar_bf16": {"../bench/models/resnet18_cifar_bf16.cue", true},
	// f32: its 3×3 stride-1 layers by Winograd F(4×4,3×3) on CUDA
	"bench_resnet18_cifar": {"../bench/models/resnet18_cifar.cue", true},
}

// metalModule writes one Go module holding the Metal program of every spec
// as its own main package under cmd/NAME (see gpuModule), each with the
// fake test of testdata/fakehost/metal_test.go, and returns their names.
func metalModule(t *testing.T, dir string, batch int) []string {
	t.Helper()
	var names []string
	for name := range metalProgramSpecs(t) {
		names = append(names, name)
	}
	sort.Strings(names)
	gpuModule(t, Metal, dir, batch, names)
	return names
}

// gpuModule writes one Go module holding backend b's program of each named
// spec as its own main package under cmd/NAME, sharing one copy of the
// runtime and of the device package (with its fake), so one `go build` and
// one `go test` cover them all. Each package also gets fake_test.go, from
// testdata/fakehost/<backend>_test.go, which runs the program's tables on
// the device's fake.
func gpuModule(t *testing.T, b *Backend, dir string, batch int, names []string) {
	t.Helper()
	specs := metalProgramSpecs(t)
	fakeTest, err := os.ReadFile(filepath.Join("testdata", "fakehost", b.Name+"_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var shared []File
	for _, name := range names {
		s, ok := specs[name]
		if !ok {
			s, ok = largeSpecs[name]
		}
		if !ok {
			t.Fatalf("no spec %s", name)
		}
		files, err := b.program(backendInput(t, b, s.file, s.fusion, batch))
		if err != nil {
			t.Fatalf("%s (%s): %v", name, s.file, err)
		}
		for _, f := range files {
			switch f.Path {
			case "main.go", "kernels.go":
				writeModule(t, dir, []File{{Path: "cmd/" + name + "/" + f.Path, Data: f.Data}})
			}
		}
		writeModule(t, dir, []File{{Path: "cmd/" + name + "/fake_test.go", Data: fakeTest}})
		for _, c := range []struct {
			specs      []string
			file, path string
		}{{cudaFaultSpecs, "cuda_fault_test.go", "fault_test.go"}, {cudaTextSpecs, "cuda_text_test.go", "text_test.go"}} {
			if b != CUDA || !slices.Contains(c.specs, name) {
				continue
			}
			for _, f := range []struct{ from, to string }{{c.file, c.path}, {"cuda_main_test.go", "main_test.go"}} {
				data, err := os.ReadFile(filepath.Join("testdata", "fakehost", f.from))
				if err != nil {
					t.Fatal(err)
				}
				writeModule(t, dir, []File{{Path: "cmd/" + name + "/" + f.to, Data: data}})
			}
		}
		if shared == nil {
			shared = files
		}
	}
	fake, err := b.DeviceFiles(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(shared, fake...) {
		switch f.Path {
		case "main.go", "kernels.go":
		default:
			writeModule(t, dir, []File{f})
		}
	}
}

// goEnv is the environment `mlbuild compile` builds generated programs in,
// with an empty module cache of its own: the programs build from what
// mlbuild carries (their vendor/ folder), never from a cache that happens
// to hold their dependencies. Every go command run in it takes -trimpath,
// as mlbuild compile's does: without it the go command keys each package
// of a module on its folder, so every temporary module compiled the whole
// runtime (rt/..., cuda, the vendored modules) again, about 12 s of CPU a
// module with a warm build cache; with it the modules of
// TestMetalPrograms, TestCUDAPrograms and TestCUDADataParallel and the
// cross-build for linux/amd64 share one compile of each package.
func goEnv(t *testing.T, goos, goarch string) []string {
	return append(append(os.Environ(), BuildEnv([]File{{Path: "vendor/modules.txt"}}, goos, goarch)...), "GOMODCACHE="+t.TempDir())
}

// TestMetalPrograms is the evidence without a Mac: the Metal programs of
// models/mnist.cue (fused and unfused) and of every valid spec
// cross-compile to Mach-O arm64 executables, and each program's host code
// runs a training step, both inference plans and the GEMM selftest on the
// recording fake (at a small batch) of Metal with its protocol checks passing.
func TestMetalPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every generated Metal program")
	}
	t.Run("darwin-arm64", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		names := metalModule(t, dir, 0)
		out := t.TempDir()
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out+string(filepath.Separator), "./cmd/...")
		cmd.Dir = dir
		cmd.Env = goEnv(t, "darwin", "arm64")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cross-compiling the Metal programs for darwin/arm64: %v\n%s", err, b)
		}
		for _, name := range names {
			f, err := macho.Open(filepath.Join(out, name))
			if err != nil {
				t.Errorf("%s: not a Mach-O file: %v", name, err)
				continue
			}
			if f.Cpu != macho.CpuArm64 || f.Type != macho.TypeExec {
				t.Errorf("%s: Mach-O cpu %v type %v, want arm64 executable", name, f.Cpu, f.Type)
			}
			f.Close()
		}
	})
	t.Run("fake", func(t *testing.T) {
		// The fake computes GEMMs in plain Go, so the host code runs here
		// on the same programs planned at batch 3 (awkward for every
		// threadgroup size); only the tables' numbers differ.
		t.Parallel()
		dir := t.TempDir()
		names := metalModule(t, dir, 3)
		cmd := exec.Command("go", "test", "-trimpath", "-count=1", "./cmd/...")
		cmd.Dir = dir
		cmd.Env = goEnv(t, goHost("GOOS"), goHost("GOARCH"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the generated host code failed on the fake: %v\n%s", err, b)
		}
		for _, name := range names {
			if !strings.Contains(string(b), "ok  \tmlbuildprog/cmd/"+name) {
				t.Errorf("no passing test run for %s in:\n%s", name, b)
			}
		}
		if testing.Verbose() {
			t.Logf("%s", b)
		}
	})
}

func goHost(v string) string {
	b, err := exec.Command("go", "env", v).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// TestCUDAPrograms is the CUDA backend's evidence without a GPU: the CUDA
// programs of every valid spec cross-compile for linux/amd64 and
// linux/arm64 (CGO_ENABLED=0), and the programs of the flagship (fused and
// unfused) and of specs that exercise dropout, batch norm and the other
// kernels run on cuda/fakecuda, which computes every kernel and GEMM:
// selftest, three training steps against the CPU backend's kernels, and
// device-resident training against host-fed training.
func TestCUDAPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every generated CUDA program")
	}
	var all []string
	for name := range metalProgramSpecs(t) {
		all = append(all, name)
	}
	sort.Strings(all)
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run("linux-"+arch, func(t *testing.T) {
			dir := t.TempDir()
			gpuModule(t, CUDA, dir, 0, all)
			out := t.TempDir()
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out+string(filepath.Separator), "./cmd/...")
			cmd.Dir = dir
			cmd.Env = goEnv(t, "linux", arch)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("compiling the CUDA programs for linux/%s: %v\n%s", arch, err, b)
			}
			for _, name := range all {
				if _, err := os.Stat(filepath.Join(out, name)); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
	t.Run("fake", func(t *testing.T) {
		names := strings.Fields(os.Getenv("MLBUILD_CUDA_FAKE_SPECS"))
		if len(names) == 0 {
			names = cudaFakeSpecs
		}
		dir := t.TempDir()
		if keep := os.Getenv("MLBUILD_CUDA_FAKE_DIR"); keep != "" {
			dir = keep
		}
		gpuModule(t, CUDA, dir, 3, names)
		args := []string{"test", "-trimpath", "-count=1", "-timeout=30m"}
		if run := os.Getenv("MLBUILD_CUDA_FAKE_RUN"); run != "" {
			args = append(args, "-v", "-run", run) // e.g. TestSelftestOnFakeCUDA alone for a large model
		}
		// The programs' TestFaultMidTraining trains on real MNIST (make data).
		b := goTestOnFakeCUDA(t, dir, args, "./cmd/...", "the CUDA programs failed on the fake GPU")
		for _, name := range names {
			if !strings.Contains(string(b), "ok  \tmlbuildprog/cmd/"+name) {
				t.Errorf("no passing test run for %s in:\n%s", name, b)
			}
		}
		if testing.Verbose() {
			t.Logf("%s", b)
		}
	})
}

// cudaFakeSpecs are the programs run on the fake GPU in CI (each compiles
// its kernels with g++): the flagship fused and unfused, and the spec with
// layer normalisation, reducemean, div, powconst, sqrt and erf, and the
// transformer block (dense layers on [tokens, features], matmul of two
// values over heads, transpose, softmax over the last of three axes), and
// batch norm (its selftest compared inference outputs the GPU never
// writes, which a discrete device, as the fake is, shows), and the
// benchmark MLP in bf16 (every GEMM through cublasGemmEx's bf16 compute
// type, which the fake computes with rounded operands), the U-Net-like
// graph of nearest and bilinear resizes (their kernels forward and
// backward in a whole program), and AdamW with gradient clipping (the
// clipping kernels, a weight decayed and a bias not in one multi-tensor
// update), the tiny GPT (the embedding's gather and its
// scatter-add backward with learned positions, causal softmax, dropout,
// GELU, per-token cross-entropy, a head tied to the embedding), the
// tiny GPT whose attention masks padding, fused and not, and in bf16
// (the padded attention, on register fragments in bf16, and softmax
// against rt/cpu's, fed padding ids by seeded in cuda_test.go), and
// gradient accumulation (micro-batches through Gradients, then the mean
// in the update), and the tiny GPT in bf16 (its dense layers reading the
// bfloat16 twins that layer norm and the optimizer write), a small
// convolutional network in bf16 (its convolutions through the fake cuDNN
// in tf32, as f32 plans keep im2col), the tiny ResNet in bf16 (cuDNN on
// bfloat16 channels-last tensors, reading the weights' KRSC twins in
// training; resnet_tiny_bf16_unfused, whose inference plans read them
// too, and resnet_tiny, a small f32 ResNet whose 3×3 layers run as
// Winograd F(4×4,3×3), run when named, as make test-fake-long does: CI's
// time), and values
// read by a dense layer and an activation in both orders (the dense
// backward adding its dx into the gradient sum,
// Beta 1); set
// MLBUILD_CUDA_FAKE_SPECS to run others (`go test ./emit -run CUDAPrograms`)
// and MLBUILD_CUDA_FAKE_RUN to run only the programs' tests it matches
// (ResNet-18's training steps take minutes on the fake's Go GEMMs);
// MLBUILD_CUDA_FAKE_DIR keeps the module in that folder, to run and time
// its tests by hand.
var cudaFakeSpecs = []string{"mnist", "mnist_unfused", "spec_layernorm_graph", "spec_transformer_block", "spec_batchnorm_dense", "bench_mlp_bf16", "spec_resize_unet", "spec_adamw_cosine", "spec_gpt_tiny", "spec_gpt_tiny_pad", "gpt_tiny_pad_unfused", "spec_accumulate", "gpt_tiny_bf16", "gpt_tiny_pad_bf16", "convnet_bf16", "resnet_tiny_bf16", "accumulate_gemm"}

// cudaFaultSpecs are the programs whose fake run also trains on MNIST
// through a GPU fault (testdata/fakehost/cuda_fault_test.go).
var cudaFaultSpecs = []string{"mnist", "mnist_unfused"}

// cudaTextSpecs are the programs whose fake run also trains on Moby-Dick
// with the text kept on the device and fed from the host
// (testdata/fakehost/cuda_text_test.go).
var cudaTextSpecs = []string{"spec_gpt_tiny", "spec_gpt_tiny_pad"}

// goTestOnFakeCUDA runs `go ARGS PKGS` in the generated module dir, whose
// programs run on cuda/fakecuda's GPUs (kernel cache in a temporary
// folder) and train on MNIST from $MLBUILD_MNIST_DIR or data/mnist (make
// data), and returns the output; a failure fails t with what, the error
// and the output.
func goTestOnFakeCUDA(t *testing.T, dir string, args []string, pkgs, what string) []byte {
	t.Helper()
	cmd := exec.Command("go", append(args, pkgs)...)
	cmd.Dir = dir
	mnist := os.Getenv("MLBUILD_MNIST_DIR")
	if mnist == "" {
		mnist, _ = filepath.Abs(filepath.Join("..", "data", "mnist"))
	}
	text := os.Getenv("MLBUILD_TEXT_DIR")
	if text == "" {
		text, _ = filepath.Abs(filepath.Join("..", "data", "text"))
	}
	cmd.Env = append(goEnv(t, goHost("GOOS"), goHost("GOARCH")), "MLBUILD_FAKECUDA_DIR="+t.TempDir(), "MLBUILD_MNIST_DIR="+mnist, "MLBUILD_TEXT_DIR="+text)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b)
	}
	return b
}
