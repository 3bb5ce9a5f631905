package planner

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// poolTarget is a target whose "pools" method (the 5×5 convolutions padded
// by 2) takes 2×2 max pools of stride 2 into its epilogue, and whose
// "plain" method (everything else) takes none: the shape of a GPU target's
// rule, without importing a backend.
var poolTarget = Target{
	Name: "pooling",
	Conv: func(g ConvGeom, pass ConvPass) ConvChoice {
		if g.KH == 5 && g.PH == 2 {
			return ConvChoice{Method: "pools"}
		}
		return ConvChoice{Method: "plain"}
	},
	PoolEpilogue: func(g ConvGeom, method string, pool ConvGeom) bool {
		return method == "pools" && pool.KH == 2 && pool.KW == 2 && pool.SH == 2 && pool.SW == 2 && pool.PH == 0 && pool.PW == 0
	},
}

// TestFusePool: an inference plan for a target that pools folds each max
// pool into the convolution before it, the step writing the pool's output
// with the pool's geometry in Attr.Pool, at the same FLOPs and fewer
// bytes than the CPU's plan, which keeps the pools.
func TestFusePool(t *testing.T) {
	p := mustBuild(t, flagship(), Options{Batch: 3, Fusion: true, Target: poolTarget})
	if got := kernels(p.Forward); got != "conv2d conv2d gemm gemm" {
		t.Fatalf("forward %s, want the pools folded into the convolutions", got)
	}
	for i, want := range []struct {
		fused  string
		in, y  []int
		poolIn int
	}{
		{"conv1,relu1,pool1", []int{3, 1, 28, 28}, []int{3, 16, 14, 14}, 28},
		{"conv2,relu2,pool2", []int{3, 16, 14, 14}, []int{3, 32, 7, 7}, 14},
	} {
		s := p.Forward[i]
		pg := s.Attr.Pool
		if pg == nil {
			t.Fatalf("step %d has no pool: %+v", i, s)
		}
		if strings.Join(s.Fused, ",") != want.fused || s.Attr.Act != "relu" || s.Attr.Method != "pools" {
			t.Errorf("step %d fused %v, act %q, method %q", i, s.Fused, s.Attr.Act, s.Attr.Method)
		}
		if pg.KH != 2 || pg.SH != 2 || pg.H != want.poolIn || pg.OH != want.poolIn/2 || pg.C != s.Attr.Conv.OC || s.Attr.Conv.OH != want.poolIn {
			t.Errorf("step %d pool %+v of convolution %+v", i, *pg, *s.Attr.Conv)
		}
		if !equalShapes(p.shapeOf(s.In[0]), want.in) || !equalShapes(p.shapeOf(s.Out[0]), want.y) {
			t.Errorf("step %d reads %v and writes %v, want %v and %v", i, p.shapeOf(s.In[0]), p.shapeOf(s.Out[0]), want.in, want.y)
		}
		if name := p.Buffers[s.Out[0]].Name; !strings.HasPrefix(name, "pool") {
			t.Errorf("step %d writes %s, want the pool's output", i, name)
		}
	}
	for _, b := range p.Buffers {
		if b.Name == "relu1.out" || b.Name == "relu2.out" {
			t.Errorf("the convolutions' full-size output %s is still planned", b.Name)
		}
	}
	want := []string{
		"conv1 + relu1 + pool1 -> conv2d (max pool 2x2 stride 2 epilogue, pools)",
		"conv2 + relu2 + pool2 -> conv2d (max pool 2x2 stride 2 epilogue, pools)",
	}
	if got := p.Fusions[len(p.Fusions)-2:]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("fusions %q", p.Fusions)
	}
	var text strings.Builder
	if err := WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "conv2d(relu k5x5 s1 p2 pools maxpool k2x2 s2)  conv1+relu1+pool1") {
		t.Errorf("the plan's text does not show the pool:\n%s", text.String())
	}

	cpuPlan := mustBuild(t, flagship(), Options{Batch: 3, Fusion: true})
	if got := kernels(cpuPlan.Forward); got != "conv2d maxpool2d conv2d maxpool2d gemm gemm" {
		t.Errorf("the CPU's forward %s, want its pools kept", got)
	}
	fused, kept := p.Stats(), cpuPlan.Stats()
	if fused.ForwardFLOPs != kept.ForwardFLOPs || fused.ForwardBytes >= kept.ForwardBytes {
		t.Errorf("pooled in the epilogue: %d FLOPs, %d bytes; pools kept: %d FLOPs, %d bytes (want the same FLOPs and fewer bytes)",
			fused.ForwardFLOPs, fused.ForwardBytes, kept.ForwardFLOPs, kept.ForwardBytes)
	}
}

// TestFusePoolKeeps: the pass leaves the pool a step of its own in a
// training plan, without fusion, for a target without PoolEpilogue, for
// a method or pool geometry the target declines, for an average pool, and
// when the convolution's output has another reader.
func TestFusePoolKeeps(t *testing.T) {
	pools := func(p *Plan) int {
		n := 0
		for _, s := range p.Forward {
			if s.Attr.Pool != nil {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		m    *spec.Model
		opts Options
		want int // convolutions that pool
	}{
		{"inference", flagship(), Options{Batch: 2, Fusion: true, Target: poolTarget}, 2},
		{"training", flagship(), Options{Batch: 2, Training: true, Fusion: true, Target: poolTarget}, 0},
		{"fusion off", flagship(), Options{Batch: 2, Target: poolTarget}, 0},
		{"cpu", flagship(), Options{Batch: 2, Fusion: true}, 0},
		// conv2 is unpadded: the target's "plain" method does not pool
		{"method", lenet5(), Options{Batch: 2, Fusion: true, Target: poolTarget}, 1},
		{"3x3 pool", func() *spec.Model {
			b := newModel("pool3", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			b.pool("pool", spec.OpMaxPool2D, 3)
			return b.model()
		}(), Options{Batch: 2, Fusion: true, Target: poolTarget}, 0},
		{"average pool", func() *spec.Model {
			b := newModel("avg", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			b.unary("relu", spec.OpReLU, 0)
			b.pool("pool", spec.OpAvgPool2D, 2)
			return b.model()
		}(), Options{Batch: 2, Fusion: true, Target: poolTarget}, 0},
		{"two readers", func() *spec.Model {
			b := newModel("tworeaders", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			r := b.unary("relu", spec.OpReLU, 0)
			mx := b.pool("max", spec.OpMaxPool2D, 2, r)
			avg := b.pool("avg", spec.OpAvgPool2D, 2, r)
			b.binary("sum", spec.OpAdd, mx, avg)
			return b.model()
		}(), Options{Batch: 2, Fusion: true, Target: poolTarget}, 0},
		{"pool is the output", func() *spec.Model {
			b := newModel("last", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			b.pool("pool", spec.OpMaxPool2D, 2)
			return b.model()
		}(), Options{Batch: 2, Fusion: true, Target: poolTarget}, 1},
	} {
		p := mustBuild(t, tc.m, tc.opts)
		if got := pools(p); got != tc.want {
			t.Errorf("%s: %d convolutions pool, want %d (forward %s, fusions %q)", tc.name, got, tc.want, kernels(p.Forward), p.Fusions)
		}
		if got, want := strings.Count(kernels(p.Forward), "maxpool2d"), strings.Count(kernels(mustBuild(t, tc.m, Options{Batch: 2, Training: tc.opts.Training}).Forward), "maxpool2d")-tc.want; got != want {
			t.Errorf("%s: %d max pool steps, want %d", tc.name, got, want)
		}
	}
}

// TestVerifyPool: Verify rejects an epilogue pool in a training plan, on
// another kernel, and one whose geometry does not read the convolution's
// output or disagrees with the step's output.
func TestVerifyPool(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *Plan)
		want   string
	}{
		{"training", func(p *Plan) { p.Training = true }, "training plan"},
		{"other kernel", func(p *Plan) { p.Forward[2].Attr.Pool = p.Forward[0].Attr.Pool }, "on a gemm step"},
		{"reads elsewhere", func(p *Plan) {
			g := *p.Forward[0].Attr.Pool
			g.H, g.W, g.OH, g.OW = 14, 14, 7, 7
			p.Forward[0].Attr.Pool = &g
		}, "epilogue pool reads"},
		{"window rule", func(p *Plan) {
			g := *p.Forward[0].Attr.Pool
			g.OH = 13
			p.Forward[0].Attr.Pool = &g
		}, "window rule"},
		{"output shape", func(p *Plan) { p.Forward[0].Out[0] = p.Forward[1].Out[0] }, "has shape"},
	} {
		p := mustBuild(t, flagship(), Options{Batch: 2, Fusion: true, Target: poolTarget})
		if err := Verify(p); err != nil || p.Forward[0].Attr.Pool == nil {
			t.Fatalf("%s: the plan as built fails (%v) or does not pool (%s)", tc.name, err, kernels(p.Forward))
		}
		tc.change(p)
		if err := Verify(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify says %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}
