package cpu

import (
	"fmt"
	"testing"
)

// BenchmarkGemmGPT runs the dense products of models/gpt.cue's training
// step (16384 tokens, width 384, MLP 1536) in FP32 and BF16 on one and two
// threads, in GFLOP/s: the forward products (x·wᵀ), an input gradient
// (dy·w) and the weight gradients (dyᵀ·x).
func BenchmarkGemmGPT(b *testing.B) {
	defer SetThreads(Threads())
	for _, s := range []struct {
		name           string
		transA, transB bool
		m, n, k        int
	}{
		{"fwd", false, true, 16384, 384, 384},
		{"fwd", false, true, 16384, 1536, 384},
		{"fwd", false, true, 16384, 384, 1536},
		{"dx", false, false, 16384, 384, 1536},
		{"dw", true, false, 384, 384, 16384},
		{"dw", true, false, 1536, 384, 16384},
	} {
		rng := newTestRand(9)
		a, bm, c := randSlice(rng, s.m*s.k, 1), randSlice(rng, s.k*s.n, 1), make([]float32, s.m*s.n)
		lda, ldb := s.k, s.n
		if s.transA {
			lda = s.m
		}
		if s.transB {
			ldb = s.k
		}
		for _, threads := range []int{1, 2} {
			for _, p := range []*Precision{FP32, BF16} {
				b.Run(fmt.Sprintf("%s_%dx%dx%d/threads=%d/%s", s.name, s.m, s.n, s.k, threads, p), func(b *testing.B) {
					SetThreads(threads)
					for b.Loop() {
						p.gemm(s.transA, s.transB, s.m, s.n, s.k, a, lda, bm, ldb, c, s.n)
					}
					b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
