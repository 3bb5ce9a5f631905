package fakecuda

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/mlbuild/mlbuild/cuda"
)

// NCCLWorld is a simulated NCCL over several fake GPUs of one process:
// the cliques of communicators that ranks form from a unique id, and the
// collectives between them. Each fake GPU gets NCCL's function table
// from Fake.NCCL, so the cuda package's Communicator code that drives
// real NCCL runs in tests over several fake GPUs, each rank on its own
// engine thread as on a real machine.
//
// It computes for real: an all-reduce enqueues on its stream a piece of
// work that takes part in its round once the stream's earlier work has
// finished (NCCL work pending there, or waited for through an event) and
// finishes when every rank of the clique has taken part; then the sums (float32, added in rank order, so every run gives
// the same bits) are written to every rank's buffer. Until then the
// stream is busy: cuStreamQuery answers CUDA_ERROR_NOT_READY, and work
// launched after it on that stream waits for it (the launching thread
// waits, where a real GPU would).
//
// It enforces NCCL's rules, with NCCL's status codes: a context must be
// current on the thread that creates a communicator
// (ncclUnhandledCudaError); the id must come from ncclGetUniqueId, the
// rank must be in range and not taken, every rank must agree on the
// size (ncclInvalidArgument, ncclInvalidUsage); an all-reduce needs a
// live communicator, float32 sums, a stream of its GPU that is not being
// captured, and buffers inside live allocations of its GPU
// (ncclInvalidArgument, ncclInvalidUsage); ranks whose all-reduces of
// one round differ in length get ncclInvalidUsage as an async error
// (real NCCL would hang or corrupt); destroying a communicator with
// collectives pending is ncclInvalidUsage (call ncclCommAbort). And it
// injects the faults of a distributed run: Hang(rank) makes a rank's
// later collectives never start, as a stuck process; Kill(rank) makes
// its peers see ncclRemoteError as an async error, as a network
// transport does when a process dies. A GPU whose work faulted runs no
// collective after the fault, so its peers wait as for a hung rank. ncclCommAbort finishes (drops) a
// communicator's pending work and makes its peers see ncclRemoteError.
type NCCLWorld struct {
	mu      sync.Mutex
	cliques map[cuda.NCCLUniqueID]*clique
	comms   map[cuda.NCCLComm]*ncclComm
	ids     uint64
	next    uintptr
	hung    map[int]bool
	dead    map[int]bool
	groups  map[int][]func() cuda.NCCLResult // OS thread → collectives of its open group
	depth   map[int]int
	last    string
	closed  chan struct{}
	version int32
}

type clique struct {
	nranks int
	comms  map[int]*ncclComm
	full   chan struct{}
	rounds map[int]*round
}

type ncclComm struct {
	h        cuda.NCCLComm
	f        *Fake
	cl       *clique
	rank     int
	issued   int
	asyncErr cuda.NCCLResult
	aborted  bool
	pending  []chan struct{}
}

// round is the n-th collective of a clique, as its ranks enqueue it.
type round struct {
	count uintptr
	parts map[int]part
}

type part struct {
	c    *ncclComm
	buf  uint64 // in place: send == recv
	recv uint64
	done chan struct{}
}

// NewNCCLWorld makes an empty world.
func NewNCCLWorld() *NCCLWorld {
	return &NCCLWorld{cliques: map[cuda.NCCLUniqueID]*clique{}, comms: map[cuda.NCCLComm]*ncclComm{},
		hung: map[int]bool{}, dead: map[int]bool{}, groups: map[int][]func() cuda.NCCLResult{}, depth: map[int]int{},
		closed: make(chan struct{}), next: 0x7000, version: 22807}
}

// Hang makes rank's later collectives never start: its peers' sums
// never finish, as when a process is stuck.
func (w *NCCLWorld) Hang(rank int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hung[rank] = true
}

// Kill makes rank a crashed process: its later collectives never start,
// and every peer of its cliques sees ncclRemoteError as an async error.
func (w *NCCLWorld) Kill(rank int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead[rank] = true
	for _, c := range w.comms {
		if c.rank == rank && !c.aborted {
			w.peersLost(c, fmt.Sprintf("rank %d exited", rank))
		}
	}
}

// Close ends the world: a rank still waiting in ncclCommInitRank for
// peers that never came returns ncclSystemError, so tests can close their
// devices.
func (w *NCCLWorld) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.closed:
	default:
		close(w.closed)
	}
}

// peersLost marks every live peer of c with ncclRemoteError. w.mu is held.
func (w *NCCLWorld) peersLost(c *ncclComm, why string) {
	for r, p := range c.cl.comms {
		if r != c.rank && !p.aborted && p.asyncErr == cuda.NCCLSuccess {
			p.asyncErr = cuda.NCCLRemoteError
		}
	}
	w.last = "fakecuda NCCL: " + why
}

// ncclLeaks lists f's communicators neither destroyed nor aborted.
func (w *NCCLWorld) ncclLeaks(f *Fake) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for h, c := range w.comms {
		if c.f == f {
			out = append(out, fmt.Sprintf("NCCL communicator %#x (rank %d)", h, c.rank))
		}
	}
	sort.Strings(out)
	return out
}

var ncclMessages = map[cuda.NCCLResult]string{
	0: "no error", 1: "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
	2: "unhandled system error (run with NCCL_DEBUG=INFO for details)", 3: "internal error - please report this issue to the NCCL developers",
	4: "invalid argument (run with NCCL_DEBUG=WARN for details)", 5: "invalid usage (run with NCCL_DEBUG=WARN for details)",
	6: "remote process exited or there was a network error", 7: "NCCL operation in progress",
}

// NCCL returns NCCL's function table for this fake GPU in world w; put it
// in the Libraries (Libraries().NCCL) of the engines that use this GPU.
func (f *Fake) NCCL(w *NCCLWorld) *cuda.NCCLAPI {
	f.mu.Lock()
	f.nccl = w
	f.mu.Unlock()
	return &cuda.NCCLAPI{
		GetVersion: func(v *int32) cuda.NCCLResult { *v = w.version; return 0 },
		GetErrorString: func(r cuda.NCCLResult) string {
			if m, ok := ncclMessages[r]; ok {
				return m
			}
			return "unknown result code"
		},
		GetLastError: func(cuda.NCCLComm) string {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.last
		},
		GetUniqueID: func(id *cuda.NCCLUniqueID) cuda.NCCLResult {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.ids++
			*id = cuda.NCCLUniqueID{}
			copy(id.Internal[:], "fakecuda NCCL id")
			binary.LittleEndian.PutUint64(id.Internal[24:], w.ids)
			w.cliques[*id] = &clique{comms: map[int]*ncclComm{}, full: make(chan struct{}), rounds: map[int]*round{}}
			return 0
		},
		CommInitRank: func(comm *cuda.NCCLComm, nranks int32, id cuda.NCCLUniqueID, rank int32) cuda.NCCLResult {
			return w.initRank(f, comm, int(nranks), id, int(rank))
		},
		AllReduce: func(send, recv cuda.DevicePtr, count uintptr, dt cuda.NCCLDataType, op cuda.NCCLRedOp, comm cuda.NCCLComm, s cuda.Stream) cuda.NCCLResult {
			return w.allReduce(f, uint64(send), uint64(recv), count, dt, op, comm, s)
		},
		GroupStart: func() cuda.NCCLResult {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.depth[threadID()]++
			return 0
		},
		GroupEnd: func() cuda.NCCLResult {
			tid := threadID()
			w.mu.Lock()
			if w.depth[tid] == 0 {
				w.mu.Unlock()
				return cuda.NCCLInvalidUsage
			}
			w.depth[tid]--
			if w.depth[tid] > 0 {
				w.mu.Unlock()
				return 0
			}
			queued := w.groups[tid]
			delete(w.groups, tid)
			w.mu.Unlock()
			for _, issue := range queued {
				if r := issue(); r != 0 {
					return r
				}
			}
			return 0
		},
		CommGetAsyncError: func(comm cuda.NCCLComm, r *cuda.NCCLResult) cuda.NCCLResult {
			w.mu.Lock()
			defer w.mu.Unlock()
			c := w.comms[comm]
			if c == nil || r == nil {
				return cuda.NCCLInvalidArgument
			}
			*r = c.asyncErr
			return 0
		},
		CommAbort: func(comm cuda.NCCLComm) cuda.NCCLResult {
			w.mu.Lock()
			defer w.mu.Unlock()
			c := w.comms[comm]
			if c == nil {
				return cuda.NCCLInvalidArgument
			}
			c.aborted = true
			for _, d := range c.livePending() { // the finished ones are closed already
				close(d)
			}
			c.pending = nil
			for _, r := range c.cl.rounds {
				delete(r.parts, c.rank)
			}
			w.peersLost(c, fmt.Sprintf("rank %d aborted its communicator", c.rank))
			delete(w.comms, comm) // ncclCommAbort frees it
			return 0
		},
		CommDestroy: func(comm cuda.NCCLComm) cuda.NCCLResult {
			w.mu.Lock()
			defer w.mu.Unlock()
			c := w.comms[comm]
			if c == nil {
				return cuda.NCCLInvalidArgument
			}
			if len(c.livePending()) > 0 {
				w.last = fmt.Sprintf("fakecuda NCCL: rank %d destroyed with %d collectives pending; abort it instead", c.rank, len(c.pending))
				return cuda.NCCLInvalidUsage
			}
			delete(w.comms, comm)
			return 0
		},
	}
}

// livePending drops c's finished work and returns the rest. w.mu is held.
func (c *ncclComm) livePending() []chan struct{} {
	live := c.pending[:0]
	for _, d := range c.pending {
		select {
		case <-d:
		default:
			live = append(live, d)
		}
	}
	c.pending = live
	return live
}

func (w *NCCLWorld) initRank(f *Fake, comm *cuda.NCCLComm, nranks int, id cuda.NCCLUniqueID, rank int) cuda.NCCLResult {
	f.mu.Lock()
	ctx := f.current[threadID()]
	f.mu.Unlock()
	if ctx == 0 {
		return cuda.NCCLUnhandledCudaError // cudaGetDevice without a context
	}
	if comm == nil {
		return cuda.NCCLInvalidArgument
	}
	w.mu.Lock()
	cl := w.cliques[id]
	switch {
	case cl == nil:
		w.last = "fakecuda NCCL: an id that ncclGetUniqueId did not make"
		w.mu.Unlock()
		return cuda.NCCLInvalidArgument
	case nranks < 1 || rank < 0 || rank >= nranks:
		w.last = fmt.Sprintf("fakecuda NCCL: rank %d of %d", rank, nranks)
		w.mu.Unlock()
		return cuda.NCCLInvalidArgument
	case cl.nranks != 0 && cl.nranks != nranks:
		w.last = fmt.Sprintf("fakecuda NCCL: rank %d says %d ranks, the clique has %d", rank, nranks, cl.nranks)
		w.mu.Unlock()
		return cuda.NCCLInvalidArgument
	case cl.comms[rank] != nil:
		w.last = fmt.Sprintf("fakecuda NCCL: rank %d joined twice", rank)
		w.mu.Unlock()
		return cuda.NCCLInvalidUsage
	}
	cl.nranks = nranks
	w.next += 0x10
	c := &ncclComm{h: cuda.NCCLComm(w.next), f: f, cl: cl, rank: rank}
	cl.comms[rank] = c
	w.comms[c.h] = c
	if len(cl.comms) == nranks {
		close(cl.full)
	}
	w.mu.Unlock()
	select {
	case <-cl.full: // ncclCommInitRank returns when every rank has joined
		*comm = c.h
		return 0
	case <-w.closed:
		w.mu.Lock()
		delete(w.comms, c.h)
		delete(cl.comms, rank)
		w.last = "fakecuda NCCL: the world closed while rank waited for its peers"
		w.mu.Unlock()
		return cuda.NCCLSystemError
	}
}

func (w *NCCLWorld) allReduce(f *Fake, send, recv uint64, count uintptr, dt cuda.NCCLDataType, op cuda.NCCLRedOp, comm cuda.NCCLComm, s cuda.Stream) cuda.NCCLResult {
	if dt != cuda.NCCLFloat32 || op != cuda.NCCLSum || count == 0 {
		return cuda.NCCLInvalidArgument // the fake sums float32 only
	}
	f.mu.Lock()
	st := f.streams[s]
	n := uint64(count) * 4
	okMem := f.bytesAt(send, n) != nil && f.bytesAt(recv, n) != nil && send%4 == 0 && recv%4 == 0
	capturing := st != nil && st.capturing
	f.mu.Unlock()
	if st == nil || !okMem {
		return cuda.NCCLInvalidArgument
	}
	if capturing {
		return cuda.NCCLInvalidUsage // collectives in a CUDA graph are not simulated
	}
	issue := func() cuda.NCCLResult { return w.issue(f, st, send, recv, count, comm) }
	tid := threadID()
	w.mu.Lock()
	if w.comms[comm] == nil || w.comms[comm].f != f {
		w.mu.Unlock()
		return cuda.NCCLInvalidArgument
	}
	if w.depth[tid] > 0 {
		w.groups[tid] = append(w.groups[tid], issue)
		w.mu.Unlock()
		return 0
	}
	w.mu.Unlock()
	return issue()
}

// issue enqueues one all-reduce of comm on st: it takes part in its
// round once the work enqueued on st before it has finished (at once, but
// for NCCL work pending there, or waited for through an event), and the
// last part of a round completes it.
func (w *NCCLWorld) issue(f *Fake, st *stream, send, recv uint64, count uintptr, comm cuda.NCCLComm) cuda.NCCLResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.comms[comm]
	if c == nil {
		return cuda.NCCLInvalidArgument
	}
	done := make(chan struct{})
	f.mu.Lock()
	before := slices.Clone(f.pendingAsync(st))
	st.async = append(st.async, done)
	faulted := f.pending != cuda.Success || f.sticky != cuda.Success
	f.mu.Unlock()
	c.pending = append(c.pending, done)
	n := c.issued
	c.issued++
	if w.hung[c.rank] || w.dead[c.rank] || faulted {
		return 0 // enqueued, and never starts (a faulted GPU runs nothing more)
	}
	p := part{c: c, buf: send, recv: recv, done: done}
	if len(before) == 0 {
		w.join(n, count, p)
		return 0
	}
	go func() {
		for _, b := range before {
			<-b
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !c.aborted && w.comms[comm] == c {
			w.join(n, count, p)
		}
	}()
	return 0
}

// join adds p to round n of its clique and, as its last part, computes
// the sums and writes them to every part. w.mu is held.
func (w *NCCLWorld) join(n int, count uintptr, p part) {
	c := p.c
	r := c.cl.rounds[n]
	if r == nil {
		r = &round{count: count, parts: map[int]part{}}
		c.cl.rounds[n] = r
	}
	if r.count != count {
		for _, q := range c.cl.comms {
			if q.asyncErr == cuda.NCCLSuccess {
				q.asyncErr = cuda.NCCLInvalidUsage
			}
		}
		w.last = fmt.Sprintf("fakecuda NCCL: collective %d: rank %d sums %d values, another rank %d", n, c.rank, count, r.count)
		return
	}
	r.parts[c.rank] = p
	if len(r.parts) < c.cl.nranks {
		return
	}
	delete(c.cl.rounds, n)
	sum := make([]float32, count)
	for rank := range c.cl.nranks {
		q := r.parts[rank]
		for i, v := range q.c.f.deviceFloats(q.buf, count) {
			sum[i] += v
		}
	}
	for _, q := range r.parts {
		copy(q.c.f.deviceFloats(q.recv, count), sum)
		close(q.done)
	}
}

// deviceFloats is the device memory at p as count float32s, or nil when it is
// no longer inside a live allocation.
func (f *Fake) deviceFloats(p uint64, count uintptr) []float32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.bytesAt(p, uint64(count)*4)
	if b == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), count)
}
