package emit

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

// inputFor loads a spec and plans it as `mlbuild compile` does.
func inputFor(t *testing.T, file string, fusion bool) *Input {
	t.Helper()
	m, err := spec.Load(file)
	if err != nil {
		t.Fatalf("loading %s: %v", file, err)
	}
	var plans []*planner.Plan
	for _, o := range []planner.Options{{Training: true, Fusion: fusion}, {Fusion: fusion}, {Fusion: fusion, Batch: 1}} {
		p, err := planner.Build(m, o)
		if err != nil {
			t.Fatalf("planning %s: %v", file, err)
		}
		plans = append(plans, p)
	}
	return &Input{Model: m, Train: plans[0], Infer: plans[1], Infer1: plans[2], Backend: "cpu", Version: "golden"}
}

// TestMNISTGolden keeps the generated program for the flagship spec as a
// golden file, reviewed like code. MLBUILD_UPDATE=1 rewrites it.
func TestMNISTGolden(t *testing.T) {
	src, err := ModelSource(inputFor(t, "../models/mnist.cue", true))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "mnist.go.golden")
	if os.Getenv("MLBUILD_UPDATE") != "" {
		if err := os.WriteFile(golden, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
	}
	if !bytes.Equal(src, want) {
		t.Errorf("generated source for models/mnist.cue differs from %s; review the diff and rerun with MLBUILD_UPDATE=1", golden)
	}
}

// TestBF16MLPGolden keeps the generated program of the benchmark MLP with
// bf16 products (bench/models/mlp_bf16.cue) as a golden file.
func TestBF16MLPGolden(t *testing.T) {
	src, err := ModelSource(inputFor(t, "../bench/models/mlp_bf16.cue", true))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, ".", "mlp_bf16.go.golden", src)
}

// TestBF16Calls: a bf16 spec's program calls cpu.BF16's dense kernels (by
// bf16Dense, which its gradient check sets to cpu.FP32) in its training
// plan, cpu.BF16Inference's (packed weights kept) in its batch inference
// plan, and the float32 ones at batch 1, and says in `info` how this CPU runs bf16; the same model in f32
// calls the float32 kernels only and says nothing of bf16. Metal's plans
// keep f32 (its MPS matrices are float32); CUDA's run bf16.
func TestBF16Calls(t *testing.T) {
	bf, err := ModelSource(inputFor(t, "../bench/models/mlp_bf16.cue", true))
	if err != nil {
		t.Fatal(err)
	}
	f32, err := ModelSource(inputFor(t, "../bench/models/mlp.cue", true))
	if err != nil {
		t.Fatal(err)
	}
	count := func(src []byte, call string) int { return strings.Count(string(src), call+"(") }
	if n := count(bf, "bf16Dense.GemmBwd"); n != 3 || count(bf, "cpu.GemmBwd") != 0 {
		t.Errorf("bf16 program: %d cpu.BF16.GemmBwd and %d cpu.GemmBwd calls, want 3 and 0", n, count(bf, "cpu.GemmBwd"))
	}
	// The batch-1 plan's three layers stay f32; every other forward is bf16.
	if n := count(bf, "cpu.GemmFwd"); n != 3 {
		t.Errorf("bf16 program: %d cpu.GemmFwd calls, want 3 (the batch-1 plan)", n)
	}
	if n, all := count(bf, "bf16Dense.GemmFwd"), count(f32, "cpu.GemmFwd"); n != 3 || all != 9 {
		t.Errorf("bf16 program: %d bf16Dense.GemmFwd calls, want 3 (the training plan's; the f32 program has %d forward calls, want 9)", n, all)
	}
	if n := count(bf, "cpu.BF16Inference.GemmFwd"); n != 3 {
		t.Errorf("bf16 program: %d cpu.BF16Inference.GemmFwd calls, want 3 (the batch-250 inference plan's)", n)
	}
	if n := strings.Count(string(bf), "app.DenseCheck("); n != 3 {
		t.Errorf("the bf16 program's selftest checks %d dense layers in bf16, want 3", n)
	}
	if !strings.Contains(string(bf), "var bf16Dense = cpu.BF16\n") || !strings.Contains(string(bf), "return append(gradCheckF32(m), ") {
		t.Errorf("the bf16 program's dense steps do not run on cpu.BF16, or its gradient check is not in f32")
	}
	if strings.Contains(string(f32), "BF16") || strings.Contains(string(f32), "bf16") || strings.Contains(string(f32), "DeviceFacts") {
		t.Errorf("the f32 program mentions bf16")
	}
	if !strings.Contains(string(bf), "func (model) DeviceFacts() [][2]string {") || !strings.Contains(string(bf), "cpu.BF16Hardware()") {
		t.Errorf("the bf16 program does not tell `info` how bf16 runs")
	}

	m, err := spec.Load("../bench/models/mlp_bf16.cue")
	if err != nil {
		t.Fatal(err)
	}
	// Metal keeps f32 and says why; CUDA runs every dense step in bf16.
	for _, c := range []struct {
		b      *Backend
		want   string
		listed int
	}{{Metal, planner.PrecisionF32, 6}, {CUDA, planner.PrecisionBF16, 0}} {
		p, err := planner.Build(m, c.b.PlanOptions(planner.Options{Batch: 1, Training: true, Fusion: true}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ph := range []planner.Phase{p.Forward, p.Backward} {
			for _, st := range ph {
				if (st.Kernel == planner.KGemm || st.Kernel == planner.KGemmBwd) && st.Attr.Precision != c.want {
					t.Errorf("%s: %s %s in %q, want %s", c.b.Name, st.Kernel, st.Layer, st.Attr.Precision, c.want)
				}
			}
		}
		if len(p.Precisions) != c.listed {
			t.Errorf("%s: %d steps listed as left at f32, want %d: %q", c.b.Name, len(p.Precisions), c.listed, p.Precisions)
		}
	}
}

// TestCUDABF16Program: the CUDA program of a bf16 spec runs every GEMM of
// its dense steps in bf16 (each gemmShape names gpuhost.PrecisionBF16),
// the classifier's forward included, which an f32 program runs as the
// float32 dense_dot kernel instead of a GEMM; the CPU references stay
// f32. Its main.go is a golden file.
func TestCUDABF16Program(t *testing.T) {
	bf, err := CUDA.RenderGPU(backendInput(t, CUDA, "../bench/models/mlp_bf16.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	f32, err := CUDA.RenderGPU(backendInput(t, CUDA, "../bench/models/mlp.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	src := string(bf.Main)
	shapes := strings.Count(src, "gemmShape{TransA")
	if n := strings.Count(src, "Precision: gpuhost.PrecisionBF16}"); n == 0 || n != shapes {
		t.Errorf("%d of %d GEMM shapes in bf16, want all", n, shapes)
	}
	if strings.Contains(bf.KernelSource, "dense_dot") || !strings.Contains(f32.KernelSource, "dense_dot") {
		t.Errorf("dense_dot kernels: in the bf16 program %v, in the f32 one %v; want only the f32 one's",
			strings.Contains(bf.KernelSource, "dense_dot"), strings.Contains(f32.KernelSource, "dense_dot"))
	}
	if strings.Contains(string(f32.Main), "Precision") || strings.Contains(src, "BF16.Gemm") || strings.Contains(src, "bf16Dense") {
		t.Errorf("the f32 program names a precision, or the bf16 program's CPU references are not f32")
	}
	checkGolden(t, "cuda", "mlp_bf16.main.go.golden", bf.Main)
}

// TestDeterministic renders twice and compares: generated names must not
// depend on map order.
func TestDeterministic(t *testing.T) {
	a, err := ModelSource(inputFor(t, "../models/mnist.cue", false))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b, err := ModelSource(inputFor(t, "../models/mnist.cue", false))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatal("two renders of the same plan differ")
		}
	}
}

// TestEveryValidSpecRenders renders every legal spec of the test suite, with
// and without fusion, and checks each buffer is declared with its size.
func TestEveryValidSpecRenders(t *testing.T) {
	files, _ := filepath.Glob("../testdata/specs/valid/*.cue")
	if len(files) == 0 {
		t.Fatal("no valid specs found in ../testdata/specs/valid")
	}
	for _, f := range files {
		for _, fusion := range []bool{true, false} {
			in := inputFor(t, f, fusion)
			src, err := ModelSource(in)
			if err != nil {
				t.Errorf("%s (fusion %v): %v", f, fusion, err)
				continue
			}
			for _, b := range in.Train.Buffers {
				if !bytes.Contains(src, []byte("(*["+strconv.Itoa(b.Size)+"]float32)")) {
					t.Errorf("%s: buffer %s of %d elements is not declared with its size", f, b.Name, b.Size)
				}
			}
		}
	}
}

// TestCommentsCannotInject feeds hostile text to the comment filter.
func TestCommentsCannotInject(t *testing.T) {
	for _, s := range []string{"a\n}\nfunc evil() {", "x */ y", "//go:generate rm -rf /", "\u2028", "`"} {
		c := comment(s)
		if strings.ContainsAny(c, "\n\r`{}*\u2028") {
			t.Errorf("comment(%q) = %q still holds dangerous characters", s, c)
		}
	}
}
