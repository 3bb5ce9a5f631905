package cpu

import (
	"flag"
	"fmt"
	"testing"
)

// benchGemmPath forces BenchmarkConvMobile onto one GEMM path (and its
// convolution kernels): go test -bench ConvMobile -args -gemmpath avx2.
var benchGemmPath = flag.String("gemmpath", "", "the GEMM path BenchmarkConvMobile runs on (default: the fastest this machine has)")

// benchConvThreads sets BenchmarkConvMobile's threads: go test -bench
// ConvMobile -args -convthreads 2 times the split of batch-1 layers
// (ns/op is then the wall time to read).
var benchConvThreads = flag.Int("convthreads", 1, "the threads BenchmarkConvMobile runs on")

// mobileConvs are layers of torchvision's mobilenet_v2, efficientnet_b0
// and resnet50 at 224×224 (batch 1, the inference the zoo benchmark
// times): their 1×1 convolutions and their depthwise ones.
var mobileConvs = []struct {
	name string
	g    Conv
}{
	{"mbv2 1x1 16-96 112", convCase(1, 16, 112, 112, 96, 1, 1, 1, 0, 1, 1)},
	{"mbv2 1x1 144-24 56", convCase(1, 144, 56, 56, 24, 1, 1, 1, 0, 1, 1)},
	{"mbv2 1x1 64-384 14", convCase(1, 64, 14, 14, 384, 1, 1, 1, 0, 1, 1)},
	{"mbv2 1x1 960-320 7", convCase(1, 960, 7, 7, 320, 1, 1, 1, 0, 1, 1)},
	{"mbv2 1x1 320-1280 7", convCase(1, 320, 7, 7, 1280, 1, 1, 1, 0, 1, 1)},
	{"mbv2 1x1 160-960 7", convCase(1, 160, 7, 7, 960, 1, 1, 1, 0, 1, 1)},
	{"rgy 1x1 440-440 7", convCase(1, 440, 7, 7, 440, 1, 1, 1, 0, 1, 1)},
	{"rgy 1x1 208-208 14", convCase(1, 208, 14, 14, 208, 1, 1, 1, 0, 1, 1)},
	{"rn50 1x1 256-64 56", convCase(1, 256, 56, 56, 64, 1, 1, 1, 0, 1, 1)},
	{"rn50 1x1 64-256 56", convCase(1, 64, 56, 56, 256, 1, 1, 1, 0, 1, 1)},
	{"effb0 se 1x1 1152-48 b32", convCase(32, 1152, 1, 1, 48, 1, 1, 1, 0, 1, 1)},
	{"mbv2 dw3 32 112", convCase(1, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32)},
	{"mbv2 dw3 s2 96 112", convCase(1, 96, 112, 112, 96, 3, 3, 2, 1, 1, 96)},
	{"mbv2 dw3 144 56", convCase(1, 144, 56, 56, 144, 3, 3, 1, 1, 1, 144)},
	{"mbv2 dw3 384 14", convCase(1, 384, 14, 14, 384, 3, 3, 1, 1, 1, 384)},
	{"mbv2 dw3 960 7", convCase(1, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960)},
	{"effb0 dw5 s2 144 56", convCase(1, 144, 56, 56, 144, 5, 5, 2, 2, 1, 144)},
	{"effb0 dw5 240 28", convCase(1, 240, 28, 28, 240, 5, 5, 1, 2, 1, 240)},
	{"effb0 dw5 672 14", convCase(1, 672, 14, 14, 672, 5, 5, 1, 2, 1, 672)},
	{"effb0 dw5 1152 7", convCase(1, 1152, 7, 7, 1152, 5, 5, 1, 2, 1, 1152)},
}

// BenchmarkConvMobile times every method that takes each of mobileConvs,
// forward and backward with dx, on one thread (-convthreads), in CPU time (cpu-ms/op):
// the numbers that set planner.cpuConv's choice among them.
func BenchmarkConvMobile(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(*benchConvThreads)
	if *benchGemmPath != "" {
		defer SetGemmPath("")
		if err := SetGemmPath(*benchGemmPath); err != nil {
			b.Fatal(err)
		}
	}
	r := newTestRand(5)
	for _, c := range mobileConvs {
		g := c.g
		x := randSlice(r, g.N*g.C*g.H*g.W, 1)
		w := randSlice(r, g.OC*g.C/g.Groups*g.KH*g.KW, 1)
		bias := randSlice(r, g.OC, 1)
		y := make([]float32, g.N*g.OC*g.OH*g.OW)
		dy := randSlice(r, len(y), 1)
		dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, len(bias))
		for _, m := range convMethods {
			if !m.ok(g) {
				continue
			}
			b.Run(fmt.Sprintf("%s/fwd/%s", c.name, m.name), func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					m.fwd(x, w, bias, y, g, ActReLU, 0)
				}
				reportCPUTime(b, start)
			})
			if m.bwd == nil {
				continue
			}
			b.Run(fmt.Sprintf("%s/bwd/%s", c.name, m.name), func(b *testing.B) {
				start := processCPU()
				for b.Loop() {
					m.bwd(x, w, y, dy, dx, dw, db, g, ActNone, 0)
				}
				reportCPUTime(b, start)
			})
		}
	}
}
