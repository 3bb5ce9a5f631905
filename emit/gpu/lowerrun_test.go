package gpu

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// kernelServer is the g++ build of a Program's kernels running as
// `driver -serve`: a test sends it one launch at a time with the bound
// slices of its buffers and copies back what the kernel wrote, computing
// the GEMMs between launches in Go. It runs a lowered Program end to end on
// the CPU, in the order a GPU command buffer would.
type kernelServer struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	index map[string]int // kernel name → case index in the driver
	prog  *Program
}

// startKernelServer compiles prog's kernels (already rewritten for d by
// Lower) with the serve driver and starts it; the test's cleanup stops it.
// shimIncludes are g++'s include flags for the dialects' shims in folder
// shim (testdata/shim): it and cuda/fakecuda, whose fibers.h and warp.h
// (the lanes' scheduler, the tiles' and fragments' emulation) the shims
// share with the fake GPU's.
func shimIncludes(shim string) []string {
	return []string{"-I", shim, "-I", filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(shim)))), "cuda", "fakecuda")}
}

func startKernelServer(t *testing.T, d *Dialect, prog *Program) *kernelServer {
	t.Helper()
	gpp := gxx(t)
	dir := t.TempDir()
	src := prog.Source
	if d == CUDA {
		src = "#include \"cuda_shim.h\"\n" + src
	}
	src += driverSource(d, prog.Kernels)
	cpp := filepath.Join(dir, "program_"+d.Name+".cpp")
	if err := os.WriteFile(cpp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	shim, err := filepath.Abs("testdata/shim")
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "driver")
	if outp, err := exec.Command(gpp, append(append([]string{"-std=c++20", "-O1", "-fno-strict-aliasing", "-pthread", "-Wno-attributes"}, shimIncludes(shim)...), "-o", exe, cpp)...).CombinedOutput(); err != nil {
		t.Fatalf("g++ on the lowered %s program failed: %v\n%s\n(source kept in %s)", d.Name, err, outp, cpp)
	}
	s := &kernelServer{cmd: exec.Command(exe, "-serve"), index: map[string]int{}, prog: prog}
	s.cmd.Stderr = os.Stderr
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.out = bufio.NewReader(stdout)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i, k := range prog.Kernels {
		s.index[k.Name] = i
	}
	t.Cleanup(func() {
		binary.Write(s.in, binary.LittleEndian, int32(-1))
		s.in.Close()
		if err := s.cmd.Wait(); err != nil {
			t.Errorf("serve driver: %v", err)
		}
	})
	return s
}

// launch runs one Launch on the arena (one slice per plan buffer), binding
// args as the StepArgs buffer, and copies the mutable bindings back.
func (s *kernelServer) launch(t *testing.T, l *Launch, arena [][]float32, args []float32) {
	t.Helper()
	idx, ok := s.index[l.Kernel]
	if !ok {
		t.Fatalf("launch of %s, which the program does not define", l.Kernel)
	}
	slices := make([][]float32, len(l.Bindings))
	for i, b := range l.Bindings {
		if b.StepArgs {
			slices[i] = args[:b.Size]
			continue
		}
		if int(b.Buf) < 0 || int(b.Buf) >= len(arena) || b.Offset < 0 || b.Offset+b.Size > len(arena[b.Buf]) {
			t.Fatalf("launch of %s: binding %d, %d elements from %d of buffer %d, is outside the buffer", l.Kernel, i, b.Size, b.Offset, b.Buf)
		}
		slices[i] = arena[b.Buf][b.Offset : b.Offset+b.Size]
	}
	w := bufio.NewWriter(s.in)
	binary.Write(w, binary.LittleEndian, int32(idx))
	for _, sl := range slices {
		binary.Write(w, binary.LittleEndian, uint32(len(sl)))
		binary.Write(w, binary.LittleEndian, sl)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("sending launch of %s: %v", l.Kernel, err)
	}
	for i, sl := range slices {
		got := make([]float32, len(sl))
		if err := binary.Read(s.out, binary.LittleEndian, got); err != nil {
			t.Fatalf("reading the results of %s: %v", l.Kernel, err)
		}
		if l.Bindings[i].Mutable {
			copy(sl, got)
		}
	}
}

// refGemm is the plain reference of a Gemm on the arena, in float64:
// C = Alpha·op(A)·op(B) + Beta·C, with C not read when Beta is 0 (as BLAS
// and MPSMatrixMultiplication do).
func refGemm(t *testing.T, g *Gemm, arena [][]float32) {
	t.Helper()
	at := func(m Matrix, r, c int, trans bool) float64 {
		if trans {
			r, c = c, r
		}
		if r >= m.Rows || c >= m.Cols {
			t.Fatalf("GEMM %dx%dx%d reads (%d,%d) of a %dx%d operand", g.M, g.N, g.K, r, c, m.Rows, m.Cols)
		}
		return float64(arena[m.Buf][m.Offset+r*m.LD+c])
	}
	if g.C.Offset+(g.C.Rows-1)*g.C.LD+g.C.Cols > len(arena[g.C.Buf]) || g.C.Rows != g.M || g.C.Cols != g.N {
		t.Fatalf("GEMM output %+v does not fit its buffer or M=%d N=%d", g.C, g.M, g.N)
	}
	out := make([]float32, g.M*g.N)
	for i := 0; i < g.M; i++ {
		for j := 0; j < g.N; j++ {
			var acc float64
			for k := 0; k < g.K; k++ {
				acc += at(g.A, i, k, g.TransA) * at(g.B, k, j, g.TransB)
			}
			v := float64(g.Alpha) * acc
			if g.Beta != 0 {
				v += float64(g.Beta) * float64(arena[g.C.Buf][g.C.Offset+i*g.C.LD+j])
			}
			out[i*g.N+j] = float32(v)
		}
	}
	// Write after computing: an output that overlaps an input reads the
	// old values, as a GPU GEMM may not be relied on to do otherwise.
	for i := 0; i < g.M; i++ {
		copy(arena[g.C.Buf][g.C.Offset+i*g.C.LD:], out[i*g.N:(i+1)*g.N])
	}
}

// run executes ops in order on the arena.
func (s *kernelServer) run(t *testing.T, ops []Op, arena [][]float32, args []float32) {
	t.Helper()
	for _, op := range ops {
		switch {
		case op.Launch != nil:
			s.launch(t, op.Launch, arena, args)
		case op.Gemm != nil:
			for b := range max(op.Gemm.Batch, 1) {
				one := *op.Gemm
				one.A.Offset += b * one.Stride[0]
				one.B.Offset += b * one.Stride[1]
				one.C.Offset += b * one.Stride[2]
				refGemm(t, &one, arena)
			}
		case op.Conv != nil:
			refConv(t, op.Conv, arena)
		default:
			t.Fatalf("op of layer %s is neither a launch, a GEMM nor a convolution", op.Layer)
		}
	}
}

// convLayerCase is one convolution layer of the end-to-end test: its
// geometry, epilogue, which gradients the backward step writes, the
// scratch it is planned with, and the rounds that scratch must give.
type convLayerCase struct {
	name    string
	g       planner.ConvGeom
	bias    bool
	act     string
	alpha   float32
	dx      bool
	scratch int
	rounds  int // forward GEMMs are rounds·Groups
	direct  bool
	// fwdDirect: the forward runs as the direct kernel (ConvDirectMethod),
	// one launch and no GEMM.
	fwdDirect bool
	// bwdDirect: the backward too (no dx: the weight and bias gradients
	// in one pass).
	bwdDirect bool
}

// withOutputSize fills in OH and OW from the window rule (zero strides,
// dilations and groups read as 1).
func withOutputSize(g planner.ConvGeom) planner.ConvGeom {
	g = normConv(g)
	g.OH = (g.H+2*g.PH-g.DH*(g.KH-1)-1)/g.SH + 1
	g.OW = (g.W+2*g.PW-g.DW*(g.KW-1)-1)/g.SW + 1
	return g
}

// convLayerBuffers are the plan buffers of one layer of convLayerPlan.
type convLayerBuffers struct {
	x, w, b, y, cols, dy, dx, dw, db, bwdCols planner.BufID
}

// convLayerPlan is a training plan of independent convolution layers, one
// per case, each with its own buffers, forward and backward steps.
func convLayerPlan(cases []convLayerCase) (*planner.Plan, []convLayerBuffers) {
	p := &planner.Plan{Model: "convs", Training: true}
	add := func(name string, kind planner.BufKind, shape ...int) planner.BufID {
		return testBuffer(p, name, kind, shape...)
	}
	var bufs []convLayerBuffers
	for _, c := range cases {
		g := c.g
		n := c.name
		var lb convLayerBuffers
		lb.x = add(n+".in", planner.KindActivation, g.N, g.C, g.H, g.W)
		lb.w = add(n+".weight", planner.KindParam, g.OC, g.C/g.Groups, g.KH, g.KW)
		lb.b, lb.dx, lb.db = planner.NoBuf, planner.NoBuf, planner.NoBuf
		if c.bias {
			lb.b = add(n+".bias", planner.KindParam, g.OC)
			lb.db = add(n+".bias.grad", planner.KindParamGrad, g.OC)
		}
		lb.y = add(n+".out", planner.KindActivation, g.N, g.OC, g.OH, g.OW)
		lb.cols = add(n+".cols", planner.KindScratch, c.scratch)
		lb.dy = add(n+".out.grad", planner.KindGrad, g.N, g.OC, g.OH, g.OW)
		if c.dx {
			lb.dx = add(n+".in.grad", planner.KindGrad, g.N, g.C, g.H, g.W)
		}
		lb.dw = add(n+".weight.grad", planner.KindParamGrad, g.OC, g.C/g.Groups, g.KH, g.KW)
		lb.bwdCols = add(n+".bwd_cols", planner.KindScratch, c.scratch)
		geom := g
		attr := planner.Attr{Conv: &geom, Act: c.act, Alpha: float64(c.alpha)}
		p.Forward = append(p.Forward, planner.Step{Kernel: planner.KConv2D, Layer: n,
			In: []planner.BufID{lb.x, lb.w, lb.b}, Out: []planner.BufID{lb.y, lb.cols}, Attr: attr})
		p.Backward = append(p.Backward, planner.Step{Kernel: planner.KConv2DBwd, Layer: n,
			In: []planner.BufID{lb.x, lb.w, lb.y, lb.dy, lb.bwdCols}, Out: []planner.BufID{lb.dx, lb.dw, lb.db}, Attr: attr})
		bufs = append(bufs, lb)
	}
	return p, bufs
}

// convLayerArena is the starting contents of a convLayerPlan's buffers:
// inputs and params in [-1, 1), dy too, outputs and gradients junk in
// [500, 600) and scratch NaN, so that reading what was not written fails.
func convLayerArena(p *planner.Plan, bufs []convLayerBuffers, seed int64) [][]float32 {
	r := rand.New(rand.NewSource(seed))
	fill := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*r.Float32()
		}
		return v
	}
	initial := make([][]float32, len(p.Buffers))
	for i, b := range p.Buffers {
		switch b.Kind {
		case planner.KindScratch:
			initial[i] = make([]float32, b.Size)
			for j := range initial[i] {
				initial[i][j] = float32(math.NaN())
			}
		case planner.KindActivation, planner.KindParam:
			initial[i] = fill(b.Size, -1, 1)
		default:
			initial[i] = fill(b.Size, 500, 600)
		}
	}
	for _, lb := range bufs {
		initial[lb.dy] = fill(p.Buffers[lb.dy].Size, -1, 1)
	}
	return initial
}

// runConvLayers runs a lowered convLayerPlan's forward and backward ops on
// a copy of its starting arena (kernels through d's g++ shim, GEMMs in
// float64) and returns the arena afterwards.
func runConvLayers(t *testing.T, d *Dialect, prog *Program, initial [][]float32) [][]float32 {
	t.Helper()
	arena := make([][]float32, len(initial))
	for i := range initial {
		arena[i] = append([]float32(nil), initial[i]...)
	}
	s := startKernelServer(t, d, prog)
	args := make([]float32, gpuhost.StepArgsLen)
	s.run(t, prog.Forward, arena, args)
	s.run(t, prog.Backward, arena, args)
	return arena
}

// convLayerReference is rt/cpu's y, dx, dW and db of one layer of a
// convLayerPlan from its starting contents, by the CPU method that takes
// every geometry (im2col); dx and db are nil where the layer has none.
func convLayerReference(t *testing.T, c convLayerCase, lb convLayerBuffers, initial [][]float32) (y, dx, dw, db []float32) {
	g := cpuConv(c.g)
	act := cpuFusedAct(t, c.act)
	var b []float32
	if c.bias {
		b, db = initial[lb.b], make([]float32, c.g.OC)
	}
	if c.dx {
		dx = make([]float32, len(initial[lb.x]))
	}
	y = make([]float32, len(initial[lb.y]))
	cpu.Conv2DIm2colFwd(initial[lb.x], initial[lb.w], b, y, g, act, c.alpha)
	dy := append([]float32(nil), initial[lb.dy]...)
	dw = make([]float32, len(initial[lb.w]))
	cpu.Conv2DIm2colBwd(initial[lb.x], initial[lb.w], y, dy, dx, dw, db, g, act, c.alpha)
	return y, dx, dw, db
}

// cpuFusedAct is rt/cpu's fused activation named act.
func cpuFusedAct(t *testing.T, act string) cpu.Act {
	switch act {
	case "":
		return cpu.ActNone
	case "relu":
		return cpu.ActReLU
	case "leakyrelu":
		return cpu.ActLeakyReLU
	case "sigmoid":
		return cpu.ActSigmoid
	case "tanh":
		return cpu.ActTanh
	}
	t.Fatalf("no rt/cpu activation for %q", act)
	return 0
}

// TestLoweredConvMatchesCPU lowers whole convolution layers, forward and
// backward, runs every op (kernels through the dialect's g++ shim, GEMMs by
// refGemm, in program order) and compares y, dx, dW and db with rt/cpu's
// Conv2DIm2colFwd and Conv2DIm2colBwd. The layers cover rounds of several images with a
// batch that is not a multiple of the round, the whole batch in one round,
// one image at a time (GEMMs straight into y and dy), groups, stride,
// padding, dilation, and absent bias and dx. Scratch starts as NaN and every
// output as junk, so reading what was not written fails the comparison.
func TestLoweredConvMatchesCPU(t *testing.T) {
	grouped := withOutputSize(planner.ConvGeom{N: 5, C: 4, H: 9, W: 8, OC: 6, KH: 3, KW: 2, SH: 2, SW: 2, PH: 1, PW: 1, DH: 2, DW: 1, Groups: 2})
	plain := withOutputSize(planner.ConvGeom{N: 7, C: 3, H: 6, W: 5, OC: 4, KH: 3, KW: 3, SH: 1, SW: 1, DH: 1, DW: 1, Groups: 1})
	long := withOutputSize(planner.ConvGeom{N: 40, C: 1, H: 28, W: 28, OC: 4, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1})
	// the first layer of models/mnist.cue in small: 25 taps, more partial
	// sums than a direct weight-gradient block has threads
	first := withOutputSize(planner.ConvGeom{N: 6, C: 1, H: 28, W: 28, OC: 5, KH: 5, KW: 5, SH: 1, SW: 1, PH: 2, PW: 2, DH: 1, DW: 1, Groups: 1})
	// rows of 11 pixels: runs of directPixels a thread with a ragged last run
	ragged := withOutputSize(planner.ConvGeom{N: 3, C: 2, H: 11, W: 11, OC: 3, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1, Groups: 1})
	// dilated windows over rows of 13: the weight gradient's runs of 7 and 6
	dilated := withOutputSize(planner.ConvGeom{N: 2, C: 1, H: 9, W: 13, OC: 2, KH: 3, KW: 3, SH: 1, SW: 1, PH: 2, PW: 2, DH: 2, DW: 2, Groups: 1})
	cases := []convLayerCase{
		{name: "rounds_of_2", g: grouped, bias: true, act: "leakyrelu", alpha: 0.1, dx: true,
			scratch: 2 * convScratchPerImage(grouped), rounds: 3},
		{name: "whole_batch", g: grouped, bias: true, act: "relu", dx: true,
			scratch: ConvScratch(grouped), rounds: 1},
		{name: "one_image", g: grouped, bias: true, act: "tanh", dx: true,
			scratch: convColsPerImage(grouped), rounds: 5, direct: true},
		{name: "rounds_of_3", g: plain, scratch: 3*convScratchPerImage(plain) + 7, rounds: 3},
		// K = 40·28·28 = 31,360 pixels for 4×9 outputs: dW is split-K.
		{name: "split_k", g: long, bias: true, act: "relu", dx: true, scratch: ConvScratchWithin(1 << 27)(long), rounds: 1},
		{name: "direct_fwd", g: grouped, bias: true, act: "sigmoid", dx: true, scratch: ConvScratch(grouped), rounds: 1, fwdDirect: true},
		{name: "direct_both", g: grouped, bias: true, act: "leakyrelu", alpha: 0.2, scratch: max(ConvScratch(grouped), DirectBwdScratch(grouped)),
			rounds: 1, fwdDirect: true, bwdDirect: true},
		{name: "direct_long", g: long, act: "relu", scratch: DirectBwdScratch(long), rounds: 1, fwdDirect: true, bwdDirect: true},
		{name: "direct_ragged", g: ragged, bias: true, act: "relu", dx: true, scratch: ConvScratch(ragged), rounds: 1, fwdDirect: true},
		{name: "direct_dilated", g: dilated, bias: true, act: "tanh", scratch: DirectBwdScratch(dilated), rounds: 1, fwdDirect: true, bwdDirect: true},
		{name: "direct_first", g: first, bias: true, act: "relu", scratch: DirectBwdScratch(first), rounds: 1, fwdDirect: true, bwdDirect: true},
	}
	p, bufs := convLayerPlan(cases)
	for i, c := range cases {
		if c.fwdDirect {
			p.Forward[i].Attr.Method = ConvDirectMethod
		}
		if c.bwdDirect {
			p.Backward[i].Attr.Method = ConvDirectMethod
		}
	}
	initial := convLayerArena(p, bufs, 7)

	for _, d := range []*Dialect{Metal, CUDA} {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			prog, err := Lower(p, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				gemms, launches := 0, 0
				for _, op := range prog.Forward {
					if op.Layer != c.name {
						continue
					}
					if op.Gemm != nil {
						gemms++
					} else {
						launches++
					}
				}
				wantLaunches, wantGemms := c.rounds*2, c.rounds*c.g.Groups // im2col and epilogue per round
				if c.direct {
					wantLaunches = c.rounds + 1 // im2col per image, bias+act once
				}
				if c.fwdDirect {
					wantLaunches, wantGemms = 1, 0
				}
				if gemms != wantGemms || launches != wantLaunches {
					t.Errorf("%s: forward has %d GEMMs and %d launches, want %d and %d (%d rounds)",
						c.name, gemms, launches, wantGemms, wantLaunches, c.rounds)
				}
			}
			split := 0
			for _, op := range prog.Backward {
				if op.Layer == "split_k" && op.Gemm != nil && op.Gemm.Batch > 1 {
					split++
				}
			}
			if split != 1 {
				t.Errorf("split_k: %d batched weight-gradient GEMMs, want 1 (split-K)", split)
			}
			arena := runConvLayers(t, d, prog, initial)

			for ci, c := range cases {
				lb := bufs[ci]
				y, dx, dw, db := convLayerReference(t, c, lb, initial)
				compare := func(what string, got, want []float32) {
					t.Helper()
					closeTo(t, d.Name+"/"+c.name+": "+what, got, want)
				}
				compare("y", arena[lb.y], y)
				compare("dW", arena[lb.dw], dw)
				if c.bias {
					compare("db", arena[lb.db], db)
				}
				if c.dx {
					compare("dx", arena[lb.dx], dx)
				}
			}
		})
	}
}

// TestConvScratch checks the round sizes ConvScratch asks for: the whole
// batch when it fits the budget, balanced rounds when it does not, one
// image's columns when not even two images fit, and that Lower reads back
// the round size it meant.
func TestConvScratch(t *testing.T) {
	for _, c := range []struct {
		g          planner.ConvGeom
		wantImages int
	}{
		{withOutputSize(planner.ConvGeom{N: 250, C: 1, H: 28, W: 28, OC: 16, KH: 5, KW: 5, PH: 2, PW: 2}), 250},
		{withOutputSize(planner.ConvGeom{N: 250, C: 16, H: 14, W: 14, OC: 32, KH: 5, KW: 5, PH: 2, PW: 2}), 125},
		{withOutputSize(planner.ConvGeom{N: 7, C: 3, H: 6, W: 5, OC: 4, KH: 3, KW: 3, Groups: 1}), 7},
		{withOutputSize(planner.ConvGeom{N: 1, C: 3, H: 6, W: 5, OC: 4, KH: 3, KW: 3}), 1},
		{withOutputSize(planner.ConvGeom{N: 8, C: 64, H: 256, W: 256, OC: 64, KH: 3, KW: 3, PH: 1, PW: 1}), 1},
	} {
		g := normConv(c.g)
		s := ConvScratch(c.g)
		if s > convScratchBudget && c.wantImages > 1 {
			t.Errorf("%+v: scratch %d over the budget %d", c.g, s, convScratchBudget)
		}
		got, err := convRoundImages(g, s)
		if err != nil || got != c.wantImages {
			t.Errorf("%+v: scratch %d gives rounds of %d images (%v), want %d", c.g, s, got, err, c.wantImages)
		}
		if c.wantImages == 1 && s != convColsPerImage(g) {
			t.Errorf("%+v: one image at a time should need only its columns (%d), got %d", c.g, convColsPerImage(g), s)
		}
	}
	g := normConv(withOutputSize(planner.ConvGeom{N: 4, C: 2, H: 5, W: 5, OC: 3, KH: 3, KW: 3}))
	if _, err := convRoundImages(g, convColsPerImage(g)-1); err == nil {
		t.Errorf("scratch smaller than one image's columns was accepted")
	}
}
