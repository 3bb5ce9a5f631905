package main

// This file is copied next to cuda_ddp_test.go by emit's
// TestCUDADataParallel: a run of several members (train --nodes 2) on the
// fake GPUs. The fake NCCL cannot span processes, so the members are
// goroutines of this test process, each with its own fake GPU of one NCCL
// world, meeting through the real rendezvous over loopback and watching
// each other through its control channel, as two machines would.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mlbuildprog/cuda"
	"mlbuildprog/cuda/fakecuda"
	"mlbuildprog/rt/gpuhost"
	"mlbuildprog/rt/rendezvous"
)

const nodesToken = "a-test-token-of-some-length"

// listenLoopback is member 0's port for a test.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// joinNodes starts n members of one fake GPU each, of the NCCL world w,
// through the rendezvous on ln, as RunMember does, and returns each
// member's Replicated (global rank i on member i).
func joinNodes(t *testing.T, w *fakecuda.NCCLWorld, ln net.Listener, work, cache string, n int) []*gpuhost.Replicated {
	t.Helper()
	out := make([]*gpuhost.Replicated, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			devs, err := worldDevices(w, work, cache, 1, nil)
			if err != nil {
				errs[i] = err
				return
			}
			clique := cuda.NewClique(devs)
			cfg := rendezvous.Config{Members: n, Member: i, Addr: ln.Addr().String(), Token: nodesToken, Timeout: 30 * time.Second}
			self := rendezvous.Member{Host: "node" + strconv.Itoa(i), GPUs: 1}
			var g *rendezvous.Group
			if i == 0 {
				id, err := clique.NewID()
				if err != nil {
					errs[i] = err
					return
				}
				g, err = rendezvous.Serve(context.Background(), ln, cfg, self, id)
				if err != nil {
					errs[i] = err
					return
				}
			} else if g, err = rendezvous.Dial(context.Background(), cfg, self); err != nil {
				errs[i] = err
				return
			}
			t.Cleanup(func() { g.Close() })
			colls, err := clique.Start(g.Payload, g.Self().FirstRank, g.Ranks(), 30*time.Second)
			if err != nil {
				errs[i] = err
				return
			}
			out[i], errs[i] = gpuhost.NewReplicated(hostDevices(devs), colls, &program, 30*time.Second)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return out
}

// hostFed runs steps host-fed training steps on m from the seed's state:
// each step's loss and prediction of the global batch.
func hostFed(m *gpuhost.Replicated, steps int) ([]float32, [][]float32) {
	B := program.Meta.Batch
	x, y, init, _, _ := trainData(steps*B, steps)
	copy(m.State(), init)
	inN, labN := len(m.TrainInput()), len(m.TrainLabels())
	var loss []float32
	var out [][]float32
	for s := range steps {
		copy(m.TrainInput(), x[s*inN:(s+1)*inN])
		copy(m.TrainLabels(), y[s*labN:(s+1)*labN])
		loss = append(loss, m.TrainStep(1e-3, s+1))
		out = append(out, append([]float32(nil), m.TrainOutput()...))
	}
	return loss, out
}

// TestTwoNodesMatchOneMachine trains two members of one fake GPU each
// (global ranks 0 and 1, met through the rendezvous) against --gpus 2 in
// one process: host-fed steps (the losses and the global batch's
// prediction gathered across the members) and 10 device-resident steps
// give the same bits, losses, counts of correct rows and weights, on both
// members. (--gpus 2 matches one GPU within TestDataParallelMatchesOneGPU's
// tolerance.)
func TestTwoNodesMatchOneMachine(t *testing.T) {
	work, cache := os.Getenv("MLBUILD_FAKECUDA_DIR"), t.TempDir()
	const steps, host = 10, 3
	devs, err := fakeDevices(work, cache, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, cs, err := cuda.StartReplicas(devs, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	two, err := gpuhost.NewReplicated(ds, cs, &program, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantHostLoss, wantOut := hostFed(two, host)
	wantLoss, wantCorrect, wantState := residentRun(t, two, steps, 7)
	if err := two.Close(); err != nil {
		t.Fatal(err)
	}

	nodes := joinNodes(t, fakecuda.NewNCCLWorld(), listenLoopback(t), work, cache, 2)
	type result struct {
		hostLoss []float32
		out      [][]float32
		loss     []float32
		correct  []int
		state    []float32
		err      error
	}
	res := make([]result, 2)
	var wg sync.WaitGroup
	for i, m := range nodes {
		if m.GPUs() != 1 || m.Ranks() != 2 {
			t.Fatalf("node %d: %d GPUs of %d ranks, want 1 of 2", i, m.GPUs(), m.Ranks())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &res[i]
			r.hostLoss, r.out = hostFed(m, host)
			r.loss, r.correct, r.state, r.err = residentTrain(m, steps, 7)
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("node %d: %v", i, r.err)
		}
		for s := range host {
			if r.hostLoss[s] != wantHostLoss[s] {
				t.Errorf("node %d, host-fed step %d: loss %v, --gpus 2 %v", i, s+1, r.hostLoss[s], wantHostLoss[s])
			}
			for k := range wantOut[s] {
				if r.out[s][k] != wantOut[s][k] {
					t.Errorf("node %d, host-fed step %d: prediction[%d] %v, --gpus 2 %v (row %d of the global batch)", i, s+1, k, r.out[s][k], wantOut[s][k], k/(len(wantOut[s])/program.Meta.Batch))
					break
				}
			}
		}
		for s := range wantLoss {
			if r.loss[s] != wantLoss[s] || r.correct[s] != wantCorrect[s] {
				t.Errorf("node %d, step %d: loss %v and %d rows correct, --gpus 2 %v and %d", i, s+1, r.loss[s], r.correct[s], wantLoss[s], wantCorrect[s])
			}
		}
		differ := 0
		for k := range wantState {
			if r.state[k] != wantState[k] {
				differ++
			}
		}
		if differ > 0 {
			t.Errorf("node %d: %d of %d state values differ from --gpus 2's after %d steps", i, differ, len(wantState), steps)
		}
	}
	t.Logf("2 nodes: host-fed losses %v, resident %v…, as --gpus 2", res[0].hostLoss, res[0].loss[:3])
	for _, m := range nodes {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}
}

// nodeRun is one member's end in runNodes.
type nodeRun struct {
	code     int
	out, err string
	took     time.Duration
}

// nodeSetup varies one member of runNodes.
type nodeSetup struct {
	args    []string
	token   string
	step    time.Duration // its step timeout
	prepare func(*fakecuda.Fake)
	joined  func(*rendezvous.Group)
	hang    bool // its fake GPU's sums never start (with joined: a dead process)
}

// runNodes runs one train command per member with gpuhost.RunMember, the
// members goroutines of this process with one fake GPU each of one NCCL
// world, member 0 on a loopback port.
func runNodes(t *testing.T, nodes []nodeSetup) []nodeRun {
	t.Helper()
	work, cache := os.Getenv("MLBUILD_FAKECUDA_DIR"), t.TempDir()
	w := fakecuda.NewNCCLWorld()
	ln := listenLoopback(t)
	runs := make([]nodeRun, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		args := append(append([]string(nil), n.args...), "--nodes", strconv.Itoa(len(nodes)), "--node-rank", strconv.Itoa(i), "--rendezvous", ln.Addr().String())
		cfg, err := gpuhost.DistributedConfig(args, func(k string) string {
			if k == rendezvous.TokenEnv {
				return n.token
			}
			return ""
		})
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		step := n.step
		if step == 0 {
			step = time.Minute
		}
		mb := gpuhost.Member{
			Config: cfg, Host: "node" + strconv.Itoa(i), Program: &program, StepTimeout: step, StartTimeout: 30 * time.Second,
			Watch: rendezvous.WatchOptions{Interval: 100 * time.Millisecond, Silence: 3 * time.Second},
			Open: func(first, count int) ([]gpuhost.Device, gpuhost.Clique, error) {
				if first != 0 || count != 1 {
					return nil, nil, fmt.Errorf("opening GPUs %d to %d; want GPU 0 alone", first, first+count-1)
				}
				devs, err := worldDevices(w, work, cache, 1, func(_ int, f *fakecuda.Fake) {
					if n.prepare != nil {
						n.prepare(f)
					}
				})
				if err != nil {
					return nil, nil, err
				}
				return hostDevices(devs), cuda.NewClique(devs), nil
			},
			Joined: n.joined,
			Grace:  time.Hour, // the test's own limits say when it is late
			Exit:   func(code int) { t.Errorf("node %d: the grace ran out (exit %d)", i, code) },
		}
		if i == 0 {
			mb.Listener = ln
		}
		if n.hang {
			w.Hang(i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errs bytes.Buffer
			start := time.Now()
			runs[i].code = gpuhost.RunMember(mb, args, &out, &errs)
			runs[i].took = time.Since(start)
			runs[i].out, runs[i].err = out.String(), errs.String()
		}()
	}
	wg.Wait()
	return runs
}

// execSelf runs this test binary as the program with args (TestMain).
func execSelf(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MLBUILD_FAKEHOST_DDP=1", "MLBUILD_FAKEHOST_ARGS="+strings.Join(args, "\n"))
	return cmd
}

// losses reads the step losses of a --metrics file.
func losses(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l []float64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Event string  `json:"event"`
			Loss  float64 `json:"loss"`
			Acc   float64 `json:"acc"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ev.Event == "step" {
			l = append(l, ev.Loss, ev.Acc)
		}
	}
	return l
}

// TestNodesOnTheCommandLine runs `train --nodes 2 --node-rank I
// --rendezvous HOST:PORT` as two members: both exit 0; node 0 alone
// reports progress and writes the metrics, checkpoint and weights, which
// are --gpus 2's (the losses and accuracies of every step, the weights'
// bytes); node 1 writes nothing. Three nodes of one GPU, a total the
// program holds no tables for, all exit 2. Then the failures: a node with the wrong
// token is refused (exit 1 on both, naming the token); node 1's GPU
// faulting in epoch 2 ends node 0 (exit 1, naming node 1, its host, rank
// and fault, within the step timeout), keeping the first epoch's
// checkpoint, from which both nodes resume to the end; node 1 dying (its connection closed, its sums never run)
// ends node 0 within seconds, though its step timeout is a minute.
func TestNodesOnTheCommandLine(t *testing.T) {
	mnist := os.Getenv("MLBUILD_MNIST_DIR")
	if _, err := os.Stat(filepath.Join(mnist, "train-images-idx3-ubyte")); err != nil {
		t.Fatalf("MNIST is needed (run `make data` or set MLBUILD_MNIST_DIR): %v", err)
	}
	B := program.Meta.Batch
	dir := t.TempDir()
	train := func(name string, extra ...string) []string {
		return append([]string{"train", "--data", mnist, "--epochs", "2", "--limit", strconv.Itoa(4 * B), "--validation-split", "0",
			"--out", filepath.Join(dir, name+".safetensors"), "--metrics", filepath.Join(dir, name+".jsonl"), "--force"}, extra...)
	}
	// --gpus 2 in one process, as TestGPUsOnTheCommandLine runs it.
	cmdRun := func(args []string) (string, int) {
		cmd := execSelf(args)
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			return string(b), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), 0
	}
	if msg, code := cmdRun(train("gpus2", "--gpus", "2")); code != 0 {
		t.Fatalf("--gpus 2: exit status %d:\n%s", code, msg)
	}

	runs := runNodes(t, []nodeSetup{{args: train("node0"), token: nodesToken}, {args: train("node1"), token: nodesToken}})
	for i, r := range runs {
		if r.code != 0 {
			t.Fatalf("node %d: exit status %d\n%s%s", i, r.code, r.out, r.err)
		}
	}
	if want := fmt.Sprintf("node 0 of 2 (node0): GPUs as ranks 0 to 0; training on 2 GPUs of 2 nodes: global batch %d = 2 × %d", B, B/2); !strings.Contains(runs[0].out, want) || !strings.Contains(runs[0].out, "trained 2 epochs") {
		t.Errorf("node 0's output lacks %q or the summary:\n%s", want, runs[0].out)
	}
	if !strings.Contains(runs[1].out, "node 0 wrote the weights and checkpoint") || strings.Contains(runs[1].out, "epoch 1/2") {
		t.Errorf("node 1 should print no progress and say that node 0 wrote the files:\n%s", runs[1].out)
	}
	for _, f := range []string{"node1.safetensors", "node1.ckpt.safetensors", "node1.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("node 1 wrote %s", f)
		}
	}
	if got, want := losses(t, filepath.Join(dir, "node0.jsonl")), losses(t, filepath.Join(dir, "gpus2.jsonl")); fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 16 {
		t.Errorf("node 0's step losses and accuracies %v; --gpus 2's %v", got, want)
	}
	a, errA := os.ReadFile(filepath.Join(dir, "node0.safetensors"))
	b, errB := os.ReadFile(filepath.Join(dir, "gpus2.safetensors"))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("node 0's weights differ from --gpus 2's (%v, %v; %d and %d bytes)", errA, errB, len(a), len(b))
	}

	t.Run("no tables for the total", func(t *testing.T) {
		three := nodeSetup{args: train("three", "--quiet"), token: nodesToken}
		for i, r := range runNodes(t, []nodeSetup{three, three, three}) {
			if r.code != 2 || !strings.Contains(r.err, "3 nodes with 3 GPUs in all: this program trains on 1 or 2 or 4 or 8 GPU(s), not 3") {
				t.Errorf("node %d of 3 nodes of one GPU: exit status %d, want 2 and the counts the program holds:\n%s", i, r.code, r.err)
			}
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		runs := runNodes(t, []nodeSetup{
			{args: train("tok0", "--rendezvous-timeout", "3s"), token: nodesToken},
			{args: train("tok1", "--rendezvous-timeout", "3s"), token: "another-token-of-some-length"},
		})
		if runs[1].code != 1 || !strings.Contains(runs[1].err, "token") {
			t.Errorf("node 1 with the wrong token: exit status %d, want 1 naming the token:\n%s", runs[1].code, runs[1].err)
		}
		if runs[0].code != 1 || !strings.Contains(runs[0].err, "never joined") || !strings.Contains(runs[0].err, "token") {
			t.Errorf("node 0: exit status %d, want 1 saying node 1 never joined and a connection was refused for its token:\n%s", runs[0].code, runs[0].err)
		}
	})

	// Rank 1's launches: per epoch a state snapshot and three a step (the
	// step's parts around its two gradient buckets, as in
	// TestGPUsOnTheCommandLine), 4 steps: launch 18 is in the second epoch.
	t.Run("a node's GPU fails", func(t *testing.T) {
		ckpt := filepath.Join(dir, "fail0.ckpt.safetensors")
		// A faulted fake GPU runs no more sums and its stream never
		// reports the fault (a real one's does, at once), so node 1 learns
		// of its fault at its step timeout, and tells node 0 then.
		const step = 10 * time.Second // the fake under a loaded machine (load 700) took more than 3 s a step
		runs := runNodes(t, []nodeSetup{
			{args: train("fail0", "--quiet"), token: nodesToken, step: step},
			{args: train("fail1", "--quiet"), token: nodesToken, step: step, prepare: func(f *fakecuda.Fake) { f.FailGraphLaunch(18, cuda.ErrorLaunchFailed) }},
		})
		if runs[1].code != 1 || !strings.Contains(runs[1].err, "CUDA_ERROR_LAUNCH_FAILED") {
			t.Errorf("node 1 (its GPU failed): exit status %d, want 1 with the fault:\n%s", runs[1].code, runs[1].err)
		}
		for _, want := range []string{"node 1 (node1, rank 1) failed", "CUDA_ERROR_LAUNCH_FAILED", "the last good checkpoint is " + ckpt} {
			if runs[0].code != 1 || !strings.Contains(runs[0].err, want) {
				t.Errorf("node 0: exit status %d, want 1 and %q in:\n%s", runs[0].code, want, runs[0].err)
			}
		}
		if runs[0].took > step+10*time.Second { // 10 s of slack for a loaded machine
			t.Errorf("node 0 took %v to end; the step timeout is %v", runs[0].took, step)
		}
		if _, err := os.Stat(ckpt); err != nil {
			t.Fatalf("the first epoch's checkpoint is gone: %v", err)
		}
		// Both nodes resume from it (a shared folder, as on a cluster).
		resume := []string{"train", "--resume", ckpt, "--data", mnist, "--quiet", "--force"}
		runs = runNodes(t, []nodeSetup{{args: resume, token: nodesToken}, {args: resume, token: nodesToken}})
		for i, r := range runs {
			if r.code != 0 || !strings.Contains(r.out, "trained epoch 2 of 2 (resumed from") {
				t.Errorf("node %d resuming: exit status %d\n%s%s", i, r.code, r.out, r.err)
			}
		}
	})

	t.Run("a node dies", func(t *testing.T) {
		var once sync.Once
		runs := runNodes(t, []nodeSetup{
			{args: train("dead0", "--quiet"), token: nodesToken},
			// node 1 joins, then its process "dies": the connection closes
			// without a done, and its GPU runs no more sums.
			{args: train("dead1", "--quiet"), token: nodesToken, step: 2 * time.Second, hang: true,
				joined: func(g *rendezvous.Group) {
					once.Do(func() { time.AfterFunc(200*time.Millisecond, func() { g.Close() }) })
				}},
		})
		if runs[0].code != 1 || !strings.Contains(runs[0].err, "node 1 (node1, rank 1) failed: its connection closed") {
			t.Errorf("node 0: exit status %d, want 1 naming node 1's closed connection:\n%s", runs[0].code, runs[0].err)
		}
		if runs[0].took > 20*time.Second {
			t.Errorf("node 0 took %v to end after node 1 died", runs[0].took)
		}
		if runs[1].code == 0 {
			t.Errorf("the dead node 1 ended well:\n%s", runs[1].err)
		}
	})
}
