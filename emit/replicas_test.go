package emit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCUDADataParallel is the evidence of data-parallel training without
// GPUs: the CUDA program of testdata/fakehost/mnist_mlp.cue (an MLP on
// MNIST at batch 8, so it holds the tables of 2, 4 and 8 GPUs) runs testdata/fakehost/
// cuda_ddp_test.go on cuda/fakecuda's GPUs and NCCL: 20 steps on 2 and 4
// fake GPUs against one, the gradients' buckets with and without overlap,
// and the program as a command with --gpus through a rank's failure (it
// trains on MNIST: make data), and cuda_nodes_test.go, two members
// (--nodes 2) through the rendezvous against --gpus 2; the program of
// mnist_bn.cue (the same with a batch norm) runs cuda_syncbn_test.go:
// synchronised batch norm on 2 fake GPUs against one; with
// MLBUILD_CUDA_DDP_TWINS=1 the tiny bf16 ResNet's runs
// cuda_ddp_twins_test.go too: its weights' bfloat16 twins (the
// convolutions' in KRSC order) as the replicas' updates write them. That
// case compiles a third program's kernels (about three minutes of CI's
// 2-core machine), and the twins the single-GPU update writes are checked
// in TestCUDAPrograms' fake run; run it where data-parallel or the twins
// change.
func TestCUDADataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a CUDA program on fake GPUs")
	}
	dir := t.TempDir()
	if keep := os.Getenv("MLBUILD_CUDA_DDP_DIR"); keep != "" {
		dir = keep // keep the module, to run its tests by hand
	}
	fake, err := CUDA.DeviceFiles(true)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "fakehost", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	helpers := read("ddp_helpers_test.go")
	cases := []struct{ spec, cmd, test string }{
		{"mnist_mlp.cue", "mnist", "cuda_ddp_test.go"},
		{"mnist_bn.cue", "mnistbn", "cuda_syncbn_test.go"},
	}
	if os.Getenv("MLBUILD_CUDA_DDP_TWINS") == "1" {
		cases = append(cases, struct{ spec, cmd, test string }{"../../../testdata/specs/bf16/resnet_tiny_bf16.cue", "resnettiny", "cuda_ddp_twins_test.go"})
	}
	for _, c := range cases {
		files, err := CUDA.program(backendInput(t, CUDA, filepath.Join("testdata", "fakehost", c.spec), true, 0))
		if err != nil {
			t.Fatal(err)
		}
		if c.cmd == "mnist" {
			files = append(files, fake...)
		}
		for _, f := range files {
			switch f.Path {
			case "main.go", "kernels.go":
				f.Path = "cmd/" + c.cmd + "/" + f.Path
			}
			writeModule(t, dir, []File{f})
		}
		writeModule(t, dir, []File{{Path: "cmd/" + c.cmd + "/ddp_test.go", Data: read(c.test)}, {Path: "cmd/" + c.cmd + "/ddp_helpers_test.go", Data: helpers}})
		if c.cmd == "mnist" {
			writeModule(t, dir, []File{{Path: "cmd/mnist/nodes_test.go", Data: read("cuda_nodes_test.go")}})
		}
	}
	args := []string{"test", "-trimpath", "-count=1", "-timeout=20m"} // -trimpath: see goEnv
	if testing.Verbose() {
		args = append(args, "-v")
	}
	b := goTestOnFakeCUDA(t, dir, args, "./cmd/...", "data-parallel training on the fake GPUs failed")
	for _, c := range cases {
		if cmd := c.cmd; !strings.Contains(string(b), "ok  \tmlbuildprog/cmd/"+cmd) {
			t.Errorf("no passing test run of cmd/%s in:\n%s", cmd, b)
		}
	}
	t.Logf("%s", b)
}

// TestNoReplicasWhenAccumulating: a CUDA program whose spec accumulates
// gradients carries no replica tables (it trains on one GPU, and --gpus 2
// is refused with the counts it has), while one that does not carries
// the 2-GPU share.
func TestNoReplicasWhenAccumulating(t *testing.T) {
	for _, c := range []struct {
		spec string
		want bool
	}{{"accumulate.cue", false}, {"mlp_784_512_256_10.cue", true}} {
		files, err := CUDA.program(backendInput(t, CUDA, "../testdata/specs/valid/"+c.spec, true, 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == "main.go" {
				if got := strings.Contains(string(f.Data), "MainReplicated"); got != c.want {
					t.Errorf("%s: main.go runs MainReplicated: %v, want %v", c.spec, got, c.want)
				}
			}
		}
	}
}
