package cpu

import (
	"strconv"
	"testing"
)

// BenchmarkConvBatch1 times the forward pass of ResNet-18's and
// ResNet-50's and DenseNet-121's convolutions at batch 1 (one-sample inference, 224×224) by
// each method that takes them, on one and two threads: wall ms a call and
// the process's CPU ms.
func BenchmarkConvBatch1(b *testing.B) {
	defer SetThreads(Threads())
	type method struct {
		name string
		fwd  func(x, w, b, y []float32, g Conv, act Act, alpha float32)
	}
	direct, wino := method{"direct", Conv2DDirectFwd}, method{"winograd3", Conv2DWinograd3Fwd}
	im2col, phase := method{"im2col", Conv2DIm2colFwd}, method{"phase", Conv2DPhaseFwd}
	phasePW := method{"phase pointwise", phasePointwise}
	for _, l := range []struct {
		name    string
		g       Conv
		methods []method
	}{
		{"64 56²", convCase(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"128 28²", convCase(1, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"256 14²", convCase(1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"512 7²", convCase(1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"densenet 128→32 56²", convCase(1, 128, 56, 56, 32, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"densenet 128→32 28²", convCase(1, 128, 28, 28, 32, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"densenet 128→32 14²", convCase(1, 128, 14, 14, 32, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"densenet 128→32 7²", convCase(1, 128, 7, 7, 32, 3, 3, 1, 1, 1, 1), []method{wino, direct}},
		{"64→128 56² s2", convCase(1, 64, 56, 56, 128, 3, 3, 2, 1, 1, 1), []method{im2col, phase}},
		{"128→256 28² s2", convCase(1, 128, 28, 28, 256, 3, 3, 2, 1, 1, 1), []method{im2col, phase}},
		{"256→512 14² s2", convCase(1, 256, 14, 14, 512, 3, 3, 2, 1, 1, 1), []method{im2col, phase}},
		{"1×1 64→128 56² s2", convCase(1, 64, 56, 56, 128, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"1×1 256→512 14² s2", convCase(1, 256, 14, 14, 512, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"resnet50 1×1 256→512 56² s2", convCase(1, 256, 56, 56, 512, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"resnet50 1×1 512→1024 28² s2", convCase(1, 512, 28, 28, 1024, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"resnet50 1×1 1024→2048 14² s2", convCase(1, 1024, 14, 14, 2048, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"regnet 1×1 32→48 112² s2", convCase(1, 32, 112, 112, 48, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"regnet 1×1 48→104 56² s2", convCase(1, 48, 56, 56, 104, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"regnet 1×1 104→208 28² s2", convCase(1, 104, 28, 28, 208, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"regnet 1×1 208→440 14² s2", convCase(1, 208, 14, 14, 440, 1, 1, 2, 0, 1, 1), []method{im2col, phase, phasePW}},
		{"stem 3→64 224² 7×7 s2", convCase(1, 3, 224, 224, 64, 7, 7, 2, 3, 1, 1), []method{im2col, phase}},
	} {
		r := newTestRand(73)
		g := l.g
		x, w, bias := randSlice(r, g.C*g.H*g.W, 1), randSlice(r, g.OC*g.C*g.KH*g.KW, 0.05), randSlice(r, g.OC, 0.05)
		y := make([]float32, g.OC*g.OH*g.OW)
		for _, m := range l.methods {
			for _, threads := range []int{1, 2} {
				b.Run(l.name+"/"+m.name+"/"+strconv.Itoa(threads)+" threads", func(b *testing.B) {
					SetThreads(threads)
					start := processCPU()
					for b.Loop() {
						m.fwd(x, w, bias, y, g, ActReLU, 0)
					}
					reportCPUTime(b, start)
				})
			}
		}
	}
}
