package spec

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// MaxEvalMemory bounds how much the Go heap may grow while CUE evaluates a
// spec: past it, Load stops waiting and returns an error. CUE evaluation
// cannot be interrupted, so the evaluation is left behind like a timed-out
// one; a command line tool exits right after the error, which frees it.
// The bound is a quarter of the 1 GB mlbuild promises to stay under, for
// an evaluation may go on allocating between the watchdog's sample and the
// exit (a string doubled once more doubles the heap). Legal specs stay far
// below it: the examples grow the heap by under 30 MB, and 800 layers
// (10 s of evaluation, half the time bound) by 150 MB.
var MaxEvalMemory int64 = 256 << 20

// memSampleEvery is how often the watchdog reads the heap's size. CUE
// allocates a large value in one piece and then fills it, so a sample
// every 2 ms sees it while its bytes are still being written.
const memSampleEvery = 2 * time.Millisecond

// OverMemory, where set (by a command-line tool, before it loads specs),
// gets Load's error the moment the watchdog finds the heap past
// MaxEvalMemory, on the watchdog's goroutine, and should end the process
// (print the error, exit). Evaluation cannot be stopped and goes on
// doubling while Load returns: each garbage collection waits for CUE's
// copy of the next doubled value to end, and so does the goroutine Load
// returns on, so a tool that exited only after Load returned reached
// 1,050 and 2,073 MB on a loaded 2-core machine
// (TestHostileSpecsThroughCLI), past the 1 GB it promises. nil: Load
// returns the error, as a library's caller needs.
var OverMemory func(error)

// heapMetric is the runtime's count of the bytes of heap objects, live or
// not yet swept.
const heapMetric = "/memory/classes/heap/objects:bytes"

// heapBytes reads heapMetric.
func heapBytes() int64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	v := s[0].Value.Uint64()
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// watchMemory samples the heap until stop is closed and sends the heap's
// growth over base on over (once) when it passes limit, after calling
// now (when not nil) with it.
func watchMemory(base, limit int64, stop <-chan struct{}, over chan<- int64, now func(grown int64)) {
	t := time.NewTicker(memSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if grown := heapBytes() - base; grown > limit {
				if now != nil {
					now(grown)
				}
				over <- grown
				return
			}
		}
	}
}

// The soft memory limit Load sets while specs evaluate (see limitMemory),
// shared by Loads that run at once.
var (
	memLimitMu    sync.Mutex
	memLimitUsers int
	memLimitOld   int64
)

// limitMemory lowers the Go runtime's soft memory limit to what the
// runtime uses now plus extra, unless a lower limit is set, so that the
// garbage collector works harder before the watchdog's bound and garbage
// alone never trips it. The returned function restores the old limit once
// the last concurrent Load is done.
func limitMemory(extra int64) (restore func()) {
	memLimitMu.Lock()
	defer memLimitMu.Unlock()
	if memLimitUsers == 0 {
		memLimitOld = debug.SetMemoryLimit(-1)
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
		metrics.Read(s)
		if want := int64(s[0].Value.Uint64()) + extra; want < memLimitOld {
			debug.SetMemoryLimit(want)
		}
	}
	memLimitUsers++
	return func() {
		memLimitMu.Lock()
		defer memLimitMu.Unlock()
		memLimitUsers--
		if memLimitUsers == 0 {
			debug.SetMemoryLimit(memLimitOld)
		}
	}
}
