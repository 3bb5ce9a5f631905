package cuda

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// Communicator is one GPU's NCCL communicator as a gpuhost.Collective:
// its all-reduces are enqueued on a second stream of the Device's engine
// (one stream for all of them, so NCCL runs them in order), after the
// sequences launched before them (an event) and, for AllReduce, before
// those launched after (an event back; StartAllReduce leaves that to
// Join), and Wait polls both streams (cuStreamQuery) and NCCL's async
// error, so a
// peer that died or hangs ends in an error within the timeout instead of
// a wait without end. NCCL must be loaded (Libraries.LoadNCCL, or a
// fake's table in Libraries.NCCL).
type Communicator struct {
	d          *Device
	lib        *Libraries
	comm       NCCLComm
	rank, size int

	mu      sync.Mutex
	pending bool
	aborted error
	closed  bool
}

var _ gpuhost.Collective = (*Communicator)(nil)

// NewNCCLID makes the unique id of a new clique of communicators: rank 0
// makes it and the rendezvous hands it to every other rank.
func NewNCCLID(l *Libraries) (NCCLUniqueID, error) {
	var id NCCLUniqueID
	if l.NCCL == nil {
		return id, errors.New("cuda: NCCL is not loaded")
	}
	return id, l.ncclError("ncclGetUniqueId", l.NCCL.GetUniqueID(&id), 0, "making the id of a new clique")
}

// OpenCommunicators makes the communicators of this process's GPUs:
// devices[i] becomes rank firstRank+i of nranks, in the clique of id.
// NCCL's ncclCommInitRank returns only when every rank of the clique has
// called it, so the GPUs' calls run at once, each on its engine's thread
// (NCCL's way for one process with several GPUs besides a group), and
// the whole is bounded by timeout: a rank that never comes is an error
// naming the ranks of this process still waiting. Their engine threads
// then stay blocked in NCCL, so the program must exit rather than close
// those devices.
func OpenCommunicators(devices []*Device, id NCCLUniqueID, firstRank, nranks int, timeout time.Duration) ([]*Communicator, error) {
	if len(devices) == 0 || firstRank < 0 || firstRank+len(devices) > nranks {
		return nil, fmt.Errorf("cuda: %d GPUs as ranks %d to %d of %d", len(devices), firstRank, firstRank+len(devices)-1, nranks)
	}
	type result struct {
		i    int
		comm NCCLComm
		err  error
	}
	results := make(chan result, len(devices))
	for i, d := range devices {
		if d.e.lib.NCCL == nil {
			return nil, fmt.Errorf("cuda: GPU %d: NCCL is not loaded", d.e.opts.Ordinal)
		}
		go func() {
			var comm NCCLComm
			rank := firstRank + i
			err := d.e.do(func() error {
				return d.e.lib.ncclError("ncclCommInitRank", d.e.lib.NCCL.CommInitRank(&comm, int32(nranks), id, int32(rank)), 0,
					fmt.Sprintf("rank %d of %d on GPU %d", rank, nranks, d.e.opts.Ordinal))
			})
			results <- result{i, comm, err}
		}()
	}
	comms := make([]*Communicator, len(devices))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	waiting := func() string {
		var w []string
		for i, c := range comms {
			if c == nil {
				w = append(w, fmt.Sprint(firstRank+i))
			}
		}
		return strings.Join(w, ", ")
	}
	for range devices {
		select {
		case r := <-results:
			if r.err != nil {
				// The clique cannot form: the other GPUs' calls would wait
				// for this one until the timeout, so say why now.
				for _, c := range comms {
					if c != nil {
						c.Abort(errors.New("another GPU of this process failed to start NCCL"))
					}
				}
				comms[r.i] = &Communicator{} // not waiting
				if w := waiting(); w != "" {
					return nil, fmt.Errorf("%w (ranks %s of this process are left waiting)", r.err, w)
				}
				return nil, r.err
			}
			d := devices[r.i]
			comms[r.i] = &Communicator{d: d, lib: d.e.lib, comm: r.comm, rank: firstRank + r.i, size: nranks}
		case <-timer.C:
			return nil, fmt.Errorf("cuda: NCCL's start did not finish within %v: ranks %s of this process still wait for the other ranks (did every node start, with the same --nodes?)",
				timeout, waiting())
		}
	}
	return comms, nil
}

// Rank is the communicator's rank.
func (c *Communicator) Rank() int { return c.rank }

// Size is the number of ranks of its clique.
func (c *Communicator) Size() int { return c.size }

// who names the communicator in errors.
func (c *Communicator) who() string {
	return fmt.Sprintf("cuda: rank %d of %d (GPU %d)", c.rank, c.size, c.d.e.opts.Ordinal)
}

// usable refuses a call on an aborted or closed communicator; c.mu is held.
func (c *Communicator) usable(what string) error {
	switch {
	case c.aborted != nil:
		return fmt.Errorf("%s: %s: %w: %w", c.who(), what, gpuhost.ErrAborted, c.aborted)
	case c.closed:
		return fmt.Errorf("%s: %s after Close", c.who(), what)
	}
	return nil
}

// AllReduce enqueues the in-place float32 sum of each span across every
// rank, the spans in one NCCL group, in the order of the engine's stream:
// on its second stream (where every collective of the communicator
// goes), after an event recorded on the engine's stream and before an
// event the engine's stream then waits for (gpuhost.Collective).
func (c *Communicator) AllReduce(spans []gpuhost.Arg) error {
	return c.allReduce("AllReduce", spans, false)
}

// StartAllReduce enqueues the sums as AllReduce does, but without the
// event back: the engine's later work runs beside them until Join
// (gpuhost.Collective).
func (c *Communicator) StartAllReduce(spans []gpuhost.Arg) error {
	return c.allReduce("StartAllReduce", spans, true)
}

// Join makes the engine's stream wait, from here on, for every sum
// started before (an event recorded on the second stream): no wait on the
// host (gpuhost.Collective).
func (c *Communicator) Join() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable("Join"); err != nil {
		return err
	}
	if err := c.d.busy("Join"); err != nil {
		return err
	}
	e := c.d.e
	return e.do(func() error {
		if e.side == 0 {
			return nil // nothing was ever started beside
		}
		return e.order(e.side, e.stream, e.toMain)
	})
}

func (c *Communicator) allReduce(what string, spans []gpuhost.Arg, beside bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(what); err != nil {
		return err
	}
	if err := c.d.busy(what); err != nil {
		return err
	}
	ptrs := make([]DevicePtr, len(spans))
	for i, s := range spans {
		if err := gpuhost.CheckSpan(s); err != nil {
			return fmt.Errorf("%s: AllReduce span %d: %w", c.who(), i, err)
		}
		b, err := c.d.buffer(s.Buf, fmt.Sprintf("AllReduce span %d", i))
		if err != nil {
			return err
		}
		ptrs[i] = b.ptr + DevicePtr(s.Offset)
	}
	if len(spans) == 0 {
		return nil
	}
	e, n := c.d.e, c.lib.NCCL
	err := e.do(func() error {
		// Every collective goes on the second stream, so that NCCL runs
		// them in the order they were issued: collectives of one
		// communicator on two streams may run in another order on
		// another rank, and then wait for each other for ever.
		if err := e.sideStream(); err != nil {
			return err
		}
		if err := e.order(e.stream, e.side, e.toSide); err != nil {
			return err
		}
		stream := e.side
		if err := c.lib.ncclError("ncclGroupStart", n.GroupStart(), c.comm, ""); err != nil {
			return err
		}
		var errs []error
		for i, s := range spans {
			bb := s.Buf.(*buffer)
			r := n.AllReduce(ptrs[i], ptrs[i], uintptr(s.Bytes/4), NCCLFloat32, NCCLSum, c.comm, stream)
			errs = append(errs, c.lib.ncclError("ncclAllReduce", r, c.comm,
				fmt.Sprintf("bucket %d: bytes %d to %d of %q", i, s.Offset, s.Offset+s.Bytes, bb.label)))
		}
		errs = append(errs, c.lib.ncclError("ncclGroupEnd", n.GroupEnd(), c.comm, ""))
		if err := errors.Join(errs...); err != nil || beside {
			return err
		}
		return e.order(e.side, e.stream, e.toMain) // in the stream: what follows waits
	})
	c.pending = true
	if err != nil {
		// Some of this step's sums may have started: the peers would wait
		// for the rest forever.
		c.abortLocked(err)
		return fmt.Errorf("%s: %w", c.who(), err)
	}
	return nil
}

// Wait waits for the enqueued sums, at most timeout (gpuhost.Collective).
func (c *Communicator) Wait(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	e := c.d.e
	for poll := 20 * time.Microsecond; ; poll = min(2*poll, 5*time.Millisecond) {
		c.mu.Lock()
		if err := c.usable("Wait"); err != nil {
			c.mu.Unlock()
			return err
		}
		if !c.pending {
			c.mu.Unlock()
			return nil
		}
		var r Result
		async := NCCLSuccess
		callErr := e.do(func() error {
			r = e.query()
			if r == ErrorNotReady {
				return c.lib.ncclError("ncclCommGetAsyncError", c.lib.NCCL.CommGetAsyncError(c.comm, &async), c.comm, "")
			}
			return nil
		})
		var fail error
		switch {
		case callErr != nil:
			fail = callErr
		case r == Success:
			c.pending = false
			c.mu.Unlock()
			return nil
		case r != ErrorNotReady:
			fail = e.lib.driverError("cuStreamQuery", r, "waiting for the all-reduce")
		case async != NCCLSuccess && async != NCCLInProgress:
			fail = fmt.Errorf("%w: %w", gpuhost.ErrPeerFailed, c.lib.ncclError("ncclCommGetAsyncError", async, c.comm, "the all-reduce's async error"))
		case time.Now().After(deadline):
			fail = fmt.Errorf("%w: nothing finished within %v; another rank died, hangs or is far behind", gpuhost.ErrCollectiveTimeout, timeout)
		}
		if fail != nil {
			c.abortLocked(fail)
			c.mu.Unlock()
			return fmt.Errorf("%s: %w (NCCL aborted)", c.who(), fail)
		}
		c.mu.Unlock()
		time.Sleep(poll)
	}
}

// Abort ends the communicator at once (gpuhost.Collective). It calls
// ncclCommAbort on the caller's thread, which NCCL allows, so that it
// works while the engine's thread is busy.
func (c *Communicator) Abort(reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abortLocked(reason)
}

func (c *Communicator) abortLocked(reason error) {
	if c.aborted != nil || c.closed {
		return
	}
	if reason == nil {
		reason = errors.New("aborted")
	}
	c.aborted = reason
	c.pending = false
	c.lib.NCCL.CommAbort(c.comm) // it frees the communicator; its status changes nothing now
}

// Close destroys the communicator, aborting sums still pending
// (gpuhost.Collective).
func (c *Communicator) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.aborted != nil {
		c.closed = true
		return nil
	}
	if c.pending {
		var r Result
		c.d.e.do(func() error { r = c.d.e.query(); return nil })
		if r != Success {
			c.abortLocked(errors.New("closed with sums pending"))
			c.closed = true
			return nil
		}
		c.pending = false
	}
	c.closed = true
	return c.d.e.do(func() error {
		return c.lib.ncclError("ncclCommDestroy", c.lib.NCCL.CommDestroy(c.comm), c.comm, fmt.Sprintf("rank %d", c.rank))
	})
}

// query is cuStreamQuery of the engine's stream and, once made, of its
// second stream: Success when both are done, else the first other answer.
// It runs on the engine's thread.
func (e *Engine) query() Result {
	r := e.lib.Driver.StreamQuery(e.stream)
	if r == Success && e.side != 0 {
		r = e.lib.Driver.StreamQuery(e.side)
	}
	return r
}
