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
		return nil, &spec.Error{Pos: n.Pos, Layer: n.Name, Message: fmt.Sprintf("the first layer must be the input, not %s", n.Op)}
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
		return nil, &spec.Error{Pos: n.Pos, Layer: m.Output, Message: "the model's output names no layer"}
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
	return &spec.Error{Pos: n.Pos, Layer: n.Name, Message: fmt.Sprintf(format, args...)}
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
		return l.denseParams(n)
	case spec.OpConv2D, spec.OpConv1D:
		return l.convParams(n)
	case spec.OpBatchNorm:
		return l.batchNormParams(n)
	case spec.OpLayerNorm:
		return l.layerNormParams(n)
	case spec.OpEmbedding:
		return l.embeddingParams(n)
	}
	return nil
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

// lowerNode adds the buffers and steps of one node.
func (l *lowering) lowerNode(n *spec.Node) error {
	if _, dup := l.value[n.Name]; dup {
		return fail(n, "a second layer is called %q", n.Name)
	}
	if op, ok := unaryOps[n.Op]; ok {
		return l.lowerUnary(n, op)
	}
	if op, ok := binaryOps[n.Op]; ok {
		return l.lowerBinary(n, op)
	}
	switch n.Op {
	case spec.OpInput:
		return l.lowerInput(n)
	case spec.OpDense:
		return l.lowerDense(n)
	case spec.OpConv2D, spec.OpMaxPool2D, spec.OpAvgPool2D, spec.OpConv1D, spec.OpMaxPool1D, spec.OpAvgPool1D:
		return l.lowerWindow(n)
	case spec.OpGlobalAvgPool:
		return l.lowerGlobalAvgPool(n)
	case spec.OpResize:
		return l.lowerResize(n)
	case spec.OpFlatten, spec.OpReshape:
		return l.lowerView(n)
	case spec.OpTranspose:
		return l.lowerTranspose(n)
	case spec.OpSoftmax, spec.OpLogSoftmax:
		return l.lowerSoftmax(n)
	case spec.OpDropout:
		return l.lowerDropout(n)
	case spec.OpBatchNorm:
		return l.lowerBatchNorm(n)
	case spec.OpMatMul:
		return l.lowerMatMul(n)
	case spec.OpLayerNorm:
		return l.lowerLayerNorm(n)
	case spec.OpReduceMean:
		return l.lowerReduceMean(n)
	case spec.OpConcat:
		return l.lowerConcat(n)
	case spec.OpSlice:
		return l.lowerSlice(n)
	case spec.OpEmbedding:
		return l.lowerEmbedding(n)
	}
	return fail(n, "the planner cannot lower op %q", n.Op)
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

// lowerInput adds the model's input buffer; a model has one input layer.
func (l *lowering) lowerInput(n *spec.Node) error {
	if l.p.Input != NoBuf {
		return fail(n, "a model has one input layer")
	}
	id := l.p.addBuffer(n.Name+".out", KindInput, withBatch(l.batch, n.OutShape))
	l.value[n.Name] = id
	l.p.Input = id
	return nil
}
