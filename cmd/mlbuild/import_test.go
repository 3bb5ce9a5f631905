package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/mlbuild/mlbuild/emit"
	"github.com/mlbuild/mlbuild/onnx"
	"github.com/mlbuild/mlbuild/rt/npy"
	"github.com/mlbuild/mlbuild/rt/safetensors"
	"github.com/mlbuild/mlbuild/spec"
)

// onnxTestData is where Debian's libonnx-testdata puts the ONNX project's
// backend test suite; `make deps` installs it.
const onnxTestData = "/usr/share/libonnx-testdata/data"

func onnxSuite(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MLBUILD_ONNX_TESTDATA")
	if dir == "" {
		dir = onnxTestData
	}
	if _, err := os.Stat(filepath.Join(dir, "node")); err != nil {
		t.Fatalf("ONNX's backend test data is not in %s: run `make deps` (it installs Debian's libonnx-testdata) or set MLBUILD_ONNX_TESTDATA: %v", dir, err)
	}
	return dir
}

// TestImportWritesSpecAndWeights imports a PyTorch-exported convolution and
// checks both files: the spec loads, its layer has the imported geometry,
// and the weights file holds the ONNX initializers under mlbuild's names.
func TestImportWritesSpecAndWeights(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := mlbuild(t, "import", "../../testdata/onnx/test_Conv2d.onnx", "-o", out, "--name", "conv")
	if code != 0 {
		t.Fatalf("import exited %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "#0    Conv  conv2d1") || !strings.Contains(stderr, "fixed batch of 2") {
		t.Errorf("mapping or warning missing:\n%s\n%s", stdout, stderr)
	}
	m, err := spec.Load(filepath.Join(out, "conv.cue"))
	if err != nil {
		t.Fatal(err)
	}
	n := m.Node("conv2d1")
	if n == nil || n.Kernel != [2]int{3, 2} || !slices.Equal(n.OutShape, []int{4, 5, 4}) {
		t.Fatalf("conv2d1: %+v", n)
	}
	f, err := safetensors.Read(filepath.Join(out, "conv.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := onnx.ReadFile("../../testdata/onnx/test_Conv2d.onnx")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := src.Graph.Initializers[0].Float32s()
	w, ok := f.Tensor("conv2d1.weight")
	if !ok || !slices.Equal(w.Shape, []int{4, 3, 3, 2}) || !slices.Equal(w.Data, want) {
		t.Errorf("conv2d1.weight: %+v", w)
	}
	if _, ok := f.Tensor("conv2d1.bias"); !ok {
		t.Errorf("conv2d1.bias missing")
	}

	// A second import refuses to replace the files without --force.
	if code, _, stderr := mlbuild(t, "import", "../../testdata/onnx/test_Conv2d.onnx", "-o", out, "--name", "conv"); code != ExitIO || !strings.Contains(stderr, "--force") {
		t.Errorf("second import: exit %d, %s", code, stderr)
	}
}

// TestImportRejects: a hostile file exits 2 with the decoder's message; a
// model with ops mlbuild lacks exits 1 with a report naming each node.
func TestImportRejects(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../../testdata/onnx/test_Linear.onnx")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "truncated.onnx")
	os.WriteFile(bad, good[:len(good)-7], 0o644)
	code, _, stderr := mlbuild(t, "import", bad, "-o", dir)
	if code != ExitUnreadableModel || !strings.Contains(stderr, "truncated.onnx: byte 19: length 562") || !strings.Contains(stderr, "runs past the end") {
		t.Errorf("truncated file: exit %d, %s", code, stderr)
	}
	code, _, stderr = mlbuild(t, "import", filepath.Join(dir, "missing.onnx"))
	if code != ExitUnreadableModel {
		t.Errorf("missing file: exit %d, %s", code, stderr)
	}
	for file, want := range map[string]string{
		"external-escapes.onnx": `tensor "w": external data "../../../../etc/passwd": the location leaves the model's folder`,
		"huge-dims.onnx":        `graph.initializer[0] (byte 10): tensor "w": dimensions [1048576 1048576 1048576] hold more than 2147483648 elements`,
	} {
		code, _, stderr = mlbuild(t, "import", filepath.Join("../../testdata/onnx/hostile", file), "-o", dir)
		if code != ExitUnreadableModel || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %s", file, code, stderr)
		}
	}

	code, _, stderr = mlbuild(t, "import", "../../testdata/onnx/test_Linear.onnx", "--name", "1bad-name", "-o", dir)
	if code != ExitUsage || !strings.Contains(stderr, "is not a safe identifier") {
		t.Errorf("bad --name: exit %d, %s", code, stderr)
	}

	suite := onnxSuite(t)
	code, stdout, stderr := mlbuild(t, "import", filepath.Join(suite, "node", "test_averagepool_2d_same_lower", "model.onnx"), "-o", dir)
	if code != ExitInvalid || !strings.Contains(stderr, "node #0 (AveragePool, opset 11): pads [1 0 0 0] are not symmetric") {
		t.Errorf("unsupported node: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.cue")); err == nil {
		t.Errorf("a rejected import wrote model.cue")
	}
	code, _, stderr = mlbuild(t, "import", filepath.Join(suite, "node", "test_abs", "model.onnx"), "-o", dir)
	if code != ExitInvalid || !strings.Contains(stderr, "op Abs has no counterpart") || !strings.Contains(stderr, "what to do:") {
		t.Errorf("unknown op: exit %d, %s", code, stderr)
	}
}

// importScope lists the ONNX ops of the import's scope (every op the
// importer reads): a backend test is in scope when every node of its model
// is one of these.
var importScope = map[string]bool{
	"Conv": true, "MaxPool": true, "AveragePool": true, "GlobalAveragePool": true,
	"Gemm": true, "MatMul": true, "Relu": true, "Sigmoid": true, "Tanh": true, "LeakyRelu": true,
	"Softmax": true, "LogSoftmax": true, "BatchNormalization": true, "Dropout": true, "Flatten": true,
	"Reshape": true, "Identity": true, "Constant": true, "Transpose": true, "Concat": true,
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Exp": true, "Log": true, "Gelu": true, "Erf": true,
	"Sqrt": true, "Pow": true, "Reciprocal": true, "ReduceMean": true, "LayerNormalization": true,
	// folded in shape arithmetic, or in patterns
	"Shape": true, "Gather": true, "Unsqueeze": true, "Squeeze": true, "Slice": true, "Cast": true,
	"Pad": true, "ConstantOfShape": true,
	// pieces of a dense layer's features (a packed q, k, v projection)
	"Split": true,
	// resampling of images
	"Resize": true, "Upsample": true,
}

// backendGolden records, for every backend test in scope, whether it
// passes or why the importer refuses it; a change in coverage shows up as a
// diff. MLBUILD_UPDATE=1 rewrites it.
const backendGolden = "../../testdata/onnx/backend.golden"

// TestImportONNXBackend runs ONNX's own backend tests for the ops in scope
// through the importer: each model is imported, compiled with the CPU
// backend, run on the test's inputs, and its outputs compared with the
// expected ones (max absolute difference ≤ 1e-4). Node tests feed weights
// as graph inputs; the test binds every input but the first to its test
// value as an initializer, as an exporter would write trained weights.
// Tests whose inputs are sequences or optionals (not tensors) are out of
// scope.
func TestImportONNXBackend(t *testing.T) {
	suite := onnxSuite(t)
	var cases []string
	for _, group := range []string{"node", "pytorch-converted", "pytorch-operator"} {
		dirs, _ := filepath.Glob(filepath.Join(suite, group, "test_*"))
		for _, d := range dirs {
			m, err := onnx.ReadFile(filepath.Join(d, "model.onnx"))
			if err != nil || len(m.Graph.Nodes) == 0 {
				continue
			}
			in := true
			for _, n := range m.Graph.Nodes {
				in = in && importScope[n.OpType]
			}
			for _, v := range m.Graph.Inputs {
				in = in && v.ElemType != onnx.Undefined
			}
			if in {
				cases = append(cases, d)
			}
		}
	}
	if len(cases) < 50 {
		t.Fatalf("only %d backend tests in scope under %s", len(cases), suite)
	}
	var mu sync.Mutex
	status := map[string]string{}
	t.Run("cases", func(t *testing.T) {
		for _, dir := range cases {
			name := filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				st := "FAILED"
				defer func() {
					mu.Lock()
					status[name] = st
					mu.Unlock()
				}()
				ok, why := runBackendCase(t, dir)
				if ok {
					st = "pass"
				} else {
					st = "rejected: " + why
				}
			})
		}
	})
	var b strings.Builder
	passed := 0
	names := make([]string, 0, len(status))
	for k, v := range status {
		names = append(names, k)
		if v == "pass" {
			passed++
		}
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "# ONNX backend tests (Debian libonnx-testdata) in the import's scope: %d; pass (imported, compiled, outputs within 1e-4): %d\n", len(cases), passed)
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", k, status[k])
	}
	t.Logf("backend tests in scope: %d; passed: %d", len(cases), passed)
	if t.Failed() || len(status) != len(cases) {
		return // a subset run (-run) or failures: the golden file describes the whole run
	}
	if os.Getenv("MLBUILD_UPDATE") != "" {
		if err := os.WriteFile(backendGolden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(backendGolden)
	if err != nil {
		t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
	}
	if string(want) != b.String() {
		t.Errorf("coverage differs from %s (MLBUILD_UPDATE=1 rewrites it; review the diff):\n%s", backendGolden, lineDiff(string(want), b.String()))
	}
}

// lineDiff lists the lines only in a (-) and only in b (+).
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	am, bm := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !bm[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !am[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// statisticsOutputs are ops whose optional outputs are statistics saved
// for training, which an mlbuild model (one output) does not return.
var statisticsOutputs = map[string]bool{"LayerNormalization": true}

// dropStatisticsOutputs removes from m's graph outputs, and from the
// expected outputs, the optional outputs of statisticsOutputs ops (the
// layer normalisation tests expect Y, Mean and InvStdDev), so that such a
// test checks the op's main output.
func dropStatisticsOutputs(m *onnx.Model, outputs []*onnx.Tensor) (*onnx.Model, []*onnx.Tensor) {
	aux := map[string]bool{}
	for _, n := range m.Graph.Nodes {
		if statisticsOutputs[n.OpType] {
			for _, o := range n.Outputs[min(1, len(n.Outputs)):] {
				aux[o] = true
			}
		}
	}
	if len(aux) == 0 || len(outputs) != len(m.Graph.Outputs) {
		return m, outputs
	}
	var keep []*onnx.ValueInfo
	var want []*onnx.Tensor
	for i, o := range m.Graph.Outputs {
		if !aux[o.Name] {
			keep = append(keep, o)
			want = append(want, outputs[i])
		}
	}
	m.Graph.Outputs = keep
	return m, want
}

// runBackendCase imports, builds and runs one backend test. It returns
// false and the importer's report when the import is refused; numeric
// disagreements and build failures fail the test.
func runBackendCase(t *testing.T, dir string) (bool, string) {
	m, err := onnx.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "test_data_set_0")
	inputs := readPBs(t, data, "input")
	outputs := readPBs(t, data, "output")
	// Bind every graph input but the first that is not an initializer.
	isInit := map[string]bool{}
	for _, in := range m.Graph.Initializers {
		isInit[in.Name] = true
	}
	k := 0
	var runtimeIn *onnx.Tensor
	for _, in := range m.Graph.Inputs {
		if isInit[in.Name] {
			continue
		}
		if k >= len(inputs) {
			t.Fatalf("input %s has no test value", in.Name)
		}
		if k == 0 {
			runtimeIn = inputs[0]
		} else {
			bound := *inputs[k]
			bound.Name = in.Name
			m.Graph.Initializers = append(m.Graph.Initializers, &bound)
		}
		k++
	}
	m, outputs = dropStatisticsOutputs(m, outputs)
	im, err := onnx.Import(m)
	if err != nil {
		return false, strings.Join(strings.Fields(err.Error()), " ")
	}
	if len(outputs) != 1 {
		t.Fatalf("%d expected outputs", len(outputs))
	}
	x, err := runtimeIn.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	want, err := outputs[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	runImported(t, im, x, want, nil)
	return true, ""
}

// runImported writes the imported spec and weights, checks them as import
// does, compiles the spec with the CPU backend, runs the binary on the
// samples in x and compares its outputs with want: the largest absolute
// difference must be at most 1e-4. With wantShape, the .npy predict wrote
// must have that shape (the samples' axes kept, not flattened).
func runImported(t *testing.T, im *onnx.Imported, x, want []float32, wantShape []int) {
	t.Helper()
	runImportedWithin(t, im, x, want, wantShape, 1e-4)
}

// runImportedWithin is runImported with the largest absolute difference
// from the reference that passes.
func runImportedWithin(t *testing.T, im *onnx.Imported, x, want []float32, wantShape []int, tol float64) {
	t.Helper()
	out := t.TempDir()
	cuePath := filepath.Join(out, "model.cue")
	src := im.Spec("model", "model.onnx", "model.safetensors")
	tensors := im.Weights()
	if err := checkImported(cuePath, src, im, tensors); err != nil {
		t.Fatalf("importer bug: %v\n%s", err, src)
	}
	if err := os.WriteFile(cuePath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(out, "model.safetensors")
	if err := safetensors.Write(weights, tensors, nil); err != nil {
		t.Fatal(err)
	}
	bin := buildProgram(t, cuePath, filepath.Join(out, "model"))

	// Run the produced binary as a user would: predict on a .npy of the
	// samples, writing the raw outputs to a .npy.
	per := 1
	for _, d := range im.Input {
		per *= d
	}
	xPath, yPath := filepath.Join(out, "x.npy"), filepath.Join(out, "y.npy")
	if err := npy.Write(xPath, append([]int{len(x) / per}, im.Input...), x); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "predict", "--weights", weights, "--output", yPath, xPath)
	if outp, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, outp)
	}
	ya, err := npy.Open(yPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ya.Close()
	if wantShape != nil && !slices.Equal(ya.Shape, wantShape) {
		t.Errorf("predict --output wrote an array of shape %v; PyTorch's output is %v", ya.Shape, wantShape)
	}
	rows := make([]int, ya.Rows())
	for i := range rows {
		rows[i] = i
	}
	got := make([]float32, ya.Rows()*ya.RowSize())
	ya.Gather(got, rows)
	if len(got) != len(want) {
		t.Fatalf("the model wrote %d values, the reference has %d\n%s", len(got), len(want), src)
	}
	worst, at := 0.0, 0
	for i := range got {
		if math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i])) {
			continue // both undefined (the square root of a negative number)
		}
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if worst > tol || math.IsNaN(worst) {
		t.Fatalf("max |difference| %g at element %d (got %g, want %g)\n%s", worst, at, got[at], want[at], src)
	}
	t.Logf("%d values, max |difference| %.3g", len(got), worst)
}

// TestImportTorchExports imports models that Debian's python3-torch 1.13
// exported (testdata/onnx/torch/export.py: an MLP written with
// x.view(x.size(0), -1) and batchnorm over features, a CNN with batchnorm,
// padded average pooling and log-softmax, a residual block with global
// average pooling; opsets 9, 11, 13 and 17, a dynamic batch), compiles
// them and compares the binaries' outputs with PyTorch's on the same three
// samples, within 1e-4 or the model's own tolerance in the manifest
// (upsample's resizes within 1e-5).
func TestImportTorchExports(t *testing.T) {
	dir := "../../testdata/onnx/torch"
	manifest, readF32 := exportManifest(t, dir, 24)
	for _, c := range manifest {
		t.Run(c.Model, func(t *testing.T) {
			t.Parallel()
			m, err := onnx.ReadFile(filepath.Join(dir, c.Model))
			if err != nil {
				t.Fatal(err)
			}
			im, err := onnx.Import(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(im.Warnings) != 0 {
				t.Errorf("warnings for a dynamic batch: %v", im.Warnings)
			}
			tol := 1e-4
			if c.Tolerance != 0 {
				tol = c.Tolerance
			}
			runImportedWithin(t, im, readF32(c.Input, c.InputShape), readF32(c.Output, c.OutputShape), c.OutputShape, tol)
		})
	}
}

func readPBs(t *testing.T, dir, prefix string) []*onnx.Tensor {
	var ts []*onnx.Tensor
	for i := 0; ; i++ {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s_%d.pb", prefix, i)))
		if err != nil {
			return ts
		}
		tn, err := onnx.DecodeTensor(data)
		if err != nil {
			t.Fatalf("%s_%d.pb: %v", prefix, i, err)
		}
		ts = append(ts, tn)
	}
}

// buildProgram compiles the spec with the CPU backend, as mlbuild compile
// does, without the cache.
func buildProgram(t *testing.T, cuePath, out string) string {
	t.Helper()
	m, err := spec.Load(cuePath)
	if err != nil {
		t.Fatal(err)
	}
	plans, err := planAll(m, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	files, err := emit.Program(&emit.Input{Model: m, Train: plans[0], Infer: plans[1], Infer1: plans[2], Backend: "cpu", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := goBuild(files, runtime.GOOS, runtime.GOARCH, "test", out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImportSpecGolden keeps the specs written for two PyTorch exports (a
// chain and a graph with a residual connection) as golden files, so that a
// change in what import writes is reviewed in the diff.
// MLBUILD_UPDATE=1 rewrites them.
func TestImportSpecGolden(t *testing.T) {
	for _, name := range []string{"cnn_opset13", "residual_opset13", "mlp_opset9"} {
		m, err := onnx.ReadFile(filepath.Join("../../testdata/onnx/torch", name+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		im, err := onnx.Import(m)
		if err != nil {
			t.Fatal(err)
		}
		got := im.Spec(name, name+".onnx", name+".safetensors")
		golden := filepath.Join("../../testdata/onnx/golden", name+".cue")
		if os.Getenv("MLBUILD_UPDATE") != "" {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (MLBUILD_UPDATE=1 rewrites it):\n%s", name, golden, lineDiff(string(want), string(got)))
		}
		if _, err := spec.Load(golden); err != nil {
			t.Errorf("%s: %v", golden, err)
		}
	}
}

// exportEntry is one model of an export script's manifest.json: the .onnx
// file, and the raw little-endian float32 files of its inputs and of
// PyTorch's outputs for them.
type exportEntry struct {
	Model, Input, Output    string
	InputShape, OutputShape []int
	// Tolerance is the largest difference from PyTorch the model's test
	// accepts, where the export script gives one (else 1e-4).
	Tolerance float64
}

// exportManifest reads dir's manifest.json, which must list at least
// least models, and returns it with a reader of its float32 files.
func exportManifest(t *testing.T, dir string, least int) ([]exportEntry, func(name string, shape []int) []float32) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []exportEntry
	if err := json.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) < least {
		t.Fatalf("%s/manifest.json lists %d models, want at least %d", dir, len(manifest), least)
	}
	readF32 := func(name string, shape []int) []float32 {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		if len(b) != 4*n {
			t.Fatalf("%s: %d bytes for shape %v", name, len(b), shape)
		}
		v := make([]float32, n)
		binary.Read(bytes.NewReader(b), binary.LittleEndian, v)
		return v
	}
	return manifest, readF32
}
