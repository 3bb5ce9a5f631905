package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// csvLinearModel is the linear test model as a program of a CSV dataset.
func csvLinearModel() *linearModel {
	m := newLinearModel()
	m.meta.InputShape = []int{16}
	m.meta.Data = DataSpec{Format: "csv", Task: "classification", Train: "rows.csv", TestSplit: 0.25, Delimiter: ",", Label: []Column{{Index: -1}}}
	return m
}

// TestHelpSpeaksOfTheDataset: the help of a CSV program names its files,
// not IDX files and data/mnist, and neither lists nor runs sample (which
// writes an image of IDX files); an IDX program keeps sample.
func TestHelpSpeaksOfTheDataset(t *testing.T) {
	dir := t.TempDir()
	var all strings.Builder
	for _, args := range [][]string{{"--help"}, {"train", "--help"}, {"eval", "--help"}, {"predict", "--help"}} {
		code, out, errOut := runModel(t, dir, csvLinearModel(), args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		all.WriteString(out)
	}
	help := all.String()
	for _, bad := range []string{"IDX training files", "IDX test files", "data/mnist", "  sample "} {
		if strings.Contains(help, bad) {
			t.Errorf("the CSV program's help says %q:\n%s", bad, help)
		}
	}
	for _, want := range []string{"training data (rows.csv)", "train --data DIR", "rows.csv --weights"} {
		if !strings.Contains(help, want) {
			t.Errorf("the CSV program's help lacks %q:\n%s", want, help)
		}
	}
	code, _, errOut := runModel(t, dir, csvLinearModel(), "sample", "--data", "d", "x.png")
	if code != exitUsage || !strings.Contains(errOut, "this model reads csv data") {
		t.Errorf("sample in a CSV program: exit %d: %s", code, errOut)
	}
	if _, out, _ := runLin(t, dir, "--help"); !strings.Contains(out, "  sample ") {
		t.Errorf("the IDX program's usage lost sample:\n%s", out)
	}
}

// TestRegressionEvalReport: eval --json of a regression reports its error
// measures and no accuracy (it printed accuracy 0), and --confusion, which
// a regression has no classes for, is refused rather than ignored.
func TestRegressionEvalReport(t *testing.T) {
	mse, mae, r2 := 2.5, 1.25, 0.75
	var b bytes.Buffer
	r := evalResult{Loss: 2.5, Samples: 10, MSE: &mse, MAE: &mae, R2: &r2}
	if err := r.writeJSON(&b, "test"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mse", "mae", "r2", "loss", "samples"} {
		if _, ok := got[k]; !ok {
			t.Errorf("regression eval --json lacks %q: %s", k, b.String())
		}
	}
	for _, k := range []string{"accuracy", "correct"} {
		if _, ok := got[k]; ok {
			t.Errorf("regression eval --json has %q: %s", k, b.String())
		}
	}
	b.Reset()
	c := evalResult{Accuracy: 0.5, Correct: 5, Samples: 10}
	if err := c.writeJSON(&b, "test"); err != nil || !strings.Contains(b.String(), `"accuracy":0.5`) {
		t.Errorf("classification eval --json: %v %s", err, b.String())
	}

	m := newLinearModel()
	m.meta.Data = diabetesMeta().Data
	m.meta.InputShape = []int{16}
	code, _, errOut := runModel(t, t.TempDir(), m, "eval", "--weights", "w.safetensors", "--data", "d", "--confusion")
	if code != exitUsage || !strings.Contains(errOut, "--confusion") || !strings.Contains(errOut, "regression") {
		t.Errorf("eval --confusion of a regression: exit %d: %s", code, errOut)
	}
}

// TestEvalValidationTakesTheRunsSplit: weights record the seed, limit and
// validation split of their run, and eval --split validation takes them,
// so it evaluates the samples the run held out whatever the spec's
// defaults; a flag that differs is obeyed with a note. Without the record,
// a run with another seed was evaluated on its training images.
func TestEvalValidationTakesTheRunsSplit(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, dir+"/data", 64, 32)
	if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "1", "--quiet", "--seed", "99", "--validation-split", "0.25", "--limit", "48"); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	md, err := readMetadata(dir + "/lin.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if md["mlbuild.seed"] != "99" || md["mlbuild.limit"] != "48" || md["mlbuild.validation_split"] != "0.25" {
		t.Errorf("the weights record seed %q, limit %q, validation split %q; want 99, 48, 0.25", md["mlbuild.seed"], md["mlbuild.limit"], md["mlbuild.validation_split"])
	}
	// The run's validation samples: 48 images, a quarter held out by seed 99.
	ds, err := openTrainSet(&newLinearModel().meta, dir+"/data", 48)
	if err != nil {
		t.Fatal(err)
	}
	_, val := ds.split(0.25, 99)
	ds.close()

	sel := &evalSelection{split: "validation", seed: 7, limit: 0, valSplit: 0.1}
	var note bytes.Buffer
	if err := sel.adopt(md, nil, &note); err != nil {
		t.Fatal(err)
	}
	if sel.seed != 99 || sel.limit != 48 || sel.valSplit != 0.25 || note.Len() > 0 {
		t.Errorf("adopt: seed %d limit %d split %v, note %q; want the run's 99, 48, 0.25 and no note", sel.seed, sel.limit, sel.valSplit, note.String())
	}
	code, out, errOut := runLin(t, dir, "eval", "--data", "data", "--weights", "lin.safetensors", "--split", "validation", "--json")
	var r struct{ Samples int }
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Samples != len(val) {
		t.Errorf("eval --split validation: exit %d, %s (want %d samples, the run's held-out ones)\n%s", code, out, len(val), errOut)
	}
	code, _, errOut = runLin(t, dir, "eval", "--data", "data", "--weights", "lin.safetensors", "--split", "validation", "--seed", "5")
	if code != 0 || !strings.Contains(errOut, "trained with --seed 99") {
		t.Errorf("eval --split validation --seed 5: exit %d, want a note that the run's seed was 99: %s", code, errOut)
	}
}

// TestCheckpointsPaced: a tiny model's epochs take microseconds and a
// checkpoint write milliseconds (its fsyncs), so a run writes far fewer
// checkpoints than epochs (it wrote two files an epoch: 100 epochs of a
// 353-row CSV took 2.4 s for 0.04 s of training); the last epoch is
// always written, and the weights and checkpoint hold the run's end.
func TestCheckpointsPaced(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, dir+"/data", 64, 32)
	writes := 0
	testHookEpochWrite = func() { writes++ }
	defer func() { testHookEpochWrite = nil }()
	const epochs = 200
	code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "200", "--validation-split", "0", "--quiet")
	if code != 0 || !strings.Contains(out, "trained 200 epochs in") {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	if writes < 1 || writes > epochs/2 {
		t.Errorf("%d epoch-end writes in %d epochs of a tiny model; want at least the last and at most half", writes, epochs)
	}
	ck, err := readMetadata(dir + "/lin.ckpt.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	w, err := readMetadata(dir + "/lin.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if ck["mlbuild.epoch"] != "200" || w["mlbuild.trained_epochs"] != "200" {
		t.Errorf("checkpoint at epoch %q and weights of %q epochs; want both at 200", ck["mlbuild.epoch"], w["mlbuild.trained_epochs"])
	}
}

// TestTrainedWording: the summary counts the epochs the run trained, in
// the singular for one, and a resumed run says which epochs it added.
func TestTrainedWording(t *testing.T) {
	for _, c := range []struct {
		first, end, epochs int
		resumed, want      string
	}{
		{0, 1, 1, "", "trained 1 epoch"},
		{0, 3, 3, "", "trained 3 epochs"},
		{0, 2, 5, "", "trained 2 epochs"}, // early stopping
		{1, 3, 3, "c.ckpt", "trained epochs 2 to 3 of 3 (resumed from c.ckpt)"},
		{2, 3, 3, "c.ckpt", "trained epoch 3 of 3 (resumed from c.ckpt)"},
	} {
		if got := trainedText(c.first, c.end, c.epochs, c.resumed); got != c.want {
			t.Errorf("trainedText(%d, %d, %d, %q) = %q, want %q", c.first, c.end, c.epochs, c.resumed, got, c.want)
		}
	}
}

// TestCSVTrainingSaysRows: the progress of a CSV model counts rows, not
// images.
func TestCSVTrainingSaysRows(t *testing.T) {
	for _, c := range []struct{ format, want string }{{"", "img"}, {"imagefolder", "img"}, {"csv", "rows"}, {"npy", "samples"}} {
		m := Meta{Data: DataSpec{Format: c.format}}
		if got := m.sampleNoun(); got != c.want {
			t.Errorf("format %q: %q, want %q", c.format, got, c.want)
		}
	}
	var b bytes.Buffer
	m := csvLinearModel()
	if code := Run(m, []string{"bench", "--iters", "1"}, &b, &b); code != 0 || !strings.Contains(b.String(), "rows/s") || strings.Contains(b.String(), "images/s") {
		t.Errorf("bench of a CSV model: exit %d:\n%s", code, b.String())
	}
}

// TestPredictCSVWithoutHeader: a CSV file given to predict without the
// header row the spec promises (header: true) is read from its first row,
// with a note; it silently lost its first sample as a header. A file with
// the header still predicts every row after it.
func TestPredictCSVWithoutHeader(t *testing.T) {
	dir := trainedLin(t)
	row := func(i int) string {
		cells := make([]string, 17)
		for j := range 16 {
			cells[j] = fmt.Sprint((i + j) % 3)
		}
		cells[16] = fmt.Sprint(i % 4)
		return strings.Join(cells, ",") + "\n"
	}
	var names []string
	for j := range 16 {
		names = append(names, fmt.Sprintf("f%d", j))
	}
	header := strings.Join(append(names, "class"), ",") + "\n"
	body := row(0) + row(1) + row(2)
	if err := os.WriteFile(filepath.Join(dir, "bare.csv"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "headed.csv"), []byte(header+body), 0o644); err != nil {
		t.Fatal(err)
	}
	m := func() *linearModel {
		m := csvLinearModel()
		m.meta.Data.Header = true
		return m
	}
	for _, c := range []struct {
		file string
		note bool
	}{{"bare.csv", true}, {"headed.csv", false}} {
		code, out, errOut := runModel(t, dir, m(), "predict", "--weights", "lin.safetensors", c.file)
		if code != 0 || strings.Count(out, c.file+"[") != 3 || strings.Contains(errOut, "no header row") != c.note {
			t.Errorf("predict %s: exit %d, want 3 predictions (note %v):\n%s%s", c.file, code, c.note, out, errOut)
		}
	}
	// Columns chosen by name cannot be found without the header: refused.
	named := m()
	named.meta.Data.Label = []Column{{Name: "class"}}
	code, _, errOut := runModel(t, dir, named, "predict", "--weights", "lin.safetensors", "bare.csv")
	if code == 0 || !strings.Contains(errOut, "is all numbers where the spec expects a header") {
		t.Errorf("predict bare.csv with named columns: exit %d: %s", code, errOut)
	}
}

// countingModel counts the runs of each inference plan.
type countingModel struct {
	*linearModel
	batches, ones int
}

func (c *countingModel) Infer(one bool) []float32 {
	if one {
		c.ones++
	} else {
		c.batches++
	}
	return c.linearModel.Infer(one)
}

// TestShortBatchesRunAlone: predict of one sample, or of a file whose
// last batch is short, runs those samples through the one-sample plan
// (a resnet18 sample from a .npy file took 22 times bench's batch-1
// latency through the batch plan), with the same outputs; eval does the
// same with its last batch. predict takes --threads.
func TestShortBatchesRunAlone(t *testing.T) {
	dir := trainedLin(t)
	var rows []string
	for i := range 5 {
		cells := make([]string, 16)
		for j := range cells {
			cells[j] = fmt.Sprint(float32((i*7+j)%5) / 4)
		}
		rows = append(rows, strings.Join(cells, ","))
	}
	outs := map[int]string{}
	for _, c := range []struct {
		rows, batches, ones int
	}{{1, 0, 1}, {4, 1, 0}, {5, 1, 1}} {
		name := fmt.Sprintf("r%d.csv", c.rows)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(rows[:c.rows], "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		m := &countingModel{linearModel: csvLinearModel()}
		code, out, errOut := runModel(t, dir, m, "predict", "--weights", "lin.safetensors", "--threads", "1", "--json", name)
		if code != 0 || strings.Count(out, "\n") != c.rows {
			t.Fatalf("predict %s: exit %d\n%s%s", name, code, out, errOut)
		}
		if m.batches != c.batches || m.ones != c.ones {
			t.Errorf("predict of %d rows at batch 4: %d batch runs and %d one-sample runs, want %d and %d", c.rows, m.batches, m.ones, c.batches, c.ones)
		}
		outs[c.rows] = strings.ReplaceAll(out, name, "f")
	}
	// Row 0 alone (r1.csv) and in a batch (r4.csv) gives the same output.
	if first := strings.SplitN(outs[4], "\n", 2)[0] + "\n"; outs[1] != first {
		t.Errorf("row 0 alone and in a batch differ:\n%s%s", outs[1], first)
	}
	// eval of 30 images at batch 4: 7 batches and 2 images alone.
	m := &countingModel{linearModel: newLinearModel()}
	code, out, errOut := runModel(t, dir, m, "eval", "--weights", "lin.safetensors", "--data", "data", "--split", "train", "--limit", "30")
	if code != 0 || !strings.Contains(out, "samples: 30\n") || m.batches != 7 || m.ones != 2 {
		t.Errorf("eval of 30 images: exit %d, %d batch runs and %d one-sample runs, want 7 and 2:\n%s%s", code, m.batches, m.ones, out, errOut)
	}
}

// TestInfoMemoryByUse: info gives each plan's peak memory and where it
// goes, from the planner's account in the program's metadata, in its text
// and in --json.
func TestInfoMemoryByUse(t *testing.T) {
	m := newLinearModel()
	m.meta.Memory = []MemoryUse{
		{Phase: "training", Weights: 272, Gradients: 272, Optimizer: 544, KeptForBackward: 3 << 20, Activations: 4, ActivationGrads: 1 << 20, Work: 4<<20 + 4, Total: 5 << 20},
		{Phase: "inference", Weights: 272, Activations: 2048, Scratch: 1024, Work: 3072, Total: 4096},
	}
	code, out, errOut := runModel(t, t.TempDir(), m, "info")
	if code != 0 {
		t.Fatalf("info: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"memory, training:   5.0 MiB peak: weights 272 B, gradients 272 B, optimizer state 544 B, activations kept for backward 3.0 MiB, other activations 4 B, gradients of activations 1.0 MiB\n",
		"memory, inference:  4.0 KiB peak: weights 272 B, activations 2.0 KiB, workspace 1.0 KiB\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runModel(t, t.TempDir(), m, "info", "--json")
	var j struct {
		Memory map[string]map[string]int64 `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.Memory["training"]["peak_bytes"] != 5<<20 || j.Memory["inference"]["workspace_bytes"] != 1024 || j.Memory["training"]["kept_for_backward_bytes"] != 3<<20 {
		t.Errorf("info --json memory: %v", j.Memory)
	}
}

// TestDeviceNeed: help, version, a command's --help and sample need no
// device, info describes it, the commands that run the model need it.
func TestDeviceNeed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want DeviceNeed
	}{
		{nil, DeviceUnused}, {[]string{"--help"}, DeviceUnused}, {[]string{"help", "train"}, DeviceUnused},
		{[]string{"version"}, DeviceUnused}, {[]string{"--version"}, DeviceUnused},
		{[]string{"train", "--data", "d", "--help"}, DeviceUnused}, {[]string{"predict", "-h"}, DeviceUnused},
		{[]string{"sample", "--data", "d", "x.png"}, DeviceUnused}, {[]string{"frobnicate"}, DeviceUnused},
		{[]string{"info"}, DeviceDescribed}, {[]string{"info", "--json"}, DeviceDescribed},
		{[]string{"train", "--data", "d"}, DeviceRequired}, {[]string{"eval"}, DeviceRequired},
		{[]string{"predict", "--weights", "w", "--", "--help"}, DeviceRequired}, // an input file named --help
		{[]string{"bench"}, DeviceRequired}, {[]string{"selftest"}, DeviceRequired},
	} {
		if got := DeviceNeedOf(c.args); got != c.want {
			t.Errorf("DeviceNeedOf(%q) = %d, want %d", c.args, got, c.want)
		}
	}
	var out, errOut bytes.Buffer
	meta := &newLinearModel().meta
	if code := RunWithoutDevice(meta, []string{"no GPU here", "CUDA driver: not found"}, []string{"info"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "device:") || !strings.Contains(out.String(), "none usable: no GPU here") || !strings.Contains(out.String(), "CUDA driver:") {
		t.Errorf("info without a device: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := RunWithoutDevice(meta, []string{"no GPU here"}, []string{"bench"}, &out, &errOut); code != exitFailure || out.Len() > 0 ||
		strings.Count(errOut.String(), "\n") != 2 || !strings.Contains(errOut.String(), "bench runs the model on the GPU") {
		t.Errorf("bench without a device: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
}

// trainCounter is a linearModel that counts the calls that make or run
// the training plan.
type trainCounter struct {
	*linearModel
	calls int
}

func (c *trainCounter) TrainInput() []float32 { c.calls++; return c.linearModel.TrainInput() }
func (c *trainCounter) TrainStep(lr float32, step int) float32 {
	c.calls++
	return c.linearModel.TrainStep(lr, step)
}

// TestBenchInferOnly: bench --infer-only times inference and never makes
// or runs the training plan (a zoo model's training memory is many times
// its inference's); without it, bench times a training step too.
func TestBenchInferOnly(t *testing.T) {
	for _, c := range []struct {
		args      []string
		wantTrain bool
	}{{[]string{"bench", "--iters", "1", "--json", "--infer-only"}, false}, {[]string{"bench", "--iters", "1", "--json"}, true}} {
		m := &trainCounter{linearModel: newLinearModel()}
		var b bytes.Buffer
		if code := Run(m, c.args, &b, &b); code != 0 {
			t.Fatalf("%v: exit %d\n%s", c.args, code, b.String())
		}
		var got map[string]any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, b.String())
		}
		_, hasTrain := got["train_step_ms"]
		if hasTrain != c.wantTrain || (m.calls > 0) != c.wantTrain || got["infer_batch1_ms"] == nil {
			t.Errorf("%v: train_step_ms present %v, training calls %d, output %s", c.args, hasTrain, m.calls, b.String())
		}
	}
}
