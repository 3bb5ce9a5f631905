package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var threads atomic.Int32

func init() { threads.Store(int32(runtime.GOMAXPROCS(0))) }

// SetThreads sets how many goroutines kernels split their work over; n < 1
// means one per available CPU (GOMAXPROCS).
func SetThreads(n int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	threads.Store(int32(n))
}

// Threads reports the number of goroutines kernels use.
func Threads() int { return int(threads.Load()) }

// ParallelFor splits [0, n) into at most Threads() contiguous chunks of at
// least grain items and calls fn on each, concurrently, returning when all are
// done. The chunks depend only on n, grain and Threads(); which goroutine
// runs which one does not matter. With one chunk it calls fn on the caller's
// goroutine.
func ParallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	chunks := Threads()
	if max := (n + grain - 1) / grain; chunks > max {
		chunks = max
	}
	if chunks <= 1 {
		fn(0, n)
		return
	}
	t := newTask(chunks)
	t.loop = forLoop{fn: fn, n: n, per: (n + chunks - 1) / chunks}
	t.body = &t.loop
	t.runWith(chunks - 1)
	t.release()
}

// forLoop is ParallelFor's work as a task body: part i is the i-th chunk of
// per items.
type forLoop struct {
	fn     func(lo, hi int)
	n, per int
}

func (l *forLoop) runPart(_ *task, i int) {
	lo := i * l.per
	l.fn(lo, min(lo+l.per, l.n))
}

// A task is one parallel call's work: parts [0, parts) that the calling
// goroutine and the pool's workers it recruited take one at a time from a
// shared counter, so a worker that wakes late, or a core that another
// process holds, simply gets fewer of them. The caller never waits for a
// worker that has not started: once every part is taken it withdraws the
// invitations nobody accepted and waits only for the workers that joined.
//
// Tasks are recycled (newTask, release), so a parallel call allocates
// nothing in steady state.
type task struct {
	body  partRunner
	parts int
	// single makes every participant take at most one part, for parts that
	// meet at barriers and so must all run at once (a shared-B Sgemm); the
	// caller then takes none (runShared gives it a part of its own).
	single bool
	next   atomic.Int64 // parts taken
	left   atomic.Int32 // joined workers that have finished
	// waiting is set while the caller sleeps on wake for workers to leave.
	waiting atomic.Bool
	wake    chan struct{}
	invited [taskMaxHelpers]*worker
	loop    forLoop // ParallelFor's body, kept here so it is not allocated
}

// partRunner runs one part of a task.
type partRunner interface {
	runPart(t *task, part int)
}

// taskMaxHelpers bounds the workers one call recruits.
const taskMaxHelpers = 63

var tasks = sync.Pool{New: func() any { return &task{wake: make(chan struct{}, 1)} }}

func newTask(parts int) *task {
	t := tasks.Get().(*task)
	t.parts, t.single = parts, false
	t.next.Store(0)
	t.left.Store(0)
	return t
}

// release drops the references to the caller's data and recycles t.
func (t *task) release() {
	t.body, t.loop = nil, forLoop{}
	tasks.Put(t)
}

// runWith runs t on the caller's goroutine and up to helpers idle workers,
// returning when every part is done.
func (t *task) runWith(helpers int) {
	n := workers.reserve(t, min(helpers, t.parts-1))
	workers.invite(t, n)
	t.work()
	t.finish(n)
}

// work takes and runs parts until none is left (or one, for single tasks).
func (t *task) work() {
	for {
		i := int(t.next.Add(1)) - 1
		if i >= t.parts {
			return
		}
		t.body.runPart(t, i)
		if t.single {
			return
		}
	}
}

// finish withdraws the invitations to t that no worker has accepted yet
// (the first invited of t.invited) and waits until the workers that did
// have left t. For a single task, whose parts must all run, it withdraws
// none.
func (t *task) finish(invited int) {
	joined := 0
	for _, w := range t.invited[:invited] {
		if !t.single && w.invitation.CompareAndSwap(t, nil) {
			workers.idle(w) // never saw the invitation: it is still waiting
			continue
		}
		joined++
	}
	clear(t.invited[:invited])
	if joined == 0 {
		return
	}
	// The last parts usually end within microseconds of each other, so
	// poll a little before sleeping, with a PAUSE every teamPolls polls
	// and no call into the scheduler (see accept). The caller never gives
	// its core away with osYield here: where another process shares the
	// core, that costs a whole time slice, while a sleeping caller is
	// woken, and run soon, when the last worker leaves.
	var start time.Time
	for i := 1; int(t.left.Load()) < joined; i++ {
		if i%teamPolls != 0 {
			continue
		}
		spinPause()
		if i%(16*teamPolls) != 0 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		}
		if time.Since(start) < taskWait {
			continue
		}
		t.waiting.Store(true)
		if int(t.left.Load()) < joined {
			<-t.wake
		}
		t.waiting.Store(false)
	}
	// A wake-up sent after the last check would be stale for the next use.
	select {
	case <-t.wake:
	default:
	}
}

// taskWait is about how long a caller polls for its workers to leave
// before it sleeps (waking a sleeping goroutine takes longer).
const taskWait = 30 * time.Microsecond

// A worker is one long-lived goroutine of the pool. It waits for an
// invitation to a task, spinning for a while after its last one (a model
// step calls the next kernel within microseconds, and waking a sleeping
// goroutine takes longer than that) and then sleeping on wake.
type worker struct {
	invitation atomic.Pointer[task]
	sleeping   atomic.Bool
	wake       chan struct{}
}

// workers is the pool shared by ParallelFor, Sgemm and everything built on
// them. A call recruits only idle workers, each of which then runs nothing
// but that call's parts, so calls made from inside parts (Sgemm in a
// ParallelFor) or from several goroutines at once can never wait on each
// other: with no worker idle the caller runs everything itself.
var workers workerPool

type workerPool struct {
	mu      sync.Mutex
	started int
	free    []*worker // idle workers, most recently idle last
}

// workerSpin is how long an idle worker keeps polling for an invitation
// before it sleeps. It covers the serial stretches of a training step: in
// the benchmark MLP's (last layer, loss, its backward: about 0.2 ms) a
// 200 µs spin let the worker fall asleep, and the next layer's backward
// took 0.58 ms on 2 threads instead of 0.50.
const workerSpin = 500 * time.Microsecond

// workerGoschedEvery is how many of an idle worker's clock readings (a
// microsecond or two apart) pass between its calls to runtime.Gosched:
// some 100 µs, so that a goroutine of the program waiting for a processor
// (the batch loader, the garbage collector) gets one well within
// workerSpin.
const workerGoschedEvery = 64

// reserve takes up to n idle workers off the free list for t (listing them
// in t.invited), starting workers until there are Threads()-1 of them, and
// returns how many it took. They do nothing until invite.
func (p *workerPool) reserve(t *task, n int) int {
	n = min(n, taskMaxHelpers)
	if n <= 0 {
		return 0
	}
	p.mu.Lock()
	for ; p.started < Threads()-1; p.started++ {
		w := &worker{wake: make(chan struct{}, 1)}
		p.free = append(p.free, w)
		go w.loop()
	}
	n = min(n, len(p.free))
	copy(t.invited[:n], p.free[len(p.free)-n:])
	p.free = p.free[:len(p.free)-n]
	p.mu.Unlock()
	return n
}

// invite offers t to the n workers reserve took for it, waking those that
// sleep.
func (p *workerPool) invite(t *task, n int) {
	for _, w := range t.invited[:n] {
		w.invitation.Store(t)
		if w.sleeping.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// idle returns w to the free list.
func (p *workerPool) idle(w *worker) {
	p.mu.Lock()
	p.free = append(p.free, w)
	p.mu.Unlock()
}

func (w *worker) loop() {
	for {
		t := w.accept()
		t.work()
		wake := t.wake
		// Back on the free list before the caller can return, so that the
		// caller's next parallel call finds this worker idle.
		workers.idle(w)
		t.left.Add(1)
		if t.waiting.Load() {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// accept waits for an invitation and takes it, so that the inviting
// caller can no longer withdraw it.
//
// It polls with a PAUSE every teamPolls loads (as the decode team does)
// and reads the clock every 16·teamPolls. At each reading it lets other
// threads run on this core (sched_yield: where another process holds some
// of the cores, two of ours may share one, and an idle worker must not
// keep the caller off it; a worker that loses its core this way only
// joins later, and nobody waits for it). Only at every workerGoschedEvery-th
// reading does it let other goroutines run on this processor
// (runtime.Gosched): that puts the goroutine on the scheduler's global
// queue under its lock, and 15 workers doing so every few hundred loads
// spent half of a 16-core batch-1 ResNet-18 inference in that lock (H200
// host, docs/kernels-cpu.md).
func (w *worker) accept() *task {
	start := time.Now()
	for i := 1; ; i++ {
		if t := w.invitation.Load(); t != nil && w.invitation.CompareAndSwap(t, nil) {
			return t
		}
		if i%teamPolls != 0 {
			continue
		}
		spinPause()
		if i%(16*teamPolls) != 0 {
			continue
		}
		if time.Since(start) < workerSpin {
			osYield()
			if i%(workerGoschedEvery*16*teamPolls) == 0 {
				runtime.Gosched()
			}
			continue
		}
		w.sleeping.Store(true)
		if w.invitation.Load() == nil {
			<-w.wake
		}
		w.sleeping.Store(false)
		start = time.Now()
	}
}
