package gpuhost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/mlbuild/mlbuild/rt/app"
)

// Data-parallel training on several GPUs of one process (--gpus N), or
// on the GPUs of several processes (--nodes, members.go). Each
// GPU runs the program's replica tables (Program.ForGPUs: the training
// plan at Batch/N rows, its loss divided by the global batch) on its own
// Model, arenas and copy of the training set. Rank r trains on rows
// r·B/N to (r+1)·B/N − 1 of each global batch of B rows, a contiguous
// slice, so the N slices together are the batch one GPU would train on.
// A step is recorded in parts around its collective points (stepparts.go):
//
//	every rank: (advance, gather,) forward, copy of the prediction, backward,
//	            each bucket of gradients started (StartAllReduce) as soon as
//	            the backward pass has written it, the rest computed beside
//	every rank: Join, update (, record)
//
// so each rank's update sees the sum of the shares' gradients, which is
// the gradient of the global batch's mean loss, and every rank's weights
// stay the same bits (the sums are written alike to every rank). Losses
// and counts of correct rows are summed over the ranks on the host (one
// process holds them all). Only rank 0's state is read and written by the
// app (its checkpoints, weights and inference); it is copied to the other
// ranks before they next run. Batch norm's statistics are each rank's own
// share's, so its running statistics follow rank 0's share, unless
// SetSyncBN (train --sync-bn) makes them the global batch's.

// StepTimeout bounds the wait for one window's sums: a rank that hangs
// fails the run within it (PyTorch's NCCL default is 10 minutes).
// MLBUILD_STEP_TIMEOUT (a duration: 30s, 10m) sets another.
const StepTimeout = 5 * time.Minute

// Replicated is app.Model and app.Resident over the GPUs of one process,
// each a Model of the program's replica tables with a Collective. The
// process may be one member of a run of several (--nodes, torchrun): its
// GPUs are then ranks first to first+len(ranks)−1 of total, the other
// ranks are other processes', and the figures of each step are summed
// across processes by one more all-reduce (across). Inference, selftest
// and the state are the process's first GPU's.
type Replicated struct {
	*Model // the process's first GPU
	p      *Program
	ranks  []*Model
	colls  []Collective
	// first is the global rank of ranks[0]; total is the number of ranks
	// of every process together.
	first, total int
	// sums are each rank's buffer of the figures summed across processes.
	sums []Buffer
	// x, y and out are the global batch of host-fed training and its
	// prediction, the ranks' slices side by side.
	x, y, out []float32
	// dirty is set when the app may have written rank 0's state since the
	// other ranks last got it.
	dirty   bool
	timeout time.Duration
	// onAbort, when set, learns of every abort's reason: a run of several
	// processes tells the others of its own failures at once (RunMember).
	onAbort func(error)
}

// NewReplicated starts data-parallel training of p on devs, collective
// colls[i] being devs[i]'s: rank first+i of total, where first is
// colls[0].Rank() and total colls[0].Size() (len(devs) ranks of 2 or more
// in one process; fewer, down to one, when other processes hold the
// rest). The program must hold replica tables for total GPUs
// (Program.ForGPUs).
func NewReplicated(devs []Device, colls []Collective, p *Program, stepTimeout time.Duration) (*Replicated, error) {
	n := len(devs)
	if n < 1 || len(colls) != n {
		return nil, fmt.Errorf("gpuhost: %d GPUs with %d collectives: want as many of both", n, len(colls))
	}
	first, total := colls[0].Rank(), colls[0].Size()
	if total < 2 || first < 0 || first+n > total {
		return nil, fmt.Errorf("gpuhost: %d GPUs as ranks %d to %d of %d: want 2 ranks or more in all", n, first, first+n-1, total)
	}
	q, err := p.ForGPUs(total)
	if err != nil {
		return nil, err
	}
	if len(p.Gradients) == 0 {
		return nil, errors.New("gpuhost: the program lists no gradients to sum across GPUs")
	}
	r := &Replicated{p: p, colls: colls, first: first, total: total, timeout: stepTimeout, dirty: true}
	for i, d := range devs {
		if c := colls[i]; c.Rank() != first+i || c.Size() != total {
			return nil, fmt.Errorf("gpuhost: the collective of GPU %d is rank %d of %d; want rank %d of %d", i, c.Rank(), c.Size(), first+i, total)
		}
		m, err := New(d, q)
		if err != nil {
			return nil, r.rankErr(i, err)
		}
		m.dp = &dataParallel{bucketBytes: DefaultBucketBytes}
		if err := m.recordHostParts(); err != nil {
			return nil, r.rankErr(i, err)
		}
		r.ranks = append(r.ranks, m)
	}
	r.Model = r.ranks[0]
	r.x = make([]float32, p.TrainInputSize)
	r.y = make([]float32, p.TrainLabelsSize)
	r.out = make([]float32, p.OutputSize)
	return r, nil
}

// recordHostParts records a replica's host-fed step in parts.
func (m *Model) recordHostParts() error {
	items, err := m.stepItems(nil, nil)
	if err != nil {
		return err
	}
	m.dp.host, err = m.recordParts("training step", items)
	return err
}

// SetBuckets makes the gradients' buckets at most maxBytes instead of
// DefaultBucketBytes (PyTorch's bucket_cap_mb) and, with overlap false,
// starts every bucket after the whole backward pass instead of as soon as
// its gradients are written (the sums then overlap nothing); it records
// the steps again, so it must come before the training set is loaded.
// Tests use it to compare the two ways and to cut a small model into many
// buckets.
func (r *Replicated) SetBuckets(maxBytes int, overlap bool) error {
	if maxBytes < 4 {
		return fmt.Errorf("gpuhost: buckets of %d bytes; want 4 or more", maxBytes)
	}
	return r.each(func(i int, m *Model) error {
		if m.res != nil {
			return errors.New("gpuhost: SetBuckets after the training set was loaded")
		}
		m.dp.bucketBytes, m.dp.afterBackward = maxBytes, !overlap
		return m.recordHostParts()
	})
}

// SetSyncBN makes every batch norm layer's statistics the global batch's
// (train --sync-bn): each rank runs the replica's synchronised batch norm
// steps, whose sums of Σx and Σx² in the forward pass and of Σdy and
// Σdy·x̂ in the backward pass are summed across the ranks at collective
// points (stepparts.go). It records the steps again, so it must come
// before the training set is loaded; a model without batch norm is an
// error.
func (r *Replicated) SetSyncBN() error {
	if _, err := r.ranks[0].p.withSyncBN(); err != nil {
		return err
	}
	return r.each(func(i int, m *Model) error {
		if m.res != nil {
			return errors.New("gpuhost: SetSyncBN after the training set was loaded")
		}
		q, err := m.p.withSyncBN()
		if err != nil {
			return err
		}
		m.p = q
		return m.recordHostParts()
	})
}

// GPUs is how many GPUs of this process train (app's --gpus check).
func (r *Replicated) GPUs() int { return len(r.ranks) }

// Ranks is how many GPUs train, of every process.
func (r *Replicated) Ranks() int { return r.total }

// remote says whether other processes hold ranks too.
func (r *Replicated) remote() bool { return len(r.ranks) < r.total }

// Meta is the program's, with the global batch.
func (r *Replicated) Meta() *app.Meta { return r.p.Meta }

// State is rank 0's state; the other ranks get what the app writes into
// it before they next run.
func (r *Replicated) State() []float32 {
	r.dirty = true
	return r.ranks[0].State()
}

// spread copies rank 0's state to the other ranks when the app may have
// written it.
func (r *Replicated) spread() {
	if !r.dirty {
		return
	}
	src := r.ranks[0].hostView(ArenaState, false)
	for _, m := range r.ranks[1:] {
		copy(m.hostView(ArenaState, true), src)
	}
	r.dirty = false
}

// rankErr names the rank of an error.
func (r *Replicated) rankErr(i int, err error) error {
	return fmt.Errorf("GPU %d (rank %d of %d): %w", i, r.first+i, r.total, err)
}

// each runs f on every rank in rank order, stopping at the first error.
func (r *Replicated) each(f func(i int, m *Model) error) error {
	for i, m := range r.ranks {
		if err := f(i, m); err != nil {
			return r.rankErr(i, err)
		}
	}
	return nil
}

// ranksDo runs f on every rank at once, each in its own goroutine: a
// rank's launches after its sums may wait for its peers (a queue that
// fills; the fake's launches always do), so one host thread cannot launch
// them rank after rank. The first error aborts every rank's collective,
// which ends the others' waits (and launches waiting on the sums); so does
// the step timeout, should the launches themselves never return (a GPU
// that faulted runs no more sums, and its peers' launches behind theirs
// wait). The error returned names its rank and is, where there is one, a
// rank's own failure rather than a peer's abort that followed it.
func (r *Replicated) ranksDo(f func(i int, m *Model) error) error {
	errs := make(chan error, len(r.ranks))
	for i, m := range r.ranks {
		go func() {
			err := f(i, m)
			if err != nil {
				err = r.rankErr(i, err)
				r.abort(err)
			}
			errs <- err
		}()
	}
	watchdog := time.AfterFunc(r.timeout, func() {
		r.abort(fmt.Errorf("%w: the launches and sums of %d GPUs did not finish within %v", ErrCollectiveTimeout, len(r.ranks), r.timeout))
	})
	defer watchdog.Stop()
	var first, own error
	for range r.ranks {
		err := <-errs
		if err != nil && first == nil {
			first = err
		}
		if err != nil && own == nil && !errors.Is(err, ErrAborted) {
			own = err
		}
	}
	if own != nil || first == nil {
		return own
	}
	return r.culprit(first)
}

// culprit looks, after every rank was aborted, for a rank whose GPU
// failed (a fault stops its sums, so its peers saw only a timeout or an
// abort), and names it; else it returns err.
func (r *Replicated) culprit(err error) error {
	found := make(chan error, 1)
	go func() {
		for i, m := range r.ranks {
			if serr := m.d.Sync(); serr != nil {
				found <- r.rankErr(i, fmt.Errorf("%w; and so: %v", serr, err))
				return
			}
		}
		found <- err
	}()
	select {
	case e := <-found:
		return e
	case <-time.After(10 * time.Second): // a GPU that does not even answer
		return err
	}
}

// wait waits for every rank's sums at once; the first failure to arrive
// (a rank whose GPU faulted reports at once, its peers only at the
// timeout) aborts the other ranks' collectives, so that no rank waits for
// a peer that failed, and is the error returned.
func (r *Replicated) wait() error {
	errs := make(chan error, len(r.colls))
	for _, c := range r.colls {
		go func() { errs <- c.Wait(r.timeout) }()
	}
	var first error
	for range r.colls {
		if err := <-errs; err != nil && first == nil {
			first = err
			r.abort(err)
		}
	}
	return first
}

func (r *Replicated) abort(err error) {
	if r.onAbort != nil {
		r.onAbort(err)
	}
	for _, c := range r.colls {
		c.Abort(err)
	}
}

// TrainInput and TrainLabels are the global batch of host-fed training.
func (r *Replicated) TrainInput() []float32  { return r.x }
func (r *Replicated) TrainLabels() []float32 { return r.y }

// TrainOutput is the last host-fed step's prediction of the global batch.
func (r *Replicated) TrainOutput() []float32 { return r.out }

// hostStep runs a host-fed step on every rank: each takes its slice of the
// global batch, runs forward and backward, the sums, and the update when
// update is set; it returns the global mean loss.
func (r *Replicated) hostStep(lr float32, step int, update bool) (float32, error) {
	r.spread()
	q := r.ranks[0].p
	inN, labN := q.TrainInputSize, q.TrainLabelsSize
	err := r.ranksDo(func(i int, m *Model) error {
		g := r.first + i // the global rank: its slice of the batch
		copy(m.TrainInput(), r.x[g*inN:(g+1)*inN])
		copy(m.TrainLabels(), r.y[g*labN:(g+1)*labN])
		m.setArgs(lr, step)
		if err := m.upload(); err != nil {
			return err
		}
		m.touched()
		m.weightsChanged()
		if err := launchParts(m.dp.host, r.colls[i], update); err != nil {
			return err
		}
		if err := r.colls[i].Wait(r.timeout); err != nil {
			return err
		}
		return m.d.Sync()
	})
	if err != nil {
		return 0, err
	}
	var loss float32
	outN := q.OutputSize
	for i, m := range r.ranks {
		loss += m.slice(q.TrainLoss)[0]
		copy(r.out[(r.first+i)*outN:(r.first+i+1)*outN], m.slice(q.TrainOutput))
	}
	if r.remote() {
		// The other processes' losses and slices of the prediction: each
		// process's figures are zero where another's are, so the sum is
		// every slice (x + 0 = x exactly).
		for k := range r.out {
			if k < r.first*outN || k >= (r.first+len(r.ranks))*outN {
				r.out[k] = 0
			}
		}
		v := append([]float32{loss}, r.out...)
		if err := r.across(v); err != nil {
			return 0, err
		}
		loss = v[0]
		copy(r.out, v[1:])
	}
	return loss, nil
}

// TrainStep runs one host-fed data-parallel step.
func (r *Replicated) TrainStep(lr float32, step int) float32 {
	loss, err := r.hostStep(lr, step, true)
	if err != nil {
		fail(r.p, fmt.Errorf("training step %d: %w", step, err))
	}
	return loss
}

// Gradients runs forward, backward and the sums without the update: the
// gradients of the global batch's mean loss, in rank 0's state.
func (r *Replicated) Gradients() float32 {
	loss, err := r.hostStep(0, 1, false)
	if err != nil {
		fail(r.p, fmt.Errorf("gradients: %w", err))
	}
	return loss
}

// SetRand gives every rank the step's dropout seed.
func (r *Replicated) SetRand(seed uint64) {
	for _, m := range r.ranks {
		m.SetRand(seed)
	}
}

// LoadTrainSet copies the training set to every GPU.
func (r *Replicated) LoadTrainSet(x, y []float32, rows int) (bool, error) {
	return r.loadEach(func(m *Model) (bool, error) { return m.LoadTrainSet(x, y, rows) })
}

// LoadTrainWindows copies the training text to every GPU.
func (r *Replicated) LoadTrainWindows(ids []float32, windows int) (bool, error) {
	return r.loadEach(func(m *Model) (bool, error) { return m.LoadTrainWindows(ids, windows) })
}

// loadEach runs load on every rank; where one declines or fails, the
// ranks before it drop what they loaded.
func (r *Replicated) loadEach(load func(m *Model) (bool, error)) (bool, error) {
	for i, m := range r.ranks {
		ok, err := load(m)
		if err != nil || !ok {
			for _, m := range r.ranks[:i] {
				m.freeResident()
				m.feeding = false
			}
			if err != nil {
				err = r.rankErr(i, err)
			}
			return false, err
		}
	}
	return true, nil
}

// StartEpoch gives each rank its slice of every global batch of order.
func (r *Replicated) StartEpoch(order []int, seeds []uint64, lrs []float32, step0, first int) error {
	r.spread()
	B, n := r.p.Meta.Batch, r.total
	share := B / n
	steps := len(seeds)
	if len(order) < steps*B {
		return fmt.Errorf("gpuhost: %d batches need %d rows of order, got %d", steps, steps*B, len(order))
	}
	return r.each(func(i int, m *Model) error {
		g := r.first + i // the global rank: its slice of every batch
		own := make([]int, steps*share)
		for b := 0; b < steps; b++ {
			copy(own[b*share:(b+1)*share], order[b*B+g*share:b*B+(g+1)*share])
		}
		return m.StartEpoch(own, seeds, lrs, step0, first)
	})
}

// QueueSteps launches n data-parallel steps on every rank and waits for
// their sums (each rank in its own goroutine, ranksDo), so that a rank
// that fails or hangs ends the window within the step timeout; the
// results stay on the devices for StepResults.
func (r *Replicated) QueueSteps(n int) error {
	r.spread()
	err := r.ranksDo(func(i int, m *Model) error {
		if err := m.upload(); err != nil {
			return err
		}
		m.weightsChanged()
		for s := 0; s < n; s++ {
			if err := launchParts(m.res.parts, r.colls[i], true); err != nil {
				return err
			}
			m.res.queued++
		}
		return r.colls[i].Wait(r.timeout)
	})
	for _, m := range r.ranks {
		m.touched()
	}
	if err != nil {
		res := r.ranks[0].res
		return fmt.Errorf("training steps %d to %d of the epoch: %w", res.first+1, res.first+n, err)
	}
	return nil
}

// StepResults waits for the queued steps' sums and results: each step's
// loss and correct rows summed over the ranks (each rank's loss is its
// share's sum divided by the global batch, so the sum is the global mean),
// those of other processes too (across).
func (r *Replicated) StepResults() ([]float32, []int, error) {
	if err := r.wait(); err != nil {
		res := r.ranks[0].res
		return nil, nil, fmt.Errorf("training steps %d to %d of the epoch: %w", res.first+1, res.first+res.queued, err)
	}
	var loss []float32
	var correct []int
	err := r.each(func(i int, m *Model) error {
		l, c, err := m.StepResults()
		if err != nil {
			return err
		}
		if loss == nil {
			loss, correct = l, c
			return nil
		}
		for k := range l {
			loss[k] += l[k]
			correct[k] += c[k]
		}
		return nil
	})
	if err != nil || !r.remote() {
		return loss, correct, err
	}
	v := make([]float32, 2*len(loss))
	for k := range loss {
		v[k], v[len(loss)+k] = loss[k], float32(correct[k])
	}
	if err := r.across(v); err != nil {
		res := r.ranks[0].res
		return nil, nil, fmt.Errorf("summing the figures of steps %d to %d across the nodes: %w", res.first+1, res.first+len(loss), err)
	}
	for k := range loss {
		loss[k], correct[k] = v[k], int(v[len(loss)+k])
	}
	return loss, correct, nil
}

// across sums v over the processes of the run, in place, on every
// process: this process's first rank gives v and its other ranks zeros
// to one all-reduce of every rank (the counts of correct rows are exact
// in float32 below 2^24). Every process calls it at the same point, as
// it does every collective.
func (r *Replicated) across(v []float32) error {
	n := 4 * len(v)
	if len(r.sums) == 0 || r.sums[0].Len() < n {
		for i, b := range r.sums {
			r.ranks[i].d.Free(b)
		}
		r.sums = r.sums[:0]
		for i, m := range r.ranks {
			b, err := m.d.Alloc("figures summed across nodes", max(n, 256))
			if err != nil {
				return r.rankErr(i, err)
			}
			r.sums = append(r.sums, b)
		}
	}
	mine := make([]byte, n)
	for k, x := range v {
		binary.LittleEndian.PutUint32(mine[4*k:], math.Float32bits(x))
	}
	err := r.ranksDo(func(i int, m *Model) error {
		part := mine
		if i > 0 {
			part = make([]byte, n)
		}
		if err := m.d.Upload(r.sums[i], 0, part); err != nil {
			return err
		}
		if err := r.colls[i].AllReduce([]Arg{{Buf: r.sums[i], Bytes: n}}); err != nil {
			return err
		}
		if err := r.colls[i].Wait(r.timeout); err != nil {
			return err
		}
		if i == 0 {
			return m.d.Download(mine, r.sums[0], 0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for k := range v {
		v[k] = math.Float32frombits(binary.LittleEndian.Uint32(mine[4*k:]))
	}
	return nil
}

// SaveState, RestoreState, SetBatch and PrepareBatch act on every rank.
func (r *Replicated) SaveState() error {
	r.spread()
	return r.each(func(i int, m *Model) error { return m.SaveState() })
}

func (r *Replicated) RestoreState() error {
	return r.each(func(i int, m *Model) error { return m.RestoreState() })
}

func (r *Replicated) SetBatch(b int) error {
	if err := r.wait(); err != nil {
		return err
	}
	return r.each(func(i int, m *Model) error { return m.SetBatch(b) })
}

func (r *Replicated) PrepareBatch() error {
	return r.each(func(i int, m *Model) error { return m.PrepareBatch() })
}

// Close closes every collective, then every device.
func (r *Replicated) Close() error {
	var errs []error
	for _, c := range r.colls {
		errs = append(errs, c.Close())
	}
	for i, b := range r.sums {
		errs = append(errs, r.ranks[i].d.Free(b))
	}
	for _, m := range r.ranks {
		m.freeResident()
		errs = append(errs, m.d.Close())
	}
	return errors.Join(errs...)
}

// MainReplicated is Main for a program that can train data-parallel
// (`train --gpus N|all`, and `--nodes N` or torchrun's variables for
// several processes, RunMember): openN opens n GPUs from the first given
// (n 0: every one) and loads NCCL. Without those flags and variables, or
// with --gpus 1, it is Main and never calls openN, so a run on one GPU
// never loads NCCL.
func MainReplicated(open func() (Device, error), openN func(first, n int) ([]Device, Clique, error), p *Program) {
	args := os.Args[1:]
	if app.DeviceNeedOf(args) != app.DeviceRequired || len(args) == 0 || args[0] != "train" {
		Main(open, p)
		return
	}
	cfg, err := DistributedConfig(args, os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Meta.Name, err)
		os.Exit(2)
	}
	timeout := StepTimeout
	if v := os.Getenv("MLBUILD_STEP_TIMEOUT"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil || timeout <= 0 {
			fmt.Fprintf(os.Stderr, "%s: MLBUILD_STEP_TIMEOUT=%q: want a duration such as 5m or 30s\n", p.Meta.Name, v)
			os.Exit(2)
		}
	}
	if cfg.Members > 1 {
		if len(p.Replicas) == 0 {
			fmt.Fprintf(os.Stderr, "%s: %d nodes: %v\n", p.Meta.Name, cfg.Members, noReplicas(p))
			os.Exit(2)
		}
		os.Exit(RunMember(Member{Config: cfg, Open: openN, Program: p, StepTimeout: timeout}, args, os.Stdout, os.Stderr))
	}
	n := cfg.GPUs
	if n == 1 {
		Main(open, p)
		return
	}
	if n > 1 {
		if _, err := p.ForGPUs(n); err != nil {
			fmt.Fprintf(os.Stderr, "%s: --gpus %d: %v\n", p.Meta.Name, n, err)
			os.Exit(2)
		}
	}
	devs, clique, err := openN(0, n)
	if err != nil {
		fail(p, err)
	}
	if len(devs) == 1 { // --gpus all on a machine of one GPU
		Main(func() (Device, error) { return devs[0], nil }, p)
		return
	}
	closeDevs := func() {
		for _, d := range devs {
			d.Close()
		}
	}
	if _, err := p.ForGPUs(len(devs)); err != nil { // --gpus all
		closeDevs()
		fmt.Fprintf(os.Stderr, "%s: --gpus all (%d here): %v\n", p.Meta.Name, len(devs), err)
		os.Exit(2)
	}
	id, err := clique.NewID()
	if err != nil {
		closeDevs()
		fail(p, err)
	}
	colls, err := clique.Start(id, 0, len(devs), DefaultStartTimeout)
	if err != nil {
		closeDevs()
		fail(p, err)
	}
	m, err := NewReplicated(devs, colls, p, timeout)
	if err != nil {
		for _, c := range colls {
			c.Close()
		}
		closeDevs()
		fail(p, err)
	}
	if !quiet(args) {
		B := p.Meta.Batch
		fmt.Printf("training on %d GPUs: global batch %d = %d × %d\n", m.GPUs(), B, m.GPUs(), B/m.GPUs())
	}
	code := app.Run(m, args, os.Stdout, os.Stderr)
	if err := m.Close(); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Meta.Name, err)
		code = 1
	}
	os.Exit(code)
}

// noReplicas says why p cannot train on several GPUs.
func noReplicas(p *Program) error {
	_, err := p.ForGPUs(2)
	return err
}
