package main

// This file is copied next to the main.go of the CUDA program of
// mnist_mlp.cue (batch 8, so that it holds the replica tables of 2, 4 and
// 8 GPUs) by emit's TestCUDADataParallel: it trains
// data-parallel on several fake GPUs (cuda/fakecuda, one NCCL world that
// really sums) against one fake GPU, and runs the program as a command
// with --gpus 2 through a rank's failure.

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mlbuildprog/cuda"
	"mlbuildprog/cuda/fakecuda"
	"mlbuildprog/rt/gpuhost"
)

// TestMain lets the tests run this program as a command: with
// MLBUILD_FAKEHOST_DDP=1 the test binary is the program (as main.go runs
// it) with the arguments in MLBUILD_FAKEHOST_ARGS, one per line, on one
// fake GPU, or on --gpus N fake GPUs of one NCCL world (all: 2).
// MLBUILD_FAKEHOST_FAIL_RANK and MLBUILD_FAKEHOST_FAIL_AT make that rank's
// nth graph launch fault; MLBUILD_FAKEHOST_NO_NCCL=1 makes opening several
// GPUs (and so NCCL) exit 97, which a run on one GPU must never do.
func TestMain(m *testing.M) {
	if os.Getenv("MLBUILD_FAKEHOST_DDP") != "1" {
		os.Exit(m.Run())
	}
	os.Args = append(os.Args[:1], strings.Split(os.Getenv("MLBUILD_FAKEHOST_ARGS"), "\n")...)
	work, cache := os.Getenv("MLBUILD_FAKECUDA_DIR"), os.Getenv("MLBUILD_FAKEHOST_CACHE")
	failRank, failAt := -1, 0
	if v := os.Getenv("MLBUILD_FAKEHOST_FAIL_RANK"); v != "" {
		failRank, _ = strconv.Atoi(v)
		failAt, _ = strconv.Atoi(os.Getenv("MLBUILD_FAKEHOST_FAIL_AT"))
	}
	open := func() (gpuhost.Device, error) {
		f := fakecuda.New(fakecuda.Options{WorkDir: work})
		return cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: cache})
	}
	openN := func(first, n int) ([]gpuhost.Device, gpuhost.Clique, error) {
		if os.Getenv("MLBUILD_FAKEHOST_NO_NCCL") == "1" {
			fmt.Fprintln(os.Stderr, "several GPUs and NCCL were opened")
			os.Exit(97)
		}
		if n == 0 { // all: 2 fake GPUs, or MLBUILD_FAKEHOST_ALL
			n = 2
			if v := os.Getenv("MLBUILD_FAKEHOST_ALL"); v != "" {
				n, _ = strconv.Atoi(v)
			}
		}
		devs, err := fakeDevices(work, cache, n, func(i int, f *fakecuda.Fake) {
			if i == failRank {
				f.FailGraphLaunch(failAt, cuda.ErrorLaunchFailed)
			}
		})
		if err != nil {
			return nil, nil, err
		}
		return hostDevices(devs), cuda.NewClique(devs), nil
	}
	gpuhost.MainReplicated(open, openN, &program)
}

// Tolerances of data-parallel training against one GPU: the same rows,
// weights and seeds, but each GEMM of the backward pass sums its batch in
// N parts (then added by the all-reduce), so the gradients differ in
// float32 rounding, which Adam (a step of about lr whatever the
// gradient's size) can turn into a weight moved the other way where a
// gradient is near zero.
const (
	ddpLossTol   = 1e-4 // relative, on each of the first 20 losses
	ddpWeightTol = 1e-4 // on 99% of each param's weights after 20 steps
)

// TestDataParallelMatchesOneGPU trains 20 steps on one fake GPU and on 2
// and on 4 fake GPUs (each its share of every batch, gradients summed by
// the fake NCCL): the losses agree within ddpLossTol, the counts of
// correct rows exactly, and the weights within ddpWeightTol (all within
// 2·lr·steps). On 2 GPUs it trains twice more: with every bucket's sums
// after the whole backward pass (no overlap) and with 4 KiB buckets
// (about 50, most started while the backward pass still computes); the
// sums are the same, so both must give the very bits of the default run.
func TestDataParallelMatchesOneGPU(t *testing.T) {
	work, cache := os.Getenv("MLBUILD_FAKECUDA_DIR"), t.TempDir()
	const steps, lr = 20, 1e-3
	f := fakecuda.New(fakecuda.Options{WorkDir: work})
	d, err := cuda.OpenDevice(cuda.Options{Libraries: f.Libraries(), KernelCacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	one, err := gpuhost.New(d, &program)
	if err != nil {
		t.Fatal(err)
	}
	wantLoss, wantCorrect, wantState := residentRun(t, one, steps, 7)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Libraries().NCCL != nil {
		t.Errorf("the one-GPU run loaded NCCL")
	}
	// ddp trains on n fake GPUs, buckets set by setup when not nil.
	ddp := func(t *testing.T, n int, setup func(*gpuhost.Replicated) error) ([]float32, []int, []float32) {
		devs, err := fakeDevices(work, cache, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		ds, cs, err := cuda.StartReplicas(devs, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r, err := gpuhost.NewReplicated(ds, cs, &program, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		}()
		if r.GPUs() != n || r.Meta().Batch != program.Meta.Batch {
			t.Fatalf("%d GPUs, batch %d; want %d and the global %d", r.GPUs(), r.Meta().Batch, n, program.Meta.Batch)
		}
		if setup != nil {
			if err := setup(r); err != nil {
				t.Fatal(err)
			}
		}
		return residentRun(t, r, steps, 7)
	}
	var twoLoss, twoState []float32
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d GPUs", n), func(t *testing.T) {
			loss, correct, state := ddp(t, n, func(r *gpuhost.Replicated) error {
				// The model has no batch norm: --sync-bn is refused.
				if err := r.SetSyncBN(); err == nil || !strings.Contains(err.Error(), "no batch norm") {
					t.Errorf("SetSyncBN on a model without batch norm: %v; want a refusal saying so", err)
				}
				return nil
			})
			if n == 2 {
				twoLoss, twoState = loss, state
			}
			for i := range wantLoss {
				if d := math.Abs(float64(loss[i] - wantLoss[i])); !(d <= ddpLossTol*math.Max(1, math.Abs(float64(wantLoss[i])))) {
					t.Errorf("step %d: loss %v on %d GPUs, %v on one", i+1, loss[i], n, wantLoss[i])
				}
				if correct[i] != wantCorrect[i] {
					t.Errorf("step %d: %d rows correct on %d GPUs, %d on one", i+1, correct[i], n, wantCorrect[i])
				}
			}
			worst := 0.0
			for _, p := range program.Meta.Params {
				far := 0
				for i := p.Offset; i < p.Offset+p.Size; i++ {
					d := math.Abs(float64(state[i] - wantState[i]))
					worst = max(worst, d)
					if d > 2*lr*steps {
						t.Errorf("after %d steps %s[%d] is %v on %d GPUs, %v on one", steps, p.Name, i-p.Offset, state[i], n, wantState[i])
						break
					}
					if d > ddpWeightTol {
						far++
					}
				}
				if far > p.Size/100+1 {
					t.Errorf("after %d steps %d of the %d weights of %s differ by more than %g between %d GPUs and one", steps, far, p.Size, p.Name, ddpWeightTol, n)
				}
			}
			t.Logf("%d GPUs: first losses %v (one GPU: %v); largest weight difference %.3g", n, loss[:3], wantLoss[:3], worst)
		})
	}
	for _, c := range []struct {
		name     string
		maxBytes int
		overlap  bool
	}{{"2 GPUs, sums after the backward pass", gpuhost.DefaultBucketBytes, false}, {"2 GPUs, 4 KiB buckets", 4096, true}} {
		t.Run(c.name, func(t *testing.T) {
			if twoState == nil {
				t.Fatal("the 2-GPU run failed")
			}
			loss, _, state := ddp(t, 2, func(r *gpuhost.Replicated) error { return r.SetBuckets(c.maxBytes, c.overlap) })
			same := func(what string, got, want []float32) {
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Errorf("%s[%d] is %v, %v with the default buckets", what, i, got[i], want[i])
						return
					}
				}
			}
			same("loss", loss, twoLoss)
			same("state", state, twoState)
		})
	}
}

// TestGPUsOnTheCommandLine runs the program as a command: --gpus 1 (and no
// --gpus) trains without opening NCCL; --gpus all on a machine of one GPU
// trains on it; --gpus 3 is refused naming the
// counts the program has, and --sync-bn of this model without batch norm
// too; --gpus 2 trains; a fault of rank 1's GPU in the
// second epoch ends the run with exit status 1 and a message naming the
// rank, within the step timeout, keeping the first epoch's checkpoint,
// from which a run on one GPU resumes to the end.
func TestGPUsOnTheCommandLine(t *testing.T) {
	mnist := os.Getenv("MLBUILD_MNIST_DIR")
	if _, err := os.Stat(filepath.Join(mnist, "train-images-idx3-ubyte")); err != nil {
		t.Fatalf("MNIST is needed (run `make data` or set MLBUILD_MNIST_DIR): %v", err)
	}
	B := program.Meta.Batch
	dir, cache := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "w.safetensors")
	ckpt := filepath.Join(dir, "w.ckpt.safetensors")
	train := func(extra ...string) []string {
		return append([]string{"train", "--data", mnist, "--epochs", "2", "--limit", strconv.Itoa(4 * B), "--validation-split", "0", "--out", out, "--force"}, extra...)
	}
	run := func(args []string, env ...string) (string, int, time.Duration) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MLBUILD_FAKEHOST_DDP=1", "MLBUILD_FAKEHOST_ARGS="+strings.Join(args, "\n"), "MLBUILD_FAKEHOST_CACHE="+cache)
		cmd.Env = append(cmd.Env, env...)
		start := time.Now()
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), code, time.Since(start)
	}
	for _, args := range [][]string{train(), train("--gpus", "1")} {
		msg, code, _ := run(args, "MLBUILD_FAKEHOST_NO_NCCL=1")
		if code != 0 || strings.Contains(msg, "GPUs:") {
			t.Errorf("%q: exit status %d, want 0 on one GPU without NCCL; output:\n%s", args, code, msg)
		}
	}
	msg, code, _ := run(train("--gpus", "all"), "MLBUILD_FAKEHOST_ALL=1")
	if code != 0 || strings.Contains(msg, "GPUs:") || !strings.Contains(msg, "trained 2 epochs") {
		t.Errorf("--gpus all on a machine of one GPU: exit status %d, want 0 and a run on one GPU; output:\n%s", code, msg)
	}
	msg, code, _ = run(train("--gpus", "3"))
	if code != 2 || !strings.Contains(msg, "--gpus 3") || !strings.Contains(msg, "1 or 2 or 4 or 8") {
		t.Errorf("--gpus 3: exit status %d, want 2 and a message listing 1, 2, 4 and 8; output:\n%s", code, msg)
	}
	msg, code, _ = run(train("--gpus", "2", "--sync-bn"))
	if code != 2 || !strings.Contains(msg, "has no batch norm layer") {
		t.Errorf("--gpus 2 --sync-bn of a model without batch norm: exit status %d, want 2 and a message saying so; output:\n%s", code, msg)
	}
	msg, code, _ = run(train("--gpus", "2"))
	if code != 0 || !strings.Contains(msg, fmt.Sprintf("training on 2 GPUs: global batch %d = 2 × %d", B, B/2)) || !strings.Contains(msg, "trained 2 epochs") {
		t.Errorf("--gpus 2: exit status %d, want 0 with the shares and two epochs; output:\n%s", code, msg)
	}
	// Rank 1's launches: per epoch a state snapshot and three a step (the
	// step's parts: up to the second layer's backward, the first's, the
	// update; the two layers' gradients are two buckets, not adjacent in
	// the state), 4 steps: launch 18 is the second epoch's second step.
	const timeout = 20 * time.Second
	msg, code, took := run(train("--gpus", "2", "--quiet"), "MLBUILD_FAKEHOST_FAIL_RANK=1", "MLBUILD_FAKEHOST_FAIL_AT=18", "MLBUILD_STEP_TIMEOUT="+timeout.String())
	if code != 1 {
		t.Fatalf("--gpus 2 with rank 1 failing: exit status %d, want 1; output:\n%s", code, msg)
	}
	for _, want := range []string{"epoch 2", "rank 1 of 2", "CUDA_ERROR_LAUNCH_FAILED", "the last good checkpoint is " + ckpt} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure message lacks %q:\n%s", want, msg)
		}
	}
	if took > timeout+10*time.Second { // 10 s of slack for a loaded machine
		t.Errorf("the failed run took %v, more than its step timeout of %v", took, timeout)
	}
	msg, code, _ = run([]string{"train", "--resume", ckpt, "--data", mnist, "--quiet", "--force"}, "MLBUILD_FAKEHOST_NO_NCCL=1")
	if code != 0 || !strings.Contains(msg, "trained epoch 2 of 2 (resumed from") {
		t.Errorf("resuming on one GPU from the 2-GPU run's checkpoint: exit status %d; output:\n%s", code, msg)
	}
}
