package onnx

import "fmt"

// Checking past a refused node: a node that cannot be imported has no
// layer, so the nodes after it would read nothing and could not be checked,
// and a report would name only the first of several problems of a chain.
// When the refused node's output shape is known, its output is bound to a
// stand-in instead: a runtime value of that shape that belongs to no layer.
// The nodes after it are then imported as usual, and any of them that
// cannot be is reported too. The shape is known when the graph declares it
// (value_info, or the graph's output) with the batch first, or when the op
// computes an element-wise function, whose output has the (broadcast)
// shape of its inputs. Otherwise the output is poison, and the nodes that
// read it are counted as not checked.

// sameShapeOps are the ONNX ops whose output has the numpy broadcast of
// their inputs' shapes: element-wise functions, and normalisations and
// activations that keep the shape.
var sameShapeOps = map[string]bool{}

func init() {
	for _, op := range []string{
		"Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Clip", "Elu", "Selu", "Celu", "HardSigmoid",
		"HardSwish", "Softplus", "Softsign", "Mish", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
		"Cosh", "Asinh", "Acosh", "Atanh", "Shrink", "ThresholdedRelu", "PRelu", "Relu", "Sigmoid", "Tanh",
		"Exp", "Log", "LeakyRelu", "Gelu", "Sqrt", "Erf", "Reciprocal", "Softmax", "LogSoftmax", "Hardmax",
		"BatchNormalization", "InstanceNormalization", "LayerNormalization", "GroupNormalization",
		"LpNormalization", "MeanVarianceNormalization", "Dropout", "Identity",
		"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum", "Mod",
	} {
		sameShapeOps[op] = true
	}
}

// standInLayer names the layer of a stand-in value: it is no spec name
// (it has a space), so no fold or lookup finds a layer by it.
const standInLayer = "(refused node)"

// standIn binds the outputs of the refused node n to stand-ins where their
// shape is known, and poisons the others.
func (im *importer) standIn(n *Node, name string) {
	im.poison(n)
	for i, o := range n.Outputs {
		if o == "" {
			continue
		}
		shape, ok := im.declaredShape(o)
		if !ok && i == 0 && sameShapeOps[n.OpType] {
			shape, ok = im.elementwiseShape(n)
		}
		if ok {
			im.vals[o] = &value{layer: standInLayer, lshape: shape, shape: shape, standIn: name}
		}
	}
}

// declaredShape returns the per-sample shape the graph declares for a
// value, when it declares one whose first axis can be the batch and whose
// other axes are all fixed.
func (im *importer) declaredShape(name string) ([]int, bool) {
	g := im.m.Graph
	for _, list := range [][]*ValueInfo{g.ValueInfo, g.Outputs} {
		for _, vi := range list {
			if vi.Name != name || !vi.HasShape || len(vi.Dims) < 2 {
				continue
			}
			if b := vi.Dims[0]; b.Known && int(b.Value) != max(im.batchN, 1) {
				return nil, false
			}
			var shape []int
			for _, d := range vi.Dims[1:] {
				if !d.Known || d.Value < 1 || d.Value > MaxElements {
					return nil, false
				}
				shape = append(shape, int(d.Value))
			}
			if checkShape(toInt64s(shape)) != nil {
				return nil, false
			}
			return shape, true
		}
	}
	return nil, false
}

// elementwiseShape returns the per-sample shape an element-wise node
// computes from its inputs, when every input is known and the broadcast
// keeps the batch axis first.
func (im *importer) elementwiseShape(n *Node) ([]int, bool) {
	var out []int
	runtime := false
	for _, in := range n.Inputs {
		if in == "" {
			continue
		}
		v, ok := im.vals[in]
		if !ok || v.poison || v.lazy != nil || v.moved != nil || v.pad != [4]int{} {
			return nil, false
		}
		dims := v.fullDims()
		if v.konst == nil {
			runtime = true
		}
		if out == nil {
			out = dims
			continue
		}
		if out, ok = broadcastShapes(out, dims); !ok {
			return nil, false
		}
	}
	if !runtime || len(out) < 2 || out[0] != -1 {
		return nil, false
	}
	return out[1:], true
}

// fromRefused says, for a problem of a node that reads a stand-in, that
// the problem may follow from the refused node before it.
func fromRefused(node string) string {
	return fmt.Sprintf(" (its input comes from refused node %s, whose output was taken to have the shape the graph declares or its inputs give; this may follow from that node's problem)", node)
}
