package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// accumulateSpec is a small classifier of csv rows; each case of
// TestAccumulateMatchesLargerBatch fills in the optimizer, the batch and
// accumulate.
const accumulateSpec = `package acc

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "acc"
	model: {
		input: [4]
		layers: [
			{op: "dense", units: 8},
			{op: "tanh"},
			{op: "dense", units: 3},
		]
	}
	training: {
		TRAINING
		epochs: 3
		seed:   5
	}
	dataset: {
		format:   "csv"
		train:    "train.csv"
		label:    -1
		classes:  3
		features: 4
	}
}
`

// TestAccumulateMatchesLargerBatch: a CPU program whose optimizer steps
// accumulate 2 micro-batches of 4 trains, on the same data in the same
// order, to the weights of one that steps on batches of 8, up to float
// rounding (the loss is a mean over a batch, so the sum of the two
// micro-batches' gradients is halved); clipping, weight decay and a
// per-step schedule with warmup count optimizer steps alike. And it is
// not the run with batches of 4 (the comparison can fail).
func TestAccumulateMatchesLargerBatch(t *testing.T) {
	dir := t.TempDir()
	writeAccumulateData(t, dir, 48)
	for _, tc := range []struct {
		name, training string
	}{
		{"sgd", `optimizer: {kind: "sgd", lr: 0.2, momentum: 0.9}`},
		{"adamw-clip-warmup", `optimizer: {kind: "adamw", lr: 0.05, weightDecay: 0.1}
		schedule: {kind: "cosine", warmupSteps: 3, minLR: 0.001}
		clipNorm: 0.3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			train := func(name string, batch, accumulate int) map[string][]float32 {
				src := strings.Replace(accumulateSpec, "TRAINING", fmt.Sprintf("%s\n\t\tbatchSize: %d\n\t\taccumulate: %d", tc.training, batch, accumulate), 1)
				specPath := filepath.Join(dir, tc.name+"-"+name+".cue")
				if err := os.WriteFile(specPath, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				bin := filepath.Join(dir, tc.name+"-"+name)
				if code, out, errOut := mlbuild(t, "compile", specPath, "-o", bin, "--cache-dir", filepath.Join(dir, "cache")); code != 0 {
					t.Fatalf("compile %s: exit %d\n%s%s", name, code, out, errOut)
				}
				weights := bin + ".safetensors"
				runOK(t, bin, "train", "--data", dir, "--out", weights, "--threads", "1")
				if want := "2 micro-batches of 4 a training step, a batch of 8\n"; accumulate > 1 && !strings.Contains(runOK(t, bin, "info"), want) {
					t.Errorf("%s: info does not say %q", name, want)
				}
				f, err := safetensors.Read(weights)
				if err != nil {
					t.Fatal(err)
				}
				w := map[string][]float32{}
				for _, tn := range f.Tensors {
					w[tn.Name] = tn.Data
				}
				return w
			}
			big := train("b8", 8, 1)
			acc := train("b4x2", 4, 2)
			small := train("b4", 4, 1)
			const tol = 2e-5
			var dAcc, dSmall float64
			for name, want := range big {
				for i := range want {
					dAcc = max(dAcc, math.Abs(float64(acc[name][i]-want[i])))
					dSmall = max(dSmall, math.Abs(float64(small[name][i]-want[i])))
				}
				if len(acc[name]) != len(want) {
					t.Fatalf("%s: %d values accumulated, %d in batches of 8", name, len(acc[name]), len(want))
				}
			}
			if dAcc > tol {
				t.Errorf("accumulating 2×4 ends %g from batches of 8 (tolerance %g)", dAcc, tol)
			}
			if dSmall < 100*tol {
				t.Errorf("batches of 4 end only %g from batches of 8: the comparison cannot tell accumulation from none", dSmall)
			}
			t.Logf("largest difference from batches of 8: accumulated 2×4 %.3g, batches of 4 %.3g", dAcc, dSmall)
		})
	}
}

// writeAccumulateData writes n csv rows of 4 features and a class in
// 0..2 that a small net can learn (the class of the largest of the
// first three features), into dir/train.csv.
func writeAccumulateData(t *testing.T, dir string, n int) {
	t.Helper()
	var b strings.Builder
	x := uint32(12345)
	next := func() float64 {
		x = x*1664525 + 1013904223
		return float64(x>>8)/float64(1<<24)*2 - 1
	}
	for range n {
		f := [4]float64{next(), next(), next(), next()}
		label := 0
		for k := 1; k < 3; k++ {
			if f[k] > f[label] {
				label = k
			}
		}
		fmt.Fprintf(&b, "%.4f,%.4f,%.4f,%.4f,%d\n", f[0], f[1], f[2], f[3], label)
	}
	if err := os.WriteFile(filepath.Join(dir, "train.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
