package cpu

import (
	"bytes"
	"sync"
	"sync/atomic"
	"unsafe"
)

// This file keeps the packed Winograd filters of forward passes over few
// tiles (one-sample inference) from one call to the next. There the
// filter transform (winoPackFilters) weighs as much as the products: a
// batch of one of ResNet-18's 256 channels at 14² (16 tiles) took 4.1 CPU
// ms a call, about 1.3 of them in the transform and its packing. The
// filters are the model's parameters, which stay where they are between
// calls and change only when training updates them or weights are loaded,
// so each entry keeps a copy of the filters it was made from and is used
// again only when the call's filters equal that copy bit for bit (a
// comparison of 2.4 MB there, about 0.1 ms): a changed filter is
// transformed again, never read stale.

// winoCacheTiles is the most tiles a batch may have for its forward pass
// to keep its packed filters: a batch of one at 224² (ResNet's 56² layers:
// 196 tiles) and fewer, where the products are short.
const winoCacheTiles = 256

// winoCacheLayerFloats and winoCacheFloats bound the packed filters of one
// layer (16 MiB: not ResNet's 512 channels, 37.7 MB, whose 7² layers keep
// the direct method at batch 1) and of all the entries together (256 MiB,
// with the copies of the filters). A layer past either is transformed on
// every call, as before.
const (
	winoCacheLayerFloats = 4 << 20
	winoCacheFloats      = 64 << 20
)

// winoCacheKey names one layer's packed filters: the filters' first
// element and length, and what the packing depends on besides their
// values.
type winoCacheKey struct {
	w      *float32
	n      int
	a      *winoAlg
	p      *gemmPath
	c, ocp int
}

// winoCached is one layer's packed filters and the filters they were made
// from. busy marks an entry that a call is reading; a second call on the
// same filters meanwhile transforms its own.
type winoCached struct {
	w, packed []float32
	busy      bool
}

var winoCache struct {
	mu      sync.Mutex
	entries map[winoCacheKey]*winoCached
	floats  int
}

// winoCachedFilters returns the packed filters of a forward pass (what
// winoPackFilters writes) from the cache, transforming them first when the
// entry is new or its filters changed, and the entry to give back with its
// release method; or nil, nil where the layer is not kept (too many tiles,
// too large, over budget or busy), for the caller to pack its own.
func winoCachedFilters(a *winoAlg, w []float32, g Conv, ocp, tiles int, p *gemmPath) ([]float32, *winoCached) {
	n := g.OC * g.C * a.r * a.r
	size := a.alpha * a.alpha * g.C * gemmRoundUp(ocp, p.nr)
	if tiles > winoCacheTiles || size > winoCacheLayerFloats {
		return nil, nil
	}
	key := winoCacheKey{w: &w[0], n: n, a: a, p: p, c: g.C, ocp: ocp}
	winoCache.mu.Lock()
	e := winoCache.entries[key]
	switch {
	case e == nil && winoCache.floats+size+n <= winoCacheFloats:
		if winoCache.entries == nil {
			winoCache.entries = map[winoCacheKey]*winoCached{}
		}
		e = &winoCached{w: make([]float32, n), packed: make([]float32, size), busy: true}
		winoCache.entries[key] = e
		winoCache.floats += size + n
		winoCache.mu.Unlock()
		winoPackFilters(a, w, e.packed, g, ocp, false, p)
		copy(e.w, w[:n])
		return e.packed, e
	case e == nil || e.busy:
		winoCache.mu.Unlock()
		return nil, nil
	}
	e.busy = true
	winoCache.mu.Unlock()
	if !sameFloatBits(e.w, w[:n]) {
		winoPackFilters(a, w, e.packed, g, ocp, false, p)
		copy(e.w, w[:n])
	}
	return e.packed, e
}

// winoKeep is winoCachedFilters, where a forward pass keeps its packed
// filters: F(4×4,3×3)'s (convWinogradForward's callers pass nil for the
// others, so that their programs link no cache).
type winoKeep func(a *winoAlg, w []float32, g Conv, ocp, tiles int, p *gemmPath) ([]float32, *winoCached)

// release gives back an entry of winoCachedFilters (nil: none).
func (e *winoCached) release() {
	if e == nil {
		return
	}
	winoCache.mu.Lock()
	e.busy = false
	winoCache.mu.Unlock()
}

// sameFloatBits reports whether a and b (of one length) hold the same
// bits, NaNs included, comparing blocks of 64 Ki floats on the threads
// (at batch 1 on one thread the comparison of 2.4 MB was a tenth of a
// 256-channel 14² layer's call).
func sameFloatBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	const block = 1 << 16
	var differ atomic.Bool
	ParallelFor(gemmCeilDiv(len(a), block), 1, func(lo, hi int) {
		lo, hi = lo*block, min(hi*block, len(a))
		if differ.Load() || lo == hi {
			return
		}
		ab := unsafe.Slice((*byte)(unsafe.Pointer(&a[lo])), 4*(hi-lo))
		bb := unsafe.Slice((*byte)(unsafe.Pointer(&b[lo])), 4*(hi-lo))
		if !bytes.Equal(ab, bb) {
			differ.Store(true)
		}
	})
	return !differ.Load()
}
