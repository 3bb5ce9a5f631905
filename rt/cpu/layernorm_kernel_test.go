package cpu

import "testing"

// TestLayerNormBwdKernelsMatchGo runs layerNormBwd on every GEMM path the
// machine has (so the AVX-512 loops where they exist) and on the generic
// one, on widths with whole 64-column blocks, a partial block and a tail
// of fewer than 8 columns: the vector loops promise the Go loops' bits.
func TestLayerNormBwdKernelsMatchGo(t *testing.T) {
	r := newTestRand(31)
	for _, sz := range []struct{ rows, cols int }{{3, 64}, {17, 128}, {5, 200}, {9, 384}, {2, 71}, {1, 8}} {
		n := sz.rows * sz.cols
		x, dy, gamma := randSlice(r, n, 2), randSlice(r, n, 1), randSlice(r, sz.cols, 1)
		mean, inv := make([]float32, sz.rows), make([]float32, sz.rows)
		LayerNormFwd(x, gamma, nil, make([]float32, n), mean, inv, sz.rows, sz.cols, 1e-5)
		sum := randSlice(r, n, 1)
		run := func(path string) (dx, added, dg, db []float32) {
			if err := SetGemmPath(path); err != nil {
				t.Fatal(err)
			}
			defer SetGemmPath("")
			dx, dg, db = make([]float32, n), make([]float32, sz.cols), make([]float32, sz.cols)
			LayerNormBwd(x, gamma, mean, inv, dy, dx, dg, db, sz.rows, sz.cols)
			added = cloneF(sum)
			LayerNormBwdAdd(x, gamma, mean, inv, dy, added, nil, nil, sz.rows, sz.cols)
			return
		}
		wdx, wadd, wdg, wdb := run("generic")
		for _, path := range GemmPaths() {
			dx, added, dg, db := run(path)
			for _, c := range []struct {
				what      string
				got, want []float32
			}{{"dx", dx, wdx}, {"dx added", added, wadd}, {"dgamma", dg, wdg}, {"dbeta", db, wdb}} {
				if msg := sameBits(c.got, c.want); msg != "" {
					t.Errorf("%s %dx%d: %s: %s (the Go loops')", path, sz.rows, sz.cols, c.what, msg)
				}
			}
		}
	}
}

// TestLayerNormFwdKernelsMatchGo runs LayerNormFwd on every GEMM path the
// machine has and on the generic one, with and without beta, on widths
// with and without a tail of fewer than 8 columns: the vector loop
// promises the Go loop's bits.
func TestLayerNormFwdKernelsMatchGo(t *testing.T) {
	r := newTestRand(33)
	for _, sz := range []struct{ rows, cols int }{{3, 64}, {5, 200}, {9, 384}, {2, 71}, {1, 8}, {4, 5}} {
		n := sz.rows * sz.cols
		x, gamma, beta := randSlice(r, n, 2), randSlice(r, sz.cols, 1), randSlice(r, sz.cols, 1)
		for _, beta := range [][]float32{beta, nil} {
			run := func(path string) (y, mean, inv []float32) {
				if err := SetGemmPath(path); err != nil {
					t.Fatal(err)
				}
				defer SetGemmPath("")
				y, mean, inv = make([]float32, n), make([]float32, sz.rows), make([]float32, sz.rows)
				LayerNormFwd(x, gamma, beta, y, mean, inv, sz.rows, sz.cols, 1e-5)
				return
			}
			wy, wmean, winv := run("generic")
			for _, path := range GemmPaths() {
				y, mean, inv := run(path)
				for _, c := range []struct {
					what      string
					got, want []float32
				}{{"y", y, wy}, {"mean", mean, wmean}, {"inv", inv, winv}} {
					if msg := sameBits(c.got, c.want); msg != "" {
						t.Errorf("%s %dx%d beta %v: %s: %s (the Go loop's)", path, sz.rows, sz.cols, beta != nil, c.what, msg)
					}
				}
			}
		}
	}
}

// BenchmarkLayerNormFwd is one of models/gpt.cue's layer norms forward
// (16384 rows of 384) on one thread, on each GEMM path's loops.
func BenchmarkLayerNormFwd(b *testing.B) {
	const rows, cols = 16384, 384
	r := newTestRand(34)
	x, gamma, beta := randSlice(r, rows*cols, 2), randSlice(r, cols, 1), randSlice(r, cols, 1)
	y, mean, inv := make([]float32, rows*cols), make([]float32, rows), make([]float32, rows)
	onePathEach(b, func() { LayerNormFwd(x, gamma, beta, y, mean, inv, rows, cols, 1e-5) })
}

// onePathEach runs a benchmark of run on one thread on each GEMM path.
func onePathEach(b *testing.B, run func()) {
	defer SetThreads(Threads())
	SetThreads(1)
	for _, path := range GemmPaths() {
		b.Run(path, func(b *testing.B) {
			if err := SetGemmPath(path); err != nil {
				b.Fatal(err)
			}
			defer SetGemmPath("")
			for range b.N {
				run()
			}
		})
	}
}

// BenchmarkLayerNormBwd is one of models/gpt.cue's layer norms backward
// (16384 rows of 384) on one thread, on each GEMM path's loops.
func BenchmarkLayerNormBwd(b *testing.B) {
	const rows, cols = 16384, 384
	r := newTestRand(32)
	x, dy, gamma := randSlice(r, rows*cols, 2), randSlice(r, rows*cols, 1), randSlice(r, cols, 1)
	mean, inv := make([]float32, rows), make([]float32, rows)
	LayerNormFwd(x, gamma, nil, make([]float32, rows*cols), mean, inv, rows, cols, 1e-5)
	dx, dg := make([]float32, rows*cols), make([]float32, cols)
	onePathEach(b, func() { LayerNormBwd(x, gamma, mean, inv, dy, dx, dg, nil, rows, cols) })
}
