package cpu

import (
	"math"
	"runtime"
	"sync"
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

// TestDecodeKernelsAllocateNothingOnTheTeam: on 2 and 4 threads (the
// team) a decode's matrix-vector products and cached attention allocate
// nothing a call either.
func TestDecodeKernelsAllocateNothingOnTheTeam(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(2)
	x, w, y := randSlice(r, 384, 1), randSlice(r, 1536*384, 1), make([]float32, 1536)
	wb, xb := make([]uint16, len(w)), make([]uint16, 384)
	ToBF16(wb, w)
	q, kc, vc, ya := randSlice(r, 384, 1), make([]float32, 256*384), make([]float32, 256*384), make([]float32, 384)
	scores := make([]float32, 6*256)
	for _, threads := range []int{2, 4} {
		SetThreads(threads)
		if n := testing.AllocsPerRun(20, func() { GemvF32(x, w, nil, y, 384, 1536, ActNone, 0) }); n != 0 {
			t.Errorf("%d threads: GemvF32 1×384×1536: %v allocations a call", threads, n)
		}
		if n := testing.AllocsPerRun(20, func() { GemvBF16(x, xb, wb, nil, y, 384, 1536, ActNone, 0) }); n != 0 {
			t.Errorf("%d threads: GemvBF16 1×384×1536: %v allocations a call", threads, n)
		}
		if n := testing.AllocsPerRun(20, func() { AttendCached(q, q, q, ya, kc, vc, scores, 200, 6, 64, 0.125) }); n != 0 {
			t.Errorf("%d threads: AttendCached at position 200: %v allocations a call", threads, n)
		}
		if n := testing.AllocsPerRun(20, func() { UnaryDecode(y, y, geluChain) }); n != 0 {
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
