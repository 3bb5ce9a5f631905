package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/npy"
)

// convBNSpec is a small MNIST network with a batch norm after each layer
// that has weights: a convolution without bias, a depthwise one and a
// dense layer, each followed by a batch norm and a ReLU, so that every
// kind of fold runs.
const convBNSpec = `package convbn

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "convbn"
	model: {
		input: [1, 28, 28]
		layers: [
			{op: "conv2d", outChannels: 8, kernel: 3, padding: 1, bias: false},
			{op: "batchnorm"},
			{op: "relu"},
			{op: "maxpool2d", kernel: 2},
			{op: "conv2d", outChannels: 8, kernel: 3, padding: 1, groups: 8},
			{op: "batchnorm"},
			{op: "relu"},
			{op: "maxpool2d", kernel: 2},
			{op: "flatten"},
			{op: "dense", units: 32},
			{op: "batchnorm"},
			{op: "relu"},
			{op: "dense", units: 10},
		]
	}
	training: {
		loss: "softmax_cross_entropy"
		optimizer: {kind: "adam", lr: 3e-3}
		epochs:    2
		batchSize: 50
		seed:      1
	}
	dataset: {
		format:      "idx"
		trainImages: "train-images-idx3-ubyte"
		trainLabels: "train-labels-idx1-ubyte"
		testImages:  "t10k-images-idx3-ubyte"
		testLabels:  "t10k-labels-idx1-ubyte"
		classes:     10
		imageShape: [1, 28, 28]
	}
}
`

// TestFoldBatchNormProgram compiles convBNSpec with the batch norms folded
// into their layers at inference (the default) and with
// --fold-batchnorm=off, trains both on 2000 digits for two epochs with a
// validation split, and checks that the fold changes nothing but rounding:
// the weights files are byte for byte the same (the training plan does not
// fold, and the folded weights are never written), each epoch's validation
// loss and accuracy agree (the validation after the second epoch runs on
// weights the first training steps changed: the fold must run again), and
// the logits of 2000 test digits agree within 1e-4 of their largest
// magnitude (float32 rounding of the folded weights, a sum in another
// order).
func TestFoldBatchNormProgram(t *testing.T) {
	data := mnistDir(t)
	tmp := t.TempDir()
	specFile := filepath.Join(tmp, "convbn.cue")
	if err := os.WriteFile(specFile, []byte(convBNSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := mlbuild(t, "plan", specFile, "--mode", "infer")
	if code != 0 || strings.Count(out, "fold_batchnorm") != 3 || strings.Contains(out, " batchnorm ") {
		t.Fatalf("plan --mode infer: exit %d, want 3 fold steps and no batch norm left:\n%s%s", code, out, errOut)
	}
	type run struct {
		name, bin, weights, metrics, logits string
	}
	runs := []*run{{name: "folded"}, {name: "unfolded"}}
	for _, r := range runs {
		r.bin = filepath.Join(tmp, r.name)
		r.weights = filepath.Join(tmp, r.name+".safetensors")
		r.metrics = filepath.Join(tmp, r.name+".jsonl")
		r.logits = filepath.Join(tmp, r.name+".npy")
		args := []string{"compile", specFile, "-o", r.bin, "--cache-dir", filepath.Join(tmp, "cache")}
		if r.name == "unfolded" {
			args = append(args, "--fold-batchnorm=off")
		}
		if code, out, errOut := mlbuild(t, args...); code != 0 {
			t.Fatalf("compile %s: exit %d\n%s%s", r.name, code, out, errOut)
		}
		cmd := exec.Command(r.bin, "train", "--data", data, "--limit", "2000", "--validation-split", "0.2", "--patience", "0",
			"--threads", "2", "--out", r.weights, "--metrics", r.metrics, "--quiet")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("train %s: %v\n%s", r.name, err, b)
		}
	}
	wa, _ := os.ReadFile(runs[0].weights)
	wb, _ := os.ReadFile(runs[1].weights)
	if len(wa) == 0 || !bytes.Equal(wa, wb) {
		t.Errorf("the weights files differ with the fold and without (%d and %d bytes)", len(wa), len(wb))
	}

	va, vb := validation(t, runs[0].metrics), validation(t, runs[1].metrics)
	if len(va) != 4 || len(vb) != 4 {
		t.Fatalf("want validation loss and accuracy of 2 epochs, got %v and %v", va, vb)
	}
	for i := range va {
		if math.Abs(va[i]-vb[i]) > 1e-4*math.Max(1, math.Abs(vb[i])) {
			t.Errorf("validation figures with the fold %v, without %v", va, vb)
			break
		}
	}

	// Both programs predict from the same weights.
	for _, r := range runs {
		cmd := exec.Command(r.bin, "predict", "--weights", runs[1].weights, "--output", r.logits, "--threads", "2",
			filepath.Join(data, "t10k-images-idx3-ubyte"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("predict %s: %v\n%s", r.name, err, b)
		}
	}
	la, lb := readLogits(t, runs[0].logits), readLogits(t, runs[1].logits)
	if len(la) != len(lb) || len(la) < 10*2000 {
		t.Fatalf("%d and %d logits, want the same number, at least 20000", len(la), len(lb))
	}
	scale, worst, at := 0.0, 0.0, 0
	for i := range lb {
		scale = math.Max(scale, math.Abs(lb[i]))
		if d := math.Abs(la[i] - lb[i]); d > worst {
			worst, at = d, i
		}
	}
	if worst > 1e-4*scale {
		t.Errorf("logit %d: %v with the fold, %v without; the largest difference %g passes 1e-4 of the largest logit %g", at, la[at], lb[at], worst, scale)
	}
	t.Logf("%d logits: largest difference %.3g, largest logit %.3g", len(la), worst, scale)
}

// validation returns each epoch's validation loss and accuracy from a
// metrics file, in order.
func validation(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev struct {
			Event   string  `json:"event"`
			ValLoss float64 `json:"val_loss"`
			ValAcc  float64 `json:"val_acc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		if ev.Event == "epoch" {
			out = append(out, ev.ValLoss, ev.ValAcc)
		}
	}
	return out
}

// readLogits reads every element of a .npy file predict wrote.
func readLogits(t *testing.T, path string) []float64 {
	t.Helper()
	a, err := npy.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = a.At(i)
	}
	return out
}
