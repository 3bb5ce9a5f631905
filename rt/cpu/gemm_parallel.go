package cpu

import (
	"sync"
	"sync/atomic"
	"time"
)

// gemmMaxParts bounds the parts of one call.
const gemmMaxParts = taskMaxHelpers + 1

// gemmColumnsPerPart is the fewest columns of C per goroutine for which
// runParallel splits C by columns. A column split needs no barrier at all:
// each goroutine packs its own B columns and all of A, and packing A again
// costs about 1/n of the product. On a 2-core Zen 4 it took 250×512×784 (a
// dense layer's forward pass) from 1.31 to 1.03 ms and 512³ from 1.72 to
// 1.28 ms against the shared-B row split, whose per-phase meetings and
// uneven last blocks left the second core idle; 128³ (64 columns each) was
// faster by rows.
const gemmColumnsPerPart = 128

// gemmSplit is how runParallel divides one product among goroutines.
type gemmSplit int

const (
	// splitColumns cuts C into column blocks of whole register tiles, each
	// computed by run with its own panels (or in place), taken one at a
	// time from the task's counter: no barrier, and a worker that wakes
	// late or runs on a core another process holds takes fewer. Packing A
	// again in each block costs about 1/n of the product. It serves wide C
	// (gemmColumnsPerPart columns or more a goroutine) and C too short to
	// share rows.
	splitColumns gemmSplit = iota
	// splitRowsInPlace cuts C into one block of whole register tiles of
	// rows a goroutine, each small enough for runSmall, which reads A and B
	// in place: no packing, no barrier. For 128³–224³ on two threads of
	// the 2-core Xeon it ran 1.1–1.6 times as fast as splitSharedB (see
	// BenchmarkSgemmSplits), which packed B and A and met at a barrier
	// for a product of 25–120 µs.
	splitRowsInPlace
	// splitSharedB packs each block of B once, all goroutines together,
	// and then hands out blocks of rows from a common counter; every
	// party must meet at its barriers. It serves row blocks too big for
	// runSmall (k above gemmSmallMaxK, or tall C).
	splitSharedB
)

// split chooses how runParallel divides this call over threads goroutines.
func (g *gemmCall) split(threads int) gemmSplit {
	rowTiles := gemmCeilDiv(g.m, g.p.mr)
	if g.p.pairs != nil {
		return g.pairSplit(threads, rowTiles)
	}
	inPlace := g.p.direct != nil && gemmSmall(gemmCeilDiv(rowTiles, threads)*g.p.mr, g.n, g.k)
	if g.m >= gemmTallRatio*g.n && !inPlace {
		return splitSharedB
	}
	if g.n >= gemmColumnsPerPart*threads || (rowTiles < 2*threads && g.m < g.n) {
		return splitColumns
	}
	if inPlace {
		return splitRowsInPlace
	}
	return splitSharedB
}

// pairSplit is split on a bfloat16 path, which has no in-place tiles: C
// too short to share rows, and products below gemmPairSharedMinFlops that
// are not tall, by columns; the others with a shared B.
func (g *gemmCall) pairSplit(threads, rowTiles int) gemmSplit {
	if rowTiles < 2*threads && g.m < g.n {
		return splitColumns
	}
	if g.m >= gemmTallRatio*g.n || 2*g.m*g.n*g.k >= gemmPairSharedMinFlops {
		return splitSharedB
	}
	return splitColumns
}

// gemmPairSharedMinFlops is the smallest product that is not tall which a
// bfloat16 path splits with a shared B. Its tile is about twice as fast
// as float32's, so packing all of A again in each goroutine of a column
// split costs it twice the share. Two threads of a Zen 4, CPU time a
// product, columns against shared B: 384×384×16384 (a weight gradient of
// models/gpt.cue) 31 against 28.5 ms, 1536×384×16384 122 against 112,
// 3000×384×384 6.2 against 5.1; below about 2²⁹ the barrier costs more
// than the packing: 512³ 1.5 against 1.65 ms, 250×512×784 1.2 against 1.45,
// 128³ 0.03 against 0.05.
const gemmPairSharedMinFlops = 1 << 29

// gemmTallRatio is how many times taller than wide C must be for
// runParallel to share B rather than split columns: a column split packs
// all of A in every goroutine, a shared B packs it once. On the 2-core
// Xeon, two threads, CPU time (BenchmarkTallSplits, busy machine):
// 16384×1536×384 (a GPT's MLP, models/gpt.cue) 200 → 175 ms, 16384×384×1536
// 205 → 181 ms, 16384×384×384 51 → 50 ms.
const gemmTallRatio = 8

// runParallel spreads the product over up to threads goroutines: the caller
// and idle workers of the pool (parallel.go), divided as split chooses.
// Column and in-place row blocks are parts of a task, which the caller and
// the workers take one at a time, so the caller never waits for a worker
// that has not started. A shared-B run needs every party at its barriers,
// so it counts only the workers it could reserve.
func (g *gemmCall) runParallel(threads int) {
	threads = min(threads, gemmMaxParts)
	split := g.split(threads)
	if split == splitSharedB && 2*g.m*g.n*g.k < gemmSharedBMinFlops {
		g.run(0, g.m, 0, g.n)
		return
	}
	g.runSplit(threads, split)
}

// runSplit is runParallel divided as given (tests and benchmarks force
// each split).
func (g *gemmCall) runSplit(threads int, split gemmSplit) {
	p := g.p
	rowTiles := gemmCeilDiv(g.m, p.mr)
	switch split {
	case splitColumns:
		t := newTask(min(threads, gemmCeilDiv(g.n, p.nr)))
		t.body = (*gemmColumnParts)(g)
		t.runWith(threads - 1)
		t.release()
		return
	case splitRowsInPlace:
		t := newTask(min(threads, rowTiles))
		t.body = (*gemmRowParts)(g)
		t.runWith(threads - 1)
		t.release()
		return
	}
	t := newTask(0)
	t.single = true
	helpers := workers.reserve(t, min(threads, rowTiles)-1)
	if helpers == 0 {
		t.release()
		g.run(0, g.m, 0, g.n)
		return
	}
	parties := helpers + 1
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
	t.parts, t.body = helpers, (*gemmSharedParts)(g)
	workers.invite(t, helpers)
	g.runShared(0, parties)
	t.finish(helpers)
	t.release()
	g.sharedB = [2][]float32{}
	gemmArenas.Put(even)
	gemmArenas.Put(odd)
}

// gemmRowParts is a row-split Sgemm as a task body: part i of n is the
// i-th of n row blocks of whole register tiles, sized evenly, each run in
// place by runSmall.
type gemmRowParts gemmCall

func (r *gemmRowParts) runPart(t *task, i int) {
	g := (*gemmCall)(r)
	mr, tiles := g.p.mr, gemmCeilDiv(g.m, g.p.mr)
	g.run(min(tiles*i/t.parts*mr, g.m), min(tiles*(i+1)/t.parts*mr, g.m), 0, g.n)
}

// gemmColumnParts is a column-split Sgemm as a task body: part i of n is
// the i-th of n column blocks of whole register tiles, sized evenly.
type gemmColumnParts gemmCall

func (c *gemmColumnParts) runPart(t *task, i int) {
	g := (*gemmCall)(c)
	nr, tiles := g.p.nr, gemmCeilDiv(g.n, g.p.nr)
	g.run(0, g.m, min(tiles*i/t.parts*nr, g.n), min(tiles*(i+1)/t.parts*nr, g.n))
}

// gemmSharedParts is a shared-B Sgemm as a single task's body: part i is
// participant i+1 (the caller is participant 0).
type gemmSharedParts gemmCall

func (s *gemmSharedParts) runPart(t *task, i int) {
	(*gemmCall)(s).runShared(i+1, t.parts+1)
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
				p.packBPanels(g.transB, g.b, g.ldb, pc, jc+lo, kb, hi-lo, bPanel[lo*p.steps(kb):])
			}
			g.barrier.wait() // B panel complete, counter reset
			for {
				blk := int(counter.Add(1)) - 1
				if blk >= g.rowBlocks {
					break
				}
				ic := g.rowTiles * blk / g.rowBlocks * p.mr
				mb := min(g.rowTiles*(blk+1)/g.rowBlocks*p.mr, g.m) - ic
				p.packAPanels(g.transA, g.a, g.lda, ic, pc, mb, kb, w.a)
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

// gemmBarrierSpin is how long a waiter polls before it sleeps: about
// what its 1,000 calls to runtime.Gosched took before it polled instead.
// Every party of a barrier runs on a processor of its own (the task's
// parts run at once), so none needs the waiter's.
const gemmBarrierSpin = 200 * time.Microsecond

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
	start := time.Now()
	for n := 1; ; n++ {
		if b.gen.Load() != gen {
			return
		}
		if n%teamPolls != 0 {
			continue
		}
		spinPause() // no runtime.Gosched: see worker.accept
		if n%(16*teamPolls) == 0 && time.Since(start) > gemmBarrierSpin {
			break
		}
	}
	b.mu.Lock()
	for b.gen.Load() == gen {
		b.cond.Wait()
	}
	b.mu.Unlock()
}
