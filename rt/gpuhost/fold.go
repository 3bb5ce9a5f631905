package gpuhost

import "fmt"

// The inference plans' fold steps. A plan that folds its batch norms into
// the convolutions before them (the planner's fold_batchnorm.go) starts
// with fold steps, Program.EvalFolds of EvalInfer's and OneFolds of
// OneInfer's: they write the folded weights and biases, in the plan's
// work arena after its work buffers, from the weights and running
// statistics of the state arena. The Model records them as sequences of
// their own and runs one before its plan's inference only when the
// weights may have changed since it last ran: after the host wrote the
// state arena (State, a load, a replica's copy) and after any training
// step, which updates the weights and the running statistics.

// recordFolds records the fold sequences and the inference sequences
// without them.
func (m *Model) recordFolds() (err error) {
	p := m.p
	if p.EvalFolds < 0 || p.EvalFolds > len(p.EvalInfer) || p.OneFolds < 0 || p.OneFolds > len(p.OneInfer) {
		return fmt.Errorf("gpuhost: %d and %d fold steps of inference plans of %d and %d steps (a bug in mlbuild)", p.EvalFolds, p.OneFolds, len(p.EvalInfer), len(p.OneInfer))
	}
	if p.EvalFolds > 0 {
		if m.folds[0], err = m.record("weight folding", p.EvalInfer[:p.EvalFolds]); err != nil {
			return err
		}
	}
	if p.OneFolds > 0 {
		if m.folds[1], err = m.record("one-sample weight folding", p.OneInfer[:p.OneFolds]); err != nil {
			return err
		}
	}
	if m.evalInfer, err = m.record("inference", p.EvalInfer[p.EvalFolds:]); err != nil {
		return err
	}
	m.oneInfer, err = m.record("one-sample inference", p.OneInfer[p.OneFolds:])
	return err
}

// weightsChanged marks both plans' folded weights stale: the host or a
// training step may have changed the weights or the running statistics.
func (m *Model) weightsChanged() { m.folded = [2]bool{} }

// fold runs the fold sequence of the batch plan (one: the one-sample
// plan) when its folded weights are stale, and waits for it.
func (m *Model) fold(one bool) error {
	k := b2i(one)
	if m.folds[k] == nil || m.folded[k] {
		return nil
	}
	if err := m.run(m.folds[k]); err != nil {
		return fmt.Errorf("folding the batch norms into the weights: %w", err)
	}
	m.folded[k] = true
	return nil
}
