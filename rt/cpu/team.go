package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The team runs a batch-1 decode's kernels (the matrix-vector products,
// the attention over the cache, GELU) on long-lived goroutines, part i of
// a step run by member i (the caller is member 0): a layer's rows then
// stay with one goroutine, and so with one core's L2 cache, from token to
// token (models/gpt.cue's 21 MB of bf16 weights over 16 cores' 2 MB each).
//
// A token is some 50 dependent steps a few microseconds long, so a step
// must cost well under a microsecond of synchronisation, on 16 cores as on
// 2. The rules that keep it so:
//
//   - A step is one atomic store of a post word (the step's number and its
//     number of parts) that the members poll; no lock, channel, allocation
//     or call into the scheduler. Polling members spin on loads (and PAUSE)
//     and never call runtime.Gosched, which puts the goroutine on the scheduler's
//     global queue under its lock: 15 members doing so every few hundred
//     nanoseconds contend for that lock and trade goroutines between
//     threads (the team before this one did, and generated more slowly on
//     16 cores than on 2).
//   - Each member has its own 128-byte slot (two cache lines: Intel's
//     adjacent-line prefetch pulls pairs) holding its part's state, which
//     it claims and finishes with its own writes: no counter that all of
//     them update. The caller reads the slots of the parts in use.
//   - A step has as many parts as its work allows (teamParts): at least
//     teamPartBytes of weights (or cache rows, or their equivalent in
//     elementwise work) a part, at most the team's size, so that more
//     cores than a step can use leave it as it is rather than cut it into
//     parts smaller than a step's synchronisation. A step of one part runs
//     on the caller without a post.
//   - A member that is late (its core taken by another process, or asleep)
//     holds nobody up: the caller, once its own part is done, claims and
//     runs every part that no member has claimed within teamGrace (a few
//     microseconds; at once for a member asleep), and waits only for
//     parts that are running.
//   - Members poll for teamSpin after the last step they saw, giving the
//     core to other threads (sched_yield) once teamYieldAfter has passed
//     without a step, then sleep on a channel; DecodeTeamRest sends them to
//     sleep at once. Spinning thus stops within 2 ms of the end of a
//     generation and costs nothing while other work (the prefill's matrix
//     products on ParallelFor's workers) runs.
//
// Each output is still computed by one member in the kernel's order, so
// results do not depend on the number of threads or on who ran a part.
// One caller at a time uses the team; a call that finds it busy (a kernel
// called from another goroutine, or from inside a part) runs through
// ParallelFor.

// teamPartBytes is the least work a part of a step gets: 16 KB of weights
// (or of cached keys and values). A 384×384 bf16 layer then splits at
// most 16 ways, a 1536×384 one 64 ways, f32 twice as many. 16 KB of bf16
// weights in L2 are ~0.35 µs of one core (45 GB/s on a 384×384 layer on
// this repository's machine), the order of a step's synchronisation (a
// few cache-line transfers between cores; BenchmarkTeamStep), below which
// a part would cost about as much to hand out as to run.
const teamPartBytes = 16 << 10

// teamPartMin is the least work a part gets now: teamPartBytes unless
// SetDecodePartBytes changed it.
var teamPartMin atomic.Int64

func init() { teamPartMin.Store(teamPartBytes) }

// SetDecodePartBytes sets the least work a part of a decode team's step
// gets (bytes of weights, or their equivalent), teamPartBytes where n < 1:
// a switch to measure the rule on another machine (generate's
// MLBUILD_DECODE_PART_KB), not a setting to tune a program with.
func SetDecodePartBytes(n int) {
	if n < 1 {
		n = teamPartBytes
	}
	teamPartMin.Store(int64(n))
}

// teamElemBytes is the work of an element of a decode's elementwise chain
// (GELU, or a float64 function) in teamPartBytes' units: GELU takes about
// 2.4 ns an element on one core, as long as 100 bytes of bf16 weights, so
// a part gets at least 256 elements.
const teamElemBytes = 64

// teamSpin is how long an idle member polls before it sleeps.
const teamSpin = 2 * time.Millisecond

// teamYieldAfter is how long a member polls before it also gives its core
// to other threads (sched_yield) at each check of the clock (every
// microsecond or two): a token's steps come a microsecond or two apart, so a
// longer gap means the caller is between tokens, doing something else, or
// has lost its core to another process and may be waiting for this one.
// Where nothing else waits for the core the call returns at once, and a
// post that comes during one is seen a fraction of a microsecond late.
const teamYieldAfter = 5 * time.Microsecond

// teamPolls is how many loads of the word it waits on a polling
// goroutine makes between PAUSEs: on a virtual machine a PAUSE after each
// load would look like a spinning lock to the hypervisor's PAUSE-loop
// exiting (PAUSEs under 128 cycles apart for some 4,096 cycles), which
// then takes the core away for microseconds at a time.
const teamPolls = 64

// teamSpinNanos is teamSpin, which a test may lengthen to tell a member
// that slept because the team rests from one that polled its time out.
var teamSpinNanos atomic.Int64

func init() { teamSpinNanos.Store(int64(teamSpin)) }

// teamMax bounds the team's size (the parts of a step fit the post word's
// low byte).
const teamMax = 64

// teamPad is two cache lines, the unit of false sharing on Intel CPUs.
const teamPad = 128

// A teamJob is one step's work, split into parts by index.
type teamJob interface {
	runPart(part, parts int)
}

// A teamSlot is member i's part of the current step: state is 2s when the
// part of step s is claimed (by the member, or by the caller that found
// it unclaimed) and 2s+1 when it is done, and only grows. work is the
// member's time in parts (DecodeStats).
type teamSlot struct {
	state atomic.Uint64
	work  atomic.Int64
	_     [teamPad - 16]byte
}

type team struct {
	// the caller's, under mu
	mu      sync.Mutex // held by the calling goroutine for the whole step
	size    int        // the caller (part 0) and its members
	members []*teamMember
	stats   teamStats
	_       [teamPad]byte
	// the step's, written by the caller before its post and read by the
	// members after their claim (the last step's stay until the next)
	job     teamJob
	statsOn bool // stats.on, for the members
	gemv    gemvJob
	gemv16  gemvBF16Job
	attend  attendJob
	unary   unaryJob
	_       [teamPad]byte
	// post is the step's number s (from 1) << 8 | its number of parts;
	// the caller writes it, once a step, and the members poll it.
	post atomic.Uint64
	_    [teamPad - 8]byte
	// sleepers counts the members asleep (or about to be); the caller
	// wakes them when it is not 0.
	sleepers atomic.Int32
	resting  atomic.Bool // the members sleep rather than poll (DecodeTeamRest)
	_        [teamPad - 8]byte
	slots    [teamMax]teamSlot // slots[0] is unused: the caller's part is its own
}

type teamMember struct {
	stop     atomic.Bool
	sleeping atomic.Bool
	wake     chan struct{}
	_        [teamPad - 16]byte
}

var decodeTeam team

// teamUse is false where the decode's kernels run through ParallelFor
// instead (UseDecodeTeam).
var teamUse = true

// UseDecodeTeam runs the batch-1 decode's kernels on the team (on, the
// default) or through ParallelFor, as before the team: a switch to time
// the two (generate's MLBUILD_DECODE_POOL=1). Call it before the kernels.
func UseDecodeTeam(on bool) { teamUse = on }

// teamLock takes the team for a step when it is free and more than one
// thread is asked for, sized for Threads(); the caller then works out the
// step's parts for the team's size (teamParts), fills in its job and
// calls run, or alone where one part is all the step is worth.
func teamLock() (*team, bool) {
	t := &decodeTeam
	if Threads() == 1 || !teamUse || !t.mu.TryLock() {
		return nil, false
	}
	// members beyond the processors would only spin for one (GOMAXPROCS
	// takes the scheduler's lock, which nothing else here contends for)
	if n := min(Threads(), runtime.GOMAXPROCS(0), teamMax); n != t.size {
		t.resize(n)
	}
	return t, true
}

// alone frees the team without a step: the kernel, of one part, runs on
// the caller alone.
func (t *team) alone() {
	if t.stats.on {
		t.stats.serial++
	}
	t.mu.Unlock()
}

// teamParts is the number of parts of a step of units pieces of unitBytes
// of work each, split in whole pieces among at most size members: as many
// as keep each part at least teamPartMin (teamPartBytes; so a split's
// smallest part, floor(units/parts) pieces, is that big), at least 1.
func teamParts(units, unitBytes, size int) int {
	least := int(teamPartMin.Load())
	need := max(1, (least+unitBytes-1)/max(1, unitBytes))
	return max(1, min(size, teamMax, units/need))
}

// rowParts is teamParts for a matrix-vector product of out rows of
// rowBytes each, split in whole groups of four rows (teamRows).
func (t *team) rowParts(out, rowBytes int) int {
	return teamParts(out/4, 4*rowBytes, t.size)
}

// run runs job's parts 0..parts−1 (2 ≤ parts ≤ t.size), the caller taking
// part 0 and then any part no member has claimed within teamGrace (at
// once for a member asleep), and returns when all are done, freeing the
// team.
func (t *team) run(job teamJob, parts int) {
	defer t.mu.Unlock()
	st := &t.stats
	var mark time.Time
	if st.on {
		mark = time.Now()
	}
	t.job = job
	if t.resting.Load() {
		t.resting.Store(false)
	}
	s := t.post.Load()>>8 + 1
	t.post.Store(s<<8 | uint64(parts)) // publishes job to the members
	if t.sleepers.Load() != 0 {
		t.wakeAll()
	}
	job.runPart(0, parts)
	if st.on {
		now := time.Now()
		st.own += now.Sub(mark)
		mark = now
	}
	claimed, done := 2*s, 2*s+1
	var graceEnd time.Time // zero until a part is found unclaimed
	for i := 1; i < parts; i++ {
		sl := &t.slots[i]
		for n := 1; ; n++ {
			v := sl.state.Load()
			if v == done {
				break
			}
			if v < claimed && (t.members[i-1].sleeping.Load() || pastGrace(&graceEnd)) {
				if sl.state.CompareAndSwap(v, claimed) {
					t.steal(job, i, parts)
					sl.state.Store(done)
					break
				}
				continue
			}
			if n%teamPolls == 0 {
				spinPause()
			}
			if n%(1<<15) == 0 {
				// a part that runs this long (some 100 µs) has lost
				// its core: let the thread that runs it have this one
				osYield()
			}
		}
	}
	if st.on {
		st.wait += time.Since(mark)
		st.steps++
		st.parts += int64(parts)
	}
}

// teamGrace is how long the caller, its own part done, lets a member
// claim its part before it runs the part itself: many times the fraction
// of a microsecond that a polling member takes to see a post, far less
// than the time slice that a member without a core waits for.
const teamGrace = 3 * time.Microsecond

// pastGrace reports whether teamGrace has passed since the first call
// (which sets *end) for this step.
func pastGrace(end *time.Time) bool {
	now := time.Now()
	if end.IsZero() {
		*end = now.Add(teamGrace)
		return false
	}
	return now.After(*end)
}

// steal runs part i for its member, which did not claim it.
func (t *team) steal(job teamJob, i, parts int) {
	if !t.stats.on {
		job.runPart(i, parts)
		return
	}
	start := time.Now()
	job.runPart(i, parts)
	t.stats.stealing += time.Since(start)
	t.stats.stolen++
}

// wakeAll wakes the members that sleep.
func (t *team) wakeAll() {
	for _, m := range t.members {
		if m.sleeping.Load() {
			select {
			case m.wake <- struct{}{}:
			default:
			}
			if t.stats.on {
				t.stats.wakes++
			}
		}
	}
}

// DecodeTeamRest sends the decode team's members to sleep now rather than
// after teamSpin of polling: a caller about to run other parallel work
// (the decode's prefill, whose matrix products go through ParallelFor's
// workers) frees the processors they would poll on. The next step wakes
// them.
func DecodeTeamRest() { decodeTeam.resting.Store(true) }

// resize makes the team n strong (the caller holds mu, no step runs): the
// old members stop, new ones start. An old member that has not yet seen
// its stop may still claim a part of a later step through its slot, which
// is harmless: a part is run by whoever claims it.
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
		go t.loop(m, i)
	}
}

// loop is member i's life: poll the post for a step, claim and run part i
// of it where the step has one, again; yield and sleep when idle.
func (t *team) loop(m *teamMember, i int) {
	seen := t.post.Load()
	var idle time.Time // since when no step came; zero: not yet looked at the clock
	for n := 1; ; n++ {
		if p := t.post.Load(); p != seen {
			seen, idle = p, time.Time{}
			if s, parts := p>>8, int(p&0xff); i < parts {
				t.claim(i, s, parts)
			}
			continue
		}
		if n%teamPolls != 0 {
			continue
		}
		spinPause()
		if n%(16*teamPolls) != 0 { // the clock every microsecond or two
			continue
		}
		if m.stop.Load() {
			return
		}
		if idle.IsZero() {
			idle = time.Now()
			continue
		}
		waited := time.Since(idle)
		if waited < time.Duration(teamSpinNanos.Load()) && !t.resting.Load() {
			if waited > teamYieldAfter {
				osYield()
			}
			continue
		}
		m.sleeping.Store(true)
		t.sleepers.Add(1)
		if t.post.Load() == seen && !m.stop.Load() {
			<-m.wake
		}
		t.sleepers.Add(-1)
		m.sleeping.Store(false)
		idle = time.Time{}
	}
}

// claim runs part i of step s where it is still unclaimed (the caller may
// have taken it, or the step may be long over when the member saw its
// post late). The job is read only after the claim: until part i is done
// the caller cannot post the next step.
func (t *team) claim(i int, s uint64, parts int) {
	sl := &t.slots[i]
	v := sl.state.Load()
	if v >= 2*s || !sl.state.CompareAndSwap(v, 2*s) {
		return
	}
	if t.statsOn {
		start := time.Now()
		t.job.runPart(i, parts)
		sl.work.Add(int64(time.Since(start)))
	} else {
		t.job.runPart(i, parts)
	}
	sl.state.Store(2*s + 1)
}

// teamStats is the caller's account of its steps (DecodeStats), kept
// where on: fields the caller alone writes, under mu.
type teamStats struct {
	on                                  bool
	steps, parts, stolen, serial, wakes int64
	own, stealing, wait                 time.Duration
}

// DecodeStats is the decode team's account since SetDecodeStats(true):
// where the caller's time in its steps went and how busy the members
// were, for a per-token breakdown (generate's MLBUILD_DECODE_STATS=1).
type DecodeStats struct {
	// Team is the team's size (the caller and its members).
	Team int
	// Steps counts the steps run on the team, Parts their parts, Stolen
	// the parts the caller ran for a member that had not claimed them,
	// and Serial the decode kernels' calls of one part, run on the
	// caller alone. Wakes counts the sleeping members woken.
	Steps, Parts, Stolen, Serial, Wakes int64
	// Own is the caller's time in its own parts, Stealing in the parts it
	// claimed for members, Wait in waiting for members' parts to end.
	Own, Stealing, Wait time.Duration
	// MemberWork is the members' time in their parts, summed over them.
	MemberWork time.Duration
}

// SetDecodeStats starts (on) the decode team's account afresh, or stops
// it. The account costs a few clock readings a step.
func SetDecodeStats(on bool) {
	t := &decodeTeam
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats, t.statsOn = teamStats{on: on}, on
	for i := range t.slots {
		t.slots[i].work.Store(0)
	}
}

// ReadDecodeStats returns the account kept since SetDecodeStats(true).
func ReadDecodeStats() DecodeStats {
	t := &decodeTeam
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &t.stats
	d := DecodeStats{Team: max(1, t.size), Steps: st.steps, Parts: st.parts, Stolen: st.stolen, Serial: st.serial,
		Wakes: st.wakes, Own: st.own, Stealing: st.stealing, Wait: st.wait - st.stealing} // wait ran from the own part's end
	for i := range t.slots {
		d.MemberWork += time.Duration(t.slots[i].work.Load())
	}
	return d
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
