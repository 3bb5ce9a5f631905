package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// settings are a run's flags that differ from the spec's defaults, so that
// a resume which forgot any of them would train another run.
var settings = []string{"--data", "data", "--epochs", "6", "--lr", "0.3", "--limit", "56", "--validation-split", "0.25", "--patience", "4"}

// TestResumeContinuesTheRun: a run interrupted by Ctrl-C and continued with
// `train --resume CKPT` alone (no --data, no other flag) ends with the
// weights of the same run uninterrupted, bit for bit: the checkpoint keeps
// epochs, learning rate, limit, validation split, patience and data folder.
func TestResumeContinuesTheRun(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	if code, out, errOut := runLin(t, dir, append([]string{"train", "--out", "ref.safetensors", "--quiet"}, settings...)...); code != 0 {
		t.Fatalf("uninterrupted train: exit %d\n%s%s", code, out, errOut)
	}
	ref := mustRead(t, filepath.Join(dir, "ref.safetensors"))
	// 56 images, 14 held out: 42 train, 10 steps an epoch; step 17 is in epoch 2.
	for _, at := range []int{3, 17, 40} {
		m := newLinearModel()
		m.interruptAt = at
		code, out, errOut := runModel(t, dir, m, append([]string{"train", "--out", "r.safetensors", "--quiet"}, settings...)...)
		if code != exitSignal || !strings.Contains(errOut, "--resume r.ckpt.safetensors") {
			t.Fatalf("interrupt at step %d: exit %d (want %d)\n%s%s", at, code, exitSignal, out, errOut)
		}
		code, out, errOut = runLin(t, dir, "train", "--resume", "r.ckpt.safetensors", "--out", "r.safetensors", "--quiet")
		if code != 0 {
			t.Fatalf("resume after step %d: exit %d\n%s%s", at, code, out, errOut)
		}
		if strings.Contains(errOut, "note:") {
			t.Errorf("resume with no flags printed a note: %s", errOut)
		}
		if got := mustRead(t, filepath.Join(dir, "r.safetensors")); !bytes.Equal(got, ref) {
			t.Errorf("interrupted at step %d and resumed: the weights differ from the uninterrupted run's", at)
		}
	}
}

// TestResumeOverride: a flag given with --resume wins over the kept value
// and a note says which; a finished run can be lengthened this way.
func TestResumeOverride(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	if code, out, errOut := runLin(t, dir, append([]string{"train", "--quiet"}, settings...)...); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runLin(t, dir, "train", "--resume", "lin.ckpt.safetensors", "--epochs", "8", "--quiet")
	if code != 0 || !strings.Contains(errOut, "note: --epochs 8 differs from the interrupted run's 6") || !strings.Contains(out, "trained epochs 7 to 8 of 8 (resumed from lin.ckpt.safetensors)") {
		t.Errorf("--resume --epochs 8: exit %d\n%s%s", code, out, errOut)
	}
}

// TestResumeFinishedRun: resuming a run that trained all its epochs, or
// stopped early, says so, exits 0 and changes no file.
func TestResumeFinishedRun(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	if code, out, errOut := runLin(t, dir, append([]string{"train", "--quiet", "--metrics", "m.jsonl"}, settings...)...); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	files := []string{"lin.safetensors", "lin.ckpt.safetensors", "m.jsonl"}
	before := map[string][]byte{}
	stamps := map[string]time.Time{}
	for _, f := range files {
		before[f] = mustRead(t, filepath.Join(dir, f))
		fi, _ := os.Stat(filepath.Join(dir, f))
		stamps[f] = fi.ModTime()
	}
	time.Sleep(10 * time.Millisecond)
	for _, args := range [][]string{
		{"train", "--resume", "lin.ckpt.safetensors", "--metrics", "m.jsonl"},
		{"train", "--resume", "lin.ckpt.safetensors", "--metrics", "m.jsonl", "--data", "data", "--epochs", "6"},
	} {
		code, out, errOut := runLin(t, dir, args...)
		if code != 0 || !strings.Contains(out, "this run is finished (6 of 6 epochs); nothing was changed") {
			t.Errorf("%q: exit %d, want 0 saying the run is finished:\n%s%s", args, code, out, errOut)
		}
	}
	for _, f := range files {
		fi, _ := os.Stat(filepath.Join(dir, f))
		if !bytes.Equal(mustRead(t, filepath.Join(dir, f)), before[f]) || !fi.ModTime().Equal(stamps[f]) {
			t.Errorf("resuming a finished run changed %s", f)
		}
	}

	// Early stopping: a learning rate this large makes the validation loss
	// worse after the first epoch, so patience 1 stops the run early.
	code, out, errOut := runLin(t, dir, "train", "--data", "data", "--validation-split", "0.25", "--patience", "1", "--epochs", "30", "--lr", "300", "--out", "e.safetensors", "--quiet")
	if code != 0 || !strings.Contains(out, "early stopping") {
		t.Fatalf("train with patience 1: exit %d, want early stopping:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runLin(t, dir, "train", "--resume", "e.ckpt.safetensors", "--out", "e.safetensors")
	if code != 0 || !strings.Contains(out, "this run stopped early after epoch") {
		t.Errorf("resume of an early-stopped run: exit %d\n%s%s", code, out, errOut)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWeightsRecordTheirEpoch: the weights file says how many epochs made
// it; with a validation split, the best epoch's.
func TestWeightsRecordTheirEpoch(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "3", "--quiet"); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	md, err := readMetadata(filepath.Join(dir, "lin.safetensors"))
	if err != nil || md["mlbuild.trained_epochs"] != "3" {
		t.Errorf("weights metadata %v (%v), want mlbuild.trained_epochs 3", md, err)
	}
	// still weights, not a checkpoint: eval and predict take it
	if code, out, errOut := runLin(t, dir, "eval", "--data", "data", "--weights", "lin.safetensors"); code != 0 {
		t.Errorf("eval: exit %d\n%s%s", code, out, errOut)
	}
}
