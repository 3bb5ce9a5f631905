package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"github.com/mlbuild/mlbuild/emit"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/mlbuild/mlbuild/rt/npy"
	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// readF32File reads a raw little-endian float32 file of the torch exports.
func readF32File(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	binary.Read(bytes.NewReader(b), binary.LittleEndian, v)
	return v
}

// readNPY reads a .npy file that predict --output wrote.
func readNPY(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := npy.Parse(path, b)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float64, a.Rows()*a.RowSize())
	for i := range v {
		v[i] = a.At(i)
	}
	return v
}

// rewriteWeights writes the tensors of src to dst, changed by edit.
func rewriteWeights(t *testing.T, src, dst string, md map[string]string, edit func(*safetensors.Tensor)) {
	t.Helper()
	f, err := safetensors.Read(src)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		edit(&f.Tensors[i])
	}
	for k, v := range f.Metadata {
		if _, ok := md[k]; !ok {
			md[k] = v
		}
	}
	if err := safetensors.Write(dst, f.Tensors, md); err != nil {
		t.Fatal(err)
	}
}

// TestCompileEmbeddedWeights is the single-file story end to end on a CNN
// exported by PyTorch: import, compile --weights, and the binary alone
// predicts what it predicts with the weights file, bit for bit, and what
// PyTorch computed, within 1e-4; info names the file's SHA-256; other
// weights are another cache entry; a file that does not fit the spec is
// refused before anything is built, naming the tensor and both shapes.
func TestCompileEmbeddedWeights(t *testing.T) {
	dir := t.TempDir()
	cacheDir := filepath.Join(dir, "cache")
	torch := "../../testdata/onnx/torch"
	if code, out, errOut := mlbuild(t, "import", filepath.Join(torch, "cnn_opset13.onnx"), "-o", dir, "--name", "cnn"); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	spec, weights := filepath.Join(dir, "cnn.cue"), filepath.Join(dir, "cnn.safetensors")
	bin := filepath.Join(dir, "cnn")
	code, out, errOut := mlbuild(t, "compile", spec, "--weights", weights, "-o", bin, "--cache-dir", cacheDir)
	if code != 0 || !strings.Contains(out, "weights cnn.safetensors embedded, built") {
		t.Fatalf("compile --weights: exit %d\n%s%s", code, out, errOut)
	}
	if err := npy.Write(filepath.Join(dir, "x.npy"), []int{3, 1, 16, 16}, readF32File(t, filepath.Join(torch, "cnn.input.bin"))); err != nil {
		t.Fatal(err)
	}
	// The weights file moves away: the binary needs only itself.
	moved := filepath.Join(dir, "elsewhere.safetensors")
	if err := os.Rename(weights, moved); err != nil {
		t.Fatal(err)
	}
	runIn := func(bin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	runIn(bin, "predict", "x.npy", "--output", "embedded.npy")
	runIn(bin, "predict", "x.npy", "--weights", "elsewhere.safetensors", "--output", "file.npy")
	emb, err := os.ReadFile(filepath.Join(dir, "embedded.npy"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(dir, "file.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(emb, file) {
		t.Errorf("predict with the embedded weights differs from predict --weights with the same file")
	}
	want := readF32File(t, filepath.Join(torch, "cnn.output.bin"))
	got := readNPY(t, filepath.Join(dir, "embedded.npy"))
	if len(got) != len(want) {
		t.Fatalf("%d outputs, PyTorch has %d", len(got), len(want))
	}
	var maxDiff float64
	for i := range got {
		maxDiff = math.Max(maxDiff, math.Abs(got[i]-float64(want[i])))
	}
	if !(maxDiff <= 1e-4) {
		t.Errorf("the embedded model's outputs differ from PyTorch's by %g (max absolute), want at most 1e-4", maxDiff)
	}

	data, err := os.ReadFile(moved)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	var info struct {
		Weights *struct{ Source, SHA256 string } `json:"embedded_weights"`
	}
	if err := json.Unmarshal([]byte(runIn(bin, "info", "--json")), &info); err != nil || info.Weights == nil ||
		info.Weights.SHA256 != hex.EncodeToString(sum[:]) || info.Weights.Source != "cnn.safetensors" {
		t.Errorf("info --json: %v %+v, want sha256 %x", err, info.Weights, sum)
	}

	// The same weights are a cache hit; other weights are another program.
	if err := os.Rename(moved, weights); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := mlbuild(t, "compile", spec, "--weights", weights, "-o", bin, "--cache-dir", cacheDir); code != 0 || !strings.Contains(out, "cache hit") {
		t.Errorf("compiling again: exit %d, want a cache hit\n%s%s", code, out, errOut)
	}
	other := filepath.Join(dir, "other.safetensors")
	rewriteWeights(t, weights, other, map[string]string{}, func(tn *safetensors.Tensor) {
		if tn.Name == "fc.bias" {
			tn.Data[0] += 1
		}
	})
	bin2 := filepath.Join(dir, "cnn2")
	if code, out, errOut := mlbuild(t, "compile", spec, "--weights", other, "-o", bin2, "--cache-dir", cacheDir); code != 0 || !strings.Contains(out, "built") {
		t.Errorf("compiling with other weights: exit %d, want a build, not a cache hit\n%s%s", code, out, errOut)
	}
	runIn(bin2, "predict", "x.npy", "--output", "other.npy")
	if b, _ := os.ReadFile(filepath.Join(dir, "other.npy")); bytes.Equal(b, emb) {
		t.Errorf("the binary with other embedded weights predicts the same outputs")
	}

	// Weights that do not fit are refused before anything is built.
	for _, c := range []struct {
		name  string
		md    map[string]string
		edit  func(*safetensors.Tensor)
		wants []string
	}{
		{"shape", map[string]string{}, func(tn *safetensors.Tensor) {
			if tn.Name == "fc.weight" {
				tn.Shape = []int{10, 32, 2}
			}
		}, []string{`tensor "fc.weight" is [10 32 2] in the file, the model needs [10 64]`, "cnn.cue"}},
		{"name", map[string]string{}, func(tn *safetensors.Tensor) {
			if tn.Name == "conv1.bias" {
				tn.Name = "conv1.b"
			}
		}, []string{`missing tensor "conv1.bias" [8]`, `unexpected tensor "conv1.b" [8]`}},
		{"checkpoint", map[string]string{"mlbuild.epoch": "1"}, func(*safetensors.Tensor) {}, []string{"is a training checkpoint", "--out"}},
		{"nan", map[string]string{}, func(tn *safetensors.Tensor) {
			if tn.Name == "fc.bias" {
				tn.Data[3] = float32(math.NaN())
			}
		}, []string{`tensor "fc.bias" holds NaN at element 3`}},
	} {
		bad := filepath.Join(dir, c.name+".safetensors")
		rewriteWeights(t, weights, bad, c.md, c.edit)
		out := filepath.Join(dir, "bad-"+c.name)
		code, stdout, stderr := mlbuild(t, "compile", spec, "--weights", bad, "-o", out, "--cache-dir", cacheDir)
		if code != ExitInvalid {
			t.Errorf("%s: exit %d, want %d\n%s%s", c.name, code, ExitInvalid, stdout, stderr)
		}
		for _, w := range c.wants {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: the message does not say %q:\n%s", c.name, w, stderr)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: a binary was written", c.name)
		}
	}
	// A tensor of a dtype the programs cannot read is named with it.
	header := `{"fc.bias":{"dtype":"I32","shape":[10],"data_offsets":[0,40]}}`
	raw := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	raw = append(append(raw, header...), make([]byte, 40)...)
	bad := filepath.Join(dir, "int.safetensors")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = mlbuild(t, "compile", spec, "--weights", bad, "--cache-dir", cacheDir, "-o", filepath.Join(dir, "bad-dtype"))
	if code != ExitInvalid || !strings.Contains(errOut, `tensor "fc.bias": dtype I32 is not supported`) {
		t.Errorf("an I32 tensor: exit %d, %s", code, errOut)
	}
	// A FIFO is refused, not waited on.
	fifo := filepath.Join(dir, "fifo.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = mlbuild(t, "compile", spec, "--weights", fifo, "--cache-dir", cacheDir, "-o", filepath.Join(dir, "bad-fifo"))
	if code != ExitIO || !strings.Contains(errOut, "--weights "+fifo+" is not a regular file") {
		t.Errorf("a FIFO: exit %d, %s", code, errOut)
	}
}

// TestCompileEmbeddedWeightsGPU: the Metal and CUDA programs embed the
// weights too (cross-built here; the loading is the runtime's, shared
// with the CPU program): the tensors' bytes are in each binary.
func TestCompileEmbeddedWeightsGPU(t *testing.T) {
	dir := t.TempDir()
	if code, out, errOut := mlbuild(t, "import", "../../testdata/onnx/torch/cnn_opset13.onnx", "-o", dir, "--name", "cnn"); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	weights := filepath.Join(dir, "cnn.safetensors")
	f, err := safetensors.Read(weights)
	if err != nil {
		t.Fatal(err)
	}
	// The file is laid out anew (as the state arena): each tensor's bytes
	// are in the binary, the largest one's stands for them all.
	var data []byte
	for _, tn := range f.Tensors {
		if 4*len(tn.Data) > len(data) {
			data = data[:0]
			for _, v := range tn.Data {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
			}
		}
	}
	for _, c := range []struct{ backend, target string }{{"cuda", "linux/amd64"}, {"metal", "darwin/arm64"}} {
		bin := filepath.Join(dir, "cnn-"+c.backend)
		code, out, errOut := mlbuild(t, "compile", filepath.Join(dir, "cnn.cue"), "--weights", weights, "--backend", c.backend, "--target", c.target,
			"-o", bin, "--cache-dir", filepath.Join(dir, "cache"))
		if code != 0 || !strings.Contains(out, "weights cnn.safetensors embedded") {
			t.Fatalf("%s: exit %d\n%s%s", c.backend, code, out, errOut)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, data) {
			t.Errorf("%s: the binary does not hold the weights (%d bytes of the largest tensor)", c.backend, len(data))
		}
	}
}

// firstLoss reads the loss of step 1 from a metrics file.
func firstLoss(t *testing.T, path string) float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Event string
			Step  int
			Loss  float64
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event == "step" && ev.Step == 1 {
			return ev.Loss
		}
	}
	t.Fatalf("%s has no step 1", path)
	return 0
}

// TestTrainFromWeights trains models/iris.cue (scikit-learn's iris.csv,
// standardised), then starts new runs from the weights: with --init FILE,
// and from the same weights compiled in. Each starts at the loss those
// weights give on its first batch (eval's, with the standardisation the
// weights were trained with), far below a fresh model's.
func TestTrainFromWeights(t *testing.T) {
	data := sklearnDir(t)
	dir := t.TempDir()
	bin := compileExample(t, "iris", dir)
	run := func(bin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	run(bin, "train", "--data", data, "--epochs", "30", "--validation-split", "0", "--quiet", "--out", "trained.safetensors")
	// One batch (8 rows), so that step 1's loss is eval's over those rows.
	one := []string{"train", "--data", data, "--epochs", "1", "--limit", "8", "--validation-split", "0"}
	var ev struct{ Loss float64 }
	if err := json.Unmarshal([]byte(run(bin, "eval", "--data", data, "--weights", "trained.safetensors", "--split", "train", "--limit", "8", "--validation-split", "0", "--json")), &ev); err != nil {
		t.Fatal(err)
	}
	run(bin, append(one, "--metrics", "fresh.jsonl", "--out", "fresh.safetensors")...)
	fresh := firstLoss(t, filepath.Join(dir, "fresh.jsonl"))
	out := run(bin, append(one, "--init", "trained.safetensors", "--metrics", "init.jsonl", "--out", "init.safetensors")...)
	fromFile := firstLoss(t, filepath.Join(dir, "init.jsonl"))
	if !strings.Contains(out, "starting from the weights in trained.safetensors with a fresh optimizer state, and the preprocessing statistics they were trained with") {
		t.Errorf("train --init does not say where it starts:\n%s", out)
	}
	if math.Abs(fromFile-ev.Loss) > 1e-4*math.Max(1, ev.Loss) {
		t.Errorf("train --init starts at loss %.6f; the weights give %.6f on that batch", fromFile, ev.Loss)
	}
	if !(fresh > 2*ev.Loss) {
		t.Errorf("a fresh model's first loss %.4f is not far above the trained weights' %.4f: the test cannot tell them apart", fresh, ev.Loss)
	}

	code, stdout, stderr := mlbuild(t, "compile", "../../models/iris.cue", "--weights", filepath.Join(dir, "trained.safetensors"),
		"-o", filepath.Join(dir, "iris-embedded"), "--cache-dir", filepath.Join(dir, "cache"))
	if code != 0 {
		t.Fatalf("compile --weights: exit %d\n%s%s", code, stdout, stderr)
	}
	emb := filepath.Join(dir, "iris-embedded")
	out = run(emb, append(one, "--metrics", "emb.jsonl", "--out", "emb.safetensors")...)
	if l := firstLoss(t, filepath.Join(dir, "emb.jsonl")); l != fromFile || !strings.Contains(out, "starting from the embedded weights (trained.safetensors") {
		t.Errorf("training the program with embedded weights starts at loss %v, --init at %v:\n%s", l, fromFile, out)
	}
	if a, b := run(emb, "eval", "--data", data), run(bin, "eval", "--data", data, "--weights", "trained.safetensors"); a != b {
		t.Errorf("eval with the embedded weights:\n%s\nwith the file:\n%s", a, b)
	}

	// Weights without the statistics the spec standardises with cannot
	// serve it: compile says so before building.
	f, err := safetensors.Read(filepath.Join(dir, "trained.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "bare.safetensors")
	if err := safetensors.Write(bare, f.Tensors, nil); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = mlbuild(t, "compile", "../../models/iris.cue", "--weights", bare, "-o", filepath.Join(dir, "iris-bare"), "--cache-dir", filepath.Join(dir, "cache"))
	if code != ExitInvalid || !strings.Contains(stderr, "holds no mlbuild.standardize.mean metadata") {
		t.Errorf("weights without standardisation statistics: exit %d, %s", code, stderr)
	}
}

// TestCompileLaysWeightsOutAsArena: compile --weights embeds the weights
// laid out as the program's state arena (`mlbuild plan`'s offsets): the
// data section starts at a multiple of 64 bytes, every param's float32s
// lie at 4 × its offset from there, with the values of the file given,
// and the gaps the arena's alignment leaves are pads that readers skip.
func TestCompileLaysWeightsOutAsArena(t *testing.T) {
	dir := t.TempDir()
	if code, out, errOut := mlbuild(t, "import", "../../testdata/onnx/torch/cnn_opset13.onnx", "-o", dir, "--name", "cnn"); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	spec, weights, src := filepath.Join(dir, "cnn.cue"), filepath.Join(dir, "cnn.safetensors"), filepath.Join(dir, "src")
	code, out, errOut := mlbuild(t, "compile", spec, "--weights", weights, "-o", filepath.Join(dir, "cnn"), "--emit", src, "--cache-dir", filepath.Join(dir, "cache"))
	if code != 0 {
		t.Fatalf("compile: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = mlbuild(t, "plan", spec, "--format", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	var plan struct {
		Params []struct {
			Name string
			Buf  int
		}
		Buffers []struct {
			Offset int
			Arena  string
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	given, err := safetensors.Read(weights)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(src, emit.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	laid, err := safetensors.ReadBytesInPlace("embedded", data)
	if err != nil {
		t.Fatalf("the embedded file does not read: %v", err)
	}
	start := safetensors.DataStart(data)
	if start%64 != 0 {
		t.Errorf("the data section starts at byte %d, not a multiple of 64", start)
	}
	if len(laid.Tensors) != len(given.Tensors) || len(plan.Params) != len(given.Tensors) {
		t.Fatalf("%d tensors embedded, %d given, %d params planned", len(laid.Tensors), len(given.Tensors), len(plan.Params))
	}
	gaps := 0
	for _, p := range plan.Params {
		b := laid.Bytes(p.Name)
		want, ok := given.Tensor(p.Name)
		if b == nil || !ok {
			t.Fatalf("tensor %q is missing", p.Name)
		}
		at := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(data))))
		if buf := plan.Buffers[p.Buf]; buf.Arena != "state" || at != start+4*buf.Offset {
			t.Errorf("tensor %q lies at byte %d, want %d (offset %d of the %s arena)", p.Name, at, start+4*buf.Offset, buf.Offset, buf.Arena)
		}
		for i, v := range want.Data {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != v {
				t.Fatalf("tensor %q element %d is %v, the file given has %v", p.Name, i, got, v)
			}
		}
		if buf := plan.Buffers[p.Buf]; buf.Offset%64 == 0 && len(want.Data)%64 != 0 {
			gaps++
		}
	}
	if gaps == 0 {
		t.Fatal("the model has no param whose size leaves a gap: the test does not cover pads")
	}
	if !bytes.Contains(data[:start], []byte(safetensors.PadPrefix)) {
		t.Error("no pad fills the gaps")
	}
}
