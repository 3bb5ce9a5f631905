package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/app"
	npyfile "github.com/mlbuild/mlbuild/rt/npy"
)

// TestCompileBuffersOver2GB compiles a model whose training work arena is
// 4.3 GB and inference work arena 2.2 GB (a dense layer 8192 wide at batch
// 65536: each activation is 2 GiB). When the arenas were package-level arrays, Go's linker refused
// the program ("symbol too large", over 2 GB) and compile failed with exit
// 3; now they are allocated when the program starts, so it builds, and its
// size does not grow with its buffers. The program is not trained (the
// test machine need not have the memory); info, which allocates nothing, runs.
func TestCompileBuffersOver2GB(t *testing.T) {
	dir := t.TempDir()
	spec := hardWriteSpec(t, dir, "wide.cue", "units: 256", "units: 8192")
	src, _ := os.ReadFile(spec)
	if err := os.WriteFile(spec, []byte(strings.Replace(string(src), "batchSize: 8", "batchSize: 65536", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "wide")
	code, out, errOut := hardCLI("compile", spec, "--memory-limit", "0", "--cache-dir", filepath.Join(dir, "cache"), "-o", bin)
	if code != ExitOK {
		t.Fatalf("compile of a model with 4.3 GB of buffers exited %d:\n%s%s", code, out, errOut)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 64<<20 {
		t.Errorf("the program is %d bytes: its buffers should not be in it", fi.Size())
	}
	info, err := exec.Command(bin, "info").CombinedOutput()
	if err != nil || !strings.Contains(string(info), "tiny") {
		t.Errorf("info: %v\n%s", err, info)
	}
}

// testMemoryRefusal: a produced program checks each phase's arenas against
// the memory available before its first step (here a figure given by
// app.MemoryEnv, as the tests may), and refuses one that does not fit with
// exit 1 and a message holding the bytes needed and available and what to
// change, never a panic. The state arena is made alone for the weights, so
// a predict never makes the training arena.
func testMemoryRefusal(t *testing.T, e *hardEnv) {
	dir := t.TempDir()
	out, err := exec.Command(e.bin, "info", "--json").Output()
	if err != nil {
		t.Fatalf("info --json: %v", err)
	}
	var info struct {
		State int64 `json:"state_bytes"`
		Train int64 `json:"train_work_bytes"`
		Infer int64 `json:"infer_work_bytes"`
		Batch int   `json:"batch"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.State == 0 || info.Train == 0 {
		t.Fatalf("info --json: %v %+v\n%s", err, info, out)
	}
	logits := int64(4 * info.Batch * 4) // the training prediction: batch × 4 classes
	run := func(avail int64, args ...string) (int, string) {
		cmd := exec.Command(e.bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", app.MemoryEnv, avail))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stderr.String()
		} else if err != nil {
			t.Fatalf("running %s: %v", e.bin, err)
		}
		return 0, stderr.String()
	}
	train := []string{"train", "--data", e.data, "--epochs", "1", "--out", "w.safetensors", "--quiet"}
	for _, c := range []struct {
		name  string
		avail int64
		args  []string
		want  []string
	}{
		{"weights", 1000, train, []string{"not enough memory for the weights", fmt.Sprintf("needs %d bytes", info.State), "1000 bytes", app.MemoryEnv}},
		// The state made, train/2 of the figure is left.
		{"training", info.State + info.Train/2, train, []string{"not enough memory for training",
			fmt.Sprintf("needs %d bytes", info.Train+logits), fmt.Sprintf("but %d bytes", info.Train/2), "training.batchSize (now 8)", "tiny.cue"}},
	} {
		code, stderr := run(c.avail, c.args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1:\n%s", c.name, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr does not say %q:\n%s", c.name, w, stderr)
			}
		}
		if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "internal error") {
			t.Errorf("%s: the refusal reads as a crash:\n%s", c.name, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "w.safetensors")); err == nil {
			t.Errorf("%s: a refused train wrote its weights", c.name)
		}
	}
	// Enough for training: it trains. Then predict needs the state and the
	// inference arenas only: what training alone would need is not asked.
	if code, stderr := run(info.State+info.Train+logits, train...); code != 0 {
		t.Fatalf("train with exactly the memory it needs: exit %d:\n%s", code, stderr)
	}
	npy := filepath.Join(dir, "x.npy")
	// A whole batch of samples, which predict runs through the batch plan
	// (a short batch may go through the one-sample plan and its arena).
	if err := npyfile.Write(npy, []int{info.Batch, 1, 8, 8}, make([]float32, 64*info.Batch)); err != nil {
		t.Fatal(err)
	}
	if info.Infer >= info.Train {
		t.Fatalf("test bug: the tiny model's inference arena (%d bytes) is not smaller than its training arena (%d)", info.Infer, info.Train)
	}
	if code, stderr := run(info.State+info.Infer, "predict", "--weights", "w.safetensors", npy); code != 0 {
		t.Errorf("predict within the inference plan's memory: exit %d:\n%s", code, stderr)
	}
}

// TestCompileRefusesWeightsTooLargeToEmbed: weights over the 2e9 bytes Go's
// linker puts in one symbol are refused before anything is read or built
// (exit 1, the size and the way round it), not left to fail the build as
// "a bug in mlbuild" (exit 3). The file is sparse: it takes no disk.
func TestCompileRefusesWeightsTooLargeToEmbed(t *testing.T) {
	dir := t.TempDir()
	spec := hardWriteSpec(t, dir, "tiny.cue", "", "")
	w := filepath.Join(dir, "big.safetensors")
	f, err := os.Create(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxEmbeddedBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out, errOut := hardCLI("compile", spec, "--weights", w, "--cache-dir", filepath.Join(dir, "cache"), "-o", filepath.Join(dir, "tiny"))
	if code != ExitInvalid || !strings.Contains(errOut, "2000000001 bytes") || !strings.Contains(errOut, "predict --weights big.safetensors") {
		t.Errorf("compile --weights of a 2 GB file: exit %d (want %d), stderr should give its size and the run-time --weights:\n%s%s", code, ExitInvalid, out, errOut)
	}
}
