package app

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// microModel is the linear test model as a program whose optimizer steps
// accumulate micro micro-batches: it records which of Gradients (a
// micro-batch) and TrainStep (an update) the training loop calls, and
// the losses they return.
type microModel struct {
	*linearModel
	calls  []string
	losses []float32
}

func (m *microModel) Gradients() float32 {
	l := m.linearModel.Gradients()
	m.calls, m.losses = append(m.calls, "g"), append(m.losses, l)
	return l
}

func (m *microModel) TrainStep(lr float32, step int) float32 {
	l := m.linearModel.TrainStep(lr, step)
	m.calls, m.losses = append(m.calls, "u"), append(m.losses, l)
	return l
}

// TestAccumulateLoop: with Defaults.Accumulate 3 an optimizer step is
// Gradients on two micro-batches and TrainStep on the third; an epoch is
// one pass over the data (64 samples: 5 steps of 3·4, the last 4 samples
// left out), the metrics count optimizer steps and give each the mean of
// its micro-batches' losses; info gives the effective batch; too few
// samples for one step is an error that says so.
func TestAccumulateLoop(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 8)
	m := &microModel{linearModel: newLinearModel()}
	m.meta.Defaults.Accumulate = 3
	code, out, errOut := runModel(t, dir, m, "train", "--data", "data", "--epochs", "1", "--metrics", "m.jsonl")
	if code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	if got, want := strings.Join(m.calls, ""), strings.Repeat("ggu", 5); got != want {
		t.Errorf("the loop called %s (g: Gradients, u: TrainStep), want %s", got, want)
	}
	f, err := os.Open(filepath.Join(dir, "m.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	steps := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var ev struct {
			Event string
			Step  int
			Loss  float64
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event != "step" {
			continue
		}
		steps++
		if ev.Step != steps || 3*steps > len(m.losses) {
			t.Fatalf("metrics step %d after %d steps (%d calls)", ev.Step, steps-1, len(m.losses))
		}
		l := m.losses[3*steps-3 : 3*steps]
		if mean := float64(l[0]/3 + l[1]/3 + l[2]/3); math.Abs(ev.Loss-mean) > 1e-6 {
			t.Errorf("step %d: loss %v in the metrics, want the mean %v of %v", ev.Step, ev.Loss, mean, l)
		}
	}
	if steps != 5 {
		t.Errorf("the metrics hold %d steps, want 5", steps)
	}
	if code, info, _ := runModel(t, dir, m, "info"); code != 0 || !strings.Contains(info, "accumulate:  3 micro-batches of 4 a training step, a batch of 12\n") {
		t.Errorf("info: exit %d, does not give the effective batch:\n%s", code, info)
	}

	code, _, errOut = runModel(t, dir, &microModel{linearModel: m.linearModel}, "train", "--data", "data", "--limit", "8", "--out", "few.safetensors")
	if want := "8 training images are fewer than one batch of 12"; code != exitFailure || !strings.Contains(errOut, want) {
		t.Errorf("train on 8 samples: exit %d, %q; want exit %d and %q", code, errOut, exitFailure, want)
	}
}
