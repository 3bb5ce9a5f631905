package app

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestLearningRateSchedules: the rate at chosen steps, worked by hand. A
// cosine with warmup 4 over 2 epochs of 7 steps (n = 14) from 1e-3 to 1e-4:
// steps 1–4 rise as lr·s/5; step 5 is lr; step 14, the last, minLR, and
// step 9, 4/9 of the way from 5 to 14, minLR + (lr−minLR)·(1+cos(π·4/9))/2.
// Without warmup the cosine moves per epoch: epoch 0 lr, the last minLR.
func TestLearningRateSchedules(t *testing.T) {
	d := Defaults{Schedule: "cosine", MinLR: 1e-4, WarmupSteps: 4}
	lr := 1e-3
	for _, tc := range []struct {
		step, epoch int
		want        float64
	}{
		{1, 0, 1e-3 / 5}, {2, 0, 2e-3 / 5}, {4, 0, 4e-3 / 5}, {5, 0, 1e-3},
		{9, 1, 1e-4 + 9e-4*(1+math.Cos(math.Pi*4/9))/2}, {14, 1, 1e-4}, {20, 1, 1e-4},
	} {
		if got := learningRate(d, lr, tc.step, tc.epoch, 2, 7); math.Abs(float64(got)-tc.want) > 1e-9 {
			t.Errorf("warmup 4, step %d: lr %g, want %g", tc.step, got, tc.want)
		}
	}
	// Warmup as long as the run: the rate only rises.
	if got := learningRate(Defaults{Schedule: "cosine", WarmupSteps: 10}, 1, 10, 0, 1, 10); math.Abs(float64(got)-10.0/11) > 1e-7 {
		t.Errorf("warmup over the whole run, last step: %g, want %g", got, 10.0/11)
	}
	d.WarmupSteps = 0
	for _, tc := range []struct {
		epoch int
		want  float64
	}{{0, 1e-3}, {1, 1e-4 + 9e-4*0.75}, {2, 1e-4 + 9e-4*0.25}, {3, 1e-4}} {
		if got := learningRate(d, lr, 100, tc.epoch, 4, 7); math.Abs(float64(got)-tc.want) > 1e-9 {
			t.Errorf("per-epoch cosine, epoch %d: lr %g, want %g", tc.epoch, got, tc.want)
		}
	}
	if perStepSchedule(d) || !perStepSchedule(Defaults{Schedule: "cosine", WarmupSteps: 1}) {
		t.Error("perStepSchedule: a cosine is per step exactly when it has warmup")
	}
}

// TestTrainingFollowsPerStepSchedule: a run with warmup trains every step
// at the rate learningRate gives that step (the metrics' lr), rising over
// the warmup and ending at minLR.
func TestTrainingFollowsPerStepSchedule(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	m := newLinearModel()
	m.meta.Defaults.WarmupSteps = 3
	code, out, errOut := runModel(t, dir, m, "train", "--data", "data", "--epochs", "2", "--quiet", "--metrics", "m.jsonl")
	if code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	f, err := os.Open(filepath.Join(dir, "m.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lrs []float64
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var e struct {
			Event string
			Step  int
			LR    float64
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Event == "step" {
			if e.Step != len(lrs)+1 {
				t.Fatalf("step event %d after %d steps", e.Step, len(lrs))
			}
			lrs = append(lrs, e.LR)
		}
	}
	n := 2 * (64 / lmBatch)
	if len(lrs) != n {
		t.Fatalf("%d step events, want %d", len(lrs), n)
	}
	d := m.meta.Defaults
	for i, got := range lrs {
		want := float64(learningRate(d, d.LR, i+1, i/(n/2), 2, n/2))
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("step %d trained at lr %g, want %g", i+1, got, want)
		}
	}
	if !(lrs[0] < lrs[1] && lrs[1] < lrs[2] && lrs[2] < lrs[3]) || math.Abs(lrs[3]-d.LR) > 1e-7 || math.Abs(lrs[n-1]-d.MinLR) > 1e-7 {
		t.Errorf("rates %v: want a rise over 3 steps to %g, then a fall to %g", lrs, d.LR, d.MinLR)
	}
}
