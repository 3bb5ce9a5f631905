package cpu

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The team runs a batch-1 decode's kernels (the matrix-vector products,
// the attention over the cache, GELU) on Threads() long-lived goroutines
// (at most GOMAXPROCS), part i of a step taken by member i where it is
// ready: a layer's rows then stay with one goroutine from token to token,
// and so, as far as the scheduler keeps it on one core, in that core's L2
// cache where they fit (models/gpt.cue's 21 MB of bf16 weights over 16
// cores' 2 MB each), where ParallelFor's parts go to whichever worker
// takes them first. A step is a few atomic stores that the polling
// members see, and a bit a part that they claim: no lock, no channel and
// no allocation, which ParallelFor's invitations cost at every one of a
// token's 50-odd steps (at 16 threads mlbuild generated more slowly than
// at 2). A member that is late (its core taken by another process) holds
// nobody up: the caller and the other members claim its part once theirs
// are done. Members poll for the next step for teamSpin before they
// sleep: a token's steps come microseconds apart, and so do tokens.
//
// Each output is still computed by one member in the kernel's order, so
// results do not depend on the number of threads. One caller at a time
// uses the team; a call that finds it busy (a kernel called from another
// goroutine, or from inside a part) runs through ParallelFor.

// teamSpin is how long an idle member polls before it sleeps.
const teamSpin = 2 * time.Millisecond

// teamSpinNanos is teamSpin, which a test may lengthen to tell a member
// that slept because the team rests from one that polled its time out.
var teamSpinNanos atomic.Int64

func init() { teamSpinNanos.Store(int64(teamSpin)) }

// teamMax bounds the team's size: a bit of claimed a part.
const teamMax = 64

// A teamJob is one step's work, split into parts by index.
type teamJob interface {
	runPart(part, parts int)
}

type team struct {
	mu      sync.Mutex // held by the calling goroutine for the whole step
	size    int        // the caller (part 0) and its members
	members []*teamMember
	job     teamJob // the step's, written before claimed is reset
	parts   int
	claimed atomic.Uint64 // a bit a part taken; those ≥ parts set
	done    atomic.Int32  // parts finished
	seq     atomic.Uint64 // steps posted: what the members poll
	resting atomic.Bool   // the members sleep rather than poll (DecodeTeamRest)
	// the jobs' arguments, here so that a step allocates nothing
	gemv   gemvJob
	gemv16 gemvBF16Job
	attend attendJob
	unary  unaryJob
}

type teamMember struct {
	stop     atomic.Bool
	sleeping atomic.Bool
	wake     chan struct{}
}

var decodeTeam team

// teamUse is false where the decode's kernels run through ParallelFor
// instead (UseDecodeTeam).
var teamUse = true

// UseDecodeTeam runs the batch-1 decode's kernels on the team (on, the
// default) or through ParallelFor, as before the team: a switch to time
// the two (generate's MLBUILD_DECODE_POOL=1). Call it before the kernels.
func UseDecodeTeam(on bool) { teamUse = on }

// teamLock takes the team for a step when it is free and worth it (more
// than one thread); the caller then fills in its job and calls run.
func teamLock() (*team, bool) {
	t := &decodeTeam
	if Threads() == 1 || !teamUse || !t.mu.TryLock() {
		return nil, false
	}
	return t, true
}

// run runs job's parts 0..n−1, n = min(Threads(), GOMAXPROCS, teamMax)
// (members beyond the processors would only spin for one), the caller
// taking part 0 and then any part no member has claimed, and returns when
// all are done, freeing the team.
func (t *team) run(job teamJob) {
	defer t.mu.Unlock()
	if n := min(Threads(), runtime.GOMAXPROCS(0), teamMax); n != t.size {
		t.resize(n)
	}
	t.job, t.parts = job, t.size
	t.resting.Store(false)
	t.done.Store(0)
	t.claimed.Store(^uint64(0) << t.parts) // publishes job and parts to claimers
	t.seq.Add(1)
	for _, m := range t.members {
		if m.sleeping.Load() {
			select {
			case m.wake <- struct{}{}:
			default:
			}
		}
	}
	t.work(0)
	for i := 0; int(t.done.Load()) < t.parts; i++ {
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
	t.job = nil
	t.gemv, t.gemv16, t.attend, t.unary = gemvJob{}, gemvBF16Job{}, attendJob{}, unaryJob{} // drop the caller's slices
}

// work claims and runs parts of the current step, own first, until none
// is left unclaimed.
func (t *team) work(own int) {
	for {
		c := t.claimed.Load()
		if c == ^uint64(0) {
			return
		}
		i := own
		if c&(1<<own) != 0 {
			i = bits.TrailingZeros64(^c)
		}
		if !t.claimed.CompareAndSwap(c, c|1<<i) {
			continue
		}
		t.job.runPart(i, t.parts)
		t.done.Add(1)
	}
}

// DecodeTeamRest sends the decode team's members to sleep now rather than
// after teamSpin of polling: a caller about to run other parallel work
// (the decode's prefill, whose matrix products go through ParallelFor's
// workers) frees the processors they would poll on. The next step wakes
// them.
func DecodeTeamRest() { decodeTeam.resting.Store(true) }

// resize makes the team n strong (the caller holds mu, no step runs): the
// old members stop, new ones start.
func (t *team) resize(n int) {
	for _, m := range t.members {
		m.stop.Store(true)
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	t.size = n
	t.members = nil
	for i := 1; i < n; i++ {
		m := &teamMember{wake: make(chan struct{}, 1)}
		t.members = append(t.members, m)
		go t.loop(m, i, t.seq.Load())
	}
}

// loop is member i's life: wait for a step past seen, claim parts, again.
func (t *team) loop(m *teamMember, i int, seen uint64) {
	for !m.stop.Load() {
		start := time.Now()
		for n := 1; t.seq.Load() == seen && !m.stop.Load(); n++ {
			if n%128 != 0 {
				continue
			}
			if time.Since(start) < time.Duration(teamSpinNanos.Load()) && !t.resting.Load() {
				// give the core to a thread that needs it (another
				// process's, or the caller's where cores are shared)
				runtime.Gosched()
				osYield()
				continue
			}
			m.sleeping.Store(true)
			if t.seq.Load() == seen && !m.stop.Load() {
				<-m.wake
			}
			m.sleeping.Store(false)
			start = time.Now()
		}
		seen = t.seq.Load()
		if !m.stop.Load() {
			t.work(i)
		}
	}
}

// teamRows is part's share of n rows split into parts, in whole groups of
// four (the matrix-vector kernels' step) but for the last part.
func teamRows(n, part, parts int) (lo, hi int) {
	groups := (n + 3) / 4
	lo = min(n, 4*(groups*part/parts))
	hi = min(n, 4*(groups*(part+1)/parts))
	return lo, hi
}

// gemvJob is GemvF32's step: each part its rows of y.
type gemvJob struct {
	x, w, b, y []float32
	in, out    int
	act        Act
	alpha      float32
}

func (j *gemvJob) runPart(part, parts int) {
	lo, hi := teamRows(j.out, part, parts)
	if lo < hi {
		gemvRows(j.x, j.w, j.b, j.y, 1, j.in, j.out, j.act, j.alpha, lo, hi)
	}
}

// gemvBF16Job is GemvBF16's step.
type gemvBF16Job struct {
	x, w  []uint16
	b, y  []float32
	out   int
	act   Act
	alpha float32
}

func (j *gemvBF16Job) runPart(part, parts int) {
	lo, hi := teamRows(j.out, part, parts)
	if lo < hi {
		gemvBF16Rows(j.x, j.w, j.b, j.y, j.act, j.alpha, lo, hi)
	}
}

// attendJob is AttendCached's step: each part its heads.
type attendJob struct {
	q, y, kc, vc, scores []float32
	heads, hd, n         int
	scale                float32
}

func (j *attendJob) runPart(part, parts int) {
	w := j.heads * j.hd
	for h := j.heads * part / parts; h < j.heads*(part+1)/parts; h++ {
		attendHead(j.q, j.y, j.kc, j.vc, j.scores[h*j.n:(h+1)*j.n], h, j.hd, w, j.scale)
	}
}

// unaryJob is UnaryDecode's step: each part its share of the elements.
type unaryJob struct {
	x, y  []float32
	chain []Unary
}

func (j *unaryJob) runPart(part, parts int) {
	n := len(j.y)
	unaryRange(j.x, j.y, j.chain, n*part/parts, n*(part+1)/parts)
}
