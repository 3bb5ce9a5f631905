package onnx

import (
	"slices"
	"strings"
	"testing"
)

// writtenNorm is the layer normalisation PyTorch writes before opset 17,
// over the last axis of [T, C] samples, with square as the square node
// ("Pow" or "Mul") and the affine transform when affine is set.
func writtenNorm(square string, affine bool, axes []int64) *Model {
	c := int64(4)
	inits := []*Tensor{NewFloatTensor("two", nil, []float32{2}), NewFloatTensor("eps", nil, []float32{1e-5})}
	sq := node("Pow", "/ln/Pow", []string{"d", "two"}, []string{"sq"})
	if square == "Mul" {
		sq = node("Mul", "/ln/Mul_sq", []string{"d", "d"}, []string{"sq"})
	}
	ax := &Attribute{Name: "axes", Type: AttrInts, Ints: axes}
	nodes := []*Node{
		node("ReduceMean", "/ln/ReduceMean", []string{"x"}, []string{"mean"}, ax),
		node("Sub", "/ln/Sub", []string{"x", "mean"}, []string{"d"}),
		sq,
		node("ReduceMean", "/ln/ReduceMean_1", []string{"sq"}, []string{"var"}, ax),
		node("Add", "/ln/Add", []string{"var", "eps"}, []string{"ve"}),
		node("Sqrt", "/ln/Sqrt", []string{"ve"}, []string{"std"}),
		node("Div", "/ln/Div", []string{"d", "std"}, []string{"n"}),
	}
	out := "n"
	if affine {
		inits = append(inits, NewFloatTensor("w", []int64{c}, []float32{1, 2, 3, 4}), NewFloatTensor("b", []int64{c}, []float32{-1, 0, 1, 2}))
		nodes = append(nodes,
			node("Mul", "/ln/Mul", []string{"n", "w"}, []string{"nw"}),
			node("Add", "/ln/Add_1", []string{"b", "nw"}, []string{"y"}))
		out = "y"
	}
	return graphModel([]int{3, int(c)}, inits, out, nodes...)
}

// TestImportWrittenLayerNorm: the written-out formula becomes one
// layernorm layer (its weight and bias from the Mul and Add, or none).
func TestImportWrittenLayerNorm(t *testing.T) {
	for _, tc := range []struct {
		square string
		affine bool
	}{{"Pow", true}, {"Mul", true}, {"Pow", false}} {
		im, err := Import(writtenNorm(tc.square, tc.affine, []int64{-1}))
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if len(im.Layers) != 1 || im.Layers[0].Op != "layernorm" || im.Layers[0].Name != "ln" {
			t.Fatalf("%+v: layers %+v", tc, im.Layers)
		}
		l := im.Layers[0]
		if tc.affine {
			if len(l.Params) != 2 || !slices.Equal(l.Params[0].Data, []float32{1, 2, 3, 4}) || !slices.Equal(l.Params[1].Data, []float32{-1, 0, 1, 2}) {
				t.Errorf("%+v: params %+v", tc, l.Params)
			}
			if len(l.Fields) != 0 {
				t.Errorf("%+v: fields %+v, want the defaults (last axis, eps 1e-5, bias)", tc, l.Fields)
			}
		} else {
			if len(l.Params) != 1 || !slices.Equal(l.Params[0].Data, []float32{1, 1, 1, 1}) {
				t.Errorf("%+v: params %+v", tc, l.Params)
			}
			if !slices.Equal(l.Fields, []Field{{"bias", false}}) {
				t.Errorf("%+v: fields %+v", tc, l.Fields)
			}
		}
		for _, mp := range im.Mapping {
			if !strings.Contains(mp.How, "layer normalisation") {
				t.Errorf("%+v: node %s: %s", tc, mp.Node, mp.How)
			}
		}
	}
}

// TestImportWrittenLayerNormOpset18: from opset 18 ReduceMean reads its
// axes from an input.
func TestImportWrittenLayerNormOpset18(t *testing.T) {
	m := writtenNorm("Pow", true, nil)
	m.Opsets[0].Version = 18
	m.Graph.Initializers = append(m.Graph.Initializers, NewInt64Tensor("axes", []int64{1}, []int64{-1}))
	for _, n := range m.Graph.Nodes {
		if n.OpType == "ReduceMean" {
			n.Attrs = nil
			n.Inputs = append(n.Inputs, "axes")
		}
	}
	im, err := Import(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 1 || im.Layers[0].Op != "layernorm" {
		t.Errorf("layers %+v", im.Layers)
	}
}

// TestImportWrittenLayerNormFallback: means over an axis that is not the
// last are not a layer normalisation of mlbuild's kind; the nodes are
// imported one by one, and the Mul by a per-channel constant tensor and
// the Add of one are reported.
func TestImportWrittenLayerNormFallback(t *testing.T) {
	im, err := Import(writtenNorm("Pow", false, []int64{1}))
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, l := range im.Layers {
		ops = append(ops, l.Op)
	}
	if want := []string{"reducemean", "sub", "powconst", "reducemean", "addconst", "sqrt", "div"}; !slices.Equal(ops, want) {
		t.Errorf("layers %v, want %v", ops, want)
	}
	// the Add of the bias after it is checked on a stand-in of the Mul's
	// shape, and is refused for the same reason
	_, err = Import(writtenNorm("Pow", true, []int64{1}))
	if ie, ok := err.(*ImportError); !ok || len(ie.Problems) != 2 || ie.Problems[0].Op != "Mul" || ie.Problems[1].Op != "Add" {
		t.Errorf("error %v, want the Mul and the Add reported", err)
	}
}

// TestImportNormErrors: what cannot be imported says why.
func TestImportNormErrors(t *testing.T) {
	for _, tc := range []struct {
		n    *Node
		want string
	}{
		{node("LayerNormalization", "ln", []string{"x", "s"}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}), "normalises over the batch axis"},
		{node("LayerNormalization", "ln", []string{"x", "x"}, []string{"y"}), "depends on the model input"},
		{node("ReduceMean", "m", []string{"x"}, []string{"y"}), "without axes averages over every axis, the batch axis included"},
		{node("ReduceMean", "m", []string{"x"}, []string{"y"}, &Attribute{Name: "axes", Type: AttrInts, Ints: []int64{-3}}), "over the batch axis"},
		{node("Pow", "p", []string{"x", "x"}, []string{"y"}), "mlbuild raises values only to a constant power"},
		{node("Pow", "p", []string{"x", "s"}, []string{"y"}), "with different values"},
	} {
		m := graphModel([]int{3, 4}, []*Tensor{NewFloatTensor("s", []int64{4}, []float32{1, 2, 3, 4})}, "y", tc.n)
		m.Opsets[0].Version = 17
		_, err := Import(m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.n.OpType, err, tc.want)
		}
	}
}

// TestImportLayerNormalization: the opset-17 op with a scale broadcast
// over two normalised axes, its epsilon and axis kept.
func TestImportLayerNormalization(t *testing.T) {
	m := graphModel([]int{2, 3}, []*Tensor{NewFloatTensor("s", []int64{1, 3}, []float32{1, 2, 3})}, "y",
		node("LayerNormalization", "/ln/LayerNormalization", []string{"x", "s"}, []string{"y"},
			&Attribute{Name: "axis", Type: AttrInt, I: -2}, &Attribute{Name: "epsilon", Type: AttrFloat, F: 1e-3}))
	m.Opsets[0].Version = 17
	im, err := Import(m)
	if err != nil {
		t.Fatal(err)
	}
	l := im.Layers[0]
	if l.Op != "layernorm" || !slices.Equal(l.Params[0].Shape, []int{2, 3}) || !slices.Equal(l.Params[0].Data, []float32{1, 2, 3, 1, 2, 3}) || len(l.Params) != 1 {
		t.Errorf("layer %+v", l)
	}
	if want := []Field{{"axis", 0}, {"eps", 0.001}, {"bias", false}}; !slices.Equal(l.Fields, want) {
		t.Errorf("fields %+v, want %+v", l.Fields, want)
	}
}

// TestImportWrittenLayerNormIdentityWeight: PyTorch writes a parameter
// equal to an earlier one (two LayerNorms' initial weights) as an Identity
// of it; the weight is still a constant, and the Mul and Add still fold.
func TestImportWrittenLayerNormIdentityWeight(t *testing.T) {
	m := writtenNorm("Pow", true, []int64{-1})
	g := m.Graph
	for _, n := range g.Nodes {
		if n.Name == "/ln/Mul" {
			n.Inputs[1] = "w_again"
		}
	}
	g.Nodes = append([]*Node{node("Identity", "Identity_0", []string{"w"}, []string{"w_again"})}, g.Nodes...)
	im, err := Import(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 1 || im.Layers[0].Op != "layernorm" || !slices.Equal(im.Layers[0].Params[0].Data, []float32{1, 2, 3, 4}) {
		t.Errorf("layers %+v", im.Layers)
	}
}
