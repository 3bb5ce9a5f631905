package cpu

import (
	"math"
	"sync"
	"testing"
)

// TestWinogradKeptFilters: a forward pass of few tiles keeps its packed
// filters (conv_winograd_cache.go), and every later call gives the bits
// that transforming its filters afresh gives (the same filters copied to
// another address, a new entry): with the filters unchanged, after one
// value of them changes in place (a training step), and from calls that
// overlap on the same filters (one of them then packs its own).
func TestWinogradKeptFilters(t *testing.T) {
	for _, wm := range winogradMethods[2:] {
		// Batch 1 and 2 of odd sizes (a tile half outside), more
		// channels than one vector.
		for _, g := range []Conv{convCase(1, 19, 13, 11, 21, wm.r, wm.r, 1, 1, 1, 1), convCase(2, 33, 9, 14, 17, wm.r, wm.r, 1, wm.r/2, 1, 1)} {
			r := newTestRand(74)
			x, w, b := randSlice(r, g.N*g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*g.KH*g.KW, 1), randSlice(r, g.OC, 1)
			fwd := func(w []float32) []float32 {
				y := randSlice(r, g.N*g.OC*g.OH*g.OW, 100)
				wm.fwd(x, w, b, y, g, ActReLU, 0)
				return y
			}
			fresh := func() []float32 { return fwd(cloneF(w)) }
			fwd(w)
			if !winoKeeps(w) {
				t.Fatalf("%s %+v: no entry kept for a forward pass of few tiles", wm.name, g)
			}
			for step, change := range []func(){
				func() {},
				func() {},
				func() { w[len(w)-1] += 0.5 },
				func() { w[0] = -w[0] },
			} {
				change()
				want := fresh()
				if msg := closeTo(fwd(w), want, 0); msg != "" {
					t.Errorf("%s %+v, call %d: the kept filters' output differs from a fresh transform's: %s", wm.name, g, step, msg)
				}
			}
			want := fresh()
			var wg sync.WaitGroup
			got := make([][]float32, 4)
			for i := range got {
				got[i] = make([]float32, len(want))
				wg.Add(1)
				go func() {
					defer wg.Done()
					wm.fwd(x, w, b, got[i], g, ActReLU, 0)
				}()
			}
			wg.Wait()
			for i := range got {
				if msg := closeTo(got[i], want, 0); msg != "" {
					t.Errorf("%s %+v, overlapping call %d: %s", wm.name, g, i, msg)
				}
			}
		}
	}
}

// winoKeeps reports whether the cache holds an entry for filters w.
func winoKeeps(w []float32) bool {
	winoCache.mu.Lock()
	defer winoCache.mu.Unlock()
	for k := range winoCache.entries {
		if k.w == &w[0] {
			return true
		}
	}
	return false
}

// TestSameFloatBits: the kept filters' comparison, split in blocks over
// the threads, finds one changed bit anywhere (first, last, a block's
// edges, the last block's tail), tells -0 from +0, and takes equal NaNs
// as equal, on lengths of one, several and part blocks.
func TestSameFloatBits(t *testing.T) {
	defer SetThreads(Threads())
	r := newTestRand(75)
	for _, threads := range []int{1, 2, 5} {
		SetThreads(threads)
		for _, n := range []int{1, 7, 1 << 16, 1<<16 + 1, 3<<16 + 5} {
			a := randSlice(r, n, 1)
			a[n/2] = float32(math.NaN())
			b := cloneF(a)
			if !sameFloatBits(a, b) {
				t.Fatalf("%d threads, %d floats: equal slices compare unequal", threads, n)
			}
			for _, i := range []int{0, n - 1, n / 2, min(n-1, 1<<16), min(n-1, 1<<16-1), min(n-1, 2<<16+3)} {
				b[i] = float32(math.Copysign(0, -1))
				a[i] = 0
				if sameFloatBits(a, b) {
					t.Fatalf("%d threads, %d floats: -0 at %d against +0 compares equal", threads, n, i)
				}
				b[i] = a[i]
			}
			if sameFloatBits(a, b[:n-1]) {
				t.Fatalf("%d floats: slices of different lengths compare equal", n)
			}
		}
	}
}
