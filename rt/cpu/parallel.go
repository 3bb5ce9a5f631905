package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
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
// done. With one chunk it calls fn on the caller's goroutine.
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
	var wg sync.WaitGroup
	per := (n + chunks - 1) / chunks
	for lo := per; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	fn(0, min(per, n))
	wg.Wait()
}
