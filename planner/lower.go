package planner

import (
	"fmt"
	"math"

	"github.com/mlbuild/mlbuild/spec"
)

// lower turns the spec's nodes into forward steps and buffers.
//
// Before: m is a validated spec.Model (nodes in topological order, Nodes[0]
// the input, every per-sample shape known).
// After: the plan has every param and statistic (in spec order, PyTorch
// state_dict names, before any other buffer so that their IDs do not depend
// on fusion), the input buffer, one buffer per node output with the batch
// dimension first, the Forward phase, and Output. Flatten and reshape (and
// dropout in an inference plan) are views of their input with no step.
// Backward, Update and the memory plan are empty.
func lower(m *spec.Model, batch int, training bool) (*Plan, error) {
	l := &lowering{
		m: m, batch: batch, training: training,
		p: &Plan{
			Model: m.Name, Batch: batch, Training: training,
			Input: NoBuf, Labels: NoBuf, Output: NoBuf, Loss: NoBuf,
		},
		value:  map[string]BufID{},
		params: map[string]BufID{},
	}
	if m.Nodes[0].Op != spec.OpInput {
		n := &m.Nodes[0]
		return nil, &Error{Pos: n.Pos, Layer: n.Name, Msg: fmt.Sprintf("the first layer must be the input, not %s", n.Op)}
	}
	for i := range m.Nodes {
		if err := l.declareParams(&m.Nodes[i]); err != nil {
			return nil, err
		}
	}
	for i := range m.Nodes {
		if err := l.lowerNode(&m.Nodes[i]); err != nil {
			return nil, err
		}
	}
	out, ok := l.value[m.Output]
	if !ok {
		n := &m.Nodes[len(m.Nodes)-1]
		return nil, &Error{Pos: n.Pos, Layer: m.Output, Msg: "the model's output names no layer"}
	}
	l.p.Output = out
	return l.p, nil
}

// lowering is the state of one lower call.
type lowering struct {
	m        *spec.Model
	p        *Plan
	batch    int
	training bool
	value    map[string]BufID // node name -> buffer holding its output
	params   map[string]BufID // param name -> buffer
}

// fail makes a positioned error about node n.
func fail(n *spec.Node, format string, args ...any) error {
	return &Error{Pos: n.Pos, Layer: n.Name, Msg: fmt.Sprintf(format, args...)}
}

// addParam declares one param (or statistic) of layer n.
func (l *lowering) addParam(n *spec.Node, suffix string, shape []int, trainable bool, init string, fanIn int) {
	name := n.Name + "." + suffix
	kind := KindParam
	if !trainable {
		kind = KindStat
	}
	id := l.p.addBuffer(name, kind, shape)
	pr := Param{Name: name, Buf: id, Grad: NoBuf, Trainable: trainable, Init: init, Layer: n.Name}
	if init == "uniform" {
		pr.Bound = 1 / math.Sqrt(float64(fanIn))
	}
	l.p.Params = append(l.p.Params, pr)
	l.params[name] = id
}

// declareParams adds the params of n in PyTorch's order: weight, bias,
// then batchnorm's running statistics. Weights and biases are drawn from
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default for Linear and Conv2d.
func (l *lowering) declareParams(n *spec.Node) error {
	switch n.Op {
	case spec.OpDense:
		in, err := l.inShape(n, 0)
		if err != nil {
			return err
		}
		if len(in) == 0 {
			return fail(n, "dense needs an input with at least one axis")
		}
		k, units := in[len(in)-1], l.units(n)
		l.addParam(n, "weight", []int{units, k}, true, "uniform", k)
		if n.Bias {
			l.addParam(n, "bias", []int{units}, true, "uniform", k)
		}
	case spec.OpConv2D:
		in, err := l.inShape(n, 0)
		if err != nil {
			return err
		}
		if len(in) != 3 || len(n.OutShape) != 3 {
			return fail(n, "conv2d needs a [channels, height, width] input, got %s", shapeString(in))
		}
		groups := max(n.Groups, 1)
		if in[0]%groups != 0 {
			return fail(n, "%d input channels do not split into %d groups", in[0], groups)
		}
		oc := n.OutShape[0]
		fanIn := in[0] / groups * n.Kernel[0] * n.Kernel[1]
		l.addParam(n, "weight", []int{oc, in[0] / groups, n.Kernel[0], n.Kernel[1]}, true, "uniform", fanIn)
		if n.Bias {
			l.addParam(n, "bias", []int{oc}, true, "uniform", fanIn)
		}
	case spec.OpBatchNorm:
		in, err := l.inShape(n, 0)
		if err != nil {
			return err
		}
		if len(in) == 0 {
			return fail(n, "batchnorm needs an input with a channel axis")
		}
		c := []int{in[0]}
		l.addParam(n, "weight", c, true, "ones", 0)
		l.addParam(n, "bias", c, true, "zeros", 0)
		l.addParam(n, "running_mean", c, false, "zeros", 0)
		l.addParam(n, "running_var", c, false, "ones", 0)
	case spec.OpLayerNorm:
		in, err := l.inShape(n, 0)
		if err != nil {
			return err
		}
		if n.Axis < 0 || n.Axis >= len(in) {
			return fail(n, "layernorm axis %d is not an axis of %s", n.Axis, shapeString(in))
		}
		norm := append([]int(nil), in[n.Axis:]...)
		l.addParam(n, "weight", norm, true, "ones", 0)
		if n.Bias {
			l.addParam(n, "bias", norm, true, "zeros", 0)
		}
	}
	return nil
}

// units is the output width of a dense layer.
func (l *lowering) units(n *spec.Node) int {
	if n.Units > 0 {
		return n.Units
	}
	if len(n.OutShape) > 0 {
		return n.OutShape[len(n.OutShape)-1]
	}
	return 0
}

// inShape returns the per-sample shape of n's i-th input.
func (l *lowering) inShape(n *spec.Node, i int) ([]int, error) {
	if i >= len(n.InShapes) {
		return nil, fail(n, "%s needs %d inputs, has %d", n.Op, i+1, len(n.InShapes))
	}
	return n.InShapes[i], nil
}

// input returns the buffer of n's i-th input.
func (l *lowering) input(n *spec.Node, i int) (BufID, error) {
	if i >= len(n.Inputs) {
		return NoBuf, fail(n, "%s needs %d inputs, has %d", n.Op, i+1, len(n.Inputs))
	}
	id, ok := l.value[n.Inputs[i]]
	if !ok {
		return NoBuf, fail(n, "input %q is not a layer defined before this one", n.Inputs[i])
	}
	return id, nil
}

// param returns the buffer of n's param suffix, or NoBuf.
func (l *lowering) param(n *spec.Node, suffix string) BufID {
	if id, ok := l.params[n.Name+"."+suffix]; ok {
		return id
	}
	return NoBuf
}

// output adds the buffer of n's output, [batch, OutShape...].
func (l *lowering) output(n *spec.Node) BufID {
	id := l.p.addBuffer(n.Name+".out", KindActivation, withBatch(l.batch, n.OutShape))
	l.value[n.Name] = id
	return id
}

// emit appends a forward step.
func (l *lowering) emit(n *spec.Node, k Kernel, in, out []BufID, attr Attr) {
	l.p.Forward = append(l.p.Forward, Step{Kernel: k, Layer: n.Name, In: in, Out: out, Attr: attr})
}

// unaryOps maps element-wise spec ops to their chain op.
var unaryOps = map[spec.Op]string{
	spec.OpReLU: "relu", spec.OpLeakyReLU: "leakyrelu", spec.OpSigmoid: "sigmoid",
	spec.OpTanh: "tanh", spec.OpGELU: "gelu", spec.OpExp: "exp", spec.OpLog: "log",
	spec.OpAddConst: "addconst", spec.OpMulConst: "mulconst",
	spec.OpSqrt: "sqrt", spec.OpPowConst: "powconst", spec.OpErf: "erf",
	spec.OpReLU6: "relu6",
}

// unaryConstants are the element-wise ops with a constant (UnaryOp.Alpha).
var unaryConstants = map[spec.Op]bool{spec.OpLeakyReLU: true, spec.OpAddConst: true, spec.OpMulConst: true, spec.OpPowConst: true}

// binaryOps maps two-operand element-wise spec ops to their BinOp.
var binaryOps = map[spec.Op]string{spec.OpAdd: "add", spec.OpSub: "sub", spec.OpMul: "mul", spec.OpDiv: "div"}

// lowerNode adds the buffers and steps of one node.
func (l *lowering) lowerNode(n *spec.Node) error {
	if _, dup := l.value[n.Name]; dup {
		return fail(n, "a second layer is called %q", n.Name)
	}
	if op, ok := unaryOps[n.Op]; ok {
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		u := UnaryOp{Op: op}
		if unaryConstants[n.Op] {
			u.Alpha = n.Alpha
		}
		l.emit(n, KUnary, []BufID{x}, []BufID{l.output(n)}, Attr{Chain: []UnaryOp{u}})
		return nil
	}
	if op, ok := binaryOps[n.Op]; ok {
		return l.lowerBinary(n, op)
	}
	switch n.Op {
	case spec.OpInput:
		if l.p.Input != NoBuf {
			return fail(n, "a model has one input layer")
		}
		id := l.p.addBuffer(n.Name+".out", KindInput, withBatch(l.batch, n.OutShape))
		l.value[n.Name] = id
		l.p.Input = id
	case spec.OpDense:
		return l.lowerDense(n)
	case spec.OpConv2D, spec.OpMaxPool2D, spec.OpAvgPool2D:
		return l.lowerWindow(n)
	case spec.OpGlobalAvgPool:
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		l.emit(n, KGlobalAvgPool, []BufID{x}, []BufID{l.output(n)}, Attr{})
	case spec.OpFlatten, spec.OpReshape:
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		if numElements(n.OutShape) != numElements(l.p.shapeOf(x)[1:]) {
			return fail(n, "%s changes the number of elements: %s to %s", n.Op, shapeString(l.p.shapeOf(x)[1:]), shapeString(n.OutShape))
		}
		l.value[n.Name] = l.p.addView(n.Name+".out", x, withBatch(l.batch, n.OutShape))
	case spec.OpTranspose:
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		perm := []int{0}
		for _, a := range n.Perm {
			perm = append(perm, a+1)
		}
		l.emit(n, KTranspose, []BufID{x}, []BufID{l.output(n)}, Attr{Perm: perm})
	case spec.OpSoftmax, spec.OpLogSoftmax:
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		k := KSoftmax
		if n.Op == spec.OpLogSoftmax {
			k = KLogSoftmax
		}
		axis, err := fullAxis(n, n.Axis, len(n.OutShape))
		if err != nil {
			return err
		}
		l.emit(n, k, []BufID{x}, []BufID{l.output(n)}, Attr{Axis: axis})
	case spec.OpDropout:
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		if !l.training {
			// Evaluation mode: dropout is the identity, so a view suffices.
			l.value[n.Name] = l.p.addView(n.Name+".out", x, l.p.shapeOf(x))
			return nil
		}
		y := l.output(n)
		mask := l.p.addBuffer(n.Name+".mask", KindScratch, l.p.shapeOf(y))
		l.emit(n, KDropout, []BufID{x}, []BufID{y, mask}, Attr{Rate: n.Rate})
	case spec.OpBatchNorm:
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		y := l.output(n)
		c := []int{n.InShapes[0][0]}
		mean := l.p.addBuffer(n.Name+".save_mean", KindScratch, c)
		invStd := l.p.addBuffer(n.Name+".save_invstd", KindScratch, c)
		eps, momentum := n.Eps, n.Momentum
		if eps == 0 {
			eps = 1e-5
		}
		if momentum == 0 {
			momentum = 0.1
		}
		l.emit(n, KBatchNorm,
			[]BufID{x, l.param(n, "weight"), l.param(n, "bias"), l.param(n, "running_mean"), l.param(n, "running_var")},
			[]BufID{y, mean, invStd}, Attr{Eps: eps, Momentum: momentum})
	case spec.OpMatMul:
		return l.lowerMatMul(n)
	case spec.OpLayerNorm:
		x, err := l.input(n, 0)
		if err != nil {
			return err
		}
		in := n.InShapes[0]
		if n.Axis < 0 || n.Axis >= len(in) {
			return fail(n, "layernorm axis %d is not an axis of %s", n.Axis, shapeString(in))
		}
		eps := n.Eps
		if eps == 0 {
			eps = 1e-5
		}
		rows := []int{l.batch * numElements(in[:n.Axis])}
		y := l.output(n)
		mean := l.p.addBuffer(n.Name+".save_mean", KindScratch, rows)
		invStd := l.p.addBuffer(n.Name+".save_invstd", KindScratch, rows)
		l.emit(n, KLayerNorm, []BufID{x, l.param(n, "weight"), l.param(n, "bias")}, []BufID{y, mean, invStd},
			Attr{Axis: n.Axis + 1, Eps: eps})
	case spec.OpReduceMean:
		return l.lowerReduceMean(n)
	case spec.OpConcat:
		var in []BufID
		for i := range n.Inputs {
			x, err := l.input(n, i)
			if err != nil {
				return err
			}
			in = append(in, x)
		}
		axis, err := fullAxis(n, n.Axis, len(n.OutShape))
		if err != nil {
			return err
		}
		l.emit(n, KConcat, in, []BufID{l.output(n)}, Attr{Axis: axis})
	default:
		return fail(n, "the planner cannot lower op %q", n.Op)
	}
	return nil
}

// fullAxis turns a per-sample axis (negative counts from the end) into an
// axis of the full shape.
func fullAxis(n *spec.Node, axis, rank int) (int, error) {
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return 0, fail(n, "axis %d is out of range for a shape of rank %d", axis, rank)
	}
	return axis + 1, nil
}

// lowerDense lowers a dense layer. An input with more than one per-sample
// axis is viewed as a matrix of rows (PyTorch's Linear applies to the last
// axis), so the gemm kernel always sees [rows, in].
func (l *lowering) lowerDense(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	in := n.InShapes[0]
	y := l.output(n)
	w, b := l.param(n, "weight"), l.param(n, "bias")
	if len(in) > 1 {
		rows := l.batch * numElements(in[:len(in)-1])
		x = l.p.addView(n.Name+".in_rows", x, []int{rows, in[len(in)-1]})
		y = l.p.addView(n.Name+".out_rows", y, []int{rows, l.units(n)})
	}
	l.emit(n, KGemm, []BufID{x, w, b}, []BufID{y}, Attr{})
	return nil
}

// window returns the geometry of a conv2d or pooling node.
func (l *lowering) window(n *spec.Node) (ConvGeom, error) {
	in := n.InShapes[0]
	if len(in) != 3 || len(n.OutShape) != 3 {
		return ConvGeom{}, fail(n, "%s needs a [channels, height, width] input, got %s", n.Op, shapeString(in))
	}
	g := ConvGeom{
		N: l.batch, C: in[0], H: in[1], W: in[2],
		OC: n.OutShape[0], OH: n.OutShape[1], OW: n.OutShape[2],
		KH: n.Kernel[0], KW: n.Kernel[1],
		SH: n.Stride[0], SW: n.Stride[1],
		PH: n.Padding[0], PW: n.Padding[1],
		DH: max(n.Dilation[0], 1), DW: max(n.Dilation[1], 1),
		Groups: 1,
	}
	if n.Op == spec.OpConv2D {
		g.Groups = max(n.Groups, 1)
		g.SH, g.SW = max(g.SH, 1), max(g.SW, 1)
	} else {
		// Pooling strides default to the window, as in PyTorch.
		if g.SH == 0 {
			g.SH = g.KH
		}
		if g.SW == 0 {
			g.SW = g.KW
		}
	}
	if g.KH < 1 || g.KW < 1 {
		return g, fail(n, "%s needs a kernel size, got %dx%d", n.Op, g.KH, g.KW)
	}
	return g, nil
}

// lowerWindow lowers conv2d, maxpool2d and avgpool2d.
func (l *lowering) lowerWindow(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	g, err := l.window(n)
	if err != nil {
		return err
	}
	y := l.output(n)
	switch n.Op {
	case spec.OpConv2D:
		// The workspace (Out[1]) is the backend's to size: chooseMethods.
		l.emit(n, KConv2D, []BufID{x, l.param(n, "weight"), l.param(n, "bias")}, []BufID{y, NoBuf}, Attr{Conv: &g})
	case spec.OpMaxPool2D:
		l.emit(n, KMaxPool2D, []BufID{x}, []BufID{y}, Attr{Conv: &g})
	case spec.OpAvgPool2D:
		l.emit(n, KAvgPool2D, []BufID{x}, []BufID{y}, Attr{Conv: &g})
	}
	return nil
}

// padRank views x as a shape of rank with leading 1s inserted after the
// batch axis, so that per-sample broadcasting (numpy's, aligned right) is
// still right once the batch axis leads both operands.
func (l *lowering) padRank(n *spec.Node, x BufID, rank int, which string) BufID {
	s := l.p.shapeOf(x)
	if len(s) >= rank {
		return x
	}
	padded := []int{s[0]}
	for range rank - len(s) {
		padded = append(padded, 1)
	}
	padded = append(padded, s[1:]...)
	return l.p.addView(n.Name+"."+which+"_view", x, padded)
}

// lowerBinary lowers add, sub and mul.
func (l *lowering) lowerBinary(n *spec.Node, op string) error {
	a, err := l.input(n, 0)
	if err != nil {
		return err
	}
	b, err := l.input(n, 1)
	if err != nil {
		return err
	}
	rank := max(len(l.p.shapeOf(a)), len(l.p.shapeOf(b)))
	a, b = l.padRank(n, a, rank, "a"), l.padRank(n, b, rank, "b")
	l.emit(n, KBinary, []BufID{a, b}, []BufID{l.output(n)}, Attr{BinOp: op})
	return nil
}

// lowerReduceMean lowers a mean over per-sample axes. The kernel writes a
// buffer that keeps the reduced axes with size 1; without keepdims the
// node's value is a view of it with those axes dropped.
func (l *lowering) lowerReduceMean(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	in := n.InShapes[0]
	kept := append([]int(nil), in...)
	for _, a := range n.Axes {
		if a < 0 || a >= len(in) {
			return fail(n, "reducemean axis %d is not an axis of %s", a, shapeString(in))
		}
		kept[a] = 1
	}
	if numElements(kept) != numElements(n.OutShape) {
		return fail(n, "reducemean of %s over axes %v gives %s, not %s", shapeString(in), n.Axes, shapeString(kept), shapeString(n.OutShape))
	}
	if n.KeepDims {
		l.emit(n, KReduceMean, []BufID{x}, []BufID{l.output(n)}, Attr{})
		return nil
	}
	y := l.p.addBuffer(n.Name+".mean", KindActivation, withBatch(l.batch, kept))
	l.emit(n, KReduceMean, []BufID{x}, []BufID{y}, Attr{})
	l.value[n.Name] = l.p.addView(n.Name+".out", y, withBatch(l.batch, n.OutShape))
	return nil
}

// lowerMatMul lowers a batched matrix product of two layers' outputs.
func (l *lowering) lowerMatMul(n *spec.Node) error {
	a, err := l.input(n, 0)
	if err != nil {
		return err
	}
	b, err := l.input(n, 1)
	if err != nil {
		return err
	}
	if len(l.p.shapeOf(a)) < 3 || len(l.p.shapeOf(b)) < 3 {
		return fail(n, "matmul needs operands with at least two per-sample axes, got %s and %s",
			shapeString(l.p.shapeOf(a)[1:]), shapeString(l.p.shapeOf(b)[1:]))
	}
	rank := max(len(l.p.shapeOf(a)), len(l.p.shapeOf(b)))
	a, b = l.padRank(n, a, rank, "a"), l.padRank(n, b, rank, "b")
	l.emit(n, KMatMul, []BufID{a, b}, []BufID{l.output(n)}, Attr{})
	return nil
}
