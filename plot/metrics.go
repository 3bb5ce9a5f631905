// Package plot turns the metrics a produced program writes with
// `train --metrics FILE` (JSON lines, see rt/progress) into learning
// curves: training and validation loss and accuracy against the step, as
// an SVG file that a browser opens. It is used by `mlbuild plot`.
package plot

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// Point is one value at one optimizer step.
type Point struct {
	Step  int
	Value float64
}

// Run is one training run's curves.
type Run struct {
	StepLoss, StepAcc []Point // every step's batch loss and accuracy
	Loss, Acc         []Point // each epoch's training mean, at its last step
	ValLoss, ValAcc   []Point // each epoch's validation figures
	Epochs            []int   // the step at which each epoch ended
	Runs              int     // how many runs the file holds (the last is kept)
}

// event is the part of a metrics line that plot reads.
type event struct {
	Event   string   `json:"event"`
	Epoch   int      `json:"epoch"`
	Step    int      `json:"step"`
	Loss    *float64 `json:"loss"`
	Acc     *float64 `json:"acc"`
	ValLoss *float64 `json:"val_loss"`
	ValAcc  *float64 `json:"val_acc"`
}

// Read reads metrics lines. A file that `train --metrics` appended to
// several times holds several runs: a step number that goes back starts a
// new one, and Read keeps the last (a run continued with --resume goes on
// counting, so it stays one run). name is used in errors.
func Read(name string, r io.Reader) (*Run, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	run := &Run{}
	last := 0
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s:%d: not a metrics line (JSON written by train --metrics): %v", name, line, err)
		}
		if ev.Event != "step" && ev.Event != "epoch" {
			continue
		}
		switch {
		case run.Runs == 0 || ev.Event == "step" && ev.Step == 1 && last >= 1:
			*run = Run{Runs: run.Runs + 1} // a fresh run starts at step 1
		case ev.Step < last:
			run.truncate(ev.Step) // a resume from an older checkpoint replays these steps
		}
		last = ev.Step
		add := func(dst *[]Point, v *float64) {
			if v != nil {
				*dst = append(*dst, Point{ev.Step, *v})
			}
		}
		switch ev.Event {
		case "step":
			add(&run.StepLoss, ev.Loss)
			add(&run.StepAcc, ev.Acc)
		case "epoch":
			add(&run.Loss, ev.Loss)
			add(&run.Acc, ev.Acc)
			add(&run.ValLoss, ev.ValLoss)
			add(&run.ValAcc, ev.ValAcc)
			run.Epochs = append(run.Epochs, ev.Step)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(run.StepLoss) == 0 && len(run.Loss) == 0 {
		return nil, fmt.Errorf("%s holds no training metrics (step or epoch lines of train --metrics)", name)
	}
	return run, nil
}

// truncate drops the points from step on, which a resumed run writes
// again.
func (r *Run) truncate(step int) {
	cut := func(ps []Point) []Point {
		for i, p := range ps {
			if p.Step >= step {
				return ps[:i]
			}
		}
		return ps
	}
	r.StepLoss, r.StepAcc = cut(r.StepLoss), cut(r.StepAcc)
	r.Loss, r.Acc, r.ValLoss, r.ValAcc = cut(r.Loss), cut(r.Acc), cut(r.ValLoss), cut(r.ValAcc)
	for i, e := range r.Epochs {
		if e >= step {
			r.Epochs = r.Epochs[:i]
			break
		}
	}
}
