package main

// This file is copied next to the main.go of the generated CUDA programs
// of text specs by emit's tests (TestCUDAPrograms, cudaTextSpecs), beside
// cuda_test.go and cuda_main_test.go: it runs the program's `train` as a
// command on a fake GPU.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTextTrainingOnTheDevice: `train` of a language model on the start
// of Moby-Dick (its first 2,000 bytes or so, cut at a line: the fake GPU
// validates every window of the last tenth after each epoch) keeps the training text on the GPU and gathers each step's windows there
// (a fault injected into the kernel that makes their labels fails the
// run), and trains what the host-fed loop trains (MLBUILD_HOST_FED=1,
// where that kernel never runs): the same loss and learning rate at every
// step of two epochs, under a schedule that changes the rate every step,
// and the same weights to the byte.
func TestTextTrainingOnTheDevice(t *testing.T) {
	book, err := os.ReadFile(filepath.Join(os.Getenv("MLBUILD_TEXT_DIR"), "moby-dick.txt"))
	if err != nil {
		t.Fatalf("Moby-Dick is needed (run `make data-text` or set MLBUILD_TEXT_DIR): %v", err)
	}
	text := t.TempDir()
	if err := os.WriteFile(filepath.Join(text, "moby-dick.txt"), book[:2000+bytes.IndexByte(book[2000:], '\n')+1], 0o644); err != nil {
		t.Fatal(err)
	}
	if program.Resident == nil || program.Resident.Windows == 0 {
		t.Fatalf("%s has no kernels for windows of a text: emit's tests copy this file only beside programs of text datasets", program.Meta.Name)
	}
	dir, cache := t.TempDir(), t.TempDir()
	run := func(name string, env ...string) (out string, code int, metrics []byte, weights []byte) {
		w, m := filepath.Join(dir, name+".safetensors"), filepath.Join(dir, name+".jsonl")
		args := []string{"train", "--data", text, "--limit", "8", "--epochs", "2", "--seed", "3", "--out", w, "--metrics", m, "--quiet"}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), "MLBUILD_FAKEHOST_FAIL_AT=0",
			"MLBUILD_FAKEHOST_ARGS="+strings.Join(args, "\n"), "MLBUILD_FAKEHOST_CACHE="+cache), env...)
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		metrics, _ = os.ReadFile(m)
		weights, _ = os.ReadFile(w)
		return string(b), code, metrics, weights
	}
	type event struct {
		Event     string
		Step      int
		Loss, Acc float64
		LR        float64 `json:"lr"`
	}
	steps := func(name string, metrics []byte) []event {
		var es []event
		for _, line := range bytes.Split(bytes.TrimSpace(metrics), []byte("\n")) {
			var e event
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatalf("%s: metrics line %q: %v", name, line, err)
			}
			if e.Event == "step" {
				es = append(es, e)
			}
		}
		return es
	}
	out, code, devM, devW := run("device")
	if code != 0 {
		t.Fatalf("train on the device: exit status %d:\n%s", code, out)
	}
	out, code, hostM, hostW := run("host", "MLBUILD_HOST_FED=1", "MLBUILD_FAKEHOST_FAIL_KERNEL="+program.Resident.GatherLabels)
	if code != 0 {
		t.Fatalf("train fed from the host (kernel %s set to fault, never run): exit status %d:\n%s", program.Resident.GatherLabels, code, out)
	}
	dev, host := steps("device", devM), steps("host", hostM)
	if len(dev) != 2*(8/program.Meta.Batch) || len(dev) != len(host) {
		t.Fatalf("%d steps on the device, %d fed from the host, want %d", len(dev), len(host), 2*(8/program.Meta.Batch))
	}
	lrs := map[float64]bool{}
	for i := range dev {
		if dev[i] != host[i] {
			t.Errorf("step %d: %+v on the device, %+v fed from the host", i+1, dev[i], host[i])
		}
		lrs[dev[i].LR] = true
	}
	if len(lrs) < len(dev)/2 {
		t.Errorf("%d learning rates over %d steps: the schedule does not change the rate every step", len(lrs), len(dev))
	}
	if len(devW) == 0 || !bytes.Equal(devW, hostW) {
		t.Errorf("the weights trained on the device (%d bytes) and fed from the host (%d bytes) differ", len(devW), len(hostW))
	}
	out, code, _, _ = run("fault", "MLBUILD_FAKEHOST_FAIL_KERNEL="+program.Resident.GatherLabels)
	if code != 1 || !strings.Contains(out, "CUDA_ERROR_LAUNCH_FAILED") {
		t.Errorf("train with the window labels' kernel %s set to fault: exit status %d, want 1 and the CUDA error; output:\n%s", program.Resident.GatherLabels, code, out)
	}
}
