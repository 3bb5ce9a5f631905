package cpu

import (
	"fmt"
	"testing"
)

// resnetConvs are the stride-1 3×3 layers of ResNet-18: torchvision's
// first stage at 56² (batch 32) and the CIFAR variant's four stages
// (batch 128), the layers the CPU rule gives the direct method in f32;
// then the CIFAR stem and narrower layers, for the fewest channels where
// bf16 im2col still pays.
var resnetConvs = []struct {
	name string
	g    Conv
}{
	{"cifar stem 3x3 3-64 32 b128", convCase(128, 3, 32, 32, 64, 3, 3, 1, 1, 1, 1)},
	{"3x3 16 32 b128", convCase(128, 16, 32, 32, 16, 3, 3, 1, 1, 1, 1)},
	{"3x3 32 32 b128", convCase(128, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1)},
	{"3x3 32-64 32 b128", convCase(128, 32, 32, 32, 64, 3, 3, 1, 1, 1, 1)},
	{"rn18 3x3 64 56 b32", convCase(32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1)},
	{"cifar 3x3 64 32 b128", convCase(128, 64, 32, 32, 64, 3, 3, 1, 1, 1, 1)},
	{"cifar 3x3 128 16 b128", convCase(128, 128, 16, 16, 128, 3, 3, 1, 1, 1, 1)},
	{"cifar 3x3 256 8 b128", convCase(128, 256, 8, 8, 256, 3, 3, 1, 1, 1, 1)},
	{"cifar 3x3 512 4 b128", convCase(128, 512, 4, 4, 512, 3, 3, 1, 1, 1, 1)},
}

// BenchmarkConvBF16 times, on one thread in CPU time (cpu-ms/op, and
// GFLOP per CPU-second of the convolution's multiply-adds), each of
// resnetConvs forward and backward with dx by the float32 direct method,
// float32 im2col and BF16's im2col: whether bf16 plans should take these
// layers from the direct method (planner's cpuConvPrecision).
func BenchmarkConvBF16(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(1)
	r := newTestRand(6)
	methods := []struct {
		name string
		fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
		bwd  func(x, w, y, dy, dx, dw, db []float32, g Conv, act Act, alpha float32)
	}{
		{"direct", Conv2DDirectFwd, Conv2DDirectBwd},
		{"im2col", Conv2DIm2colFwd, Conv2DIm2colBwd},
		{"im2col-bf16", BF16.Conv2DIm2colFwd, BF16.Conv2DIm2colBwd},
	}
	for _, c := range resnetConvs {
		g := c.g
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		w := randSlice(r, g.OC*g.C*g.KH*g.KW, 1)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		dy := randSlice(r, len(y), 1)
		dx, dw := make([]float32, len(x)), make([]float32, len(w))
		flops := 2 * float64(g.N*g.OC*g.OH*g.OW*g.C*g.KH*g.KW)
		report := func(b *testing.B, start int64, passes float64) {
			ms := float64(processCPU()-start) / float64(b.N) / 1e6
			b.ReportMetric(ms, "cpu-ms/op")
			b.ReportMetric(passes*flops/ms/1e6, "GFLOP/cpu-s")
		}
		for _, m := range methods {
			b.Run(fmt.Sprintf("%s/fwd/%s", c.name, m.name), func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					m.fwd(x, w, nil, y, g, ActNone, 0)
				}
				report(b, start, 1)
			})
			b.Run(fmt.Sprintf("%s/bwd/%s", c.name, m.name), func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					m.bwd(x, w, y, dy, dx, dw, nil, g, ActNone, 0)
				}
				report(b, start, 2)
			})
		}
	}
}
