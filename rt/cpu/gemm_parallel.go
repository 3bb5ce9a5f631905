package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// gemmPart is one goroutine's share of a parallel Sgemm: either a fixed
// block of C (rows [i0, i1), columns [j0, j1)) computed independently, or,
// when shared is set, participant id of a shared-B run.
type gemmPart struct {
	g              *gemmCall
	shared         bool
	id, parties    int
	i0, i1, j0, j1 int
}

func (p gemmPart) run() {
	if p.shared {
		p.g.runShared(p.id, p.parties)
	} else {
		p.g.run(p.i0, p.i1, p.j0, p.j1)
	}
}

// gemmWorkers is Sgemm's own pool of long-lived goroutines. Unlike
// ParallelFor it hands work over a channel of plain values, so a parallel
// Sgemm neither allocates nor starts goroutines in steady state.
//
// Parts of a shared run meet at barriers, so all of them must run at once.
// Each call enqueues its parts together under the lock and there are always
// at least as many workers as a call has queued parts, so the oldest call in
// the queue always has all its parts running: concurrent Sgemm calls cannot
// deadlock. Workers never call Sgemm themselves.
var gemmWorkers struct {
	sync.Mutex
	started int
	parts   chan gemmPart
}

// gemmDispatch starts workers until there are enough for len(parts), then
// queues the parts in one piece.
func gemmDispatch(parts []gemmPart) {
	w := &gemmWorkers
	w.Lock()
	defer w.Unlock()
	if w.parts == nil {
		w.parts = make(chan gemmPart, 256)
	}
	for ; w.started < len(parts); w.started++ {
		go gemmWorker(w.parts)
	}
	for _, p := range parts {
		p.g.pending.Add(1)
		w.parts <- p
	}
}

// gemmWorkerSpins is how many times an idle worker polls for a part,
// yielding in between, before it blocks: a training loop calls Sgemm again
// within microseconds, and waking a parked goroutine costs about as long as
// a small product.
const gemmWorkerSpins = 2000

func gemmWorker(parts <-chan gemmPart) {
	for {
		var p gemmPart
		got := false
		for i := 0; i < gemmWorkerSpins && !got; i++ {
			select {
			case p = <-parts:
				got = true
			default:
				runtime.Gosched()
			}
		}
		if !got {
			p = <-parts
		}
		p.run()
		p.g.pending.Done()
	}
}

// gemmMaxParts bounds the parts of one call (and so the worker pool).
const gemmMaxParts = 64

// gemmColumnsPerPart is the fewest columns of C per goroutine for which
// runParallel splits C by columns. A column split needs no barrier at all:
// each goroutine packs its own B columns and all of A, and packing A again
// costs about 1/n of the product. On a 2-core Zen 4 it took 250×512×784 (a
// dense layer's forward pass) from 1.31 to 1.03 ms and 512³ from 1.72 to
// 1.28 ms against the shared-B row split, whose per-phase meetings and
// uneven last blocks left the second core idle; 128³ (64 columns each) was
// faster by rows.
const gemmColumnsPerPart = 128

// runParallel spreads the product over up to threads goroutines: the caller
// and threads-1 workers. When C is wide (gemmColumnsPerPart columns or more
// each) or too short to share rows, each takes a fixed column block with its
// own panels. Otherwise all of them pack one shared B panel together and
// then take blocks of rows from a common counter, so a core slowed down by
// another process simply takes fewer blocks.
func (g *gemmCall) runParallel(threads int) {
	threads = min(threads, gemmMaxParts)
	p := g.p
	var buf [gemmMaxParts]gemmPart
	rowTiles := gemmCeilDiv(g.m, p.mr)
	wide := g.n >= gemmColumnsPerPart*threads
	if !wide && (rowTiles >= 2*threads || g.m >= g.n) {
		parties := min(threads, rowTiles)
		// About three blocks per party, of whole tiles, at most mc rows,
		// sized evenly (they differ by at most one tile) so the last one
		// taken is not the odd one out.
		g.rowTiles = rowTiles
		g.rowBlocks = min(rowTiles, max(3*parties, gemmCeilDiv(rowTiles, max(p.mc/p.mr, 1))))
		even, odd := gemmArenas.Get().(*gemmArena), gemmArenas.Get().(*gemmArena)
		even.fit(p)
		odd.fit(p)
		g.sharedB = [2][]float32{even.b, odd.b}
		g.nextRowBlock[0].Store(0)
		g.nextRowBlock[1].Store(0)
		g.barrier.reset(parties)
		parts := buf[:parties-1]
		for i := range parts {
			parts[i] = gemmPart{g: g, shared: true, id: i + 1, parties: parties}
		}
		gemmDispatch(parts)
		g.runShared(0, parties)
		g.pending.Wait()
		g.sharedB = [2][]float32{}
		gemmArenas.Put(even)
		gemmArenas.Put(odd)
		return
	}
	tiles := gemmCeilDiv(g.n, p.nr)
	parties := min(threads, tiles)
	for i := range parties {
		buf[i] = gemmPart{g: g, i0: 0, i1: g.m, j0: min(tiles*i/parties*p.nr, g.n), j1: min(tiles*(i+1)/parties*p.nr, g.n)}
	}
	gemmDispatch(buf[1:parties])
	buf[0].run()
	g.pending.Wait()
}

// runShared is participant id of parties in a shared-B run. For each block
// of B (nc columns × kc steps, a phase) all participants pack a slice of its
// panels, meet, then take row blocks from the phase's counter until none is
// left. Phases alternate between two B buffers and two counters, so one
// meeting per phase suffices: passing the meeting of phase p means everyone
// has finished phase p-1, whose buffer and counter phase p+1 reuses.
func (g *gemmCall) runShared(id, parties int) {
	p := g.p
	w := gemmArenas.Get().(*gemmArena)
	w.fit(p)
	phase := 0
	for jc := 0; jc < g.n; jc += p.nc {
		nb := min(p.nc, g.n-jc)
		panels := gemmCeilDiv(nb, p.nr)
		for pc := 0; pc < g.k; pc += p.kc {
			kb := min(p.kc, g.k-pc)
			bPanel, counter := g.sharedB[phase%2], &g.nextRowBlock[phase%2]
			if id == 0 && phase >= 2 {
				counter.Store(0)
			}
			lo, hi := panels*id/parties*p.nr, min(panels*(id+1)/parties*p.nr, nb)
			if lo < hi {
				packB(g.transB, g.b, g.ldb, pc, jc+lo, kb, hi-lo, p.nr, bPanel[lo*kb:], p.transpose8)
			}
			g.barrier.wait() // B panel complete, counter reset
			for {
				blk := int(counter.Add(1)) - 1
				if blk >= g.rowBlocks {
					break
				}
				ic := g.rowTiles * blk / g.rowBlocks * p.mr
				mb := min(g.rowTiles*(blk+1)/g.rowBlocks*p.mr, g.m) - ic
				packA(p, g.transA, g.a, g.lda, ic, pc, mb, kb, w.a)
				g.tiles(w, bPanel, ic, mb, jc, nb, pc, kb)
			}
			phase++
		}
	}
	gemmArenas.Put(w)
}

// gemmBarrier is a reusable meeting point for the parties of a shared run.
// Waiters spin briefly (yielding) before they sleep: phases of a 256³
// product last tens of microseconds, about what waking a parked goroutine
// costs.
type gemmBarrier struct {
	parties int
	arrived atomic.Int32
	gen     atomic.Uint32
	mu      sync.Mutex
	cond    sync.Cond
}

func newGemmBarrier() *gemmBarrier {
	b := &gemmBarrier{}
	b.cond.L = &b.mu
	return b
}

// reset prepares the barrier for a run of parties; no one may be waiting.
func (b *gemmBarrier) reset(parties int) {
	b.parties = parties
	b.arrived.Store(0)
}

// gemmBarrierSpins is how many times a waiter checks (yielding the
// processor in between) before it sleeps.
const gemmBarrierSpins = 1000

// wait returns once all parties have called it in this generation.
func (b *gemmBarrier) wait() {
	gen := b.gen.Load()
	if int(b.arrived.Add(1)) == b.parties {
		b.arrived.Store(0)
		b.mu.Lock()
		b.gen.Add(1)
		b.cond.Broadcast()
		b.mu.Unlock()
		return
	}
	for range gemmBarrierSpins {
		if b.gen.Load() != gen {
			return
		}
		runtime.Gosched()
	}
	b.mu.Lock()
	for b.gen.Load() == gen {
		b.cond.Wait()
	}
	b.mu.Unlock()
}
