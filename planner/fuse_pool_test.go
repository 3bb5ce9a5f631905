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

// trainPoolTarget is poolTarget for training plans: its pooling method
// also writes each window's argmax, and its pool backward applies the
// convolution's activation derivative.
var trainPoolTarget = func() Target {
	t := poolTarget
	t.Name, t.PoolArgmax, t.PoolBwdAct = "training pools", true, true
	return t
}()

// TestFusePoolTraining: a training plan for a target whose pooling
// methods write the argmax folds each of the flagship's max pools into its
// convolution, which writes the pooled output and the argmax; the pool's
// backward reads (argmax, pooled output, dy) and applies relu's
// derivative; the convolution's backward reads no y; the full-size
// outputs are gone; the plan moves fewer bytes at the same FLOPs but the
// argmax comparisons.
func TestFusePoolTraining(t *testing.T) {
	p := mustBuild(t, flagship(), Options{Batch: 3, Training: true, Fusion: true, Target: trainPoolTarget})
	if got := kernels(p.Forward); got != "conv2d conv2d gemm gemm" {
		t.Fatalf("forward %s, want the pools folded into the convolutions", got)
	}
	if got := strings.Count(kernels(p.Backward), "maxpool2d_argmax_bwd"); got != 2 || strings.Contains(kernels(p.Backward), "maxpool2d_bwd") {
		t.Fatalf("backward %s, want two maxpool2d_argmax_bwd steps and no maxpool2d_bwd", kernels(p.Backward))
	}
	for i, want := range []struct {
		fused, argmax string
		y             []int
	}{
		{"conv1,relu1,pool1", "pool1.argmax", []int{3, 16, 14, 14}},
		{"conv2,relu2,pool2", "pool2.argmax", []int{3, 32, 7, 7}},
	} {
		s := p.Forward[i]
		if s.Attr.Pool == nil || strings.Join(s.Fused, ",") != want.fused || len(s.Out) != 3 {
			t.Fatalf("step %d: pool %v, fused %v, %d outputs", i, s.Attr.Pool, s.Fused, len(s.Out))
		}
		am := p.Buffers[s.Out[2]]
		if am.Name != want.argmax || am.Kind != KindScratch || !equalShapes(am.Shape, want.y) || !equalShapes(p.shapeOf(s.Out[0]), want.y) {
			t.Errorf("step %d writes %s %v and argmax %s (%s) %v, want pooled %v and %s", i,
				p.Buffers[s.Out[0]].Name, p.shapeOf(s.Out[0]), am.Name, am.Kind, am.Shape, want.y, want.argmax)
		}
		var pb, cb *Step
		for j := range p.Backward {
			b := &p.Backward[j]
			if b.Kernel == KMaxPool2DArgmaxBwd && b.In[0] == s.Out[2] {
				pb = b
			}
			if b.Kernel == KConv2DBwd && b.Layer == s.Layer {
				cb = b
			}
		}
		if pb == nil || cb == nil {
			t.Fatalf("step %d: no pool backward reading its argmax (%v) or no conv2d_bwd (%v)", i, pb, cb)
		}
		if pb.In[1] != s.Out[0] || pb.Attr.Act != "relu" || pb.Attr.Conv == nil || *pb.Attr.Conv != *s.Attr.Pool || pb.Out[0] != cb.In[3] {
			t.Errorf("step %d: pool backward reads %v with %q over %+v, writes %d; conv2d_bwd's dy %d", i, pb.In, pb.Attr.Act, pb.Attr.Conv, pb.Out[0], cb.In[3])
		}
		if cb.In[2] != NoBuf || !cb.Attr.ActApplied {
			t.Errorf("step %d: conv2d_bwd reads y %d (ActApplied %v), want none", i, cb.In[2], cb.Attr.ActApplied)
		}
	}
	for _, b := range p.Buffers {
		if b.Name == "relu1.out" || b.Name == "relu2.out" {
			t.Errorf("the convolutions' full-size output %s is still planned", b.Name)
		}
	}
	n := 0
	for _, f := range p.Fusions {
		if strings.Contains(f, "epilogue, pools) writing each window's argmax; pool") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("fusions %q, want two pools with their argmax", p.Fusions)
	}
	var text strings.Builder
	if err := WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"maxpool2d_argmax_bwd(relu' k2x2 s2 p0)", "[3,16,14,14] [3,16,14,14] [3,16,14,14] -> [3,16,28,28]",
		"conv2d(relu k5x5 s1 p2 pools maxpool k2x2 s2)  conv1+relu1+pool1  [3,1,28,28] [16,1,5,5] [16] -> [3,16,14,14] - [3,16,14,14]"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the plan's text lacks %q:\n%s", want, text.String())
		}
	}

	// The same target without the argmax keeps the pools and the
	// full-size outputs.
	noArgmax := trainPoolTarget
	noArgmax.PoolArgmax = false
	kept := mustBuild(t, flagship(), Options{Batch: 3, Training: true, Fusion: true, Target: noArgmax})
	if got := kernels(kept.Forward); got != "conv2d maxpool2d conv2d maxpool2d gemm gemm" {
		t.Errorf("without PoolArgmax the forward is %s, want the pools kept", got)
	}
	fs, ks := p.Stats(), kept.Stats()
	// the pools' comparisons move into the convolutions, doubled for the argmax
	if fs.TotalBytes >= ks.TotalBytes || fs.ForwardFLOPs != ks.ForwardFLOPs+3*(16*14*14+32*7*7)*4 || fs.BackwardFLOPs != ks.BackwardFLOPs {
		t.Errorf("pooled: %d FLOPs forward, %d backward, %d bytes; kept: %d, %d, %d", fs.ForwardFLOPs, fs.BackwardFLOPs, fs.TotalBytes,
			ks.ForwardFLOPs, ks.BackwardFLOPs, ks.TotalBytes)
	}
	if p.WorkSize >= kept.WorkSize {
		t.Errorf("work arena %d pooled, %d kept: want smaller", p.WorkSize, kept.WorkSize)
	}
}

// TestFusePoolTrainingKeeps: in training plans the pass leaves the pool a
// step of its own where the convolution's backward needs its full-size
// output (the target's pool backward applies no derivative), where that
// output has another reader, for an average pool, and on the CPU; a
// convolution without an activation pools (its backward needs no y).
func TestFusePoolTrainingKeeps(t *testing.T) {
	noAct := trainPoolTarget
	noAct.PoolBwdAct = false
	for _, tc := range []struct {
		name string
		m    *spec.Model
		opts Options
		want int // convolutions that pool
	}{
		{"pooling target", flagship(), Options{Batch: 2, Training: true, Fusion: true, Target: trainPoolTarget}, 2},
		{"derivative not in the pool", flagship(), Options{Batch: 2, Training: true, Fusion: true, Target: noAct}, 0},
		{"cpu", flagship(), Options{Batch: 2, Training: true, Fusion: true}, 0},
		{"fusion off", flagship(), Options{Batch: 2, Training: true, Target: trainPoolTarget}, 0},
		{"second reader", func() *spec.Model {
			b := newModel("tworeaders", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			r := b.unary("relu", spec.OpReLU, 0)
			mx := b.pool("max", spec.OpMaxPool2D, 2, r)
			avg := b.pool("avg", spec.OpAvgPool2D, 2, r)
			b.binary("sum", spec.OpAdd, mx, avg)
			b.flatten("flat")
			b.dense("fc", 10)
			return b.model()
		}(), Options{Batch: 2, Training: true, Fusion: true, Target: trainPoolTarget}, 0},
		{"average pool", func() *spec.Model {
			b := newModel("avg", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			b.unary("relu", spec.OpReLU, 0)
			b.pool("pool", spec.OpAvgPool2D, 2)
			b.flatten("flat")
			b.dense("fc", 10)
			return b.model()
		}(), Options{Batch: 2, Training: true, Fusion: true, Target: trainPoolTarget}, 0},
		{"3x3 pool", func() *spec.Model {
			b := newModel("pool3", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			b.pool("pool", spec.OpMaxPool2D, 3)
			b.flatten("flat")
			b.dense("fc", 10)
			return b.model()
		}(), Options{Batch: 2, Training: true, Fusion: true, Target: trainPoolTarget}, 0},
		{"no activation", func() *spec.Model {
			b := newModel("noact", 1, 12, 12)
			b.conv("conv", 4, 5, 2)
			b.pool("pool", spec.OpMaxPool2D, 2)
			b.flatten("flat")
			b.dense("fc", 10)
			return b.model()
		}(), Options{Batch: 2, Training: true, Fusion: true, Target: trainPoolTarget}, 1},
	} {
		p := mustBuild(t, tc.m, tc.opts)
		pools, argmaxBwd := 0, 0
		for _, s := range p.Forward {
			if s.Attr.Pool != nil {
				pools++
			}
		}
		for _, s := range p.Backward {
			if s.Kernel == KMaxPool2DArgmaxBwd {
				argmaxBwd++
			}
			if s.Kernel == KConv2DBwd && s.In[2] == NoBuf && s.Attr.Act != "" && !s.Attr.ActApplied {
				t.Errorf("%s: %s's backward has no y for its %s derivative", tc.name, s.Layer, s.Attr.Act)
			}
		}
		if pools != tc.want || argmaxBwd != tc.want {
			t.Errorf("%s: %d convolutions pool, %d pool backward steps read an argmax; want %d (forward %s, backward %s)",
				tc.name, pools, argmaxBwd, tc.want, kernels(p.Forward), kernels(p.Backward))
		}
	}
}

// TestVerifyPoolTraining: Verify rejects a training plan's pooled
// convolution without its argmax or with a misshapen one, a pool
// backward from an argmax of the wrong shape, and a conv2d_bwd without y
// that must apply its activation's derivative.
func TestVerifyPoolTraining(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *Plan)
		want   string
	}{
		{"no argmax", func(p *Plan) { p.Forward[0].Out = p.Forward[0].Out[:2] }, "writes no argmax"},
		{"argmax shape", func(p *Plan) { p.Forward[0].Out[2] = p.Forward[1].Out[2] }, "argmax pool2.argmax has shape"},
		{"pool backward argmax", func(p *Plan) {
			for i := range p.Backward {
				if p.Backward[i].Kernel == KMaxPool2DArgmaxBwd && p.Backward[i].In[0] == p.Forward[0].Out[2] {
					p.Backward[i].In[0] = p.Forward[1].Out[2]
				}
			}
		}, "argmax pool2.argmax has shape"},
		{"derivative without y", func(p *Plan) {
			for i := range p.Backward {
				if p.Backward[i].Kernel == KConv2DBwd {
					p.Backward[i].Attr.ActApplied = false
				}
			}
		}, "no y, but the step applies relu's derivative"},
	} {
		p := mustBuild(t, flagship(), Options{Batch: 2, Training: true, Fusion: true, Target: trainPoolTarget})
		if err := Verify(p); err != nil || p.Forward[0].Attr.Pool == nil {
			t.Fatalf("%s: the plan as built fails (%v) or does not pool (%s)", tc.name, err, kernels(p.Forward))
		}
		tc.change(p)
		if err := Verify(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify says %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}
