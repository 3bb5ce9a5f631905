package main

// This file is copied next to the main.go of the generated CUDA programs
// of MNIST specs by emit's tests (TestCUDAPrograms, cudaFaultSpecs), beside
// cuda_test.go and cuda_main_test.go: it runs the program itself, as a
// command, on a fake GPU whose graph launch faults in the middle of
// training.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFaultMidTraining: a GPU fault in the second epoch of `train` ends
// the command with exit status 1 and a message naming the epoch, the
// failing sequence, the CUDA error and the last good checkpoint, which is
// the first epoch's and resumes to the end of the run.
func TestFaultMidTraining(t *testing.T) {
	B := program.Meta.Batch
	if program.TrainInputSize/B != 784 || program.Meta.Classes != 10 {
		t.Fatalf("%s does not take MNIST digits; emit's tests copy this file only beside programs that do", program.Meta.Name)
	}
	mnist := os.Getenv("MLBUILD_MNIST_DIR")
	if _, err := os.Stat(filepath.Join(mnist, "train-images-idx3-ubyte")); err != nil {
		t.Fatalf("MNIST is needed (run `make data` or set MLBUILD_MNIST_DIR): %v", err)
	}
	dir, cache := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "w.safetensors")
	ckpt := filepath.Join(dir, "w.ckpt.safetensors")
	// One step an epoch (the device-resident loop: a graph launch starts
	// each epoch, another runs its step): launch 4 is the second epoch's
	// step. A training step of a convolutional
	// network costs seconds on the fake, so the runs take as few as show
	// the fault, the checkpoint and the resume.
	args := []string{"train", "--data", mnist, "--epochs", "2", "--limit", strconv.Itoa(B), "--validation-split", "0", "--out", out, "--quiet"}
	run := func(failAt int, args []string, env ...string) (string, int) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MLBUILD_FAKEHOST_FAIL_AT="+strconv.Itoa(failAt),
			"MLBUILD_FAKEHOST_ARGS="+strings.Join(args, "\n"), "MLBUILD_FAKEHOST_CACHE="+cache)
		cmd.Env = append(cmd.Env, env...)
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), code
	}
	msg, code := run(4, args)
	if code != 1 {
		t.Fatalf("train with a fault in epoch 2: exit status %d, want 1; output:\n%s", code, msg)
	}
	for _, want := range []string{"epoch 2", "CUDA_ERROR_LAUNCH_FAILED", "train", "the last good checkpoint is " + ckpt, "--resume " + ckpt,
		"MLBUILD_CUDA_BLOCKING=1"} { // the graph's failure cannot name the kernel: it says how to
		if !strings.Contains(msg, want) {
			t.Errorf("the failure message lacks %q:\n%s", want, msg)
		}
	}
	msg, code = run(0, []string{"train", "--resume", ckpt, "--data", mnist, "--quiet"})
	if code != 0 {
		t.Fatalf("resuming from %s after the fault: exit status %d; output:\n%s", ckpt, code, msg)
	}
	if !strings.Contains(msg, "trained epoch 2 of 2 (resumed from") {
		t.Errorf("the resumed run did not finish the second epoch:\n%s", msg)
	}
	// Run as the graph failure's message says, the kernel and step are named.
	var kernel string
	for _, st := range program.TrainBackward {
		for _, op := range st.Ops {
			if kernel == "" && op.Gemm == nil {
				kernel = op.Kernel
			}
		}
	}
	msg, code = run(0, args, "MLBUILD_CUDA_BLOCKING=1", "MLBUILD_FAKEHOST_FAIL_KERNEL="+kernel)
	if code != 1 {
		t.Fatalf("train with a fault in kernel %s, blocking: exit status %d, want 1; output:\n%s", kernel, code, msg)
	}
	for _, want := range []string{"epoch 1", "training step 1 ", "(kernel " + kernel + ")", `training step" at op `, "CUDA_ERROR_LAUNCH_FAILED"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the blocking failure message lacks %q:\n%s", want, msg)
		}
	}
}
