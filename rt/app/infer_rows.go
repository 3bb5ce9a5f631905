package app

import "time"

// rowInference runs the inference of a run of samples gathered a batch at
// a time (predict's files, eval's sets), choosing for each batch between
// the batch plan and the one-sample plan: a short batch (the last one, or
// a file of a few samples) runs its samples one by one through the
// one-sample plan when that costs less than one run of the batch plan,
// whose cost does not shrink with the samples in it (one resnet18 sample
// from a .npy file took 2.9 s through the batch plan, 0.13 s alone).
// The choice follows measured times: the latest run of each plan.
type rowInference struct {
	m      Model
	batch  int // rows of the batch plan
	per    int // input values per sample
	tBatch time.Duration
	tOne   time.Duration
	outs   []float32 // the outputs of samples run one by one
	// ones and batches count the runs of each plan, for tests.
	ones, batches int
}

func newRowInference(m Model) *rowInference {
	B := m.Meta().Batch
	return &rowInference{m: m, batch: B, per: len(m.InferInput(false)) / B}
}

// run infers the first n samples (n ≤ the batch) of the batch input x,
// which the caller filled, and returns their outputs, n rows.
func (r *rowInference) run(x []float32, n int) []float32 {
	if n < r.batch && r.onesPay(n) {
		one := r.m.InferInput(true)
		for i := 0; i < n; i++ {
			copy(one, x[i*r.per:(i+1)*r.per])
			start := time.Now()
			out := r.m.Infer(true)
			r.tOne = time.Since(start)
			r.ones++
			if i == 0 {
				r.outs = append(r.outs[:0], out...)
				if n > 1 && !r.onesPay(n-1) { // the first one was slower than hoped
					copy(x, x[r.per:n*r.per])
					rest := r.runBatch(x, n-1)
					return append(r.outs, rest...)
				}
				continue
			}
			r.outs = append(r.outs, out...)
		}
		return r.outs
	}
	return r.runBatch(x, n)
}

// runBatch runs the batch plan on the first n samples of x, the rest of it
// cleared.
func (r *rowInference) runBatch(x []float32, n int) []float32 {
	clear(x[n*r.per:])
	start := time.Now()
	out := r.m.Infer(false)
	r.tBatch = time.Since(start)
	r.batches++
	return out[:n*(len(out)/r.batch)]
}

// onesPay reports whether n samples one by one should cost less than a
// run of the batch plan. One sample always goes alone. Before both plans
// have run, it guesses that the batch plan's samples cost at least a
// quarter of a lone sample's each, which holds for the CPU's plans.
func (r *rowInference) onesPay(n int) bool {
	switch {
	case n <= 1:
		return true
	case r.tOne > 0 && r.tBatch > 0:
		return time.Duration(n)*r.tOne < r.tBatch
	case r.tOne > 0:
		return 4*n <= r.batch
	case r.tBatch > 0:
		return true // measure a lone sample on the first one
	}
	return 4*n <= r.batch
}
