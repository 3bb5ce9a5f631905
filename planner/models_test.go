package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// modelBuilder builds spec.Models by hand, computing per-sample shapes the
// way the CUE schema does, so the planner can be tested without the front
// end.
type modelBuilder struct {
	m spec.Model
}

func newModel(name string, input ...int) *modelBuilder {
	b := &modelBuilder{m: spec.Model{
		Name: name, File: name + ".cue", DType: "f32",
		Training: spec.Training{
			Loss:      "softmax_cross_entropy",
			Optimizer: spec.Optimizer{Kind: "adam", LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
			Epochs:    1, BatchSize: 32, Seed: 1,
		},
	}}
	b.m.Nodes = append(b.m.Nodes, spec.Node{Name: "input", Op: spec.OpInput, OutShape: input,
		Pos: spec.Pos{File: b.m.File, Line: 1, Col: 1}})
	return b
}

// last is the name of the most recent node.
func (b *modelBuilder) last() string { return b.m.Nodes[len(b.m.Nodes)-1].Name }

// add appends n reading inputs (default: the previous node) and returns
// its name. out computes the output shape from the input shapes.
func (b *modelBuilder) add(n spec.Node, out func(in [][]int) []int, inputs ...string) string {
	if len(inputs) == 0 {
		inputs = []string{b.last()}
	}
	n.Inputs = inputs
	for _, in := range inputs {
		n.InShapes = append(n.InShapes, b.m.Node(in).OutShape)
	}
	n.OutShape = out(n.InShapes)
	n.Pos = spec.Pos{File: b.m.File, Line: len(b.m.Nodes) + 1, Col: 3}
	b.m.Nodes = append(b.m.Nodes, n)
	b.m.Output = n.Name
	return n.Name
}

func same(in [][]int) []int { return append([]int(nil), in[0]...) }

func (b *modelBuilder) dense(name string, units int, inputs ...string) string {
	return b.add(spec.Node{Name: name, Op: spec.OpDense, Units: units, Bias: true}, func(in [][]int) []int {
		s := same(in)
		s[len(s)-1] = units
		return s
	}, inputs...)
}

func (b *modelBuilder) unary(name string, op spec.Op, alpha float64, inputs ...string) string {
	return b.add(spec.Node{Name: name, Op: op, Alpha: alpha}, same, inputs...)
}

func (b *modelBuilder) conv(name string, oc, k, pad int, inputs ...string) string {
	return b.add(spec.Node{Name: name, Op: spec.OpConv2D, OutChannels: oc, Kernel: [2]int{k, k},
		Stride: [2]int{1, 1}, Padding: [2]int{pad, pad}, Dilation: [2]int{1, 1}, Groups: 1, Bias: true},
		func(in [][]int) []int {
			return []int{oc, in[0][1] + 2*pad - k + 1, in[0][2] + 2*pad - k + 1}
		}, inputs...)
}

func (b *modelBuilder) pool(name string, op spec.Op, k int, inputs ...string) string {
	return b.add(spec.Node{Name: name, Op: op, Kernel: [2]int{k, k}, Stride: [2]int{k, k}, Dilation: [2]int{1, 1}},
		func(in [][]int) []int { return []int{in[0][0], in[0][1] / k, in[0][2] / k} }, inputs...)
}

func (b *modelBuilder) flatten(name string, inputs ...string) string {
	return b.add(spec.Node{Name: name, Op: spec.OpFlatten}, func(in [][]int) []int {
		return []int{numElements(in[0])}
	}, inputs...)
}

func (b *modelBuilder) binary(name string, op spec.Op, a, c string) string {
	return b.add(spec.Node{Name: name, Op: op}, func(in [][]int) []int {
		y, err := broadcast(in[0], in[1])
		if err != nil {
			return in[0]
		}
		return y
	}, a, c)
}

func (b *modelBuilder) model() *spec.Model { return &b.m }

// mlp is the classic 784-512-256-10 multilayer perceptron.
func mlp() *spec.Model {
	b := newModel("mlp", 784)
	b.dense("fc1", 512)
	b.unary("relu1", spec.OpReLU, 0)
	b.dense("fc2", 256)
	b.unary("relu2", spec.OpReLU, 0)
	b.dense("fc3", 10)
	return b.model()
}

// accumulated is a small MLP with batch norm whose optimizer steps
// average the gradients of 3 micro-batches, clipped, with AdamW.
func accumulated() *spec.Model {
	b := newModel("accumulated", 12)
	b.dense("fc1", 16)
	b.add(spec.Node{Name: "bn1", Op: spec.OpBatchNorm, Eps: 1e-5, Momentum: 0.1}, same)
	b.unary("relu1", spec.OpReLU, 0)
	b.dense("fc2", 5)
	b.m.Training.Optimizer = spec.Optimizer{Kind: "adamw", LR: 1e-3, WeightDecay: 0.01}
	b.m.Training.ClipNorm = 1
	b.m.Training.Accumulate = 3
	return b.model()
}

// lenet5 is LeCun's LeNet-5 with ReLU and max pooling.
func lenet5() *spec.Model {
	b := newModel("lenet5", 1, 28, 28)
	b.conv("conv1", 6, 5, 2)
	b.unary("relu1", spec.OpReLU, 0)
	b.pool("pool1", spec.OpMaxPool2D, 2)
	b.conv("conv2", 16, 5, 0)
	b.unary("relu2", spec.OpReLU, 0)
	b.pool("pool2", spec.OpMaxPool2D, 2)
	b.flatten("flat")
	b.dense("fc1", 120)
	b.unary("relu3", spec.OpReLU, 0)
	b.dense("fc2", 84)
	b.unary("relu4", spec.OpReLU, 0)
	b.dense("fc3", 10)
	return b.model()
}

// flagship is the MNIST model of the seed paper.
func flagship() *spec.Model {
	b := newModel("mnist", 1, 28, 28)
	b.conv("conv1", 16, 5, 2)
	b.unary("relu1", spec.OpReLU, 0)
	b.pool("pool1", spec.OpMaxPool2D, 2)
	b.conv("conv2", 32, 5, 2)
	b.unary("relu2", spec.OpReLU, 0)
	b.pool("pool2", spec.OpMaxPool2D, 2)
	b.flatten("flat")
	b.dense("fc1", 128)
	b.unary("relu3", spec.OpReLU, 0)
	b.dense("fc2", 10)
	b.m.Training.BatchSize = 250
	b.m.Dataset.Classes = 10
	return b.model()
}

// residual has a skip connection: fc1's output is read by fc2 and by add.
func residual() *spec.Model {
	b := newModel("residual", 64)
	h := b.dense("fc1", 64)
	r := b.unary("act1", spec.OpTanh, 0)
	b.dense("fc2", 64)
	b.unary("act2", spec.OpGELU, 0)
	b.binary("add", spec.OpAdd, b.last(), r)
	_ = h
	b.dense("head", 10)
	return b.model()
}

// regularised has dropout and batchnorm (over channels of an image and
// over features), trained with SGD.
func regularised() *spec.Model {
	b := newModel("regularised", 3, 8, 8)
	b.conv("conv1", 8, 3, 1)
	b.add(spec.Node{Name: "bn1", Op: spec.OpBatchNorm, Eps: 1e-5, Momentum: 0.1}, same)
	b.unary("relu1", spec.OpReLU, 0)
	b.add(spec.Node{Name: "gap", Op: spec.OpGlobalAvgPool}, func(in [][]int) []int { return in[0][:1] })
	b.dense("fc1", 32)
	b.add(spec.Node{Name: "bn2", Op: spec.OpBatchNorm, Eps: 1e-5, Momentum: 0.1}, same)
	b.unary("lrelu", spec.OpLeakyReLU, 0.1)
	b.add(spec.Node{Name: "drop", Op: spec.OpDropout, Rate: 0.5}, same)
	b.dense("fc2", 10)
	b.m.Training.Optimizer = spec.Optimizer{Kind: "sgd", LR: 0.1, Momentum: 0.9, WeightDecay: 5e-4}
	return b.model()
}

// attention is one self-attention block over 8 tokens of 16 features:
// softmax(q·kᵀ)·v, then a projection, flattened into a classifier, trained
// with AdamW and gradients clipped to norm 1.
func attention() *spec.Model {
	b := newModel("attention", 8, 16)
	x := b.last()
	q := b.dense("q", 16, x)
	k := b.dense("k", 16, x)
	v := b.dense("v", 16, x)
	kt := b.add(spec.Node{Name: "kt", Op: spec.OpTranspose, Perm: []int{1, 0}}, func(in [][]int) []int {
		return []int{in[0][1], in[0][0]}
	}, k)
	mm := func(in [][]int) []int { return []int{in[0][0], in[1][1]} }
	s := b.add(spec.Node{Name: "scores", Op: spec.OpMatMul}, mm, q, kt)
	s = b.unary("scale", spec.OpMulConst, 0.25, s)
	a := b.add(spec.Node{Name: "attn", Op: spec.OpSoftmax, Axis: -1}, same, s)
	b.add(spec.Node{Name: "ctx", Op: spec.OpMatMul}, mm, a, v)
	b.dense("proj", 16)
	b.add(spec.Node{Name: "tokens", Op: spec.OpReshape, Shape: []int{128}}, func(in [][]int) []int { return []int{128} })
	b.dense("head", 4)
	b.m.Training.Optimizer.Kind = "adamw"
	b.m.Training.Optimizer.WeightDecay = 0.01
	b.m.Training.ClipNorm = 1 // nanoGPT's recipe: clipping by the global norm
	return b.model()
}

// concat joins two convolution branches along channels, then pools.
func concatModel() *spec.Model {
	b := newModel("concat", 2, 6, 6)
	x := b.last()
	l := b.conv("left", 4, 3, 1, x)
	l = b.unary("left_act", spec.OpSigmoid, 0, l)
	r := b.conv("right", 2, 1, 0, x)
	b.add(spec.Node{Name: "join", Op: spec.OpConcat, Axis: 0}, func(in [][]int) []int {
		return []int{in[0][0] + in[1][0], in[0][1], in[0][2]}
	}, l, r)
	b.pool("pool", spec.OpAvgPool2D, 2)
	b.flatten("flat")
	b.dense("head", 3)
	b.m.Training.Loss = "mse"
	return b.model()
}

// channelSplit splits a convolution's channels into two slices (ShuffleNet's
// x.chunk(2, dim=1)), activates one and joins them again; both slices'
// gradients sum into the convolution's output gradient.
func channelSplit() *spec.Model {
	b := newModel("channel_split", 2, 5, 5)
	c := b.conv("conv", 6, 3, 1)
	piece := func(name string, start, end int) string {
		return b.add(spec.Node{Name: name, Op: spec.OpSlice, Axis: 0, Start: start, End: end}, func(in [][]int) []int {
			return []int{end - start, in[0][1], in[0][2]}
		}, c)
	}
	l := piece("left", 0, 2)
	r := piece("right", 2, 6)
	r = b.unary("right_act", spec.OpTanh, 0, r)
	b.add(spec.Node{Name: "join", Op: spec.OpConcat, Axis: 0}, func(in [][]int) []int {
		return []int{in[0][0] + in[1][0], in[0][1], in[0][2]}
	}, r, l)
	b.flatten("flat")
	b.dense("head", 3)
	return b.model()
}

// upsample brings a pooled map back to full size twice, by nearest and
// by bilinear resizing with aligned corners, and adds both to the skip
// connection (a U-Net's decoder in small); a bilinear resize to a size no
// whole factor gives follows.
func upsample() *spec.Model {
	b := newModel("upsample", 2, 6, 6)
	c := b.conv("conv", 3, 3, 1)
	p := b.pool("pool", spec.OpMaxPool2D, 2, c)
	resize := func(name, mode string, align bool, h, w int, input string) string {
		return b.add(spec.Node{Name: name, Op: spec.OpResize, Mode: mode, AlignCorners: align}, func(in [][]int) []int {
			return []int{in[0][0], h, w}
		}, input)
	}
	u := resize("up", "nearest", false, 6, 6, p)
	v := resize("smooth", "bilinear", true, 6, 6, p)
	s := b.binary("sum", spec.OpAdd, u, v)
	s = b.binary("skip", spec.OpAdd, s, c)
	resize("odd", "bilinear", false, 4, 9, s)
	b.flatten("flat")
	b.dense("head", 3)
	return b.model()
}

// views reads one flattened value twice (its gradient contributions are
// summed through views of the owner's gradient) and ends in a reshape, so
// the output itself is a view.
func views() *spec.Model {
	b := newModel("views", 2, 4, 4)
	c := b.conv("conv", 2, 3, 1)
	f := b.flatten("flat", c)
	l := b.dense("left", 8, f)
	r := b.dense("right", 8, f)
	s := b.binary("sum", spec.OpAdd, l, r)
	b.dense("head", 6, s)
	b.add(spec.Node{Name: "out", Op: spec.OpReshape, Shape: []int{6}}, same)
	b.m.Training.Loss = "mse"
	return b.model()
}

// transformerNorm normalises tokens with layernorm, then again with the
// formula older ONNX exporters write out (reducemean, sub, powconst,
// reducemean, addconst, sqrt, div), then averages the tokens away.
func transformerNorm() *spec.Model {
	b := newModel("transformer_norm", 8, 16)
	b.add(spec.Node{Name: "ln", Op: spec.OpLayerNorm, Axis: 1, Eps: 1e-5, Bias: true}, same)
	h := b.dense("fc", 16)
	mean := func(keep bool, axes ...int) func(in [][]int) []int {
		return func(in [][]int) []int {
			var out []int
			for i, d := range in[0] {
				switch {
				case !slicesContains(axes, i):
					out = append(out, d)
				case keep:
					out = append(out, 1)
				}
			}
			return out
		}
	}
	m := b.add(spec.Node{Name: "mean", Op: spec.OpReduceMean, Axes: []int{1}, KeepDims: true}, mean(true, 1), h)
	c := b.binary("centred", spec.OpSub, h, m)
	b.unary("sq", spec.OpPowConst, 2, c)
	b.add(spec.Node{Name: "variance", Op: spec.OpReduceMean, Axes: []int{1}, KeepDims: true}, mean(true, 1))
	b.unary("shifted", spec.OpAddConst, 1e-5)
	std := b.unary("std", spec.OpSqrt, 0)
	b.binary("normed", spec.OpDiv, c, std)
	b.unary("act", spec.OpErf, 0)
	b.add(spec.Node{Name: "pooled", Op: spec.OpReduceMean, Axes: []int{0}}, mean(false, 0))
	b.dense("head", 4)
	return b.model()
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// allModels are the hand-built models every test runs over.
var allModels = []struct {
	name  string
	model func() *spec.Model
}{
	{"mlp", mlp}, {"lenet5", lenet5}, {"flagship", flagship}, {"residual", residual},
	{"regularised", regularised}, {"attention", attention}, {"concat", concatModel},
	{"views", views}, {"transformer_norm", transformerNorm}, {"channel_split", channelSplit},
	{"upsample", upsample},
	{"tokens", tokens}, {"accumulated", accumulated},
}

// mustBuild builds m or fails the test.
func mustBuild(t *testing.T, m *spec.Model, opts Options) *Plan {
	t.Helper()
	p, err := Build(m, opts)
	if err != nil {
		t.Fatalf("Build(%s, %+v): %v", m.Name, opts, err)
	}
	return p
}
