package cpu

import (
	"fmt"
	"testing"
)

// gptProduct is one product of a benchmark: C = op(A)·op(B), m×k times k×n.
type gptProduct struct {
	name           string
	transA, transB bool
	m, n, k        int
}

// gptProducts are models/gpt.cue's dense products at batch 64 × 256:
// forward (x·Wᵀ), input gradient and weight gradient.
var gptProducts = []gptProduct{
	{"fwd", false, true, 16384, 384, 384},
	{"fwd", false, true, 16384, 1536, 384},
	{"fwd", false, true, 16384, 384, 1536},
	{"dx", false, false, 16384, 384, 1536},
	{"dw", true, false, 384, 384, 16384},
	{"dw", true, false, 1536, 384, 16384},
}

// BenchmarkGemmGPT runs the dense products of models/gpt.cue's training
// step (16384 tokens, width 384, MLP 1536) in FP32 and BF16 on one and two
// threads, in GFLOP/s and CPU time (on a shared machine the wall clock
// counts other processes' turns): the forward products (x·wᵀ), an input
// gradient (dy·w) and the weight gradients (dyᵀ·x).
// operands are random operands of the product, packed (lda and ldb the
// stored rows' lengths), and its C.
func (s gptProduct) operands() (a []float32, lda int, b []float32, ldb int, c []float32) {
	rng := newTestRand(9)
	a, b, c = randSlice(rng, s.m*s.k, 1), randSlice(rng, s.k*s.n, 1), make([]float32, s.m*s.n)
	lda, ldb = s.k, s.n
	if s.transA {
		lda = s.m
	}
	if s.transB {
		ldb = s.k
	}
	return a, lda, b, ldb, c
}

func BenchmarkGemmGPT(b *testing.B) {
	defer SetThreads(Threads())
	for _, s := range gptProducts {
		a, lda, bm, ldb, c := s.operands()
		for _, threads := range []int{1, 2} {
			for _, p := range []*Precision{FP32, BF16} {
				b.Run(fmt.Sprintf("%s_%dx%dx%d/threads=%d/%s", s.name, s.m, s.n, s.k, threads, p), func(b *testing.B) {
					SetThreads(threads)
					start := processCPU()
					for b.Loop() {
						p.gemm(s.transA, s.transB, s.m, s.n, s.k, a, lda, bm, ldb, c, s.n)
					}
					reportCPUTime(b, start)
					b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkPairKernel runs the bfloat16 tile alone on panels in L1, next
// to Sgemm's tile: the kernels' ceilings in GFLOP/s.
func BenchmarkPairKernel(b *testing.B) {
	if bf16Path() == nil {
		b.Skip("no AVX512-BF16 path on this machine")
	}
	for _, p := range []*gemmPath{bf16Path(), gemmPathsSupported[0]} {
		steps := 128
		a, bp, c := make([]float32, steps*p.mr), make([]float32, steps*p.nr), make([]float32, p.mr*p.nr)
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				p.kernel(steps, &a[0], &bp[0], &c[0], p.nr, 1, 1)
			}
			flops := 2 * p.mr * p.nr * steps
			if p.pairs != nil {
				flops *= 2
			}
			b.ReportMetric(float64(flops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
