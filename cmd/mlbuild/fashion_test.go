package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fashionDir is the Fashion-MNIST IDX folder (make data-fashion), from
// MLBUILD_FASHION_DIR or data/fashion; the test skips when neither holds
// the files, and fails when MLBUILD_FASHION_DIR names a folder without them.
func fashionDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("MLBUILD_FASHION_DIR") != "" {
		return dataDir(t, "MLBUILD_FASHION_DIR", "fashion", "train-images-idx3-ubyte", "make data-fashion")
	}
	dir := filepath.Join("..", "..", "data", "fashion")
	if _, err := os.Stat(filepath.Join(dir, "train-images-idx3-ubyte")); err != nil {
		t.Skipf("Fashion-MNIST is not in %s (make data-fashion, or set MLBUILD_FASHION_DIR)", dir)
	}
	return dir
}

// stepLosses reads the step losses of a metrics file.
func stepLosses(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var losses []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev struct {
			Event string  `json:"event"`
			Loss  float64 `json:"loss"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("metrics line %q: %v", sc.Text(), err)
		}
		if ev.Event == "step" {
			losses = append(losses, ev.Loss)
		}
	}
	return losses
}

// meanTail is the mean of the last n values.
func meanTail(v []float64, n int) float64 {
	var s float64
	for _, x := range v[len(v)-n:] {
		s += x / float64(n)
	}
	return s
}

// TestFashionInitReinit compiles a small convolutional network on
// Fashion-MNIST padded from 28×28 to 32×32 (testdata/fashion/conv_pad.cue),
// trains it a few steps, then trains again from those weights with the
// output layer re-initialised (--init W --reinit dense2), and checks both
// runs' losses fall and the second starts from the first's features: its
// loss falls further in as many steps than the first run's did.
func TestFashionInitReinit(t *testing.T) {
	data := fashionDir(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "fashion_pad")
	if code, out, errOut := mlbuild(t, "compile", "../../testdata/fashion/conv_pad.cue", "-o", bin, "--cache-dir", filepath.Join(tmp, "cache")); code != 0 {
		t.Fatalf("compile exited %d:\n%s%s", code, out, errOut)
	}
	train := func(name string, args ...string) ([]float64, string) {
		t.Helper()
		metrics := filepath.Join(tmp, name+".jsonl")
		args = append([]string{"train", "--data", data, "--limit", "1920", "--epochs", "1", "--validation-split", "0",
			"--threads", "2", "--out", filepath.Join(tmp, name+".safetensors"), "--metrics", metrics}, args...)
		b, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
		losses := stepLosses(t, metrics)
		if len(losses) != 60 {
			t.Fatalf("%s: %d step events, want 60 (1920 images in batches of 32)", name, len(losses))
		}
		return losses, string(b)
	}
	first, _ := train("first")
	if tail := meanTail(first, 5); !(tail < first[0]*0.7) {
		t.Errorf("the first run's loss did not fall: first step %.3f, mean of the last five %.3f", first[0], tail)
	}
	second, out := train("second", "--init", filepath.Join(tmp, "first.safetensors"), "--reinit", "dense2")
	if !strings.Contains(out, "dense2 from the seed's initialisation") {
		t.Errorf("the run from weights does not say dense2 starts afresh:\n%s", out)
	}
	// A fresh output layer on trained features: the second run's first
	// loss is not the trained weights' (which --init alone starts from).
	kept, _ := train("kept", "--init", filepath.Join(tmp, "first.safetensors"))
	if d := second[0] - kept[0]; d < 0.3 && d > -0.3 {
		t.Errorf("with --reinit dense2 the run starts at loss %.3f, as without it (%.3f): dense2 was not re-initialised", second[0], kept[0])
	}
	tail1, tail2 := meanTail(first, 5), meanTail(second, 5)
	if !(tail2 < second[0]*0.7) {
		t.Errorf("the second run's loss did not fall: first step %.3f, mean of the last five %.3f", second[0], tail2)
	}
	if !(tail2 < tail1) {
		t.Errorf("the run from trained features ends at loss %.3f, no lower than the fresh run's %.3f after as many steps", tail2, tail1)
	}
	t.Logf("fresh: %.3f → %.3f; from its weights, dense2 re-initialised: %.3f → %.3f", first[0], tail1, second[0], tail2)
}
