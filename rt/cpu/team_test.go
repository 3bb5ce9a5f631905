package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTeamRows: the parts cover the rows once, in order, in whole groups
// of four but for the end, for counts around the part counts.
func TestTeamRows(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 17, 89, 384, 1536} {
		for _, parts := range []int{1, 2, 3, 7, 16, 63} {
			next := 0
			for p := range parts {
				lo, hi := teamRows(n, p, parts)
				if lo != next || hi < lo || (hi != n && hi%4 != 0) {
					t.Fatalf("n=%d parts=%d: part %d is [%d,%d), want it to start at %d and end on a group of 4 or at n", n, parts, p, lo, hi, next)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("n=%d parts=%d: the parts end at %d", n, parts, next)
			}
		}
	}
}

// TestTeamConcurrentCallersAndResize: decode kernels called from several
// goroutines at once (one gets the team, the others ParallelFor) and
// across changes of the thread count give the one-thread bits.
func TestTeamConcurrentCallersAndResize(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(12)
	in, out := 384, 1536
	x, w := randSlice(r, in, 1), randSlice(r, in*out, 1)
	wb, xb := make([]uint16, in*out), make([]uint16, in)
	ToBF16(wb, w)
	SetThreads(1)
	want, want16 := make([]float32, out), make([]float32, out)
	GemmFwd(x, w, nil, want, 1, in, out, ActNone, 0)
	GemvBF16(x, xb, wb, nil, want16, in, out, ActNone, 0)
	check := func(what string, got, want []float32) {
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("%s: y[%d] = %v, on one thread %v", what, i, got[i], want[i])
				return
			}
		}
	}
	for _, threads := range []int{3, 5, 2, 16, 4} {
		SetThreads(threads)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				y, y16, xb := make([]float32, out), make([]float32, out), make([]uint16, in)
				for range 20 {
					GemvF32(x, w, nil, y, in, out, ActNone, 0)
					check("f32", y, want)
					GemvBF16(x, xb, wb, nil, y16, in, out, ActNone, 0)
					check("bf16", y16, want16)
				}
			}()
		}
		wg.Wait()
	}
}

// teamAllocs is testing.AllocsPerRun without its GOMAXPROCS(1), which
// would leave the team without members: the mallocs of runs calls of f,
// the members' included, a call, after 20 calls to warm up (in which the
// runtime starts the threads that run the members), a collection (the
// first starts a mark worker a processor, which allocates) and a pause in
// which ParallelFor's workers, idle since the test's set-up, fall asleep
// (a goroutine that blocks may allocate the runtime's record of it).
//
// The count is the process's, so a goroutine of the runtime or of an
// earlier test that allocates once in the window (seen on a loaded CI
// machine: 1 malloc in 20 calls) would read as the kernel's; the least of
// three windows is kept. A kernel that allocates on every call still
// shows it in each window.
func teamAllocs(runs int, f func()) float64 {
	for range 20 {
		f()
	}
	least := math.Inf(1)
	for range 3 {
		runtime.GC()
		time.Sleep(10 * workerSpin)
		f()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, float64(after.Mallocs-before.Mallocs)/float64(runs))
	}
	return least
}

// leastAllocs is testing.AllocsPerRun's count, the least of three: the
// count is the process's, and a runtime goroutine that allocates once in a
// window (one malloc in 20 calls on a loaded machine) is not the kernel's;
// a kernel that allocates on every call shows in each window.
func leastAllocs(runs int, f func()) float64 {
	least := math.Inf(1)
	for range 3 {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}

// TestDecodeKernelsAllocateNothingOnTheTeam: on 2 and 4 threads (the
// team; GOMAXPROCS 4) a decode's matrix-vector products, cached attention
// and GELU allocate nothing a call either, the members' work included.
func TestDecodeKernelsAllocateNothingOnTheTeam(t *testing.T) {
	defer SetThreads(Threads())
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer DecodeTeamRest()
	// A member that sleeps may allocate the runtime's record of a blocked
	// goroutine (a sudog, when its processor's cache of them is empty):
	// not a step's allocation, so the members here poll on, as they do
	// between a token's steps, even where a loaded machine keeps the
	// caller off its core for longer than teamSpin.
	defer teamSpinNanos.Store(int64(teamSpin))
	teamSpinNanos.Store(int64(time.Minute))
	r := newTestRand(2)
	x, w, y := randSlice(r, 384, 1), randSlice(r, 1536*384, 1), make([]float32, 1536)
	wb, xb := make([]uint16, len(w)), make([]uint16, 384)
	ToBF16(wb, w)
	q, kc, vc, ya := randSlice(r, 384, 1), make([]float32, 256*384), make([]float32, 256*384), make([]float32, 384)
	scores := make([]float32, 6*256)
	for _, threads := range []int{2, 4} {
		SetThreads(threads)
		if n := teamAllocs(20, func() { GemvF32(x, w, nil, y, 384, 1536, ActNone, 0) }); n != 0 {
			t.Errorf("%d threads: GemvF32 1×384×1536: %v allocations a call", threads, n)
		}
		if n := teamAllocs(20, func() { GemvBF16(x, xb, wb, nil, y, 384, 1536, ActNone, 0) }); n != 0 {
			t.Errorf("%d threads: GemvBF16 1×384×1536: %v allocations a call", threads, n)
		}
		if n := teamAllocs(20, func() { AttendCached(q, q, q, ya, kc, vc, scores, 200, 6, 64, 0.125) }); n != 0 {
			t.Errorf("%d threads: AttendCached at position 200: %v allocations a call", threads, n)
		}
		if n := teamAllocs(20, func() { UnaryDecode(y, y, geluChain) }); n != 0 {
			t.Errorf("%d threads: UnaryDecode of GELU over 1536: %v allocations a call", threads, n)
		}
	}
}

var geluChain = []Unary{{Kind: UGELU}}

// TestUnaryDecode: UnaryDecode (the team from 256 elements of a chain with
// GELU or a float64 function) gives UnaryFwd's one-thread bits on 1 to 16
// threads, on lengths around the team's threshold and a block's.
func TestUnaryDecode(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(8)
	for _, chain := range [][]Unary{geluChain, {{Kind: UTanh}, {Kind: UMulConst, Alpha: 3}}, {{Kind: UReLU}}} {
		for _, n := range []int{1, 255, 256, 257, 1536, 5000} {
			x := randSlice(r, n, 4)
			SetThreads(1)
			want := make([]float32, n)
			UnaryFwd(x, want, chain)
			for _, threads := range []int{2, 3, 16} {
				SetThreads(threads)
				y := make([]float32, n)
				UnaryDecode(x, y, chain)
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
						t.Fatalf("chain %v n=%d threads=%d: y[%d] = %v, UnaryFwd on one thread %v", chain, n, threads, i, y[i], want[i])
					}
				}
			}
		}
	}
}

// TestDecodeTeamRest: after DecodeTeamRest the members sleep (they stop
// polling well before teamSpin), and the next step wakes them and gives
// the one-thread bits.
func TestDecodeTeamRest(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(2)
	r := newTestRand(3)
	x, w := randSlice(r, 384, 1), randSlice(r, 384*384, 1)
	want, y := make([]float32, 384), make([]float32, 384)
	gemvFwd(x, w, nil, want, 1, 384, 384, ActNone, 0)
	GemvF32(x, w, nil, y, 384, 384, ActNone, 0)
	if len(decodeTeam.members) == 0 {
		t.Skip("one processor: the team has no members")
	}
	// The members poll for a minute after a step unless the team rests:
	// one still polling 10 s after DecodeTeamRest did not rest (a fixed
	// 1 ms, half the real spin, failed on a loaded 2-core machine).
	defer teamSpinNanos.Store(int64(teamSpin))
	teamSpinNanos.Store(int64(time.Minute))
	GemvF32(x, w, nil, y, 384, 384, ActNone, 0)
	DecodeTeamRest()
	deadline := time.Now().Add(10 * time.Second)
	for !decodeTeam.members[0].sleeping.Load() {
		if time.Now().After(deadline) {
			t.Fatal("a member still polls 10 s after DecodeTeamRest")
		}
		runtime.Gosched()
	}
	GemvF32(x, w, nil, y, 384, 384, ActNone, 0)
	for i := range y {
		if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
			t.Fatalf("after the rest: y[%d] = %v, want %v", i, y[i], want[i])
		}
	}
}

// TestTeamPartsNeverBelowMinimum: the part rule gives no part of a
// decode's step less than teamPartBytes of work, or the least that
// SetDecodePartBytes set (every part of a
// matrix-vector product as teamRows cuts it, of the attention's heads and
// of an elementwise chain), never more parts than the team has, and, as
// the team grows, more parts until the work runs out and then the same
// number: never fewer.
func TestTeamPartsNeverBelowMinimum(t *testing.T) {
	type step = teamPartsStep
	var steps []step
	for _, m := range [][3]int{{384, 384, 2}, {384, 384, 4}, {1536, 384, 2}, {384, 1536, 2}, {89, 384, 2}, {89, 384, 4},
		{1536, 384, 4}, {7, 3000, 4}, {5, 384, 2}, {1000, 17, 4}, {4097, 64, 2}, {50257, 768, 2}} {
		out, in, elem := m[0], m[1], m[2]
		steps = append(steps, step{
			name: fmt.Sprintf("gemv %d×%d of %d-byte weights", out, in, elem), units: out, unitBytes: in * elem,
			parts: func(size int) int { return (&team{size: size}).rowParts(out, elem*in) },
			cut:   func(p, parts int) (int, int) { return teamRows(out, p, parts) },
		})
	}
	for _, a := range [][3]int{{6, 1, 64}, {6, 20, 64}, {6, 128, 64}, {6, 255, 64}, {12, 1000, 64}, {1, 4096, 128}, {32, 40, 128}} {
		heads, n, hd := a[0], a[1], a[2]
		steps = append(steps, step{
			name: fmt.Sprintf("attention of %d heads over %d positions", heads, n), units: heads, unitBytes: 8 * n * hd,
			parts: func(size int) int { return teamParts(heads, 8*n*hd, size) },
			cut:   func(p, parts int) (int, int) { return heads * p / parts, heads * (p + 1) / parts },
		})
	}
	for _, n := range []int{256, 300, 511, 512, 1536, 3072, 100000} {
		steps = append(steps, step{
			name: fmt.Sprintf("GELU over %d", n), units: n, unitBytes: teamElemBytes,
			parts: func(size int) int { return teamParts(n, teamElemBytes, size) },
			cut:   func(p, parts int) (int, int) { return n * p / parts, n * (p + 1) / parts },
		})
	}
	defer SetDecodePartBytes(0)
	for _, least := range []int{teamPartBytes, 1000, 64 << 10} {
		SetDecodePartBytes(least)
		checkTeamParts(t, steps, least)
	}
	SetDecodePartBytes(0)
	// the decode steps of models/gpt.cue on 16 cores: a 384×384 bf16 layer
	// in 16 parts, its head (89 rows) in 3
	g := &team{size: 16}
	if p := g.rowParts(384, 2*384); p != 16 {
		t.Errorf("384×384 bf16 on 16 cores: %d parts, want 16", p)
	}
	if p := g.rowParts(89, 2*384); p != 3 {
		t.Errorf("89×384 bf16 on 16 cores: %d parts, want 3", p)
	}
}

// teamPartsStep is a step of TestTeamPartsNeverBelowMinimum: cut gives
// part p of parts as [lo, hi) of units of unitBytes.
type teamPartsStep struct {
	name             string
	units, unitBytes int
	parts            func(size int) int
	cut              func(p, parts int) (lo, hi int)
}

func checkTeamParts(t *testing.T, steps []teamPartsStep, least int) {
	t.Helper()
	for _, st := range steps {
		prev := 0
		for size := 1; size <= teamMax+3; size++ {
			parts := st.parts(size)
			if parts < 1 || parts > min(size, teamMax) {
				t.Fatalf("%s, team of %d: %d parts", st.name, size, parts)
			}
			if parts < prev {
				t.Fatalf("%s: %d parts for a team of %d, %d for one fewer: a bigger team must not split less", st.name, parts, size, prev)
			}
			if parts > 1 {
				next := 0
				for p := range parts {
					lo, hi := st.cut(p, parts)
					if lo != next {
						t.Fatalf("%s, %d parts: part %d starts at %d, want %d", st.name, parts, p, lo, next)
					}
					if b := (hi - lo) * st.unitBytes; b < least {
						t.Fatalf("%s, least %d, team of %d: part %d of %d is [%d,%d), %d bytes of work, under the least", st.name, least, size, p, parts, lo, hi, b)
					}
					next = hi
				}
				if next != st.units {
					t.Fatalf("%s, %d parts: they end at %d of %d", st.name, parts, next, st.units)
				}
			}
			prev = parts
		}
	}
}

// TestTeamMatchesSerialOnEveryThreadCount: every decode kernel that uses
// the team gives its one-thread bits on teams of 1 to 17 (GOMAXPROCS
// raised to 17, more than this machine's cores, so that members lose
// their cores and the caller runs their parts too), on the shapes of
// models/gpt.cue's decode and awkward ones.
func TestTeamMatchesSerialOnEveryThreadCount(t *testing.T) {
	defer SetThreads(Threads())
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(17))
	defer DecodeTeamRest()
	r := newTestRand(31)
	type kernel struct {
		name string
		run  func() []float32
	}
	var kernels []kernel
	for _, m := range [][2]int{{384, 384}, {384, 1536}, {1536, 384}, {384, 89}, {100, 1027}, {3, 5000}} {
		in, out := m[0], m[1]
		x, w, b := randSlice(r, in, 1), randSlice(r, in*out, 1), randSlice(r, out, 1)
		wb, xb := make([]uint16, in*out), make([]uint16, in)
		ToBF16(wb, w)
		y, y16 := make([]float32, out), make([]float32, out)
		kernels = append(kernels,
			kernel{fmt.Sprintf("GemvF32 %d→%d", in, out), func() []float32 { GemvF32(x, w, b, y, in, out, ActTanh, 0); return y }},
			kernel{fmt.Sprintf("GemvBF16 %d→%d", in, out), func() []float32 { GemvBF16(x, xb, wb, nil, y16, in, out, ActNone, 0); return y16 }})
	}
	for _, p := range []int{0, 7, 100, 255} {
		heads, hd := 6, 64
		w := heads * hd
		q, k, v := randSlice(r, w, 1), randSlice(r, w, 1), randSlice(r, w, 1)
		kc, vc := randSlice(r, 256*w, 1), randSlice(r, 256*w, 1)
		y, scores := make([]float32, w), make([]float32, heads*256)
		kernels = append(kernels, kernel{fmt.Sprintf("AttendCached at %d", p), func() []float32 {
			AttendCached(q, k, v, y, kc, vc, scores, p, heads, hd, 0.125)
			return y
		}})
	}
	for _, n := range []int{256, 700, 1536, 4099} {
		x, y := randSlice(r, n, 4), make([]float32, n)
		kernels = append(kernels, kernel{fmt.Sprintf("UnaryDecode GELU over %d", n), func() []float32 { UnaryDecode(x, y, geluChain); return y }})
	}
	SetThreads(1)
	want := make([][]float32, len(kernels))
	for i, k := range kernels {
		want[i] = append([]float32(nil), k.run()...)
	}
	for threads := 1; threads <= 17; threads++ {
		SetThreads(threads)
		for rep := range 3 {
			for i, k := range kernels {
				got := k.run()
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("%s, %d threads, run %d: y[%d] = %v, on one thread %v", k.name, threads, rep, j, got[j], want[i][j])
					}
				}
			}
		}
		if threads > 1 && decodeTeam.size != threads {
			t.Fatalf("%d threads: a team of %d", threads, decodeTeam.size)
		}
	}
}

// TestTeamMembersSleepWhenIdle: within a few teamSpin of its last step
// every member of a team of 4 sleeps (generation's spinning stops when
// generation does), and DecodeStats counts the steps and their parts.
func TestTeamMembersSleepWhenIdle(t *testing.T) {
	defer SetThreads(Threads())
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	SetThreads(4)
	r := newTestRand(5)
	x, w, y := randSlice(r, 384, 1), randSlice(r, 384*384, 1), make([]float32, 384)
	SetDecodeStats(true)
	defer SetDecodeStats(false)
	for range 10 {
		GemvF32(x, w, nil, y, 384, 384, ActNone, 0)
	}
	st := ReadDecodeStats()
	parts := (&team{size: 4}).rowParts(384, 4*384)
	if st.Team != 4 || st.Steps != 10 || st.Parts != int64(10*parts) || st.Own <= 0 {
		t.Errorf("10 steps of 384×384 f32 on a team of 4: %+v, want 10 steps of %d parts and the caller's time in them", st, parts)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range decodeTeam.members {
		for !m.sleeping.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("a member still polls 10 s after the last step (teamSpin is %v)", teamSpin)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// countingJob counts the runs of each part, the parts but 0 slowed by
// a sleep of slow (so that the caller is done first and must wait).
type countingJob struct {
	runs [teamMax]atomic.Int32
	slow time.Duration
}

func (j *countingJob) runPart(part, parts int) {
	if part != 0 && j.slow > 0 {
		time.Sleep(j.slow)
	}
	j.runs[part].Add(1)
}

// TestTeamRunsEveryPartOnce: run returns only when every part of its step
// has run, each exactly once, whether its member, sleeping, slow or
// without a core (GOMAXPROCS 17 on this machine), or the caller ran it;
// on teams of 2 to 17, with steps of 2 parts to all of them.
func TestTeamRunsEveryPartOnce(t *testing.T) {
	defer SetThreads(Threads())
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(17))
	defer DecodeTeamRest()
	j := &countingJob{}
	for threads := 2; threads <= 17; threads++ {
		SetThreads(threads)
		for step := range 40 {
			tm, ok := teamLock()
			if !ok {
				t.Fatal("the team is busy with no other caller")
			}
			parts := 2 + step%(tm.size-1)
			j.slow = 0
			if step%8 == 0 {
				j.slow = 200 * time.Microsecond
			}
			if step%10 == 5 {
				DecodeTeamRest()
			}
			tm.run(j, parts)
			for p := range teamMax {
				want := int32(0)
				if p < parts {
					want = 1
				}
				if n := j.runs[p].Swap(0); n != want {
					t.Fatalf("team of %d, step %d of %d parts: part %d ran %d times when run returned, want %d", threads, step, parts, p, n, want)
				}
			}
		}
	}
}
