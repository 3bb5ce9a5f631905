package cpu

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestParallelForCoversEachIndexOnce runs ParallelFor over awkward sizes and
// grains on several thread counts (more than GOMAXPROCS among them) and
// checks that fn saw every index exactly once, in at most Threads() chunks
// and at most one per grain items.
func TestParallelForCoversEachIndexOnce(t *testing.T) {
	defer SetThreads(Threads())
	for _, threads := range []int{1, 2, 3, 8} {
		SetThreads(threads)
		for _, c := range []struct{ n, grain int }{{1, 1}, {2, 1}, {7, 1}, {100, 7}, {1000, 1}, {1000, 300}, {5, 10}} {
			t.Run(fmt.Sprintf("threads%d/n%d/grain%d", threads, c.n, c.grain), func(t *testing.T) {
				seen := make([]atomic.Int32, c.n)
				var chunks atomic.Int32
				ParallelFor(c.n, c.grain, func(lo, hi int) {
					chunks.Add(1)
					for i := lo; i < hi; i++ {
						seen[i].Add(1)
					}
				})
				for i := range seen {
					if v := seen[i].Load(); v != 1 {
						t.Fatalf("index %d seen %d times", i, v)
					}
				}
				if got, most := int(chunks.Load()), min(threads, (c.n+c.grain-1)/c.grain); got > most {
					t.Errorf("%d chunks; want at most %d", got, most)
				}
			})
		}
	}
}

// TestParallelForNestedAndConcurrent calls ParallelFor and Sgemm from inside
// ParallelFor's chunks, from several goroutines at once: callers recruit
// only idle workers, so this must neither deadlock nor lose a chunk.
func TestParallelForNestedAndConcurrent(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(3)
	const callers, outer, inner, n = 4, 6, 50, 96
	a, b := make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(i%7)-3, float32(i%5)-2
	}
	want := make([]float32, n*n)
	SgemmRef(false, false, n, n, n, 1, a, n, b, n, 0, want, n)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var total atomic.Int64
			cs := make([][]float32, outer)
			ParallelFor(outer, 1, func(lo, hi int) {
				for o := lo; o < hi; o++ {
					ParallelFor(inner, 1, func(lo, hi int) { total.Add(int64(hi - lo)) })
					cs[o] = make([]float32, n*n)
					Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, cs[o], n)
				}
			})
			if got := total.Load(); got != outer*inner {
				errs <- fmt.Errorf("nested loops covered %d items, want %d", got, outer*inner)
				return
			}
			for o, c := range cs {
				for i := range c {
					if c[i] != want[i] {
						errs <- fmt.Errorf("product %d: C[%d] = %v, want %v", o, i, c[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestParallelForNoAllocs checks that a parallel loop reuses its task
// record and starts no goroutine in steady state.
func TestParallelForNoAllocs(t *testing.T) {
	if gemmRaceEnabled {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	defer SetThreads(Threads())
	SetThreads(2)
	x := make([]float32, 1<<16)
	fn := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x[i]++
		}
	}
	if allocs := testing.AllocsPerRun(50, func() { ParallelFor(len(x), 1024, fn) }); allocs != 0 {
		t.Errorf("ParallelFor allocates %v times per call; want 0", allocs)
	}
	for i, v := range x {
		if v != 51 {
			t.Fatalf("x[%d] = %v after 51 loops", i, v)
		}
	}
}
