package app

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// trainedQuadrants trains the linear test model on the quadrant images in dir
// and returns the weights file it wrote (dir/trained.safetensors).
func trainedQuadrants(t *testing.T, dir string) string {
	t.Helper()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "3", "--quiet", "--out", "trained.safetensors"); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	return filepath.Join(dir, "trained.safetensors")
}

// embeddedLin is the linear test model with the file at path compiled in,
// as `mlbuild compile --weights` makes it.
func embeddedLin(t *testing.T, path string) *linearModel {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	m := newLinearModel()
	m.meta.Embedded = &EmbeddedWeights{Source: filepath.Base(path), SHA256: hex.EncodeToString(sum[:]), Data: data}
	return m
}

// firstStepLoss reads the loss of the first training step from a metrics
// file.
func firstStepLoss(t *testing.T, path string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev struct {
			Event string
			Step  int
			Loss  float64
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event == "step" && ev.Step == 1 {
			return ev.Loss
		}
	}
	t.Fatalf("%s has no step 1", path)
	return 0
}

// TestEmbeddedWeights: a program with weights compiled in predicts and
// evaluates with no weights file, exactly as with the file; --weights
// still overrides them; info and the help say they are there.
func TestEmbeddedWeights(t *testing.T) {
	dir := t.TempDir()
	trained := trainedQuadrants(t, dir)
	// Other weights, to tell an override from the embedded ones.
	if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "1", "--seed", "99", "--quiet", "--out", "other.safetensors"); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	m := embeddedLin(t, trained)
	// The file is gone: the program needs only itself.
	if err := os.Rename(trained, filepath.Join(dir, "moved.safetensors")); err != nil {
		t.Fatal(err)
	}
	predict := func(m Model, out string, args ...string) []byte {
		t.Helper()
		args = append([]string{"predict", "data/test-images", "--output", out}, args...)
		if code, stdout, stderr := runModel(t, dir, m, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, out))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	emb := predict(m, "emb.npy")
	file := predict(newLinearModel(), "file.npy", "--weights", "moved.safetensors")
	if !bytes.Equal(emb, file) {
		t.Errorf("predict with the embedded weights differs from predict with the same file")
	}
	if over := predict(embeddedLin(t, filepath.Join(dir, "moved.safetensors")), "over.npy", "--weights", "other.safetensors"); bytes.Equal(over, emb) {
		t.Errorf("--weights other.safetensors did not override the embedded weights")
	}

	code, out, errOut := runModel(t, dir, embeddedLin(t, filepath.Join(dir, "moved.safetensors")), "eval", "--data", "data", "--json")
	if code != 0 || !strings.Contains(out, `"accuracy":1`) {
		t.Errorf("eval with the embedded weights: exit %d, want accuracy 1:\n%s%s", code, out, errOut)
	}

	sha := m.meta.Embedded.SHA256
	code, out, _ = runModel(t, dir, m, "info")
	if code != 0 || !strings.Contains(out, "embedded: trained.safetensors") || !strings.Contains(out, sha) {
		t.Errorf("info does not show the embedded weights and their hash %s:\n%s", sha, out)
	}
	_, out, _ = runModel(t, dir, m, "info", "--json")
	var info struct {
		Weights *struct {
			Source, SHA256 string
			Bytes          int
		} `json:"embedded_weights"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Weights == nil || info.Weights.SHA256 != sha || info.Weights.Bytes != len(m.meta.Embedded.Data) {
		t.Errorf("info --json: %v %+v\n%s", err, info.Weights, out)
	}
	_, out, _ = runLin(t, dir, "info", "--json")
	if !strings.Contains(out, `"embedded_weights": null`) {
		t.Errorf("info --json of a program without embedded weights:\n%s", out)
	}

	// Help: predict's usage line needs no --weights when they are embedded.
	_, out, _ = runModel(t, dir, m, "predict", "--help")
	if !strings.Contains(out, "lin predict [flags] INPUT...") || !strings.Contains(out, "instead of the embedded trained.safetensors") {
		t.Errorf("predict --help of a program with embedded weights:\n%s", out)
	}
	_, out, _ = runLin(t, dir, "predict", "--help")
	if !strings.Contains(out, "lin predict --weights FILE [flags] INPUT...") {
		t.Errorf("predict --help of a program without embedded weights:\n%s", out)
	}
	_, out, _ = runModel(t, dir, m, "--help")
	if !strings.Contains(out, "trained.safetensors is compiled in (sha256 "+sha[:12]) {
		t.Errorf("the program's usage does not mention the embedded weights:\n%s", out)
	}

	// Without embedded weights, predict and eval still need --weights.
	for _, args := range [][]string{{"predict", "data/test-images"}, {"eval", "--data", "data"}} {
		code, _, errOut := runLin(t, dir, args...)
		if code != exitUsage || !strings.Contains(errOut, "needs --weights FILE (this program has no embedded weights)") {
			t.Errorf("%v without weights: exit %d, %s", args, code, errOut)
		}
	}
}

// TestTrainInit: a run started from weights (--init FILE, or the embedded
// weights by default) starts at the loss those weights give, not at a
// fresh model's; --init seed starts afresh; the messages say which.
func TestTrainInit(t *testing.T) {
	dir := t.TempDir()
	trained := trainedQuadrants(t, dir)
	// One batch of four images, so that the first step's loss is the
	// mean loss over exactly the images eval --limit 4 reads.
	one := []string{"train", "--data", "data", "--epochs", "1", "--limit", "4", "--validation-split", "0"}
	run := func(m Model, name string, args ...string) (float64, string) {
		t.Helper()
		args = append(append(append([]string(nil), one...), "--metrics", name+".jsonl", "--out", name+".safetensors"), args...)
		code, out, errOut := runModel(t, dir, m, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return firstStepLoss(t, filepath.Join(dir, name+".jsonl")), out
	}
	fresh, out := run(newLinearModel(), "fresh")
	if strings.Contains(out, "starting from") {
		t.Errorf("a plain run says where it starts from, which only runs from weights do:\n%s", out)
	}
	fromFile, out := run(newLinearModel(), "fromfile", "--init", "trained.safetensors")
	if !strings.Contains(out, "starting from the weights in trained.safetensors with a fresh optimizer state") {
		t.Errorf("--init FILE does not say so:\n%s", out)
	}
	code, out, errOut := runLin(t, dir, "eval", "--data", "data", "--weights", "trained.safetensors", "--split", "train", "--limit", "4", "--validation-split", "0", "--json")
	var ev struct{ Loss float64 }
	if code != 0 || json.Unmarshal([]byte(out), &ev) != nil {
		t.Fatalf("eval: exit %d\n%s%s", code, out, errOut)
	}
	if math.Abs(fromFile-ev.Loss) > 1e-5*math.Max(1, ev.Loss) {
		t.Errorf("train --init starts at loss %.6f, but the weights give %.6f on that batch", fromFile, ev.Loss)
	}
	if !(fresh > ev.Loss+0.5) {
		t.Errorf("the test is weak: a fresh model's first loss %.4f is near the trained weights' %.4f", fresh, ev.Loss)
	}

	// A program with embedded weights starts from them by default, and
	// from the seed's initialisation with --init seed.
	embedded, out := run(embeddedLin(t, trained), "embedded")
	if embedded != fromFile || !strings.Contains(out, "starting from the embedded weights (trained.safetensors, sha256 ") {
		t.Errorf("default start with embedded weights: loss %v (from the file: %v)\n%s", embedded, fromFile, out)
	}
	seeded, out := run(embeddedLin(t, trained), "seeded", "--init", "seed")
	if seeded != fresh || !strings.Contains(out, "starting from the seed's initialisation (--seed 7), not from the embedded weights trained.safetensors") {
		t.Errorf("--init seed: loss %v (a fresh model: %v)\n%s", seeded, fresh, out)
	}

	// A checkpoint's weights start a new run; the message points to --resume.
	_, out = run(newLinearModel(), "fromckpt", "--init", "fromfile.ckpt.safetensors")
	if !strings.Contains(out, "from the weights of the checkpoint fromfile.ckpt.safetensors") || !strings.Contains(out, "--resume fromfile.ckpt.safetensors would continue its run") {
		t.Errorf("--init CHECKPOINT:\n%s", out)
	}

	for _, c := range []struct {
		m    Model
		args []string
		code int
		want string
	}{
		{newLinearModel(), []string{"--init", "trained.safetensors", "--resume", "fromfile.ckpt.safetensors"}, exitUsage, "--init and --resume exclude each other"},
		{newLinearModel(), []string{"--init", "embedded"}, exitUsage, "this program has no embedded weights"},
		{newLinearModel(), []string{"--init", "missing.safetensors"}, exitFailure, "missing.safetensors: no such file"},
		{newLinearModel(), []string{"--init", "data"}, exitUsage, "--init data is a folder"},
		{newLinearModel(), []string{"--init", "data/train-images"}, exitFailure, "--init: data/train-images"},
		{newLinearModel(), []string{"--init", "trained.safetensors", "--out", "trained.safetensors"}, exitUsage, "--out trained.safetensors is the file --init reads"},
		{newLinearModel(), []string{"--init", "trained.safetensors", "--checkpoint", "./trained.safetensors", "--out", "x.safetensors"}, exitUsage, "--checkpoint ./trained.safetensors is the file --init reads"},
	} {
		args := append(append([]string(nil), one...), c.args...)
		code, out, errOut := runModel(t, dir, c.m, args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d (want %d), stderr %q does not contain %q\n%s", c.args, code, c.code, errOut, c.want, out)
		}
	}
}

// TestStartWeightsFreshState: --init copies the weights and zeroes the
// rest of the state arena (gradients, optimizer moments), whatever was
// there before.
func TestStartWeightsFreshState(t *testing.T) {
	dir := t.TempDir()
	trained := trainedQuadrants(t, dir)
	f, err := safetensors.Read(trained)
	if err != nil {
		t.Fatal(err)
	}
	m := newLinearModel()
	for i := range m.state {
		m.state[i] = 7
	}
	if _, _, err := startWeights(m, &trainOptions{init: trained}); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.meta.Params {
		w, _ := f.Tensor(p.Name)
		for i, v := range w.Data {
			if m.state[p.Offset+i] != v {
				t.Fatalf("%s[%d] = %v, the file has %v", p.Name, i, m.state[p.Offset+i], v)
			}
		}
	}
	for i := lmGW; i < lmState; i++ {
		if m.state[i] != 0 {
			t.Fatalf("state[%d] (a gradient) = %v after --init, want 0", i, m.state[i])
		}
	}
}

// TestReinitHead: --init with --reinit LAYER takes every other layer's
// weights from the file and leaves LAYER with the seed's initialisation,
// whatever shape the file gives it (a head for 7 classes here); without
// --reinit the mismatch is refused with the flag suggested; an unknown
// layer, or --reinit without --init, is a usage error.
func TestReinitHead(t *testing.T) {
	model := func() *linearModel {
		m := newLinearModel()
		m.meta.Params[1].Name = "head.bias" // two layers: dense1 (weight) and head (bias)
		return m
	}
	dir := t.TempDir()
	weights := filepath.Join(dir, "w.safetensors")
	w := make([]float32, lmIn*lmClasses)
	for i := range w {
		w[i] = float32(i) / 100
	}
	if err := safetensors.Write(weights, []safetensors.Tensor{
		{Name: "dense1.weight", Shape: []int{lmClasses, lmIn}, Data: w},
		{Name: "head.bias", Shape: []int{7}, Data: make([]float32, 7)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	seeded := model()
	initParams(seeded, 5)

	m := model()
	if _, _, err := startWeights(m, &trainOptions{init: weights, seed: 5}); err == nil || !strings.Contains(err.Error(), "--reinit head") {
		t.Fatalf("a head of another shape without --reinit: %v, want the error to suggest --reinit head", err)
	}
	m = model()
	if _, _, err := startWeights(m, &trainOptions{init: weights, reinit: "head", seed: 5}); err != nil {
		t.Fatal(err)
	}
	for i, v := range w {
		if m.state[lmW+i] != v {
			t.Fatalf("dense1.weight[%d] = %v, the file has %v", i, m.state[lmW+i], v)
		}
	}
	for i := 0; i < lmClasses; i++ {
		if got, want := m.state[lmB+i], seeded.state[lmB+i]; got != want || got == 0 {
			t.Fatalf("head.bias[%d] = %v, the seed's initialisation is %v", i, got, want)
		}
	}
	for _, c := range []struct {
		o    trainOptions
		want string
	}{
		{trainOptions{init: weights, reinit: "fc"}, `no layer "fc" with weights (its layers with weights: dense1, head)`},
		{trainOptions{reinit: "head"}, "give --init FILE"},
		{trainOptions{init: "seed", reinit: "head"}, "give --init FILE"},
	} {
		err := checkInit(&model().meta, &c.o)
		if _, usage := err.(usageError); !usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a usage error saying %q", c.o, err, c.want)
		}
	}
}
