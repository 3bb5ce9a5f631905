package gpuhost

import (
	"errors"
	"fmt"
	"time"
)

// Collective is one GPU's place in a group of GPUs that train one model
// together (data parallel): every GPU holds the whole model and runs its
// share of each batch, and between the backward pass and the optimizer
// step the gradients are summed across all of them, so that every GPU
// takes the same step. The CUDA device implements it with NCCL
// (cuda.Communicator), and cuda/fakecuda's NCCL fake computes the same
// sums in Go over several simulated GPUs; one conformance suite
// (gpuhosttest.RunCollective) holds both to this contract.
//
// The ordering contract. AllReduce enqueues the sums on the device's
// stream: they start after every op launched on the device before the
// call and finish before any op launched after it starts, so a training
// step is Launch(forward and backward), AllReduce(the gradients'
// buckets), Launch(the update), and the host waits only at its usual
// synchronisation points. Every rank must make the same AllReduce calls
// with spans of the same sizes, in the same order: ranks run the same
// program, so the same plan gives the same buckets (see Buckets).
//
// Overlap. StartAllReduce enqueues sums as AllReduce does, after every op
// launched before the call, but beside the ops launched after it (on a
// CUDA GPU, NCCL on a second stream): those run while the sums do, and
// must leave the spans alone, until Join, after which every op launched
// waits for every sum started before it. A data-parallel step thus starts
// each bucket's sums as soon as the backward pass has written its
// gradients, computes the rest of the backward pass meanwhile, and joins
// before the update (replicated.go). Neither call waits on the host.
//
// The failure contract. A collective cannot finish while any rank is
// missing, so a rank that died or hangs would stop the others forever.
// Wait therefore bounds every wait: it returns nil once the enqueued sums
// have finished, or an error within timeout that names this rank and
// says what happened (a peer's failure that NCCL reported, or nothing
// heard within the timeout), and aborts the collective first. Abort ends
// it at once from any goroutine, for a failure found elsewhere (the
// rendezvous's control channel names the rank that died): pending work is
// dropped and every later call fails with an error wrapping the reason.
// A host must call Wait (or Abort) before the device's Sync, Upload or
// Download whenever sums are pending, since those wait without a bound.
type Collective interface {
	// Rank is this GPU's rank, 0 to Size−1; Size is how many GPUs take part.
	Rank() int
	Size() int
	// AllReduce enqueues the in-place sum over every rank of each span's
	// float32 values (Bytes a multiple of 4, Offset 4-byte aligned), and
	// returns without waiting. The spans are its buckets: each is one
	// collective, all of them launched together. An error returns at once
	// for what cannot even start (a span outside its buffer, a buffer of
	// another device, a collective aborted or closed).
	AllReduce(spans []Arg) error
	// StartAllReduce enqueues the same sums as AllReduce but beside the
	// ops launched after it, until Join (see Overlap); its errors are
	// AllReduce's.
	StartAllReduce(spans []Arg) error
	// Join orders every op launched after it after every sum started
	// before it, without waiting; with none started it does nothing.
	Join() error
	// Wait waits for every AllReduce and StartAllReduce enqueued, at
	// most timeout; see the failure contract.
	Wait(timeout time.Duration) error
	// Abort ends the collective at once, from any goroutine; reason is
	// wrapped by the errors of pending and later calls. Aborting twice
	// keeps the first reason.
	Abort(reason error)
	// Close releases the collective: after Wait, at once; with sums still
	// pending, it aborts them.
	Close() error
}

// ErrCollectiveTimeout is wrapped by Wait's error when the sums did not
// finish within its timeout.
var ErrCollectiveTimeout = errors.New("the all-reduce did not finish in time")

// ErrAborted is wrapped by the error of every call on an aborted
// Collective (with the reason given to Abort).
var ErrAborted = errors.New("the collective was aborted")

// ErrPeerFailed is wrapped by a collective's error when NCCL reports that
// another rank failed (ncclRemoteError): the cause is elsewhere, and a run
// of several processes waits for the control channel to name it.
var ErrPeerFailed = errors.New("another rank failed")

// DefaultBucketBytes is the size of the gradient buckets that Buckets
// makes by default: 25 MiB, PyTorch DDP's default, large enough that a
// bucket's transfer time dwarfs NCCL's per-call cost (tens of µs) on
// NVLink and on a network, small enough that the first buckets' sums can
// overlap the rest of the backward pass (docs/distributed.md).
const DefaultBucketBytes = 25 << 20

// Buckets cuts spans (the gradients, in the order the backward pass
// finishes them) into buckets of at most maxBytes: adjacent spans of one
// buffer that touch are merged, and a span larger than maxBytes is split,
// all at 4-byte boundaries. Every rank computes the same buckets from the
// same spans. It refuses a span that is not whole float32s or that lies
// outside its buffer.
func Buckets(spans []Arg, maxBytes int) ([]Arg, error) {
	if maxBytes < 4 {
		return nil, fmt.Errorf("gpuhost: buckets of %d bytes; want 4 or more", maxBytes)
	}
	maxBytes &^= 3
	var out []Arg
	for i, s := range spans {
		if err := checkSpan(s); err != nil {
			return nil, fmt.Errorf("gpuhost: span %d: %w", i, err)
		}
		if s.Bytes == 0 {
			continue
		}
		// Merge into the last bucket when s continues it.
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.Buf == s.Buf && last.Offset+last.Bytes == s.Offset && last.Bytes < maxBytes {
				take := min(s.Bytes, maxBytes-last.Bytes)
				last.Bytes += take
				s.Offset += take
				s.Bytes -= take
			}
		}
		for s.Bytes > 0 {
			take := min(s.Bytes, maxBytes)
			out = append(out, Arg{Buf: s.Buf, Offset: s.Offset, Bytes: take})
			s.Offset += take
			s.Bytes -= take
		}
	}
	return out, nil
}

// checkSpan refuses a span that is not whole, aligned float32s inside its
// buffer.
func checkSpan(s Arg) error {
	switch {
	case s.Buf == nil:
		return errors.New("no buffer")
	case s.Offset < 0 || s.Bytes < 0 || s.Offset+s.Bytes > s.Buf.Len():
		return fmt.Errorf("bytes %d to %d are outside its buffer of %d", s.Offset, s.Offset+s.Bytes, s.Buf.Len())
	case s.Offset%4 != 0 || s.Bytes%4 != 0:
		return fmt.Errorf("offset %d and length %d: want whole float32s (multiples of 4)", s.Offset, s.Bytes)
	}
	return nil
}

// CheckSpan is checkSpan for a Collective's implementations: nil when s
// is whole, aligned, non-empty float32s inside its buffer.
func CheckSpan(s Arg) error {
	if err := checkSpan(s); err != nil {
		return err
	}
	if s.Bytes == 0 {
		return errors.New("an empty span")
	}
	return nil
}

// Clique is a process's GPUs before their collectives start. One process
// of a run (global rank 0's) makes the id of a new clique; a run of
// several processes hands it to the others through the rendezvous; then
// every process starts its GPUs as its ranks, firstRank to
// firstRank+len−1 of nranks, collective i being its i-th GPU's. Start
// returns only when every rank of the clique has started, or with an
// error within timeout.
type Clique interface {
	NewID() ([]byte, error)
	Start(id []byte, firstRank, nranks int, timeout time.Duration) ([]Collective, error)
}
