//go:build !purego

package cpu

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestPackBF16Vec checks the AVX-512 packers of the AMX path against the Go
// packers, bit for bit, padding included, on sizes with every kind of tail.
func TestPackBF16Vec(t *testing.T) {
	if _, avx512 := x86Features(); !avx512 {
		t.Skip("no AVX-512 here: the AMX path (which implies it) cannot run")
	}
	rng := newTestRand(8)
	for _, sz := range [][3]int{{37, 45, 19}, {250, 784, 512}, {16, 32, 16}, {33, 65, 47}, {1, 1, 1}, {512, 250, 784}} {
		m, k, n := sz[0], sz[1], sz[2]
		mp, kp, np := gemmRoundUp(m, 32), gemmRoundUp(k, 32), gemmRoundUp(n, 32)
		for _, trans := range []bool{false, true} {
			lda, ldb := k+2, n+3
			if trans {
				lda, ldb = m+1, k+4
			}
			a := randSlice(rng, max(m, k)*lda, 1)
			b := randSlice(rng, max(n, k)*ldb, 1)
			a[0] = float32(0) / float32(len(a)-len(a)) // a NaN, converted by the vector path when aligned
			want, got := make([]uint16, mp*kp), make([]uint16, mp*kp)
			for i := range got {
				got[i] = 0xffff
			}
			packBF16A(trans, a, lda, m, k, want, mp, kp)
			packBF16AVec(trans, a, lda, m, k, got, mp, kp, make([]uint32, max(kp/2*mp, np*kp/2)))
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%v trans %v: pa[%d] = %#04x, want %#04x", sz, trans, i, got[i], want[i])
				}
			}
			wantB, gotB := make([]uint32, kp/2*np), make([]uint32, kp/2*np)
			for i := range gotB {
				gotB[i] = 0xffffffff
			}
			packBF16B(trans, b, ldb, k, n, wantB, kp, np)
			packBF16BVec(trans, b, ldb, k, n, gotB, kp, np, make([]uint32, max(kp/2*mp, np*kp/2)))
			for i := range wantB {
				if gotB[i] != wantB[i] {
					t.Fatalf("%v trans %v: pb[%d] = %#08x, want %#08x", sz, trans, i, gotB[i], wantB[i])
				}
			}
		}
	}
}

// BenchmarkAMXParts times the AMX path's phases apart on the benchmark
// MLP's largest products: packing A, packing B, the tiles.
func BenchmarkAMXParts(b *testing.B) {
	if !BF16Native() {
		b.Skip("no AMX here")
	}
	rng := newTestRand(9)
	for _, c := range []struct {
		name           string
		transA, transB bool
		m, n, k        int
	}{{"fwd1", false, true, 250, 512, 784}, {"dw1", true, false, 512, 784, 250}, {"dx2", false, false, 250, 512, 256}} {
		lda, ldb := c.k, c.n
		if c.transA {
			lda = c.m
		}
		if c.transB {
			ldb = c.k
		}
		a, bm := randSlice(rng, c.m*c.k, 1), randSlice(rng, c.n*c.k, 1)
		out := make([]float32, c.m*c.n)
		mp, np, kp := gemmRoundUp(c.m, 32), gemmRoundUp(c.n, 32), gemmRoundUp(c.k, 32)
		pa, pb, pc := make([]uint16, mp*kp), make([]uint32, kp/2*np), make([]float32, mp*np)
		pt := make([]uint32, max(kp/2*mp, np*kp/2))
		flops := 2 * float64(c.m*c.n*c.k)
		for _, part := range []struct {
			name string
			run  func()
		}{
			{"packA", func() { packBF16AVec(c.transA, a, lda, c.m, c.k, pa, mp, kp, pt) }},
			{"packB", func() { packBF16BVec(c.transB, bm, ldb, c.k, c.n, pb, kp, np, pt) }},
			{"tiles", func() {
				for mb := 0; mb < mp/32; mb++ {
					amxPanelBlock(&amx.cfg[0], &pa[mb*32*kp], &pb[0], &pc[mb*32*np], np/32, kp/32, 32*kp, 32*kp, 64*kp, np*4, 0)
				}
			}},
			{"all", func() { amxGemm(c.transA, c.transB, c.m, c.n, c.k, a, lda, bm, ldb, out, c.n, false) }},
			{"allKeptB", func() { amxGemm(c.transA, c.transB, c.m, c.n, c.k, a, lda, bm, ldb, out, c.n, true) }},
		} {
			b.Run(c.name+"/"+part.name, func(b *testing.B) {
				for b.Loop() {
					part.run()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkAMXBlocking times the GPT's products on AMX with the blocking's
// choices (groups of 32-row blocks, chunks of 32-column blocks of B, 0
// being all of B; k-tiles a pass along k, 0 being no passes), on 1 and 2
// threads.
func BenchmarkAMXBlocking(b *testing.B) {
	if !BF16Native() {
		b.Skip("no AMX here")
	}
	defer func(g, c, kc int) { amxGroupBlocks, amxChunkBlocks, amxKChunk = g, c, kc }(amxGroupBlocks, amxChunkBlocks, amxKChunk)
	defer SetThreads(Threads())
	for _, s := range gptProducts {
		a, lda, bm, ldb, c := s.operands()
		for _, threads := range []int{1, 2} {
			for _, gc := range [][3]int{{1, 0, 0}, {1, 0, 16}, {1, 0, 32}, {1, 0, 64}, {8, 8, 32}} {
				b.Run(fmt.Sprintf("%s_%dx%dx%d/threads=%d/group=%d/chunk=%d/kchunk=%d", s.name, s.m, s.n, s.k, threads, gc[0], gc[1], gc[2]), func(b *testing.B) {
					SetThreads(threads)
					amxGroupBlocks, amxChunkBlocks, amxKChunk = gc[0], gc[1], gc[2]
					amxGemm(s.transA, s.transB, s.m, s.n, s.k, a, lda, bm, ldb, c, s.n, false)
					start := processCPU()
					for b.Loop() {
						amxGemm(s.transA, s.transB, s.m, s.n, s.k, a, lda, bm, ldb, c, s.n, false)
					}
					reportCPUTime(b, start)
					b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// amxPanelBlockGo is amxPanelBlock in Go, for the blocking's and the
// packers' tests on CPUs without AMX: each pair product and sum in float32
// (the tiles' order of summation within a pair may differ; the tests'
// tolerance covers it).
func amxPanelBlockGo(_ *byte, a *uint16, b *uint32, c *float32, nBlocks, kTiles, aHalf, bHalf, bNext, ldc, acc int) {
	bf := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
	for nb := 0; nb < nBlocks; nb++ {
		for h := 0; h < 2; h++ { // A's panel
			for g := 0; g < 2; g++ { // B's panel
				var sum [16][16]float32
				for r := 0; r < 16 && acc != 0; r++ {
					copy(sum[r][:], unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c), nb*128+(h*16+r)*ldc+g*64)), 16))
				}
				for kt := 0; kt < kTiles; kt++ {
					at := unsafe.Slice((*uint16)(unsafe.Add(unsafe.Pointer(a), h*aHalf+kt*1024)), 512)
					bt := unsafe.Slice((*uint32)(unsafe.Add(unsafe.Pointer(b), nb*bNext+g*bHalf+kt*1024)), 256)
					for r := 0; r < 16; r++ {
						for j := 0; j < 16; j++ {
							s := sum[r][j]
							for q := 0; q < 16; q++ {
								pair := bt[q*16+j]
								s += bf(at[r*32+2*q])*bf(uint16(pair)) + bf(at[r*32+2*q+1])*bf(uint16(pair>>16))
							}
							sum[r][j] = s
						}
					}
				}
				for r := 0; r < 16; r++ {
					row := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(c), nb*128+(h*16+r)*ldc+g*64)), 16)
					copy(row, sum[r][:])
				}
			}
		}
	}
}

// TestAMXGemmBlocking runs the AMX path's packing, blocking and edges with
// amxPanelBlockGo on every CPU, against the product of the rounded
// operands in float64: shapes with every kind of edge, both
// orientations, groups and chunks that do and do not divide the blocks,
// passes along k, on 1 and 3 threads, storing C and adding to it; and
// that amxGemmRows's callback sees
// every row of C once, after its products.
func TestAMXGemmBlocking(t *testing.T) {
	if _, avx512 := x86Features(); !avx512 {
		t.Skip("no AVX-512 here: the AMX path's packers (which AMX implies) cannot run")
	}
	defer func(g, c, kc int) { amxGroupBlocks, amxChunkBlocks, amxKChunk = g, c, kc }(amxGroupBlocks, amxChunkBlocks, amxKChunk)
	defer SetThreads(Threads())
	rng := newTestRand(12)
	for _, sz := range [][3]int{{37, 45, 70}, {96, 512, 33}, {250, 100, 64}, {3, 5, 1}, {64, 96, 300}, {161, 200, 47}, {128, 64, 500}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			// group, chunk, threads and k-chunk (2: passes along k where
			// k > 128 and C has no edges)
			// Every other one adds to C (amxGemmAdd).
			for gi, gc := range [][4]int{{8, 8, 1, 32}, {3, 2, 3, 32}, {1, 0, 3, 2}, {1, 0, 1, 3}} {
				transA, transB, add := tr[0], tr[1], gi%2 == 1
				amxGroupBlocks, amxChunkBlocks, amxKChunk = gc[0], gc[1], gc[3]
				SetThreads(gc[2])
				a, lda, b, ldb := bf16TestOperands(rng, transA, transB, m, n, k)
				ldc := n + 2
				c := randSlice(rng, m*ldc, 1) // every element of C must be written
				ref, scale := bf16Ref(transA, transB, m, n, k, a, lda, b, ldb, true)
				if add {
					for i := range m {
						for j := range n {
							ref[i*n+j] += float64(c[i*ldc+j])
							scale[i*n+j] += math.Abs(float64(c[i*ldc+j]))
						}
					}
				}
				wrong := func(i, j int) bool {
					return math.Abs(float64(c[i*ldc+j])-ref[i*n+j])/scale[i*n+j] > 2e-6*math.Sqrt(float64(k))
				}
				// rows sees each row of C once, already final.
				seen, early := make([]atomic.Int32, m), atomic.Int32{}
				rows := func(i0, i1 int) {
					for i := i0; i < i1; i++ {
						seen[i].Add(1)
						for j := 0; j < n; j++ {
							if wrong(i, j) {
								early.Store(int32(i) + 1)
							}
						}
					}
				}
				amxGemmWith(amxPanelBlockGo, transA, transB, m, n, k, a, lda, b, ldb, c, ldc, false, add, rows)
				what := fmt.Sprintf("%v trans %v group %d chunk %d threads %d k-chunk %d add %v", sz, tr, gc[0], gc[1], gc[2], gc[3], add)
				for i := 0; i < m; i++ {
					if got := seen[i].Load(); got != 1 {
						t.Fatalf("%s: rows saw row %d %d times", what, i, got)
					}
					for j := 0; j < n; j++ {
						if wrong(i, j) {
							t.Fatalf("%s: C[%d][%d] = %v, want %v", what, i, j, c[i*ldc+j], ref[i*n+j])
						}
					}
				}
				if i := early.Load(); i > 0 {
					t.Fatalf("%s: rows saw row %d before its products were stored", what, i-1)
				}
			}
		}
	}
}

// TestAMXLocal checks one thread's AMX products (amxLocal's packB and
// mulPacked) against float64 sums of the rounded operands: every
// orientation, shapes with and without edges, products of all of the
// packed B and of its first rows and columns, C overwritten and added to,
// one amxLocal reused across shapes (its buffers grow and shrink in use);
// with the tiles' Go twin on every AVX-512 CPU, and with the tiles where the
// CPU has them.
func TestAMXLocal(t *testing.T) {
	if _, avx512 := x86Features(); !avx512 {
		t.Skip("no AVX-512 here: the AMX path's packers (which AMX implies) cannot run")
	}
	kernels := map[string]*amxLocal{"Go twin": {kernel: amxPanelBlockGo}}
	if x := newAMXLocal(); x != nil {
		kernels["tiles"] = x
	}
	rng := newTestRand(19)
	for name, x := range kernels {
		// m, n, k of the product, and of the packed B
		for _, sz := range [][5]int{{64, 256, 64, 256, 64}, {37, 45, 70, 45, 70}, {256, 64, 64, 64, 64}, {3, 5, 1, 5, 1}, {64, 96, 200, 96, 200},
			{32, 32, 31, 32, 31}, {64, 128, 64, 256, 64}, {64, 64, 128, 64, 256}, {40, 50, 60, 70, 96}} {
			m, n, k, nb, kb := sz[0], sz[1], sz[2], sz[3], sz[4]
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				for _, acc := range []bool{false, true} {
					transA, transB := tr[0], tr[1]
					a, lda, b, ldb := bf16TestOperands(rng, transA, transB, m, nb, kb)
					ldc := n + 3
					c := randSlice(rng, m*ldc, 1)
					before := append([]float32(nil), c...)
					var p amxPackedB
					x.packB(&p, transB, b, ldb, kb, nb)
					x.mulPacked(transA, m, n, k, a, lda, &p, acc, c, ldc)
					ref, scale := bf16Ref(transA, transB, m, n, k, a, lda, b, ldb, true)
					for i := range m {
						for j := range ldc {
							want, tol := float64(before[i*ldc+j]), 0.0 // the gap between rows stays
							if j < n {
								want, tol = ref[i*n+j], 2e-6*math.Sqrt(float64(k))*(scale[i*n+j]+1)
								if acc {
									want += float64(before[i*ldc+j])
								}
							}
							if math.Abs(float64(c[i*ldc+j])-want) > tol {
								t.Fatalf("%s %v trans %v acc %v: C[%d][%d] = %v, want %v", name, sz, tr, acc, i, j, c[i*ldc+j], want)
							}
						}
					}
				}
			}
		}
	}
}

// twinTiles returns a thread's AMX products on the tiles' Go twin, or nil
// where the packers cannot run (no AVX-512).
func twinTiles() *amxLocal {
	if _, avx512 := x86Features(); !avx512 {
		return nil
	}
	return &amxLocal{kernel: amxPanelBlockGo}
}
