package onnx

import (
	"slices"
	"strings"
	"testing"
)

func problemsOf(t *testing.T, m *Model) *ImportError {
	t.Helper()
	_, err := Import(m)
	ie, ok := err.(*ImportError)
	if !ok {
		t.Fatalf("error %v is not an *ImportError", err)
	}
	return ie
}

func nodesOf(ie *ImportError) []string {
	var got []string
	for _, p := range ie.Problems {
		got = append(got, p.Node+" "+p.Op)
	}
	return got
}

// TestImportChecksPastRefusedNode: in a chain, the nodes after a refused
// one are still checked, on a stand-in of its output's shape, and each
// that cannot be imported is reported: before, only the first was.
func TestImportChecksPastRefusedNode(t *testing.T) {
	m := graphModel([]int{3, 8, 8}, nil, "y",
		node("Abs", "abs", []string{"x"}, []string{"a"}),
		node("Relu", "relu", []string{"a"}, []string{"r"}),
		node("MaxPool", "pool", []string{"r"}, []string{"p"},
			&Attribute{Name: "kernel_shape", Type: AttrInts, Ints: []int64{3, 3}},
			&Attribute{Name: "strides", Type: AttrInts, Ints: []int64{2, 2}},
			&Attribute{Name: "auto_pad", Type: AttrString, S: []byte("SAME_MIDDLE")}),
		node("Floor", "floor", []string{"p"}, []string{"f"}),
		node("Softmax", "soft", []string{"f"}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}),
	)
	// the MaxPool's output shape is declared, as shape inference writes it
	m.Graph.ValueInfo = []*ValueInfo{{Name: "p", ElemType: Float, HasShape: true,
		Dims: []Dim{{Param: "N"}, {Value: 3, Known: true}, {Value: 4, Known: true}, {Value: 4, Known: true}}}}
	ie := problemsOf(t, m)
	if want := []string{`"abs" Abs`, `"pool" MaxPool`, `"floor" Floor`, `"soft" Softmax`}; !slices.Equal(nodesOf(ie), want) {
		t.Errorf("problems %v, want %v", nodesOf(ie), want)
	}
	if !strings.Contains(ie.Problems[1].Why, `auto_pad "SAME_MIDDLE"`) || !strings.Contains(ie.Problems[1].Why, `its input comes from refused node "abs"`) {
		t.Errorf("the MaxPool's problem: %s", ie.Problems[1].Why)
	}
	if ie.Unchecked != 0 {
		t.Errorf("%d unchecked, want 0", ie.Unchecked)
	}

	// without the declared shape, the MaxPool's output is unknown: the
	// Softmax after it is counted, not checked (the Floor is an op mlbuild
	// lacks, which needs no input to tell)
	m.Graph.ValueInfo = nil
	ie = problemsOf(t, m)
	if want := []string{`"abs" Abs`, `"pool" MaxPool`, `"floor" Floor`}; !slices.Equal(nodesOf(ie), want) || ie.Unchecked != 1 {
		t.Errorf("problems %v, %d unchecked; want %v, 1", nodesOf(ie), ie.Unchecked, want)
	}
	if !strings.Contains(ie.Error(), "1 more node(s) read values of the nodes above whose shape is not known, and were not checked") {
		t.Errorf("the report does not count the unchecked nodes:\n%s", ie.Error())
	}
}

// TestImportWrittenTwice: a value written by two nodes, or a node's output
// that is also an initializer, is refused naming both writers.
func TestImportWrittenTwice(t *testing.T) {
	m := graphModel([]int{4}, []*Tensor{NewFloatTensor("w", []int64{4}, ones(4))}, "y",
		node("Relu", "first", []string{"x"}, []string{"y"}),
		node("Sigmoid", "second", []string{"x"}, []string{"y"}),
		node("Tanh", "third", []string{"x"}, []string{"w"}),
	)
	ie := problemsOf(t, m)
	if want := []string{`"second" Sigmoid`, `"third" Tanh`}; !slices.Equal(nodesOf(ie), want) {
		t.Fatalf("problems %v, want %v", nodesOf(ie), want)
	}
	if w := ie.Problems[0].Why; !strings.Contains(w, `writes value "y", which node "first" (Relu) writes too`) {
		t.Errorf("problem: %s", w)
	}
	if w := ie.Problems[1].Why; !strings.Contains(w, `writes value "w", which initializer "w" writes too`) {
		t.Errorf("problem: %s", w)
	}
}

// TestImportOpsetTooNew: a model of an opset newer than MaxOpset is
// refused, saying which opsets the importer knows and how to re-export;
// MaxOpset itself is read.
func TestImportOpsetTooNew(t *testing.T) {
	m := graphModel([]int{4}, nil, "y", node("Relu", "r", []string{"x"}, []string{"y"}))
	m.Opsets[0].Version = MaxOpset
	if _, err := Import(m); err != nil {
		t.Fatalf("opset %d: %v", MaxOpset, err)
	}
	m.Opsets[0].Version = MaxOpset + 1
	ie := problemsOf(t, m)
	if len(ie.Problems) != 1 || !strings.Contains(ie.Problems[0].Why, "opsets 1 to 23") || !strings.Contains(ie.Problems[0].Fix, "opset_version=") {
		t.Errorf("problems %+v", ie.Problems)
	}
}

// TestImportFixedBatchHint: when the graph fixes the batch at 1 and a node
// is refused for what it does with the batch axis, the report says to
// export with a dynamic batch axis, and how; with a dynamic batch, a
// larger fixed batch, or a problem that has nothing to do with the batch,
// it does not.
func TestImportFixedBatchHint(t *testing.T) {
	flatten0 := func() *Model {
		return graphModel([]int{3, 2}, nil, "y", node("Flatten", "f", []string{"x"}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}))
	}
	m := flatten0()
	m.Graph.Inputs[0].Dims[0] = Dim{Value: 1, Known: true}
	ie := problemsOf(t, m)
	want := `dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}`
	if !strings.Contains(ie.Hint, "fixed batch of 1") || !strings.Contains(ie.Hint, want) || !strings.Contains(ie.Error(), want) {
		t.Errorf("hint %q", ie.Hint)
	}
	if ie := problemsOf(t, flatten0()); ie.Hint != "" {
		t.Errorf("a dynamic batch got the hint %q", ie.Hint)
	}
	// a problem found at the graph's output gets the hint too
	m = graphModel([]int{4}, nil, "y", node("Transpose", "t", []string{"x"}, []string{"y"}, &Attribute{Name: "perm", Type: AttrInts, Ints: []int64{1, 0}}))
	m.Graph.Inputs[0].Dims[0] = Dim{Value: 1, Known: true}
	if ie := problemsOf(t, m); !strings.Contains(ie.Hint, want) {
		t.Errorf("output problem %+v: hint %q", ie.Problems, ie.Hint)
	}
	m = flatten0()
	m.Graph.Inputs[0].Dims[0] = Dim{Value: 3, Known: true}
	if ie := problemsOf(t, m); ie.Hint != "" {
		t.Errorf("a fixed batch of 3 got the hint %q", ie.Hint)
	}
	m = graphModel([]int{4}, nil, "y", node("Abs", "a", []string{"x"}, []string{"y"}))
	m.Graph.Inputs[0].Dims[0] = Dim{Value: 1, Known: true}
	if ie := problemsOf(t, m); ie.Hint != "" {
		t.Errorf("a problem without the batch got the hint %q", ie.Hint)
	}
}
