package cpu

import (
	"math/rand"
	"testing"
)

// BenchmarkGemmKernel measures each microkernel alone on L1-resident panels:
// the ceiling the blocking in Sgemm can approach.
func BenchmarkGemmKernel(b *testing.B) {
	for _, p := range gemmPathsSupported {
		b.Run(p.name, func(b *testing.B) {
			const k = 256
			r := rand.New(rand.NewSource(6))
			ap, bp := randomSlice(r, p.mr*k), randomSlice(r, p.nr*k)
			c := make([]float32, p.mr*p.nr)
			for b.Loop() {
				p.kernel(k, &ap[0], &bp[0], &c[0], p.nr, 1, 0)
			}
			b.ReportMetric(2*float64(p.mr*p.nr*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
