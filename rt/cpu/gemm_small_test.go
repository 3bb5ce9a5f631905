package cpu

import (
	"math"
	"math/rand"
	"strings"
	"testing"
)

// directTileSets lists a path's direct tile sets with their widths.
func directTileSets(p *gemmPath) []struct {
	tiles []directTile
	nr    int
} {
	return []struct {
		tiles []directTile
		nr    int
	}{{p.direct, p.nr}, {p.directHalf, p.nr / 2}}
}

// TestGemmDirectTiles checks each path's small-product tile lists: the
// first tile is the path's mr rows and the rest step down to 1, each
// smaller than the one before, so that runSmall can cover any remainder of
// rows without reading a row of A beyond m.
func TestGemmDirectTiles(t *testing.T) {
	for _, p := range gemmPathsSupported {
		if p.direct == nil && p.directHalf != nil {
			t.Errorf("%s has half-width direct tiles but no full ones", p.name)
		}
		for _, set := range directTileSets(p) {
			tiles := set.tiles
			if tiles == nil {
				continue
			}
			if tiles[0].rows != p.mr {
				t.Errorf("%s, %d columns: first direct tile has %d rows; want mr = %d", p.name, set.nr, tiles[0].rows, p.mr)
			}
			if last := tiles[len(tiles)-1].rows; last != 1 {
				t.Errorf("%s, %d columns: last direct tile has %d rows; want 1", p.name, set.nr, last)
			}
			for i := 1; i < len(tiles); i++ {
				if tiles[i].rows >= tiles[i-1].rows {
					t.Errorf("%s, %d columns: direct tile %d has %d rows, not fewer than the %d before it", p.name, set.nr, i, tiles[i].rows, tiles[i-1].rows)
				}
			}
		}
	}
}

// TestGemmDirectKernels runs every direct tile alone on the three A
// layouts it serves (row-major, transposed and packed, as strides), with
// B and C strides wider than the tile, k on and off the unrolled step, and
// beta zero (C holds NaN, which must not leak) and not. Only the tile's
// own rows×nr block of C may change.
func TestGemmDirectKernels(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for _, p := range gemmPathsSupported {
		for _, set := range directTileSets(p) {
			for _, tile := range set.tiles {
				checkDirectTile(t, r, p.name, tile, set.nr)
			}
		}
	}
}

func checkDirectTile(t *testing.T, r *rand.Rand, path string, tile directTile, nr int) {
	t.Helper()
	rows := tile.rows
	for _, k := range []int{1, 3, 4, 5, 8, 17} {
		for _, layout := range []struct {
			name        string
			aRow, aStep int
		}{{"row-major", k + 3, 1}, {"transposed", 1, rows + 2}, {"packed", 1, rows}} {
			for _, beta := range []float32{0, 0.5} {
				const ldb, ldc, alpha = 37 + 32, 41 + 32, 1.5
				a := randomSlice(r, (rows-1)*layout.aRow+(k-1)*layout.aStep+1)
				b := randomSlice(r, (k-1)*ldb+nr)
				c := randomSlice(r, rows*ldc)
				want := append([]float32(nil), c...)
				if beta == 0 {
					for i := 0; i < rows; i++ {
						for j := 0; j < nr; j++ {
							c[i*ldc+j] = float32(math.NaN())
						}
					}
				}
				for i := 0; i < rows; i++ {
					for j := 0; j < nr; j++ {
						var sum float32
						for q := 0; q < k; q++ {
							sum += a[i*layout.aRow+q*layout.aStep] * b[q*ldb+j]
						}
						want[i*ldc+j] = alpha*sum + beta*want[i*ldc+j]
					}
				}
				tile.kernel(k, &a[0], layout.aRow, layout.aStep, &b[0], ldb, &c[0], ldc, alpha, beta)
				for i := range c {
					got, w := c[i], want[i]
					if d := math.Abs(float64(got - w)); !(d <= 1e-4*float64(k+1)) {
						t.Fatalf("%s %d×%d tile, %s A, k=%d, beta=%g: C[%d][%d] = %v, want %v", path, rows, nr, layout.name, k, beta, i/ldc, i%ldc, got, w)
					}
				}
			}
		}
	}
}

// TestSgemmSmall runs products the small-product path takes on every
// path, on one goroutine and split over two or three by columns (each
// block in runSmall): every remainder of rows a 12-row tile
// leaves (m = 1…25), columns short of and past whole 16- and 32-column
// panels, every transpose, strides, alpha and beta. Operands end at an
// unreadable page, so a tile reading one element past a matrix (a row of
// A beyond m, say) crashes the test instead of passing by luck.
func TestSgemmSmall(t *testing.T) {
	if !guardedFloatsWork {
		t.Log("no guard pages on this system: reads past an operand go unnoticed")
	}
	defer SetThreads(Threads())
	alloc := func(n int) []float32 { return guardedFloats(t, n) }
	for _, threads := range []int{1, 2, 3} {
		SetThreads(threads)
		forEachGemmPath(t, func(t *testing.T) {
			r := rand.New(rand.NewSource(12))
			var cases []gemmCase
			for m := 1; m <= 25; m++ {
				cases = append(cases, gemmCase{m: m, n: 32, k: 9, alpha: 1, beta: 0})
			}
			for _, n := range []int{1, 15, 16, 17, 31, 33, 48, 63, 64, 65, 97} {
				cases = append(cases, gemmCase{m: 13, n: n, k: 6, alpha: 1, beta: 0})
			}
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					for _, c := range []gemmCase{
						{m: 64, n: 64, k: 64, alpha: 1, beta: 0},
						{m: 23, n: 45, k: 31, alpha: -2, beta: 0.5, padA: 3, padB: 5, padC: 2},
						{m: 37, n: 70, k: 256, alpha: 1, beta: 1, padA: 1, padC: 9},
						{m: 96, n: 35, k: 96, alpha: 0.5, beta: -1, padB: 7},
						{m: 5, n: 129, k: 200, alpha: 1, beta: 0, padA: 4, padB: 1, padC: 1},
						// Parallel by columns, each goroutine's block in runSmall.
						{m: 29, n: 611, k: 200, alpha: 1, beta: 0.5, padA: 2, padB: 1, padC: 3},
					} {
						c.transA, c.transB = tA, tB
						cases = append(cases, c)
					}
				}
			}
			for _, c := range cases {
				if !gemmSmall(c.m, c.n, c.k) {
					t.Fatalf("%v does not take the small-product path; shrink it", c)
				}
				checkGemmIn(t, r, c, alloc)
			}
		})
	}
}

// TestSgemmGuarded runs the packed and parallel paths on operands that end
// at an unreadable page too.
func TestSgemmGuarded(t *testing.T) {
	defer SetThreads(Threads())
	alloc := func(n int) []float32 { return guardedFloats(t, n) }
	for _, threads := range []int{1, 2} {
		SetThreads(threads)
		forEachGemmPath(t, func(t *testing.T) {
			r := rand.New(rand.NewSource(13))
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					for _, c := range []gemmCase{
						{m: 101, n: 67, k: 300, alpha: 1, beta: 0.5, padA: 1, padB: 3, padC: 2},
						{m: 700, n: 45, k: 100, alpha: 1, beta: 0},
					} {
						c.transA, c.transB = tA, tB
						if gemmSmall(c.m, c.n, c.k) {
							t.Fatalf("%v takes the small-product path; grow it", c)
						}
						checkGemmIn(t, r, c, alloc)
					}
				}
			}
		})
	}
}

// BenchmarkSgemmSmallVsPacked times runSmall against the packed run on
// the same products, per path, so that gemmSmall's bounds can be checked
// against both: `go test ./rt/cpu -run X -bench SmallVsPacked`.
func BenchmarkSgemmSmallVsPacked(b *testing.B) {
	for _, p := range gemmPathsSupported {
		if p.direct == nil {
			continue
		}
		for _, c := range []gemmCase{
			{m: 64, n: 64, k: 64}, {transA: true, m: 64, n: 64, k: 64}, {transB: true, m: 64, n: 64, k: 64},
			{transA: true, transB: true, m: 64, n: 64, k: 64}, {m: 96, n: 96, k: 96}, {m: 128, n: 128, k: 128},
			{m: 256, n: 256, k: 256}, {transB: true, m: 256, n: 256, k: 256}, {transA: true, m: 256, n: 256, k: 256},
			{m: 250, n: 128, k: 100}, {m: 128, n: 784, k: 250, transA: true},
		} {
			r := rand.New(rand.NewSource(14))
			x, y, z := randomSlice(r, c.m*c.k), randomSlice(r, c.k*c.n), make([]float32, c.m*c.n)
			lda, ldb := c.k, c.n
			if c.transA {
				lda = c.m
			}
			if c.transB {
				ldb = c.k
			}
			g := &gemmCall{p: p, transA: c.transA, transB: c.transB, m: c.m, n: c.n, k: c.k, alpha: 1, a: x, lda: lda, b: y, ldb: ldb, c: z, ldc: c.n}
			for _, way := range []string{"packed", "small"} {
				b.Run(p.name+"/"+c.String()[:strings.Index(c.String(), ",alpha")]+"/"+way, func(b *testing.B) {
					for b.Loop() {
						if way == "small" {
							g.runSmall(0, c.m, 0, c.n)
						} else {
							g.runPacked(0, c.m, 0, c.n)
						}
					}
					b.ReportMetric(2*float64(c.m*c.n*c.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
