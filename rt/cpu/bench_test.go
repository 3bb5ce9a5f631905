package cpu

import "testing"

// flagship is the layers of the MNIST demo model at batch 250:
// conv32@5x5 pad2 - pool - conv64@5x5 pad2 - pool - dense128 - dense10,
// models/mnist.cue since it grew from 16 and 32 channels.
type flagship struct {
	c1, p1, c2, p2                                                                    Conv
	winograd                                                                          bool // conv2 by Winograd, as the CPU's plan has it
	x, w1, b1, y1, s1, w2, b2, y2, s2, w3, b3, y3, w4, b4, y4                         []float32
	dy4, dy3, dx3, dw3, db3, dw4, db4, ds2, dy2, dw2, db2, ds1, dy1, dw1, db1, labels []float32
}

func newFlagship(batch int) *flagship {
	r := newTestRand(1)
	f := &flagship{
		c1: convCase(batch, 1, 28, 28, 32, 5, 5, 1, 2, 1, 1),
		p1: convCase(batch, 32, 28, 28, 32, 2, 2, 2, 0, 1, 1),
		c2: convCase(batch, 32, 14, 14, 64, 5, 5, 1, 2, 1, 1),
		p2: convCase(batch, 64, 14, 14, 64, 2, 2, 2, 0, 1, 1),
	}
	f.x = randSlice(r, batch*784, 1)
	f.w1, f.b1, f.y1, f.s1 = randSlice(r, 32*25, 0.2), randSlice(r, 32, 0.2), make([]float32, batch*32*784), make([]float32, batch*32*196)
	f.w2, f.b2, f.y2, f.s2 = randSlice(r, 64*32*25, 0.05), randSlice(r, 64, 0.05), make([]float32, batch*64*196), make([]float32, batch*64*49)
	f.w3, f.b3, f.y3 = randSlice(r, 128*3136, 0.03), randSlice(r, 128, 0.03), make([]float32, batch*128)
	f.w4, f.b4, f.y4 = randSlice(r, 10*128, 0.1), randSlice(r, 10, 0.1), make([]float32, batch*10)
	f.dy4, f.dy3, f.dx3 = make([]float32, len(f.y4)), make([]float32, len(f.y3)), make([]float32, len(f.s2))
	f.dw3, f.db3, f.dw4, f.db4 = make([]float32, len(f.w3)), make([]float32, 128), make([]float32, len(f.w4)), make([]float32, 10)
	f.dy2, f.dw2, f.db2 = make([]float32, len(f.y2)), make([]float32, len(f.w2)), make([]float32, 64)
	f.ds1, f.dy1, f.dw1, f.db1 = make([]float32, len(f.s1)), make([]float32, len(f.y1)), make([]float32, len(f.w1)), make([]float32, 32)
	f.labels = make([]float32, batch*10)
	for i := 0; i < batch; i++ {
		f.labels[i*10+i%10] = 1
	}
	return f
}

// step runs one forward and backward pass.
func (f *flagship) step(batch int) {
	Conv2DDirectFwd(f.x, f.w1, f.b1, f.y1, f.c1, ActReLU, 0)
	MaxPool2DFwd(f.y1, f.s1, f.p1)
	conv2Fwd, conv2Bwd := Conv2DDirectFwd, Conv2DDirectBwd
	if f.winograd {
		conv2Fwd, conv2Bwd = Conv2DWinogradFwd, Conv2DWinogradBwd
	}
	conv2Fwd(f.s1, f.w2, f.b2, f.y2, f.c2, ActReLU, 0)
	MaxPool2DFwd(f.y2, f.s2, f.p2)
	GemmFwd(f.s2, f.w3, f.b3, f.y3, batch, 3136, 128, ActReLU, 0)
	GemmFwd(f.y3, f.w4, f.b4, f.y4, batch, 128, 10, ActNone, 0)
	SoftmaxXent(f.y4, f.labels, f.dy4, batch, 10)
	GemmBwd(f.y3, f.w4, f.y4, f.dy4, f.dy3, f.dw4, f.db4, batch, 128, 10, ActNone, 0)
	GemmBwd(f.s2, f.w3, f.y3, f.dy3, f.dx3, f.dw3, f.db3, batch, 3136, 128, ActReLU, 0)
	MaxPool2DBwd(f.y2, f.s2, f.dx3, f.dy2, f.p2)
	conv2Bwd(f.s1, f.w2, f.y2, f.dy2, f.ds1, f.dw2, f.db2, f.c2, ActReLU, 0)
	MaxPool2DBwd(f.y1, f.s1, f.ds1, f.dy1, f.p1)
	Conv2DDirectBwd(f.x, f.w1, f.y1, f.dy1, nil, f.dw1, f.db1, f.c1, ActReLU, 0)
}

// BenchmarkFlagshipStep times one training step's kernels of the demo model
// (optimizer aside), the number that decides how long `make demo` takes:
// its second convolution by the direct method, and by Winograd as the
// CPU's plan runs it at batch 250.
func BenchmarkFlagshipStep(b *testing.B) {
	const batch = 250
	f := newFlagship(batch)
	for _, wino := range []bool{false, true} {
		name := "direct"
		if wino {
			name = "winograd"
		}
		b.Run(name, func(b *testing.B) {
			f.winograd = wino
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				f.step(batch)
			}
			reportCPUTime(b, start)
		})
	}
}

// BenchmarkConvLayers times each convolution pass of the demo model alone.
func BenchmarkConvLayers(b *testing.B) {
	const batch = 250
	f := newFlagship(batch)
	b.Run("conv1 fwd", func(b *testing.B) {
		for b.Loop() {
			Conv2DDirectFwd(f.x, f.w1, f.b1, f.y1, f.c1, ActReLU, 0)
		}
	})
	b.Run("conv1 bwd", func(b *testing.B) {
		for b.Loop() {
			Conv2DDirectBwd(f.x, f.w1, f.y1, f.dy1, nil, f.dw1, f.db1, f.c1, ActReLU, 0)
		}
	})
	b.Run("conv2 fwd", func(b *testing.B) {
		for b.Loop() {
			Conv2DDirectFwd(f.s1, f.w2, f.b2, f.y2, f.c2, ActReLU, 0)
		}
	})
	b.Run("conv2 bwd", func(b *testing.B) {
		for b.Loop() {
			Conv2DDirectBwd(f.s1, f.w2, f.y2, f.dy2, f.ds1, f.dw2, f.db2, f.c2, ActReLU, 0)
		}
	})
	b.Run("pool1 fwd", func(b *testing.B) {
		for b.Loop() {
			MaxPool2DFwd(f.y1, f.s1, f.p1)
		}
	})
	b.Run("pool1 bwd", func(b *testing.B) {
		for b.Loop() {
			MaxPool2DBwd(f.y1, f.s1, f.ds1, f.dy1, f.p1)
		}
	})
}
