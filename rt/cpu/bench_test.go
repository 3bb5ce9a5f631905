package cpu

import (
	"fmt"
	"testing"
)

// flagship is the layers of the MNIST demo model at batch 250:
// conv32@5x5 pad2 - pool - conv64@5x5 pad2 - pool - dense128 - dense10,
// models/mnist.cue since it grew from 16 and 32 channels.
type flagship struct {
	c1, p1, c2, p2                                                                    Conv
	conv2                                                                             string // conv2's method: "direct", "winograd" (F(2×2)) or "winograd4" (F(4×4), as the CPU's plan has it)
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
	switch f.conv2 {
	case "winograd":
		conv2Fwd, conv2Bwd = Conv2DWinogradFwd, Conv2DWinogradBwd
	case "winograd4":
		conv2Fwd, conv2Bwd = Conv2DWinogradF4Fwd, Conv2DWinogradF4Bwd
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
// its second convolution by the direct method, by Winograd F(2×2,5×5),
// and by F(4×4,5×5) as the CPU's plan runs it at batch 250.
func BenchmarkFlagshipStep(b *testing.B) {
	const batch = 250
	f := newFlagship(batch)
	for _, name := range []string{"direct", "winograd", "winograd4"} {
		b.Run(name, func(b *testing.B) {
			f.conv2 = name
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

// BenchmarkMLPStep times each kernel of a training step of the benchmark
// MLP (784-512-256-10, batch 250, Adam) alone, and forward, loss and
// backward together ("step": Adam is timed apart, since weights that it
// moved step after step towards one fixed batch make gradients tiny and
// subnormal, which the CPU computes slowly), so that each can be set
// against the SGEMM roof: the products are 0.60 GFLOP (the forward's
// 0.27, dW's 0.27, dx's 0.07 with no dx for the input layer).
func BenchmarkMLPStep(b *testing.B) {
	const batch = 250
	r := newTestRand(3)
	dims := []int{784, 512, 256, 10}
	x := randSlice(r, batch*784, 1)
	var w, bias, y, dy, dw, db, m, v [3][]float32
	for l := range 3 {
		in, out := dims[l], dims[l+1]
		w[l], bias[l] = randSlice(r, out*in, 0.05), randSlice(r, out, 0.05)
		y[l], dy[l] = make([]float32, batch*out), make([]float32, batch*out)
		dw[l], db[l] = make([]float32, out*in), make([]float32, out)
		m[l], v[l] = make([]float32, out*in), make([]float32, out*in)
	}
	dx := [3][]float32{nil, make([]float32, batch*512), make([]float32, batch*256)}
	labels := make([]float32, batch*10)
	for i := range batch {
		labels[i*10+i%10] = 1
	}
	act := [3]Act{ActReLU, ActReLU, ActNone}
	input := func(l int) []float32 {
		if l == 0 {
			return x
		}
		return y[l-1]
	}
	prec := FP32
	fwd := func(l int) { prec.GemmFwd(input(l), w[l], bias[l], y[l], batch, dims[l], dims[l+1], act[l], 0) }
	bwd := func(l int) {
		g := dy[l]
		if l < 2 {
			g = dx[l+1] // the next layer's dx is this layer's dy
		}
		prec.GemmBwd(input(l), w[l], y[l], g, dx[l], dw[l], db[l], batch, dims[l], dims[l+1], act[l], 0)
	}
	adam := func(l int) { Adam(w[l], dw[l], m[l], v[l], 1e-3, 0.9, 0.999, 1e-8, 0, 1, false) }
	step := func() {
		for l := range 3 {
			fwd(l)
		}
		SoftmaxXent(y[2], labels, dy[2], batch, 10)
		for l := 2; l >= 0; l-- {
			bwd(l)
		}
	}
	step()
	defer SetThreads(Threads())
	for _, p := range []*Precision{FP32, BF16} {
		prec = p
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			b.Run(fmt.Sprintf("%s/threads=%d", p, threads), func(b *testing.B) { mlpKernels(b, fwd, bwd, adam, step) })
		}
	}
}

// mlpKernels runs BenchmarkMLPStep's cases on the current thread count.
func mlpKernels(b *testing.B, fwd, bwd, adam func(int), step func()) {
	for _, c := range []struct {
		name   string
		run    func()
		mflops float64
	}{
		{"fwd1", func() { fwd(0) }, 2 * 250 * 784 * 512 / 1e6},
		{"fwd2", func() { fwd(1) }, 2 * 250 * 512 * 256 / 1e6},
		{"fwd3", func() { fwd(2) }, 2 * 250 * 256 * 10 / 1e6},
		{"bwd3", func() { bwd(2) }, 2 * 2 * 250 * 256 * 10 / 1e6},
		{"bwd2", func() { bwd(1) }, 2 * 2 * 250 * 512 * 256 / 1e6},
		{"bwd1", func() { bwd(0) }, 2 * 250 * 784 * 512 / 1e6},
		{"adam", func() { adam(0); adam(1); adam(2) }, 0},
		{"step", step, 601.8},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
			if c.mflops > 0 {
				b.ReportMetric(c.mflops*1e6*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			}
		})
	}
}
