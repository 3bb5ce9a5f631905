package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/npy"
	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// TestOutputsAreDistinct: --out and --checkpoint naming one file (as
// written, through a link, in another relative form, by a hard link, or
// not there yet, in one folder reached through a link)
// are refused before training, and the file is left alone; so are
// --metrics on either and --out on the checkpoint being resumed.
func TestOutputsAreDistinct(t *testing.T) {
	dir := trainedLin(t)
	ckpt := filepath.Join(dir, "lin.ckpt.safetensors")
	before := mustRead(t, ckpt)
	os.Symlink("lin.ckpt.safetensors", filepath.Join(dir, "link.safetensors"))
	os.Link(ckpt, filepath.Join(dir, "hard.safetensors"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(".", filepath.Join(dir, "linkdir"))
	for _, args := range [][]string{
		{"--out", "lin.ckpt.safetensors", "--checkpoint", "lin.ckpt.safetensors"},
		{"--out", "link.safetensors", "--checkpoint", "lin.ckpt.safetensors"},
		{"--out", "./sub/../lin.ckpt.safetensors", "--checkpoint", ckpt},
		{"--out", "linkdir/new.safetensors", "--checkpoint", "new.safetensors"},
		{"--out", "hard.safetensors", "--checkpoint", "lin.ckpt.safetensors"},
		{"--out", "new.safetensors", "--checkpoint", "c.safetensors", "--metrics", "./c.safetensors"},
		{"--resume", "lin.ckpt.safetensors", "--out", "link.safetensors", "--epochs", "3"},
	} {
		code, out, errOut := runLin(t, dir, append([]string{"train", "--data", "data", "--epochs", "1", "--quiet"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "are the same file") {
			t.Errorf("%q: exit %d (want %d)\n%s%s", args, code, exitUsage, out, errOut)
		}
	}
	if !bytes.Equal(mustRead(t, ckpt), before) {
		t.Error("the checkpoint was changed")
	}
}

// TestMetricsAppendOnlyToMetrics: --metrics appends only to an empty file
// or one whose first line is an mlbuild metrics line, unless --force: a
// weights file or notes named by mistake were appended to.
func TestMetricsAppendOnlyToMetrics(t *testing.T) {
	dir := trainedLin(t)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("precious\n"), 0o644)
	weights := mustRead(t, filepath.Join(dir, "lin.safetensors"))
	for _, f := range []string{"lin.safetensors", "notes.txt"} {
		code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "1", "--quiet", "--out", "o.safetensors", "--metrics", f)
		if code != exitFailure || !strings.Contains(errOut, "--metrics "+f+" exists and is not a metrics file") {
			t.Errorf("--metrics %s: exit %d\n%s%s", f, code, out, errOut)
		}
	}
	if !bytes.Equal(mustRead(t, filepath.Join(dir, "lin.safetensors")), weights) || string(mustRead(t, filepath.Join(dir, "notes.txt"))) != "precious\n" {
		t.Fatal("a file was appended to")
	}
	for i := range 2 { // a metrics file of an earlier run takes more
		if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "1", "--quiet", "--out", "o.safetensors", "--metrics", "m.jsonl"); code != 0 {
			t.Fatalf("run %d with --metrics m.jsonl: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	if n := strings.Count(string(mustRead(t, filepath.Join(dir, "m.jsonl"))), `"event":"epoch"`); n != 2 {
		t.Errorf("m.jsonl holds %d epoch lines after two runs, want 2", n)
	}
	if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "1", "--quiet", "--out", "o.safetensors", "--metrics", "notes.txt", "--force"); code != 0 || !strings.HasPrefix(string(mustRead(t, filepath.Join(dir, "notes.txt"))), "precious\n{") {
		t.Errorf("--force appends: exit %d\n%s%s", code, out, errOut)
	}
}

// TestResumeKeepsItsPaths: a resumed run writes its weights and
// checkpoints where the interrupted run did (kept in the checkpoint),
// whatever the current folder; it wrote ./NAME.safetensors, replacing
// another run's weights there. A checkpoint without the kept paths writes
// beside itself, as its name says.
func TestResumeKeepsItsPaths(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	os.Mkdir(filepath.Join(dir, "runs"), 0o755)
	if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "1", "--quiet", "--out", "runs/a.safetensors"); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	// Another run's weights in the folder the resume runs in.
	other := trainedLin(t)
	theirs := mustRead(t, filepath.Join(other, "lin.safetensors"))
	a := mustRead(t, filepath.Join(dir, "runs", "a.safetensors"))
	code, out, errOut := runLin(t, other, "train", "--resume", filepath.Join(dir, "runs", "a.ckpt.safetensors"), "--epochs", "2", "--quiet")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	if !bytes.Equal(mustRead(t, filepath.Join(other, "lin.safetensors")), theirs) {
		t.Error("the resumed run replaced ./lin.safetensors, another run's weights")
	}
	if bytes.Equal(mustRead(t, filepath.Join(dir, "runs", "a.safetensors")), a) {
		t.Error("the resumed run did not write its weights to runs/a.safetensors")
	}
	// Without the kept paths (an older checkpoint): beside the checkpoint.
	ckpt := filepath.Join(dir, "runs", "a.ckpt.safetensors")
	f, err := safetensors.Read(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	delete(f.Metadata, "mlbuild.out")
	delete(f.Metadata, "mlbuild.checkpoint")
	if err := safetensors.Write(ckpt, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}
	a = mustRead(t, filepath.Join(dir, "runs", "a.safetensors"))
	code, out, errOut = runLin(t, other, "train", "--resume", ckpt, "--epochs", "3", "--quiet")
	if code != 0 || bytes.Equal(mustRead(t, filepath.Join(dir, "runs", "a.safetensors")), a) || !bytes.Equal(mustRead(t, filepath.Join(other, "lin.safetensors")), theirs) {
		t.Errorf("resume of a checkpoint without kept paths: exit %d; it must write runs/a.safetensors and leave ./lin.safetensors\n%s%s", code, out, errOut)
	}
}

// TestCheckpointMetadataChecked: a checkpoint's metadata and optimizer
// state are checked, and a bad value is blamed on the checkpoint's field,
// not on a flag the user did not give: a NaN best validation loss (the
// resumed run never wrote weights), epochs of 0, more bad epochs than
// epochs, a transposed optimizer moment.
func TestCheckpointMetadataChecked(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	m := momentumLin()
	if code, out, errOut := runModel(t, dir, m, "train", "--data", "data", "--epochs", "1", "--quiet", "--validation-split", "0.25"); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	ckpt := filepath.Join(dir, "lin.ckpt.safetensors")
	good := mustRead(t, ckpt)
	for _, c := range []struct {
		md    map[string]string
		shape bool
		want  string
	}{
		{md: map[string]string{"mlbuild.best_val_loss": "NaN"}, want: `checkpoint metadata mlbuild.best_val_loss is "NaN"`},
		{md: map[string]string{"mlbuild.epochs": "0"}, want: "checkpoint metadata mlbuild.epochs is 0, which --epochs cannot be"},
		{md: map[string]string{"mlbuild.lr": "-1"}, want: "checkpoint metadata mlbuild.lr is -1, which --lr cannot be"},
		{md: map[string]string{"mlbuild.bad_epochs": "5"}, want: "checkpoint metadata mlbuild.bad_epochs is 5, more than the 1 epochs"},
		{md: map[string]string{"mlbuild.out": "relative.safetensors"}, want: `checkpoint metadata mlbuild.out is "relative.safetensors"`},
		{shape: true, want: `tensor "dense1.weight.adam_m" is [16 4] in the file, the model needs [4 16]`},
	} {
		os.WriteFile(ckpt, good, 0o644)
		rewriteTensor(t, ckpt, func(ts []safetensors.Tensor) {
			for i := range ts {
				if c.shape && ts[i].Name == "dense1.weight.adam_m" {
					ts[i].Shape = []int{16, 4}
				}
			}
		})
		{
			f, _ := safetensors.Read(ckpt)
			f.Metadata["mlbuild.epochs"] = "3" // the run is not finished
			for k, v := range c.md {
				f.Metadata[k] = v
			}
			safetensors.Write(ckpt, f.Tensors, f.Metadata)
		}
		code, out, errOut := runModel(t, dir, momentumLin(), "train", "--resume", "lin.ckpt.safetensors", "--quiet")
		if code != exitFailure || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "usage") {
			t.Errorf("%v: exit %d (want %d), stderr lacks %q:\n%s%s", c.md, code, exitFailure, c.want, out, errOut)
		}
	}
}

// momentumLin is the test model with one optimizer moment per param
// (adam_m, beside the params in the state arena), which its SGD step
// leaves alone: a checkpoint of it holds optimizer state.
func momentumLin() *linearModel {
	m := newLinearModel()
	m.state = append(m.state, make([]float32, lmIn*lmClasses+lmClasses)...)
	m.meta.StateNames = []string{"adam_m"}
	m.meta.Params[0].State = []int{lmState}
	m.meta.Params[1].State = []int{lmState + lmIn*lmClasses}
	return m
}

// TestPredictGoesOnAfterABadInput: predict reports a bad input and
// predicts the others, then exits 1 (it stopped at the first bad one);
// with --output it writes nothing, as the rows would not pair with the
// inputs.
func TestPredictGoesOnAfterABadInput(t *testing.T) {
	dir := trainedLin(t)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not an input"), 0o644)
	code, out, errOut := runLin(t, dir, "predict", "--weights", "lin.safetensors", "missing.pgm", "digit.pgm", "notes.txt", "digit.pgm")
	if code != exitFailure || strings.Count(out, "digit.pgm: class") != 2 || !strings.Contains(errOut, "missing.pgm") || !strings.Contains(errOut, "notes.txt") || !strings.Contains(errOut, "2 of 4 inputs could not be predicted") {
		t.Errorf("exit %d (want %d), want both digits predicted and both bad inputs named:\n%s%s", code, exitFailure, out, errOut)
	}
	code, out, errOut = runLin(t, dir, "predict", "--weights", "lin.safetensors", "--output", "o.npy", "missing.pgm", "digit.pgm")
	if _, err := os.Stat(filepath.Join(dir, "o.npy")); code != exitFailure || err == nil || !strings.Contains(errOut, "o.npy was not written") {
		t.Errorf("--output with a bad input: exit %d, o.npy written: %v\n%s%s", code, err == nil, out, errOut)
	}
}

// TestPredictOutputReplacesOnlyItsOwn: --output replaces an array that
// predict wrote, and no other file without --force (it replaced any).
func TestPredictOutputReplacesOnlyItsOwn(t *testing.T) {
	dir := trainedLin(t)
	if err := npy.Write(filepath.Join(dir, "mine.npy"), []int{1, 4}, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	mine := mustRead(t, filepath.Join(dir, "mine.npy"))
	for i := range 2 {
		if code, out, errOut := runLin(t, dir, "predict", "--weights", "lin.safetensors", "--output", "o.npy", "digit.pgm"); code != 0 {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	code, out, errOut := runLin(t, dir, "predict", "--weights", "lin.safetensors", "--output", "mine.npy", "digit.pgm")
	if code != exitFailure || !strings.Contains(errOut, "--output mine.npy exists and is not an array written by predict") || !bytes.Equal(mustRead(t, filepath.Join(dir, "mine.npy")), mine) {
		t.Errorf("--output on a user's array: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runLin(t, dir, "predict", "--weights", "lin.safetensors", "--output", "mine.npy", "--force", "digit.pgm"); code != 0 || bytes.Equal(mustRead(t, filepath.Join(dir, "mine.npy")), mine) {
		t.Errorf("--force: exit %d\n%s%s", code, out, errOut)
	}
}
