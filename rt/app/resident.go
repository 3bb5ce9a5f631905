package app

import (
	"fmt"
	"math"
	"os"

	"github.com/mlbuild/mlbuild/rt/progress"
)

// Resident is a Model whose device keeps the training set in its own
// memory and runs many training steps between host synchronisations (a
// discrete GPU, where feeding each batch from the host and reading each
// loss would cost more than the step). The training loop uses it when the
// model implements it; shuffles, step numbers, dropout seeds, progress,
// metrics and checkpoints are the same as the host-fed loop's.
type Resident interface {
	Model
	// LoadTrainSet copies rows rows of inputs x and labels y (one-hot rows)
	// to the device; false means the device declines (the set is too large
	// for it), and the host-fed loop runs instead.
	LoadTrainSet(x, y []float32, rows int) (bool, error)
	// LoadTrainWindows copies a language model's training text (token ids)
	// to the device, whose windows start at 0 to windows−1; false means the
	// device declines, and the host-fed loop runs instead.
	LoadTrainWindows(ids []float32, windows int) (bool, error)
	// StartEpoch gives the device an epoch: the rows (or window starts) of
	// its batches in order, the seed of each batch's step (SetRand's), the
	// learning rate of each, the optimizer step of batch 0 and the batch to
	// start from.
	StartEpoch(order []int, seeds []uint64, lrs []float32, step0, first int) error
	// QueueSteps launches n steps; StepResults waits for them and returns
	// each one's loss and number of correctly classified rows.
	QueueSteps(n int) error
	StepResults() (loss []float32, correct []int, err error)
	// SaveState snapshots the state on the device; RestoreState brings the
	// snapshot back, and SetBatch makes batch b the next one (a replay).
	SaveState() error
	RestoreState() error
	SetBatch(b int) error
	// PrepareBatch loads the next batch and its step arguments without
	// training, for TraceTrainForward.
	PrepareBatch() error
}

// residentStreamedMax bounds the bytes of a data set read from files per
// batch that a Resident device is offered whole.
const residentStreamedMax = 1 << 30

// residentWindow is how many steps run between host synchronisations.
const residentWindow = 40

// residentTextMax bounds the tokens of a training text that a Resident
// device is offered whole: the host then holds 12 bytes a token (the ids,
// their byte offsets and the float32 copy uploaded), 768 MB at most; a
// longer text stays host-fed, read from its files window by window.
const residentTextMax = 1 << 26

// residentModel returns m as a Resident with ds's training images on the
// device, or nil when m is not one or declines.
func residentModel(m Model, ds *dataset, classes int) (Resident, error) {
	r, ok := m.(Resident)
	if !ok || os.Getenv("MLBUILD_HOST_FED") == "1" {
		return nil, nil
	}
	meta := m.Meta()
	if meta.Defaults.Accumulate > 1 { // a device epoch updates every batch
		return nil, nil
	}
	if ds.text != nil {
		return ds.text.resident(r)
	}
	n := ds.n
	inW := ds.features
	if classes <= 0 || int64(n)*int64(max(inW, classes)) > math.MaxInt32 {
		return nil, nil
	}
	// The set is decoded whole into host memory first: a set read from
	// files per batch (an image folder) stays host-fed beyond a size, so
	// that its memory stays bounded.
	if _, streamed := ds.src.(interface{ bytesRead() int64 }); streamed && int64(n)*int64(inW+classes)*4 > residentStreamedMax {
		return nil, nil
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	x := make([]float32, n*inW)
	y := make([]float32, n*classes)
	if err := ds.fill(x, y, all); err != nil {
		return nil, err
	}
	ok, err := r.LoadTrainSet(x, y, n)
	if err != nil || !ok {
		return nil, err
	}
	return r, nil
}

// residentEpoch runs the steps of one epoch on a Resident model, from
// st.batch to the end, as the host-fed loop would, and returns the sums the
// epoch's summary needs.
func residentEpoch(r Resident, o *trainOptions, st *trainState, lastGood string, order []int, perSample,
	epoch, stepsPerEpoch int, rep *progress.Reporter, metrics *progress.Metrics, sigs chan os.Signal) (sumLoss float64, correct, seen int, err error) {
	meta := r.Meta()
	B := meta.Batch
	// A device failure names the steps; the checkpoints written stay.
	deviceErr := func(err error) error {
		return fmt.Errorf("epoch %d: %w; %s", epoch+1, err, lastGoodText(lastGood))
	}
	step0 := st.step - st.batch // the step before batch 0 of this epoch
	seeds := make([]uint64, stepsPerEpoch)
	lrs := make([]float32, stepsPerEpoch)
	for b := range seeds {
		seeds[b] = stepSeed(o.seed, step0+b+1)
		lrs[b] = learningRate(meta.Defaults, o.lr, step0+b+1, epoch, o.epochs, stepsPerEpoch)
	}
	if err := r.StartEpoch(order, seeds, lrs, step0+1, st.batch); err != nil {
		return 0, 0, 0, deviceErr(err)
	}
	start := st.batch
	for b := st.batch; b < stepsPerEpoch; {
		n := min(residentWindow, stepsPerEpoch-b)
		if err := r.SaveState(); err != nil {
			return 0, 0, 0, deviceErr(err)
		}
		if err := r.QueueSteps(n); err != nil {
			return 0, 0, 0, deviceErr(err)
		}
		losses, corr, err := r.StepResults()
		if err != nil {
			return 0, 0, 0, deviceErr(err)
		}
		if meta.regression() {
			clear(corr) // as trainCorrect: no accuracy for real-valued targets
		}
		for i, loss := range losses {
			if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
				return 0, 0, 0, residentDivergence(r, *st, lastGood, epoch, b, i, loss)
			}
			st.step++
			sumLoss += float64(loss)
			correct += corr[i]
			seen += B * perSample
			rep.Step(b+i+1, sumLoss/float64(b+i+1-start), float64(correct)/float64(seen))
			if metrics != nil {
				metrics.Write(progress.Event{Event: "step", Epoch: epoch + 1, Step: st.step, Loss: float64(loss), Acc: float64(corr[i]) / float64(B*perSample), LR: float64(lrs[b+i])})
			}
		}
		b += n
		select {
		case <-sigs:
			st.epoch, st.batch = epoch, b
			st.seed = o.seed
			if err := nonFiniteWeights(r, *st, lastGood, epoch, b-1); err != nil {
				return 0, 0, 0, err
			}
			if err := saveCheckpoint(r, o.checkpoint, *st); err != nil {
				return 0, 0, 0, fmt.Errorf("interrupted, and the checkpoint could not be written: %v", err)
			}
			rep.Interrupted()
			return 0, 0, 0, &interruptedError{o.checkpoint}
		default:
		}
	}
	return sumLoss, correct, seen, nil
}

// residentDivergence explains a non-finite loss of the i-th step of a
// window that started at batch b: it brings back the state from before the
// window, replays the steps before the failing one (they are deterministic)
// and loads the failing batch, so that divergence can trace it as the
// host-fed loop does.
func residentDivergence(r Resident, st trainState, lastGood string, epoch, b, i int, loss float32) error {
	if err := r.RestoreState(); err != nil {
		return err
	}
	if err := r.SetBatch(b); err != nil {
		return err
	}
	if i > 0 {
		if err := r.QueueSteps(i); err != nil {
			return err
		}
		if _, _, err := r.StepResults(); err != nil {
			return err
		}
	}
	if err := r.PrepareBatch(); err != nil {
		return err
	}
	st.step += i + 1
	before := append([]float32(nil), r.State()...)
	return divergence(r, before, false, st, lastGood, epoch, b+i, loss)
}
