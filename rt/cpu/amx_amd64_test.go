//go:build !purego

package cpu

import "testing"

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
					t.Fatalf("%v trans %v: pa[%d] (row %d col %d) = %#04x, want %#04x", sz, trans, i, i/kp, i%kp, got[i], want[i])
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
					t.Fatalf("%v trans %v: pb[%d] (pair row %d col %d) = %#08x, want %#08x", sz, trans, i, i/np, i%np, gotB[i], wantB[i])
				}
			}
		}
	}
}

// BenchmarkAMXParts times the AMX path's phases apart on the benchmark
// MLP's largest products: packing A, packing B, the tiles, the copy out.
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
		lpa, lpb := kp+32, np+16
		pa, pb, pc := make([]uint16, mp*lpa), make([]uint32, kp/2*lpb), make([]float32, mp*lpb)
		pt := make([]uint32, max(lpa/2*mp, lpb*kp/2))
		flops := 2 * float64(c.m*c.n*c.k)
		for _, part := range []struct {
			name string
			run  func()
		}{
			{"packA", func() { packBF16AVec(c.transA, a, lda, c.m, c.k, pa, mp, lpa, pt) }},
			{"packB", func() { packBF16BVec(c.transB, bm, ldb, c.k, c.n, pb, kp, lpb, pt) }},
			{"tiles", func() {
				for mb := 0; mb < mp/32; mb++ {
					amxRowBlock(&amx.cfg[0], &pa[mb*32*lpa], &pb[0], &pc[mb*32*lpb], np/32, kp/32, lpa*2, lpb*4, lpb*4)
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
