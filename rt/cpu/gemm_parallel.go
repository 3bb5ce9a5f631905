package cpu

import "sync"

// gemmPart is one block of C for a worker: rows [i0, i1), columns [j0, j1).
type gemmPart struct {
	g              *gemmCall
	i0, i1, j0, j1 int
}

// gemmWorkers is Sgemm's own pool of long-lived goroutines. Unlike
// ParallelFor it hands work over a channel of plain values, so a parallel
// Sgemm neither allocates nor starts goroutines in steady state. Workers
// only ever run gemmCall.run, which never waits on anything, so nested or
// concurrent Sgemm calls cannot deadlock: a caller waits only for parts a
// worker has already taken or will take.
var gemmWorkers struct {
	sync.Mutex
	started int
	parts   chan gemmPart
}

// ensureGemmWorkers starts workers until n are running.
func ensureGemmWorkers(n int) {
	w := &gemmWorkers
	w.Lock()
	defer w.Unlock()
	if w.parts == nil {
		w.parts = make(chan gemmPart, 256)
	}
	for ; w.started < n; w.started++ {
		go func(parts <-chan gemmPart) {
			for p := range parts {
				p.g.run(p.i0, p.i1, p.j0, p.j1)
				p.g.pending.Done()
			}
		}(w.parts)
	}
}

// runParallel splits C into up to threads row blocks of whole register
// tiles (column blocks when C is too short to feed every thread), runs the
// first on the calling goroutine and the rest on gemmWorkers. Each part packs
// its own panels, so parts share nothing but the read-only A and B.
func (g *gemmCall) runParallel(threads int) {
	ensureGemmWorkers(threads - 1)
	p := g.p
	byRows := gemmCeilDiv(g.m, p.mr) >= threads || g.m >= g.n
	tiles, unit, extent := gemmCeilDiv(g.n, p.nr), p.nr, g.n
	if byRows {
		tiles, unit, extent = gemmCeilDiv(g.m, p.mr), p.mr, g.m
	}
	parts := min(threads, tiles)
	var first gemmPart
	for i := range parts {
		lo := min(tiles*i/parts*unit, extent)
		hi := min(tiles*(i+1)/parts*unit, extent)
		part := gemmPart{g: g, i0: 0, i1: g.m, j0: lo, j1: hi}
		if byRows {
			part = gemmPart{g: g, i0: lo, i1: hi, j0: 0, j1: g.n}
		}
		if i == 0 {
			first = part
			continue
		}
		g.pending.Add(1)
		gemmWorkers.parts <- part
	}
	g.run(first.i0, first.i1, first.j0, first.j1)
	g.pending.Wait()
}
