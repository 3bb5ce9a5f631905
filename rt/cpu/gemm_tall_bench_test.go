package cpu

import (
	"fmt"
	"math/rand"
	"testing"
)

// BenchmarkTallSplits compares the column split with the shared-B split
// on the tall products of models/gpt.cue (16384 tokens) on two threads, in
// CPU time as well: gemmTallRatio's measurement.
func BenchmarkTallSplits(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(2)
	names := map[gemmSplit]string{splitColumns: "columns", splitSharedB: "shared-b"}
	p := gemmPathsSupported[0]
	for _, sz := range [][3]int{{16384, 384, 384}, {16384, 1536, 384}, {16384, 384, 1536}} {
		m, n, k := sz[0], sz[1], sz[2]
		r := rand.New(rand.NewSource(5))
		x, y, z := randomSlice(r, m*k), randomSlice(r, k*n), make([]float32, m*n)
		g := &gemmCall{barrier: newGemmBarrier(), p: p, m: m, n: n, k: k, alpha: 1, a: x, lda: k, b: y, ldb: n, c: z, ldc: n}
		for _, split := range []gemmSplit{splitColumns, splitSharedB} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", m, n, k, names[split]), func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					g.runSplit(2, split)
				}
				reportCPUTime(b, start)
				b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
