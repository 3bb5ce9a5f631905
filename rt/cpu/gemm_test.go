package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// forEachGemmPath runs f once per implementation this CPU supports, forced
// with SetGemmPath, and restores the default afterwards.
func forEachGemmPath(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	paths := GemmPaths()
	if len(paths) == 0 || paths[len(paths)-1] != "generic" {
		t.Fatalf("GemmPaths() = %v; want a list ending in generic", paths)
	}
	defer SetGemmPath("")
	for _, name := range paths {
		if err := SetGemmPath(name); err != nil {
			t.Fatal(err)
		}
		if got := GemmPath(); got != name {
			t.Fatalf("after SetGemmPath(%q), GemmPath() = %q", name, got)
		}
		t.Run(name, f)
	}
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	padA, padB     int // extra row stride beyond the stored width
	padC           int
}

func (c gemmCase) String() string {
	return fmt.Sprintf("tA=%v,tB=%v,m=%d,n=%d,k=%d,alpha=%g,beta=%g,pad=%d/%d/%d",
		c.transA, c.transB, c.m, c.n, c.k, c.alpha, c.beta, c.padA, c.padB, c.padC)
}

func randomSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	return x
}

// checkGemm runs Sgemm and SgemmRef on the same random operands and
// compares every element of C, including the padding C's stride leaves,
// which neither may touch.
func checkGemm(t *testing.T, r *rand.Rand, c gemmCase) {
	t.Helper()
	checkGemmIn(t, r, c, func(n int) []float32 { return make([]float32, n) })
}

// checkGemmIn is checkGemm with the operands in slices from alloc, each
// exactly as long as its rows and stride need (no padding after the last
// row), so that alloc can end them at an unreadable page.
func checkGemmIn(t *testing.T, r *rand.Rand, c gemmCase, alloc func(n int) []float32) {
	t.Helper()
	rowsA, colsA := c.m, c.k
	if c.transA {
		rowsA, colsA = c.k, c.m
	}
	rowsB, colsB := c.k, c.n
	if c.transB {
		rowsB, colsB = c.n, c.k
	}
	lda, ldb, ldc := max(colsA, 1)+c.padA, max(colsB, 1)+c.padB, max(c.n, 1)+c.padC
	a := fillRandom(r, alloc(gemmOperandLen(rowsA, colsA, lda)))
	b := fillRandom(r, alloc(gemmOperandLen(rowsB, colsB, ldb)))
	want := randomSlice(r, gemmOperandLen(c.m, c.n, ldc))
	got := alloc(len(want))
	copy(got, want)
	if c.beta == 0 {
		// BLAS semantics: beta = 0 means C is not read, so NaN must vanish.
		for i := 0; i < c.m; i++ {
			for j := 0; j < c.n; j++ {
				got[i*ldc+j] = float32(math.NaN())
			}
		}
	}
	SgemmRef(c.transA, c.transB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, want, ldc)
	Sgemm(c.transA, c.transB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, got, ldc)
	// Both sum k products of numbers in [-1, 1] in a different order.
	tol := 1e-5 * float64(c.k+1) * float64(max(abs32(c.alpha), 1)+abs32(c.beta))
	for i := range want {
		d := math.Abs(float64(got[i] - want[i]))
		if !(d <= tol) {
			t.Fatalf("%v: C[%d][%d] = %v, reference %v (tolerance %g)", c, i/ldc, i%ldc, got[i], want[i], tol)
		}
	}
}

// gemmOperandLen is the fewest elements a rows×cols matrix with row stride
// ld occupies (at least one, so that empty operands still have an address).
func gemmOperandLen(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 1
	}
	return (rows-1)*ld + cols
}

func fillRandom(r *rand.Rand, x []float32) []float32 {
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	return x
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

// TestSgemmAgainstReference checks every path on sizes that are not
// multiples of any tile or block, every transpose combination, strides
// larger than the width and the alpha/beta special cases.
func TestSgemmAgainstReference(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(1)
	forEachGemmPath(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(1))
		sizes := []int{1, 2, 7, 13, 33, 65}
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, m := range sizes {
					for _, n := range sizes {
						for _, k := range []int{1, 7, 33} {
							checkGemm(t, r, gemmCase{transA: tA, transB: tB, m: m, n: n, k: k, alpha: 1, beta: 0})
						}
					}
				}
				for _, c := range []gemmCase{
					{m: 257, n: 33, k: 300, alpha: 1, beta: 1},
					{m: 33, n: 257, k: 513, alpha: -0.5, beta: 2, padA: 3, padB: 5, padC: 7},
					{m: 100, n: 70, k: 260, alpha: 2, beta: 0, padA: 1, padB: 17, padC: 1},
					{m: 7, n: 1, k: 1000, alpha: 1, beta: -1},
					{m: 1, n: 300, k: 7, alpha: 0.25, beta: 0.5, padC: 3},
					{m: 25, n: 33, k: 0, alpha: 1, beta: 0.5},
					{m: 25, n: 33, k: 0, alpha: 1, beta: 0},
					{m: 0, n: 33, k: 10, alpha: 1, beta: 0},
					{m: 25, n: 0, k: 10, alpha: 1, beta: 0},
					{m: 40, n: 40, k: 40, alpha: 0, beta: 3},
				} {
					c.transA, c.transB = tA, tB
					checkGemm(t, r, c)
				}
			}
		}
	})
}

// TestSgemmLarge crosses every cache block boundary (kc, mc, nc) at least
// twice, with partial blocks after each.
func TestSgemmLarge(t *testing.T) {
	forEachGemmPath(t, func(t *testing.T) {
		r := rand.New(rand.NewSource(2))
		checkGemm(t, r, gemmCase{m: 401, n: 100, k: 530, alpha: 1, beta: 0.5, padA: 2})
		checkGemm(t, r, gemmCase{transB: true, m: 13, n: 2100, k: 300, alpha: 1, beta: 0, padC: 5})
		checkGemm(t, r, gemmCase{transA: true, transB: true, m: 257, n: 257, k: 257, alpha: 1.5, beta: 0})
	})
}

// TestSgemmParallel runs products big enough to be split over goroutines, in
// both directions (tall C by rows, short wide C by columns).
func TestSgemmParallel(t *testing.T) {
	for _, c := range []gemmCase{{m: 5, n: 2000, k: 500}, {m: 37, n: 45, k: 3000}} {
		if 2*c.m*c.n*c.k < max(gemmParallelMinFlops, gemmSharedBMinFlops) {
			t.Fatalf("%v is too small to run in parallel; grow it", c)
		}
	}
	defer SetThreads(Threads())
	for _, threads := range []int{2, 3, 8} {
		SetThreads(threads)
		forEachGemmPath(t, func(t *testing.T) {
			r := rand.New(rand.NewSource(3))
			checkGemm(t, r, gemmCase{m: 300, n: 129, k: 200, alpha: 1, beta: 1})
			checkGemm(t, r, gemmCase{transB: true, m: 5, n: 2000, k: 500, alpha: 1, beta: 0})
			checkGemm(t, r, gemmCase{transA: true, m: 37, n: 45, k: 3000, alpha: -1, beta: 0.5})
			checkGemm(t, r, gemmCase{m: 100, n: 2100, k: 300, alpha: 1, beta: 0, padB: 3})
			checkGemm(t, r, gemmCase{transB: true, m: 250, n: 520, k: 300, alpha: 1, beta: 0.5})
		})
	}
}

// TestSgemmPathErrors checks that an unknown or unsupported path is refused
// and leaves the current one in place.
func TestSgemmPathErrors(t *testing.T) {
	before := GemmPath()
	if err := SetGemmPath("sse9"); err == nil {
		t.Fatal("SetGemmPath(sse9) succeeded")
	}
	if GemmPath() != before {
		t.Fatalf("failed SetGemmPath changed the path from %s to %s", before, GemmPath())
	}
}

// TestSgemmNoAllocs checks that steady-state calls reuse their packing
// buffers and call records, on one thread and on several (the worker pool
// recycles its task records and starts no goroutine per call), for
// products small enough to be read in place (64, 200) and one that is
// packed (300).
func TestSgemmNoAllocs(t *testing.T) {
	if gemmRaceEnabled {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	defer SetThreads(Threads())
	r := rand.New(rand.NewSource(4))
	for _, n := range []int{64, 200, 300} {
		a, b, c := randomSlice(r, n*n), randomSlice(r, n*n), make([]float32, n*n)
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			allocs := leastAllocs(20, func() {
				Sgemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n)
			})
			if allocs != 0 {
				t.Errorf("%d³ Sgemm with %d threads allocates %v times per call; want 0", n, threads, allocs)
			}
		}
	}
	if !gemmSmall(64, 64, 64) || gemmSmall(300, 300, 300) {
		t.Error("the sizes above no longer cover both the small-product and the packed path")
	}
}

func TestSgemmShortSlicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Sgemm with a too-short A did not panic")
		}
	}()
	Sgemm(false, false, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
}

func BenchmarkSgemm(b *testing.B) {
	for _, n := range []int{64, 256, 1024} {
		r := rand.New(rand.NewSource(5))
		x, y, z := randomSlice(r, n*n), randomSlice(r, n*n), make([]float32, n*n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				Sgemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestSgemmConcurrentCalls runs parallel products from several goroutines
// at once, as kernels that call Sgemm inside ParallelFor do: the worker pool
// must neither deadlock at a barrier nor mix up the calls' parts.
func TestSgemmConcurrentCalls(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(3)
	const callers, n = 6, 170
	r := rand.New(rand.NewSource(7))
	a, b := randomSlice(r, n*n), randomSlice(r, n*n)
	want := make([]float32, n*n)
	SgemmRef(false, false, n, n, n, 1, a, n, b, n, 0, want, n)
	errs := make(chan string, callers)
	for range callers {
		go func() {
			c := make([]float32, n*n)
			for range 5 {
				Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
				for i := range c {
					if d := math.Abs(float64(c[i] - want[i])); d > 1e-3 {
						errs <- fmt.Sprintf("C[%d] = %v, reference %v", i, c[i], want[i])
						return
					}
				}
			}
			errs <- ""
		}()
	}
	for range callers {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

// TestSgemmSplits runs every way of dividing a product among goroutines,
// forced, on every path, with transposes, beta and blocks that are not
// whole tiles, and checks which one Sgemm chooses for products that each
// should serve.
func TestSgemmSplits(t *testing.T) {
	defer SetGemmPath("")
	for _, want := range []struct {
		m, n, k, threads int
		split            gemmSplit
	}{
		{160, 160, 160, 2, splitRowsInPlace},
		{224, 224, 224, 2, splitRowsInPlace},
		{300, 129, 200, 2, splitRowsInPlace},
		{256, 256, 256, 2, splitColumns},
		{5, 2000, 500, 2, splitColumns},
		{37, 45, 3000, 2, splitSharedB},
		{2000, 100, 100, 2, splitSharedB},
		{16384, 384, 1536, 2, splitSharedB}, // tall: A packed once (gemmTallRatio)
		{16384, 1536, 384, 2, splitSharedB},
		{3000, 384, 384, 2, splitColumns},  // not tall enough
		{512, 32, 32, 2, splitRowsInPlace}, // tall but in place
	} {
		g := &gemmCall{p: gemmPathsSupported[0], m: want.m, n: want.n, k: want.k}
		if g.p.direct == nil {
			break // no in-place tiles: every row split is shared
		}
		if got := g.split(want.threads); got != want.split {
			t.Errorf("%s: %d×%d×%d on %d threads splits as %d; want %d", g.p.name, want.m, want.n, want.k, want.threads, got, want.split)
		}
	}
	r := rand.New(rand.NewSource(9))
	for _, p := range gemmPathsSupported {
		for _, c := range []gemmCase{
			{m: 161, n: 150, k: 170, alpha: 1, beta: 0},
			{transA: true, transB: true, m: 100, n: 70, k: 260, alpha: -0.5, beta: 2},
			{transB: true, m: 37, n: 45, k: 33, alpha: 1, beta: 0.5},
		} {
			for _, threads := range []int{2, 3} {
				for _, split := range []gemmSplit{splitColumns, splitRowsInPlace, splitSharedB} {
					checkGemmSplit(t, r, p, c, threads, split)
				}
			}
		}
	}
}

// checkGemmSplit runs one product on path p divided as split over threads
// goroutines and compares it with SgemmRef.
func checkGemmSplit(t *testing.T, r *rand.Rand, p *gemmPath, c gemmCase, threads int, split gemmSplit) {
	t.Helper()
	lda, ldb := c.k, c.n
	if c.transA {
		lda = c.m
	}
	if c.transB {
		ldb = c.k
	}
	a, b := randomSlice(r, c.m*c.k), randomSlice(r, c.k*c.n)
	want := randomSlice(r, c.m*c.n)
	got := append([]float32(nil), want...)
	SgemmRef(c.transA, c.transB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, want, c.n)
	defer SetThreads(Threads())
	SetThreads(threads)
	g := &gemmCall{barrier: newGemmBarrier(), p: p, transA: c.transA, transB: c.transB, m: c.m, n: c.n, k: c.k, alpha: c.alpha, a: a, lda: lda, b: b, ldb: ldb, beta: c.beta, c: got, ldc: c.n}
	g.runSplit(threads, split)
	tol := 1e-5 * float64(c.k+1) * float64(max(abs32(c.alpha), 1)+abs32(c.beta))
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= tol) {
			t.Fatalf("%s, %v, %d threads, split %d: C[%d][%d] = %v, reference %v", p.name, c, threads, split, i/c.n, i%c.n, got[i], want[i])
		}
	}
}

// BenchmarkSgemmSplits times each way of dividing square products among
// two goroutines on each path, so that split's choices can be checked:
// `GOMAXPROCS=2 go test ./rt/cpu -run X -bench SgemmSplits`.
func BenchmarkSgemmSplits(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(2)
	names := map[gemmSplit]string{splitColumns: "columns", splitRowsInPlace: "rows-in-place", splitSharedB: "shared-b"}
	for _, p := range gemmPathsSupported {
		for _, n := range []int{128, 160, 192, 224, 256} {
			r := rand.New(rand.NewSource(5))
			x, y, z := randomSlice(r, n*n), randomSlice(r, n*n), make([]float32, n*n)
			g := &gemmCall{barrier: newGemmBarrier(), p: p, m: n, n: n, k: n, alpha: 1, a: x, lda: n, b: y, ldb: n, c: z, ldc: n}
			for _, split := range []gemmSplit{splitColumns, splitRowsInPlace, splitSharedB} {
				b.Run(fmt.Sprintf("%s/%d/%s", p.name, n, names[split]), func(b *testing.B) {
					for b.Loop() {
						g.runSplit(2, split)
					}
					b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
