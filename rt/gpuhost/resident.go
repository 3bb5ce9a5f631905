package gpuhost

import (
	"fmt"
	"math"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// Device-resident training. The training set is uploaded once; each epoch
// the host uploads the epoch's order of rows and the dropout seeds of its
// steps; then a training step is one sequence that needs nothing from the
// host:
//
//	advance   args ← (lrs[b], first step + b, seeds[b]) where b = ctl[CtlBatch]
//	gather    input rows and label rows b·B … b·B+B-1 of order, from the set
//	          (or, for a language model's text, the windows of tokens
//	          starting at those entries of order, and their next tokens)
//	forward, copy of the prediction, backward, update (the plan's tables)
//	record    results[2b] = loss, results[2b+1] = correct rows; ctl[CtlBatch] = b+1
//
// so the host launches many steps and synchronises only to read their
// results. Shuffles, seeds, learning rates and step numbers are the host
// loop's, so a device-resident run and a host-fed run train the same
// weights.

// ResidentKernels names the generated kernels of device-resident training
// (kernels of Program.Kernels, specialised to the plan's batch and row
// widths) and the layout they share.
type ResidentKernels struct {
	// Advance (args, ctl, steps: the step table, StepWords a batch), one
	// thread.
	Advance string
	// GatherInput and GatherLabels (ctl, order, set, batch), one thread per
	// element of the batch, GatherGroups[i] groups of GatherThreads.
	GatherInput, GatherLabels string
	GatherGroups              [2]int
	GatherThreads             int
	// Windows, when above 0, says that the set is one stream of token ids
	// (LoadTrainWindows) and order holds window starts: GatherInput copies
	// the Windows ids from each start, GatherLabels the ids after them one
	// hot, and Record counts the positions whose largest logit is the next
	// token. 0: the set is rows of inputs and rows of labels
	// (LoadTrainSet).
	Windows int
	// Record (ctl, loss, logits, labels, results), one group of
	// RecordThreads threads.
	Record        string
	RecordThreads int
	// CopyState (state, snapshot) copies the state arena, CopyGroups groups
	// of CopyThreads threads.
	CopyState               string
	CopyGroups, CopyThreads int
}

// resident holds the buffers of device-resident training.
type resident struct {
	rows, inW, labW int
	setX, setY      Buffer // the same buffer for a stream of tokens
	order, table    Buffer
	ctl, results    Buffer
	snapshot        Buffer
	steps           int // batches per epoch the buffers hold
	step            Sequence
	prepare         Sequence
	save, restore   Sequence
	// parts are the step of a replica of a data-parallel run (Model.dp)
	// cut at its collective points (stepparts.go).
	parts  []stepPart
	queued int // steps launched since the last StepResults
	first  int // batch of the first of them
}

// ResidentMaxElements bounds the set a device keeps: kernels index it with
// 32-bit integers.
const ResidentMaxElements = math.MaxInt32

// LoadTrainSet uploads rows rows of training inputs x and labels y (one-hot
// or targets, as the training plan's label rows) and makes the sequences of
// device-resident training. It returns false, with no error, when the
// program has no resident kernels or the set is too large to index.
func (m *Model) LoadTrainSet(x, y []float32, rows int) (bool, error) {
	rk := m.p.Resident
	B := m.p.Meta.Batch
	if rk == nil || rows == 0 || B == 0 {
		return false, nil
	}
	if rk.Windows > 0 {
		return false, fmt.Errorf("gpuhost: this program trains on windows of a token stream (LoadTrainWindows), not on rows")
	}
	inW, labW := m.p.TrainInputSize/B, m.p.TrainLabelsSize/B
	if len(x) != rows*inW || len(y) != rows*labW {
		return false, fmt.Errorf("gpuhost: a training set of %d rows needs %d inputs and %d labels, got %d and %d", rows, rows*inW, rows*labW, len(x), len(y))
	}
	if rows*max(inW, labW) > ResidentMaxElements {
		return false, nil
	}
	if err := m.checkTokenSet(x, inW); err != nil {
		return false, err
	}
	r := m.startResident(rows, inW, labW)
	var err error
	alloc := m.residentAlloc("the training set", &err)
	r.setX = alloc("training set inputs", rows*inW)
	r.setY = alloc("training set labels", rows*labW)
	r.ctl = alloc("training control", CtlLen)
	r.snapshot = alloc("state snapshot", m.p.StateSize)
	if err != nil {
		m.freeResident()
		return false, err
	}
	if err = m.d.Upload(r.setX, 0, bytesOf(x)); err == nil {
		err = m.d.Upload(r.setY, 0, bytesOf(y))
	}
	if err != nil {
		m.freeResident()
		return false, fmt.Errorf("copying the training set to %s: %w", m.d.Name(), err)
	}
	return true, nil
}

// LoadTrainWindows uploads a language model's training text, ids (token
// ids as float32), whose windows of Windows tokens start at 0 to
// windows−1 (each window's next tokens, its labels, follow it in ids), and
// makes the sequences of device-resident training. It returns false,
// with no error, when the program has no window kernels or the stream is
// too long to index.
func (m *Model) LoadTrainWindows(ids []float32, windows int) (bool, error) {
	rk := m.p.Resident
	if rk == nil || rk.Windows == 0 || windows <= 0 || m.p.Meta.Batch == 0 {
		return false, nil
	}
	T := rk.Windows
	if len(ids) < windows+T {
		return false, fmt.Errorf("gpuhost: %d windows of %d tokens and their next tokens need %d ids, got %d", windows, T, windows+T, len(ids))
	}
	if len(ids) > ResidentMaxElements {
		return false, nil
	}
	if v := m.p.Meta.Vocab; v > 0 {
		if err := cpu.CheckTokenIDs(m.p.TokenLayer, ids, v); err != nil {
			return false, fmt.Errorf("the training text: %w", err)
		}
	}
	r := m.startResident(windows, T, m.p.TrainLabelsSize/m.p.Meta.Batch)
	var err error
	alloc := m.residentAlloc("the training text", &err)
	r.setX = alloc("training text", len(ids))
	r.setY = r.setX
	r.ctl = alloc("training control", CtlLen)
	r.snapshot = alloc("state snapshot", m.p.StateSize)
	if err != nil {
		m.freeResident()
		return false, err
	}
	if err = m.d.Upload(r.setX, 0, bytesOf(ids)); err != nil {
		m.freeResident()
		return false, fmt.Errorf("copying the training text to %s: %w", m.d.Name(), err)
	}
	return true, nil
}

// startResident replaces the device-resident training state with an
// empty one for rows rows (or window starts) of inW inputs and labW labels.
func (m *Model) startResident(rows, inW, labW int) *resident {
	m.freeResident()
	m.res = &resident{rows: rows, inW: inW, labW: labW}
	m.feeding = true
	return m.res
}

// residentAlloc returns an allocator of float32 buffers that, after the
// first failure, sets *err (naming what, the data being kept) and
// allocates nothing more.
func (m *Model) residentAlloc(what string, err *error) func(label string, n int) Buffer {
	return func(label string, n int) Buffer {
		if *err != nil {
			return nil
		}
		b, e := m.d.Alloc(label, 4*max(n, 1))
		if e != nil {
			*err = fmt.Errorf("keeping %s on %s: %w", what, m.d.Name(), e)
		}
		return b
	}
}

// freeResident releases the buffers of device-resident training.
func (m *Model) freeResident() {
	r := m.res
	if r == nil {
		return
	}
	if r.setY == r.setX {
		r.setY = nil
	}
	for _, b := range []Buffer{r.setX, r.setY, r.order, r.table, r.ctl, r.results, r.snapshot} {
		if b != nil {
			m.d.Free(b)
		}
	}
	m.res = nil
}

// StartEpoch gives the device an epoch: order holds the rows (or window
// starts) of its batches (len(seeds)·Batch of them), seeds the 64-bit
// dropout seed of each batch's step, lrs its learning rate, step0 the
// optimizer step of batch 0, and first the batch the next step trains on
// (not 0 after a resume).
func (m *Model) StartEpoch(order []int, seeds []uint64, lrs []float32, step0, first int) error {
	r := m.res
	if r == nil {
		return fmt.Errorf("gpuhost: StartEpoch before LoadTrainSet")
	}
	B := m.p.Meta.Batch
	steps := len(seeds)
	if len(order) < steps*B {
		return fmt.Errorf("gpuhost: %d batches need %d rows of order, got %d", steps, steps*B, len(order))
	}
	if len(lrs) != steps || steps == 0 {
		return fmt.Errorf("gpuhost: %d batches need as many learning rates, got %d", steps, len(lrs))
	}
	if err := m.d.Sync(); err != nil {
		return err
	}
	if r.steps != steps {
		for _, b := range []Buffer{r.order, r.table, r.results} {
			if b != nil {
				m.d.Free(b)
			}
		}
		r.order, r.table, r.results = nil, nil, nil
		var err error
		if r.order, err = m.d.Alloc("epoch order", 4*max(steps*B, 1)); err == nil {
			if r.table, err = m.d.Alloc("step table", 4*StepWords*max(steps, 1)); err == nil {
				r.results, err = m.d.Alloc("step results", 8*max(steps, 1))
			}
		}
		if err != nil {
			return fmt.Errorf("keeping an epoch's order on %s: %w", m.d.Name(), err)
		}
		r.steps = steps
		if err := m.recordResident(); err != nil {
			return err
		}
	}
	ord := make([]uint32, steps*B)
	for i := range ord {
		if order[i] < 0 || order[i] >= r.rows {
			return fmt.Errorf("gpuhost: row %d of the order is outside the %d rows of the set", order[i], r.rows)
		}
		ord[i] = uint32(order[i])
	}
	table := make([]uint32, StepWords*steps)
	for i, s := range seeds {
		table[StepWords*i+StepSeed], table[StepWords*i+StepLR] = foldSeed(s), math.Float32bits(lrs[i])
	}
	ctl := make([]uint32, CtlLen)
	ctl[CtlBatch], ctl[CtlLR], ctl[CtlStep], ctl[CtlRows], ctl[CtlSteps] = uint32(first), math.Float32bits(lrs[steps-1]), uint32(step0), uint32(r.rows), uint32(steps)
	for _, u := range []struct {
		b Buffer
		v []uint32
	}{{r.order, ord}, {r.table, table}, {r.ctl, ctl}} {
		if err := m.d.Upload(u.b, 0, wordsBytes(u.v)); err != nil {
			return fmt.Errorf("copying an epoch's order to %s: %w", m.d.Name(), err)
		}
	}
	if err := m.upload(); err != nil { // the state, after an init, a load or a restore on the host
		return err
	}
	r.queued, r.first = 0, first
	return nil
}

// SetBatch makes batch b the next one trained (a replay after a restore).
func (m *Model) SetBatch(b int) error {
	r := m.res
	if err := m.d.Sync(); err != nil {
		return err
	}
	if err := m.d.Upload(r.ctl, 4*CtlBatch, wordsBytes([]uint32{uint32(b)})); err != nil {
		return err
	}
	r.queued, r.first = 0, b
	return nil
}

// recordResident records the sequences of device-resident training once
// the epoch's buffers exist.
func (m *Model) recordResident() error {
	r, rk, p := m.res, m.p.Resident, m.p
	B := p.Meta.Batch
	nbytes := func(b Buffer) int { return b.Len() }
	advance := func(enc Encoder) error {
		return enc.Dispatch(rk.Advance, []Arg{{Buf: m.bufs[ArenaArgs], Bytes: 4 * StepArgsLen}, {Buf: r.ctl, Bytes: 4 * CtlLen}, {Buf: r.table, Bytes: nbytes(r.table)}}, 1, 1)
	}
	gather := func(enc Encoder) error {
		if err := enc.Dispatch(rk.GatherInput, []Arg{{Buf: r.ctl, Bytes: 4 * CtlLen}, {Buf: r.order, Bytes: nbytes(r.order)},
			{Buf: r.setX, Bytes: nbytes(r.setX)}, {Buf: m.bufs[ArenaTrainInput], Bytes: 4 * B * r.inW}}, rk.GatherGroups[0], rk.GatherThreads); err != nil {
			return err
		}
		return enc.Dispatch(rk.GatherLabels, []Arg{{Buf: r.ctl, Bytes: 4 * CtlLen}, {Buf: r.order, Bytes: nbytes(r.order)},
			{Buf: r.setY, Bytes: nbytes(r.setY)}, {Buf: m.bufs[ArenaTrainLabels], Bytes: 4 * B * r.labW}}, rk.GatherGroups[1], rk.GatherThreads)
	}
	rec := func(enc Encoder) error {
		loss := p.TrainLoss
		return enc.Dispatch(rk.Record, []Arg{{Buf: r.ctl, Bytes: 4 * CtlLen},
			{Buf: m.bufs[loss.Arena], Offset: 4 * loss.Offset, Bytes: 4},
			{Buf: m.bufs[ArenaLogits], Bytes: 4 * p.OutputSize},
			{Buf: m.bufs[ArenaTrainLabels], Bytes: 4 * p.TrainLabelsSize},
			{Buf: r.results, Bytes: nbytes(r.results)}}, 1, rk.RecordThreads)
	}
	phases := func(fs ...func(Encoder) error) func(Encoder) error {
		return func(enc Encoder) error {
			for _, f := range fs {
				if err := f(enc); err != nil {
					return err
				}
			}
			return nil
		}
	}
	steps := func(sts ...[]PlanStep) func(Encoder) error {
		return func(enc Encoder) error {
			for _, ph := range sts {
				for i := range ph {
					if err := m.encodeStep(enc, &ph[i]); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	copyOut := func(enc Encoder) error { return m.encode(enc, &p.CopyOutput) }
	var err error
	if r.step, err = m.d.Record("resident training step", phases(advance, gather, steps(p.TrainForward), copyOut,
		steps(p.TrainBackward, p.TrainUpdate), rec)); err != nil {
		return err
	}
	if m.dp != nil {
		items, err := m.stepItems([]func(Encoder) error{advance, gather}, []func(Encoder) error{rec})
		if err != nil {
			return err
		}
		if r.parts, err = m.recordParts("resident training step", items); err != nil {
			return err
		}
	}
	if r.prepare, err = m.d.Record("resident batch", phases(advance, gather)); err != nil {
		return err
	}
	state := Arg{Buf: m.bufs[ArenaState], Bytes: 4 * p.StateSize}
	snap := Arg{Buf: r.snapshot, Bytes: 4 * p.StateSize}
	if r.save, err = m.d.Record("state snapshot", func(enc Encoder) error {
		return enc.Dispatch(rk.CopyState, []Arg{state, snap}, rk.CopyGroups, rk.CopyThreads)
	}); err != nil {
		return err
	}
	r.restore, err = m.d.Record("state restore", func(enc Encoder) error {
		return enc.Dispatch(rk.CopyState, []Arg{snap, state}, rk.CopyGroups, rk.CopyThreads)
	})
	return err
}

// QueueSteps launches n training steps without waiting for them.
func (m *Model) QueueSteps(n int) error {
	r := m.res
	if err := m.upload(); err != nil {
		return err
	}
	m.weightsChanged()
	for i := 0; i < n; i++ {
		if err := r.step.Launch(); err != nil {
			return fmt.Errorf("training step %d of the epoch: %w", r.first+r.queued+1, err)
		}
		r.queued++
	}
	m.touched()
	return nil
}

// StepResults waits for the queued steps and returns the loss and the
// number of correctly classified rows of each.
func (m *Model) StepResults() ([]float32, []int, error) {
	r := m.res
	if err := m.d.Sync(); err != nil {
		return nil, nil, fmt.Errorf("training steps %d to %d of the epoch: %w", r.first+1, r.first+r.queued, err)
	}
	n := r.queued
	buf := make([]float32, 2*n)
	if n > 0 {
		if err := m.d.Download(bytesOf(buf), r.results, 8*r.first); err != nil {
			return nil, nil, err
		}
	}
	loss := make([]float32, n)
	correct := make([]int, n)
	for i := 0; i < n; i++ {
		loss[i], correct[i] = buf[2*i], int(buf[2*i+1])
	}
	r.first += n
	r.queued = 0
	return loss, correct, nil
}

// SaveState copies the state into the device's snapshot; RestoreState
// copies it back. Both run in order with the queued steps.
func (m *Model) SaveState() error {
	if err := m.upload(); err != nil {
		return err
	}
	return m.res.save.Launch()
}

func (m *Model) RestoreState() error {
	m.weightsChanged()
	if err := m.res.restore.Launch(); err != nil {
		return err
	}
	m.touched()
	return nil
}

// PrepareBatch gathers the next batch into the training input and labels
// and sets the step arguments, without training: what TraceTrainForward
// then runs on.
func (m *Model) PrepareBatch() error {
	if err := m.run(m.res.prepare); err != nil {
		return err
	}
	return nil
}

// wordsBytes views uint32s as bytes.
func wordsBytes(v []uint32) []byte {
	f := make([]float32, len(v))
	for i, w := range v {
		f[i] = math.Float32frombits(w)
	}
	return bytesOf(f)
}
