package onnx

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// graphModel builds a model of opset 13 whose input x is [batch, shape...]
// with a dynamic batch (dim_param "N") and whose output is out.
func graphModel(shape []int, inits []*Tensor, out string, nodes ...*Node) *Model {
	dims := []Dim{{Param: "N"}}
	for _, d := range shape {
		dims = append(dims, Dim{Value: int64(d), Known: true})
	}
	return &Model{Opsets: []OpsetID{{Version: 13}}, Graph: &Graph{
		Nodes:        nodes,
		Initializers: inits,
		Inputs:       []*ValueInfo{{Name: "x", ElemType: Float, HasShape: true, Dims: dims}},
		Outputs:      []*ValueInfo{{Name: out, ElemType: Float}},
	}}
}

func node(op, name string, in []string, out []string, attrs ...*Attribute) *Node {
	return &Node{OpType: op, Name: name, Inputs: in, Outputs: out, Attrs: attrs}
}

func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i + 1)
	}
	return v
}

// TestImportViewPattern: x.view(x.size(0), -1) as torch exports it
// (Shape → Gather → Unsqueeze → Concat → Reshape), then MatMul + Add,
// becomes flatten and one dense layer with a bias, in the sequential form.
func TestImportViewPattern(t *testing.T) {
	m := graphModel([]int{2, 3, 3}, []*Tensor{
		NewFloatTensor("W", []int64{18, 4}, ones(72)),
		NewFloatTensor("b", []int64{4}, []float32{1, 2, 3, 4}),
	}, "y",
		node("Conv", "/conv/Conv", []string{"x", "cw"}, []string{"c"}),
		node("Shape", "/Shape", []string{"c"}, []string{"s"}),
		node("Constant", "/Constant", nil, []string{"zero"}, &Attribute{Name: "value", Type: AttrTensor, T: NewInt64Tensor("", nil, []int64{0})}),
		node("Gather", "/Gather", []string{"s", "zero"}, []string{"n"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}),
		node("Unsqueeze", "/Unsqueeze", []string{"n", "axes"}, []string{"n1"}),
		node("Concat", "/Concat", []string{"n1", "minus1"}, []string{"shape"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}),
		node("Reshape", "/Reshape", []string{"c", "shape"}, []string{"flat"}),
		node("MatMul", "/fc/MatMul", []string{"flat", "W"}, []string{"mm"}),
		node("Add", "/fc/Add", []string{"mm", "b"}, []string{"y"}),
	)
	m.Graph.Initializers = append(m.Graph.Initializers,
		NewFloatTensor("cw", []int64{2, 2, 1, 1}, ones(4)),
		NewInt64Tensor("axes", []int64{1}, []int64{0}),
		NewInt64Tensor("minus1", []int64{1}, []int64{-1}))
	im, err := Import(m)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, l := range im.Layers {
		ops = append(ops, l.Name+":"+l.Op)
	}
	if want := []string{"conv:conv2d", "Reshape:flatten", "fc:dense"}; !slices.Equal(ops, want) {
		t.Fatalf("layers %v, want %v", ops, want)
	}
	if !im.IsChain() || im.Output != "fc" {
		t.Errorf("chain %v, output %q", im.IsChain(), im.Output)
	}
	dense := im.Layers[2]
	if len(dense.Params) != 2 || dense.Params[1].Suffix != "bias" || !slices.Equal(dense.Params[1].Data, []float32{1, 2, 3, 4}) {
		t.Errorf("dense params: %+v", dense.Params)
	}
	// weight is W transposed: row o holds W[:, o]
	if w := dense.Params[0]; !slices.Equal(w.Shape, []int{4, 18}) || w.Data[1] != 5 || w.Data[18] != 2 {
		t.Errorf("dense weight %v: %v", w.Shape, w.Data[:20])
	}
	spec := string(im.Spec("m", "m.onnx", "m.safetensors"))
	for _, want := range []string{`layers: [`, `{name: "fc", op: "dense", units: 4, inFeatures: 18}`, `// "/fc/MatMul" (MatMul) + "/fc/Add" (Add): 4`} {
		if !strings.Contains(spec, want) {
			t.Errorf("spec lacks %q:\n%s", want, spec)
		}
	}
}

// TestImportGemm folds transB, alpha and beta into the dense layer's
// weight and bias.
func TestImportGemm(t *testing.T) {
	m := graphModel([]int{3}, []*Tensor{
		NewFloatTensor("B", []int64{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		NewFloatTensor("C", []int64{1, 2}, []float32{10, 20}),
	}, "y", node("Gemm", "fc", []string{"x", "B", "C"}, []string{"y"},
		&Attribute{Name: "transB", Type: AttrInt, I: 1},
		&Attribute{Name: "alpha", Type: AttrFloat, F: 0.5},
		&Attribute{Name: "beta", Type: AttrFloat, F: 2}))
	im, err := Import(m)
	if err != nil {
		t.Fatal(err)
	}
	l := im.Layers[0]
	if !slices.Equal(l.Params[0].Data, []float32{0.5, 1, 1.5, 2, 2.5, 3}) || !slices.Equal(l.Params[1].Data, []float32{20, 40}) {
		t.Errorf("params %+v", l.Params)
	}
	if im.Mapping[0].How != "dense (transB, alpha 0.5 folded into the weight, beta 2 folded into the bias)" {
		t.Errorf("mapping %+v", im.Mapping[0])
	}
}

// TestImportReportsEveryNode: all nodes are checked, and each one that
// cannot be imported is reported once, with its op, opset and a reason;
// nodes downstream of a failed node are not reported again.
func TestImportReportsEveryNode(t *testing.T) {
	m := graphModel([]int{4}, nil, "z",
		node("Abs", "a", []string{"x"}, []string{"y1"}),
		node("Relu", "r", []string{"y1"}, []string{"y2"}),
		node("Softmax", "s", []string{"x"}, []string{"y3"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}),
		node("Add", "sum", []string{"y2", "y3"}, []string{"z"}),
	)
	_, err := Import(m)
	ie, ok := err.(*ImportError)
	if !ok {
		t.Fatalf("error %v is not an *ImportError", err)
	}
	var got []string
	for _, p := range ie.Problems {
		got = append(got, p.Node+" "+p.Op)
		if p.Opset != 13 || p.Why == "" {
			t.Errorf("problem %+v", p)
		}
	}
	if want := []string{`"a" Abs`, `"s" Softmax`}; !slices.Equal(got, want) {
		t.Errorf("problems %v, want %v", got, want)
	}
}

// TestImportBatchWarning: a batch of 1 written into the graph is accepted
// as mlbuild's batch, with a warning; the graph form is used for a graph
// that is not a chain.
func TestImportBatchWarning(t *testing.T) {
	m := graphModel([]int{4}, nil, "z",
		node("Relu", "r", []string{"x"}, []string{"y"}),
		node("Add", "sum", []string{"y", "x"}, []string{"z"}))
	m.Graph.Inputs[0].Dims[0] = Dim{Value: 1, Known: true}
	im, err := Import(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Warnings) != 1 || !strings.Contains(im.Warnings[0], "batch of 1 baked into the graph") {
		t.Errorf("warnings %v", im.Warnings)
	}
	if im.IsChain() {
		t.Errorf("a residual graph is not a chain")
	}
	spec := string(im.Spec("m", "m.onnx", "m.safetensors"))
	if !strings.Contains(spec, `sum: {op: "add", inputs: ["r", "input"]}`) || !strings.Contains(spec, `output: "sum"`) {
		t.Errorf("graph form:\n%s", spec)
	}
}

func TestIdentifier(t *testing.T) {
	for in, want := range map[string]string{"/features/features.0/Conv": "features_features_0_Conv", "0": "n0", "a\nb": "a_b", "": "", "__x__": "x"} {
		if got := identifier(in); got != want {
			t.Errorf("identifier(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestImportBoundsFolding: constants the importer computes are bounded, so
// a small file cannot make it allocate a huge broadcast.
func TestImportBoundsFolding(t *testing.T) {
	m := graphModel([]int{4}, []*Tensor{
		NewFloatTensor("a", []int64{5000, 1}, make([]float32, 5000)),
		NewFloatTensor("b", []int64{1, 5000}, make([]float32, 5000)),
	}, "y",
		node("Mul", "big", []string{"a", "b"}, []string{"ab"}),
		node("Add", "y", []string{"x", "ab"}, []string{"y"}))
	_, err := Import(m)
	if err == nil || !strings.Contains(err.Error(), "more than 16777216 elements") {
		t.Errorf("error %v", err)
	}
}

// TestImportPad: a zero Pad of height and width (how PyTorch exports a
// padded AvgPool2d) becomes the pooling layer's padding; read by anything
// else it is reported.
func TestImportPad(t *testing.T) {
	pads := NewInt64Tensor("pads", []int64{8}, []int64{0, 0, 1, 1, 0, 0, 1, 1})
	pool := func(op string) *Model {
		return graphModel([]int{2, 4, 4}, []*Tensor{pads}, "y",
			node("Pad", "pad", []string{"x", "pads"}, []string{"p"}),
			node(op, "pool", []string{"p"}, []string{"y"}, &Attribute{Name: "kernel_shape", Type: AttrInts, Ints: []int64{3, 3}}))
	}
	im, err := Import(pool("AveragePool"))
	if err != nil {
		t.Fatal(err)
	}
	l := im.Layers[0]
	if l.Op != "avgpool2d" || !slices.Equal(l.OutShape, []int{2, 4, 4}) || !slices.ContainsFunc(l.Fields, func(f Field) bool { return f.Name == "padding" && f.Value == 1 }) {
		t.Errorf("layer %+v", l)
	}
	_, err = Import(pool("MaxPool"))
	if err == nil || !strings.Contains(err.Error(), `reads the output of Pad node "pad"`) {
		t.Errorf("Pad into MaxPool: %v", err)
	}
}

// TestImportErfGELU: the written-out GELU becomes one gelu layer in each
// order exporters use; an Erf outside the pattern is reported.
func TestImportErfGELU(t *testing.T) {
	consts := []*Tensor{
		NewFloatTensor("sqrt2", nil, []float32{float32(1.4142135)}),
		NewFloatTensor("one", nil, []float32{1}),
		NewFloatTensor("half", nil, []float32{0.5}),
	}
	head := []*Node{
		node("Div", "div", []string{"x", "sqrt2"}, []string{"t"}),
		node("Erf", "erf", []string{"t"}, []string{"e"}),
		node("Add", "add", []string{"e", "one"}, []string{"s"}),
	}
	forms := map[string][]*Node{
		"(x·(1+erf))·0.5": {node("Mul", "m1", []string{"x", "s"}, []string{"p"}), node("Mul", "m2", []string{"p", "half"}, []string{"y"})},
		"x·((1+erf)·0.5)": {node("Mul", "m1", []string{"s", "half"}, []string{"p"}), node("Mul", "m2", []string{"x", "p"}, []string{"y"})},
		"(x·0.5)·(1+erf)": {node("Mul", "h", []string{"x", "half"}, []string{"xh"}), node("Mul", "m2", []string{"xh", "s"}, []string{"y"})},
	}
	for name, tail := range forms {
		m := graphModel([]int{5}, consts, "y", append(slices.Clone(head), tail...)...)
		im, err := Import(m)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(im.Layers) != 1 || im.Layers[0].Op != "gelu" || im.Layers[0].Inputs[0] != "input" {
			t.Errorf("%s: layers %+v", name, im.Layers)
		}
	}
	// the Erf's value is also read elsewhere: not a GELU, but the formula
	// node by node, with an erf layer
	m := graphModel([]int{5}, consts, "z", append(slices.Clone(head),
		node("Mul", "m1", []string{"x", "s"}, []string{"p"}), node("Mul", "m2", []string{"p", "half"}, []string{"y"}),
		node("Add", "z", []string{"y", "e"}, []string{"z"}))...)
	im, err := Import(m)
	if err != nil {
		t.Fatalf("Erf read twice: %v", err)
	}
	var ops []string
	for _, l := range im.Layers {
		ops = append(ops, l.Op)
	}
	if !slices.Contains(ops, "erf") || slices.Contains(ops, "gelu") {
		t.Errorf("Erf read twice: layers %v, want an erf layer and no gelu", ops)
	}
}

// TestImportFoldsPerChannelConstants: Mul, Div, Add and Sub of a constant
// with one value per output channel fold into the convolution before them;
// when the convolution's output is also read elsewhere they cannot.
func TestImportFoldsPerChannelConstants(t *testing.T) {
	inits := []*Tensor{
		NewFloatTensor("w", []int64{2, 1, 1, 1}, []float32{1, 2}),
		NewFloatTensor("scale", []int64{2, 1, 1}, []float32{3, 4}),
		NewFloatTensor("div", []int64{1, 2, 1, 1}, []float32{2, 8}),
		NewFloatTensor("shift", []int64{2, 1, 1}, []float32{10, 20}),
	}
	nodes := []*Node{
		node("Conv", "conv", []string{"x", "w"}, []string{"c"}),
		node("Mul", "mul", []string{"c", "scale"}, []string{"m"}),
		node("Div", "div", []string{"m", "div"}, []string{"d"}),
		node("Sub", "y", []string{"d", "shift"}, []string{"y"}),
	}
	im, err := Import(graphModel([]int{1, 2, 2}, inits, "y", nodes...))
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 1 {
		t.Fatalf("layers %+v", im.Layers)
	}
	p := im.Layers[0].Params
	// w·scale/div = [1·3/2, 2·4/8]; bias = −shift
	if !slices.Equal(p[0].Data, []float32{1.5, 1}) || len(p) != 2 || !slices.Equal(p[1].Data, []float32{-10, -20}) {
		t.Errorf("params %+v", p)
	}
	// the convolution's output is also an input of the last Add
	nodes = append(nodes[:3], node("Add", "y", []string{"d", "c"}, []string{"y"}))
	_, err = Import(graphModel([]int{1, 2, 2}, inits, "y", nodes...))
	if err == nil || !strings.Contains(err.Error(), `node "mul" (Mul, opset 13): Mul with a constant of shape 2×1×1`) {
		t.Errorf("shared output: %v", err)
	}
}

// TestImportAsymmetricPadding: pads (1, 2) over 5 with kernel 3 and stride
// 2 give the windows of padding 1 (the extra end row is never read), so
// they import exactly; pads (0, 1) over 4 with kernel 2 and stride 1 add a
// window that reads the extra row, so they cannot.
func TestImportAsymmetricPadding(t *testing.T) {
	conv := func(in int, k int64, stride int64, pads []int64) *Model {
		return graphModel([]int{1, in, in}, []*Tensor{NewFloatTensor("w", []int64{1, 1, k, k}, make([]float32, k*k))}, "y",
			node("Conv", "conv", []string{"x", "w"}, []string{"y"},
				&Attribute{Name: "pads", Type: AttrInts, Ints: pads},
				&Attribute{Name: "strides", Type: AttrInts, Ints: []int64{stride, stride}}))
	}
	im, err := Import(conv(5, 3, 2, []int64{1, 1, 2, 2}))
	if err != nil {
		t.Fatal(err)
	}
	l := im.Layers[0]
	if !slices.Equal(l.OutShape, []int{1, 3, 3}) || !slices.ContainsFunc(l.Fields, func(f Field) bool { return f.Name == "padding" && f.Value == 1 }) {
		t.Errorf("layer %+v", l)
	}
	if _, err := Import(conv(4, 2, 1, []int64{0, 0, 1, 1})); err == nil || !strings.Contains(err.Error(), "the last window reads the padding that differs") {
		t.Errorf("inexact padding: %v", err)
	}
}

// TestImportDenseOnTokens: a MatMul by a constant matrix of [tokens,
// features] samples is a dense layer on the last axis; an Add of one value
// per feature folds into its bias, an Add of a constant that differs per
// token does not (a bias is the same for every token).
func TestImportDenseOnTokens(t *testing.T) {
	inits := []*Tensor{
		NewFloatTensor("w", []int64{3, 2}, []float32{1, 2, 3, 4, 5, 6}),
		NewFloatTensor("b", []int64{2}, []float32{10, 20}),
		NewFloatTensor("pos", []int64{4, 2}, ones(8)),
	}
	im, err := Import(graphModel([]int{4, 3}, inits, "y",
		node("MatMul", "/fc/MatMul", []string{"x", "w"}, []string{"h"}),
		node("Add", "/fc/Add", []string{"b", "h"}, []string{"y"})))
	if err != nil {
		t.Fatal(err)
	}
	l := im.Layers[0]
	if len(im.Layers) != 1 || l.Op != "dense" || !slices.Equal(l.OutShape, []int{4, 2}) {
		t.Fatalf("layers %+v", im.Layers)
	}
	// the weight is transposed to [units, in]
	if !slices.Equal(l.Params[0].Data, []float32{1, 3, 5, 2, 4, 6}) || len(l.Params) != 2 || !slices.Equal(l.Params[1].Data, []float32{10, 20}) {
		t.Errorf("params %+v", l.Params)
	}
	_, err = Import(graphModel([]int{4, 3}, inits, "y",
		node("MatMul", "/fc/MatMul", []string{"x", "w"}, []string{"h"}),
		node("Add", "/pos/Add", []string{"h", "pos"}, []string{"y"})))
	if err == nil || !strings.Contains(err.Error(), `node "/pos/Add" (Add, opset 13): Add with a constant of shape 4×2`) {
		t.Errorf("a per-token constant: %v", err)
	}
	// a constant with batch axes of its own is not a weight matrix
	inits = append(inits, NewFloatTensor("w3", []int64{2, 3, 2}, ones(12)))
	_, err = Import(graphModel([]int{4, 3}, inits, "y", node("MatMul", "mm", []string{"x", "w3"}, []string{"y"})))
	if err == nil || !strings.Contains(err.Error(), "multiplies the last axis by a matrix") {
		t.Errorf("a rank-3 constant: %v", err)
	}
}

// TestImportFoldsAttentionScale: PyTorch writes the attention scale
// q.size(-1) ** 0.5 as shape arithmetic (Shape, Gather, Cast, Pow), and
// math.sqrt of it as Sqrt; both fold to a constant, and the Div by it
// becomes a mulconst by the reciprocal.
func TestImportFoldsAttentionScale(t *testing.T) {
	for _, op := range []string{"Pow", "Sqrt"} {
		nodes := []*Node{
			node("Shape", "s", []string{"x"}, []string{"shape"}),
			node("Gather", "g", []string{"shape", "last"}, []string{"d"}),
			node("Cast", "c", []string{"d"}, []string{"df"}, &Attribute{Name: "to", Type: AttrInt, I: int64(Float)}),
		}
		if op == "Pow" {
			nodes = append(nodes, node("Pow", "p", []string{"df", "half"}, []string{"scale"}))
		} else {
			nodes = append(nodes, node("Sqrt", "p", []string{"df"}, []string{"scale"}))
		}
		nodes = append(nodes, node("Div", "div", []string{"x", "scale"}, []string{"y"}))
		inits := []*Tensor{
			NewFloatTensor("half", nil, []float32{0.5}),
			NewInt64Tensor("last", nil, []int64{-1}),
		}
		im, err := Import(graphModel([]int{2, 16}, inits, "y", nodes...))
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		l := im.Layers[len(im.Layers)-1]
		if l.Op != "mulconst" || len(l.Fields) != 1 || l.Fields[0].Value != 0.25 {
			t.Errorf("%s: layers %+v", op, im.Layers)
		}
	}
}

// TestImportIntegerDivision: a Div of integer constants truncates, as
// ONNX's integer Div does (PyTorch's chunk and `//` of sizes export one):
// here the target size (7 // 2)·4 + 2 is 14, the element count of a [7, 2]
// sample; with a float division it would be 16, and the Reshape refused.
func TestImportIntegerDivision(t *testing.T) {
	i64 := func(name string, v int64) *Tensor { return NewInt64Tensor(name, nil, []int64{v}) }
	inits := []*Tensor{i64("zero", 0), i64("one", 1), i64("two", 2), i64("four", 4), NewInt64Tensor("axes", []int64{1}, []int64{0})}
	im, err := Import(graphModel([]int{7, 2}, inits, "y",
		node("Shape", "s", []string{"x"}, []string{"shape"}),
		node("Gather", "gb", []string{"shape", "zero"}, []string{"b"}),
		node("Gather", "gt", []string{"shape", "one"}, []string{"t"}),
		node("Div", "half", []string{"t", "two"}, []string{"h"}),
		node("Mul", "times", []string{"h", "four"}, []string{"h4"}),
		node("Add", "plus", []string{"h4", "two"}, []string{"n"}),
		node("Unsqueeze", "ub", []string{"b", "axes"}, []string{"b1"}),
		node("Unsqueeze", "un", []string{"n", "axes"}, []string{"n1"}),
		node("Concat", "cat", []string{"b1", "n1"}, []string{"target"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}),
		node("Reshape", "r", []string{"x", "target"}, []string{"y"})))
	if err != nil {
		t.Fatal(err)
	}
	if l := im.Layers[len(im.Layers)-1]; !slices.Equal(l.OutShape, []int{14}) {
		t.Errorf("layers %+v", im.Layers)
	}
}

// TestImportPackedProjection: a Split (or Slices) of a dense layer's
// output along its features become dense layers with the weight rows and
// bias entries of their pieces; the packed layer goes once only pieces
// read it, and stays when something else reads it too. A Slice of any
// other runtime value, or across tokens, is reported.
func TestImportPackedProjection(t *testing.T) {
	w := make([]float32, 2*6) // [in 2, out 6]: row i holds inputs' weights
	for i := range w {
		w[i] = float32(i)
	}
	inits := []*Tensor{
		NewFloatTensor("w", []int64{2, 6}, w),
		NewFloatTensor("b", []int64{6}, []float32{10, 11, 12, 13, 14, 15}),
		NewInt64Tensor("sizes", []int64{2}, []int64{2, 4}),
		NewInt64Tensor("s0", []int64{1}, []int64{2}), NewInt64Tensor("e0", []int64{1}, []int64{6}),
		NewInt64Tensor("ax", []int64{1}, []int64{-1}), NewInt64Tensor("ax1", []int64{1}, []int64{1}),
	}
	packed := []*Node{
		node("MatMul", "/qkv/MatMul", []string{"x", "w"}, []string{"h0"}),
		node("Add", "/qkv/Add", []string{"h0", "b"}, []string{"h"}),
	}
	im, err := Import(graphModel([]int{3, 2}, inits, "y", append(slices.Clone(packed),
		node("Split", "/Split", []string{"h", "sizes"}, []string{"q", "k"}, &Attribute{Name: "axis", Type: AttrInt, I: 2}),
		node("Slice", "/Slice", []string{"k", "s0", "e0", "ax"}, []string{"k2"}),
		node("Add", "/y", []string{"q", "k2"}, []string{"y"}))...))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range im.Layers {
		names = append(names, l.Name)
	}
	// k is read only by its Slice: it goes too, k2 taking its rows
	if strings.Join(names, " ") != "qkv_0 qkv_1_0 y" {
		t.Fatalf("layers %v", names)
	}
	q, k2 := im.Layers[0], im.Layers[1]
	// the transposed weight's rows are the output features: q takes 0–1,
	// k features 2–5, and k2 features 2–3 of k (4–5 of the packed layer)
	if !slices.Equal(q.Params[0].Data, []float32{0, 6, 1, 7}) || !slices.Equal(q.Params[1].Data, []float32{10, 11}) {
		t.Errorf("q params %+v", q.Params)
	}
	if !slices.Equal(k2.Params[0].Data, []float32{4, 10, 5, 11}) || !slices.Equal(k2.Params[1].Data, []float32{14, 15}) || !slices.Equal(k2.OutShape, []int{3, 2}) {
		t.Errorf("k2 %+v", k2)
	}
	// the packed output read by the Add as well: it stays
	im, err = Import(graphModel([]int{3, 2}, inits, "y", append(slices.Clone(packed),
		node("Slice", "/Slice", []string{"h", "s0", "e0", "ax"}, []string{"p"}),
		node("Slice", "/Slice_1", []string{"h", "s0", "e0", "ax"}, []string{"p2"}),
		node("Add", "/sum", []string{"p", "p2"}, []string{"y0"}),
		node("Concat", "/cat", []string{"y0", "h"}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: -1}))...))
	if err != nil {
		t.Fatal(err)
	}
	if im.Layers[0].Name != "qkv" || len(im.Layers) != 5 {
		t.Errorf("layers %+v", im.Layers)
	}
	for _, tc := range []struct {
		nodes []*Node
		want  string
	}{
		// features 2 to 6 of an activation of 2: none
		{[]*Node{node("Relu", "/act", []string{"x"}, []string{"a"}), node("Slice", "/s", []string{"a", "s0", "e0", "ax"}, []string{"y"})},
			"Slice of no elements along axis 2"},
	} {
		_, err := Import(graphModel([]int{3, 2}, inits, "y", tc.nodes...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.nodes[len(tc.nodes)-1].Name, err)
		}
	}
}

// TestImportUnbindPacked: timm's attention, a packed projection viewed as
// [N, 3, H, d], permuted (2, 0, 3, 1, 4) and unbound along the first axis,
// becomes one dense layer per entry, viewed as [N, H, d] and transposed
// to [H, N, d]; the packed layer goes. A Transpose that moves the batch
// axis read by anything else, or as the model's output, is reported.
func TestImportUnbindPacked(t *testing.T) {
	const n, h, d = 2, 2, 3
	w := make([]float32, 4*3*h*d) // [in 4, out 18]
	for i := range w {
		w[i] = float32(i)
	}
	inits := []*Tensor{
		NewFloatTensor("w", []int64{4, 3 * h * d}, w),
		NewInt64Tensor("shape", []int64{5}, []int64{0, n, 3, h, d}),
		NewInt64Tensor("ones", []int64{3}, []int64{1, 1, 1}),
		NewInt64Tensor("zero", []int64{1}, []int64{0}),
		NewInt64Tensor("two", nil, []int64{2}),
	}
	perm := &Attribute{Name: "perm", Type: AttrInts, Ints: []int64{2, 0, 3, 1, 4}}
	head := []*Node{
		node("MatMul", "/qkv/MatMul", []string{"x", "w"}, []string{"p"}),
		node("Reshape", "/Reshape", []string{"p", "shape"}, []string{"r"}),
		node("Transpose", "/Transpose", []string{"r"}, []string{"t"}, perm),
	}
	im, err := Import(graphModel([]int{n, 4}, inits, "y", append(slices.Clone(head),
		node("Split", "/Split", []string{"t", "ones"}, []string{"q", "k", "v"}, &Attribute{Name: "axis", Type: AttrInt, I: 0}),
		node("Squeeze", "/Squeeze", []string{"q", "zero"}, []string{"q1"}),
		node("Gather", "/Gather", []string{"t", "two"}, []string{"v1"}),
		node("Add", "/y", []string{"q1", "v1"}, []string{"y"}))...))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range im.Layers {
		names = append(names, l.Name+":"+l.Op+shapeText(l.OutShape))
	}
	if got := strings.Join(names, " "); got != "qkv_0:dense2×6 qkv_0_heads:reshape2×2×3 qkv_0_t:transpose2×2×3 qkv_2:dense2×6 qkv_2_heads:reshape2×2×3 qkv_2_t:transpose2×2×3 y:add2×2×3" {
		t.Fatalf("layers %s", got)
	}
	// v (entry 2) takes features 12 to 17: the transposed weight's rows
	if v := im.Layers[3].Params[0].Data; v[0] != 12 || v[1] != 30 || len(v) != 6*4 {
		t.Errorf("v weight %v", v)
	}
	for _, tc := range []struct {
		nodes []*Node
		want  string
	}{
		{append(slices.Clone(head), node("Relu", "/act", []string{"t"}, []string{"y"})),
			`node "/act" (Relu, opset 13): reads the output of Transpose node "/Transpose", whose perm [2 0 3 1 4] moves the batch axis`},
		{slices.Clone(head), `node "/Transpose" (Transpose, opset 13): perm [2 0 3 1 4] moves the batch axis, and its output is the model's output`},
		{[]*Node{head[0], node("Relu", "/act", []string{"p"}, []string{"a"}), node("Reshape", "/Reshape", []string{"a", "shape"}, []string{"r"}),
			node("Transpose", "/Transpose", []string{"r"}, []string{"t"}, perm), node("Gather", "/Gather", []string{"t", "two"}, []string{"y"})},
			"only when it is a view of a dense layer's output"},
	} {
		out := tc.nodes[len(tc.nodes)-1].Outputs[0]
		_, err := Import(graphModel([]int{n, 4}, inits, out, tc.nodes...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.nodes[len(tc.nodes)-1].Name, err)
		}
	}
}

// TestImportMovedBatch: a Transpose that moves the batch axis is followed
// (written by nobody) through ops on the last axis and back: Softmax over
// the features of [T, B, D] is a softmax of the [T, D] samples, and the
// Transpose back leaves no layer. Ops that cannot follow it, a Softmax
// over another axis, and a moved batch at the output are reported.
func TestImportMovedBatch(t *testing.T) {
	tr := func(in, out string) *Node {
		return node("Transpose", "/T_"+out, []string{in}, []string{out}, &Attribute{Name: "perm", Type: AttrInts, Ints: []int64{1, 0, 2}})
	}
	im, err := Import(graphModel([]int{3, 4}, nil, "y",
		tr("x", "t"), node("Softmax", "/sm", []string{"t"}, []string{"s"}, &Attribute{Name: "axis", Type: AttrInt, I: -1}), tr("s", "y")))
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 1 || im.Layers[0].Op != "softmax" || !slices.Equal(im.Layers[0].Inputs, []string{"input"}) || !slices.Equal(im.Layers[0].OutShape, []int{3, 4}) {
		t.Errorf("layers %+v", im.Layers)
	}
	for _, tc := range []struct {
		nodes []*Node
		want  string
	}{
		{[]*Node{tr("x", "t"), node("Relu", "/act", []string{"t"}, []string{"y"})}, `node "/act" (Relu, opset 13): reads a value whose batch axis a Transpose or Reshape moved`},
		{[]*Node{tr("x", "y")}, "the output's batch axis is not first"},
		{[]*Node{tr("x", "t"), node("Softmax", "/sm", []string{"t"}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: 0})}, "Softmax over axis 0 of a value whose batch axis moved"},
	} {
		out := tc.nodes[len(tc.nodes)-1].Outputs[0]
		_, err := Import(graphModel([]int{3, 4}, nil, out, tc.nodes...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.nodes[len(tc.nodes)-1].Name, err)
		}
	}
}

// TestImportMergedBatch: the batch size times a number in a Reshape
// target merges the batch with part of an axis ([T, B, 4] to [T, B·2, 2]
// splits the features, a reshape layer); reshaping back and transposing
// the batch first leaves the axes in order, which one reshape merges.
func TestImportMergedBatch(t *testing.T) {
	i64 := func(name string, v ...int64) *Tensor { return NewInt64Tensor(name, []int64{int64(len(v))}, v) }
	inits := []*Tensor{i64("three", 3), i64("two1", 2), i64("four", 4), NewInt64Tensor("zero", nil, []int64{0}),
		NewInt64Tensor("two", nil, []int64{2}), i64("axes", 0)}
	perm := &Attribute{Name: "perm", Type: AttrInts, Ints: []int64{1, 0, 2}}
	cat := &Attribute{Name: "axis", Type: AttrInt, I: 0}
	im, err := Import(graphModel([]int{3, 4}, inits, "y",
		node("Shape", "s", []string{"x"}, []string{"shape"}),
		node("Gather", "g", []string{"shape", "zero"}, []string{"b"}),
		node("Mul", "m", []string{"b", "two"}, []string{"b2"}),
		node("Unsqueeze", "u", []string{"b2", "axes"}, []string{"b2u"}),
		node("Unsqueeze", "u1", []string{"b", "axes"}, []string{"bu"}),
		node("Concat", "c", []string{"three", "b2u", "two1"}, []string{"t1"}, cat),
		node("Concat", "c1", []string{"three", "bu", "four"}, []string{"t2"}, cat),
		node("Transpose", "/T", []string{"x"}, []string{"xt"}, perm),
		node("Reshape", "/R", []string{"xt", "t1"}, []string{"r"}),
		node("Reshape", "/R1", []string{"r", "t2"}, []string{"r1"}),
		node("Transpose", "/T1", []string{"r1"}, []string{"y"}, perm)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range im.Layers {
		got = append(got, l.Op+shapeText(l.OutShape))
	}
	if strings.Join(got, " ") != "reshape3×2×2 reshape3×4" {
		t.Errorf("layers %v", got)
	}
}

// TestImportClip: Clip to [0, 6] is relu6 (MobileNet's ReLU6), to
// [0, +inf) relu, with the bounds as inputs (opset 11 on) or as
// attributes (before); other bounds are reported with the values.
func TestImportClip(t *testing.T) {
	consts := []*Tensor{
		NewFloatTensor("zero", nil, []float32{0}),
		NewFloatTensor("six", nil, []float32{6}),
		NewFloatTensor("minus1", nil, []float32{-1}),
	}
	for _, c := range []struct {
		name string
		ins  []string
		want string // the layer's op, or a fragment of the error
	}{
		{"[0, 6]", []string{"x", "zero", "six"}, "relu6"},
		{"[0, +inf)", []string{"x", "zero"}, "relu"},
		{"[0, +inf) with an empty max", []string{"x", "zero", ""}, "relu"},
		{"[-1, 6]", []string{"x", "minus1", "six"}, "Clip to [-1, 6]"},
		{"no bounds", []string{"x"}, "Clip to [-Inf, +Inf]"},
	} {
		m := graphModel([]int{4}, consts, "y", node("Clip", "clip", c.ins, []string{"y"}))
		im, err := Import(m)
		if strings.Contains(c.want, " ") {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(im.Layers) != 1 || im.Layers[0].Op != c.want {
			t.Errorf("%s: layers %+v, want one %s layer", c.name, im.Layers, c.want)
		}
	}
	// opset 6: the bounds are attributes
	m := graphModel([]int{4}, nil, "y", node("Clip", "clip", []string{"x"}, []string{"y"},
		&Attribute{Name: "min", Type: AttrFloat, F: 0}, &Attribute{Name: "max", Type: AttrFloat, F: 6}))
	m.Opsets = []OpsetID{{Version: 6}}
	im, err := Import(m)
	if err != nil || len(im.Layers) != 1 || im.Layers[0].Op != "relu6" {
		t.Errorf("opset 6 Clip(min=0, max=6): %v, layers %+v", err, im)
	}
}

// TestImportPoolCeilMode: ceil_mode=1 keeps a partial last window as
// rounding: "ceil" (GoogLeNet's and SqueezeNet's max pools), falls back to
// "floor" where the partial window would start in the trailing padding,
// and is refused for AveragePool, whose partial window PyTorch averages
// differently.
func TestImportPoolCeilMode(t *testing.T) {
	pool := func(op string, shape []int, k, s, p int64) *Model {
		return graphModel(shape, nil, "y", node(op, "pool", []string{"x"}, []string{"y"},
			&Attribute{Name: "kernel_shape", Type: AttrInts, Ints: []int64{k, k}},
			&Attribute{Name: "strides", Type: AttrInts, Ints: []int64{s, s}},
			&Attribute{Name: "pads", Type: AttrInts, Ints: []int64{p, p, p, p}},
			&Attribute{Name: "ceil_mode", Type: AttrInt, I: 1}))
	}
	rounding := func(l *Layer) any {
		for _, f := range l.Fields {
			if f.Name == "rounding" {
				return f.Value
			}
		}
		return nil
	}
	for _, tc := range []struct {
		shape    []int
		k, s, p  int64
		out      []int
		rounding any
	}{
		{[]int{2, 8, 10}, 3, 2, 0, []int{2, 4, 5}, "ceil"}, // floor: 3×4
		{[]int{1, 7, 7}, 2, 2, 0, []int{1, 4, 4}, "ceil"},  // floor: 3×3
		{[]int{1, 5, 5}, 2, 2, 1, []int{1, 3, 3}, "floor"}, // the 4th window would start in the padding
		{[]int{1, 6, 6}, 2, 2, 0, []int{1, 3, 3}, nil},     // exact: nothing to round
	} {
		im, err := Import(pool("MaxPool", tc.shape, tc.k, tc.s, tc.p))
		if err != nil {
			t.Fatalf("%v k%d s%d p%d: %v", tc.shape, tc.k, tc.s, tc.p, err)
		}
		l := im.Layers[0]
		if l.Op != "maxpool2d" || !slices.Equal(l.OutShape, tc.out) || rounding(l) != tc.rounding {
			t.Errorf("%v k%d s%d p%d: %s %v rounding %v, want %v rounding %v", tc.shape, tc.k, tc.s, tc.p, l.Op, l.OutShape, rounding(l), tc.out, tc.rounding)
		}
	}
	// An AveragePool rounds up alike; its divisor (the partial window's
	// part inside the padded input) is avgpool2d's.
	im, err := Import(pool("AveragePool", []int{2, 8, 10}, 3, 2, 0))
	if err != nil || im.Layers[0].Op != "avgpool2d" || !slices.Equal(im.Layers[0].OutShape, []int{2, 4, 5}) || rounding(im.Layers[0]) != "ceil" {
		t.Errorf("AveragePool with ceil_mode: %v %+v", err, im)
	}
}

// TestImportAvgPoolCountIncludePad: count_include_pad=0 with pads of the
// node's own becomes countIncludePad: false; after a Pad node (how
// PyTorch exports count_include_pad=True) the Pad's zeros count and no
// field is written; both at once are refused, naming the Pad node.
func TestImportAvgPoolCountIncludePad(t *testing.T) {
	pads := NewInt64Tensor("pads", []int64{8}, []int64{0, 0, 1, 1, 0, 0, 1, 1})
	avg := func(include, own int64, padNode bool) *Model {
		var consts []*Tensor
		var nodes []*Node
		in := "x"
		if padNode {
			consts = []*Tensor{pads}
			nodes = append(nodes, node("Pad", "pad", []string{"x", "pads"}, []string{"p"}))
			in = "p"
		}
		nodes = append(nodes, node("AveragePool", "pool", []string{in}, []string{"y"},
			&Attribute{Name: "kernel_shape", Type: AttrInts, Ints: []int64{3, 3}},
			&Attribute{Name: "strides", Type: AttrInts, Ints: []int64{2, 2}},
			&Attribute{Name: "pads", Type: AttrInts, Ints: []int64{own, own, own, own}},
			&Attribute{Name: "count_include_pad", Type: AttrInt, I: include}))
		return graphModel([]int{2, 7, 7}, consts, "y", nodes...)
	}
	field := func(l *Layer) any {
		for _, f := range l.Fields {
			if f.Name == "countIncludePad" {
				return f.Value
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name            string
		include, own    int64
		padNode         bool
		countIncludePad any
		padding         any
	}{
		{"own pads excluded", 0, 1, false, false, 1},
		{"own pads included", 1, 1, false, nil, 1},
		{"a Pad node's zeros", 0, 0, true, nil, 1},
		{"no padding", 0, 0, false, nil, nil},
	} {
		im, err := Import(avg(tc.include, tc.own, tc.padNode))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		l := im.Layers[0]
		var padding any
		for _, f := range l.Fields {
			if f.Name == "padding" {
				padding = f.Value
			}
		}
		if l.Op != "avgpool2d" || field(l) != tc.countIncludePad || padding != tc.padding {
			t.Errorf("%s: %s fields %+v, want countIncludePad %v padding %v", tc.name, l.Op, l.Fields, tc.countIncludePad, tc.padding)
		}
	}
	_, err := Import(avg(0, 1, true))
	if err == nil || !strings.Contains(err.Error(), `count_include_pad=0 with pads of its own after Pad node "pad"`) {
		t.Errorf("Pad node and own excluded pads: %v", err)
	}
}

// TestImportSliceRuntime: Slices and Splits of runtime values that are not
// a dense layer's features become slice layers (ShuffleNet's channel
// split, x.chunk(2, dim=1)); a piece along the rows of a dense layer's
// output too. The batch axis and steps other than 1 are refused.
func TestImportSliceRuntime(t *testing.T) {
	inits := []*Tensor{
		NewInt64Tensor("s1", []int64{1}, []int64{1}), NewInt64Tensor("e3", []int64{1}, []int64{3}),
		NewInt64Tensor("big", []int64{1}, []int64{1 << 40}), NewInt64Tensor("ax1", []int64{1}, []int64{1}),
		NewInt64Tensor("axm1", []int64{1}, []int64{-1}), NewInt64Tensor("ax0", []int64{1}, []int64{0}),
		NewInt64Tensor("two", []int64{1}, []int64{2}), NewInt64Tensor("sizes", []int64{2}, []int64{2, 2}),
	}
	relu := node("Relu", "/act", []string{"x"}, []string{"a"})
	fields := func(l *Layer) string {
		var f []string
		for _, x := range l.Fields {
			f = append(f, fmt.Sprintf("%s:%v", x.Name, x.Value))
		}
		return l.Op + "{" + strings.Join(f, " ") + "}" + fmt.Sprint(l.OutShape)
	}
	for _, tc := range []struct {
		name  string
		nodes []*Node
		want  []string // the layers after the Relu
	}{
		{"channels 1 to 2", []*Node{relu, node("Slice", "/s", []string{"a", "s1", "e3", "ax1"}, []string{"y"})},
			[]string{"slice{axis:0 start:1 end:3}[2 3 5]"}},
		{"the rest of the width", []*Node{relu, node("Slice", "/s", []string{"a", "s1", "big", "axm1"}, []string{"y"})},
			[]string{"slice{axis:2 start:1 end:5}[4 3 4]"}},
		{"chunk by Split", []*Node{relu,
			node("Split", "/split", []string{"a", "sizes"}, []string{"p", "q"}, &Attribute{Name: "axis", Type: AttrInt, I: 1}),
			node("Sub", "/y", []string{"q", "p"}, []string{"y"})},
			[]string{"slice{axis:0 start:0 end:2}[2 3 5]", "slice{axis:0 start:2 end:4}[2 3 5]", "sub{}[2 3 5]"}},
	} {
		im, err := Import(graphModel([]int{4, 3, 5}, inits, "y", tc.nodes...))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, l := range im.Layers[1:] {
			got = append(got, fields(l))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: layers %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		node *Node
		want string
	}{
		{"batch", node("Slice", "/s", []string{"a", "s1", "e3", "ax0"}, []string{"y"}), "Slice of the batch axis"},
		{"step 2", node("Slice", "/s", []string{"a", "s1", "big", "ax1", "two"}, []string{"y"}), "step 2 along axis 1"},
		{"split batch", node("Split", "/s", []string{"a"}, []string{"y", "z"}), "Split along the batch axis"},
	} {
		_, err := Import(graphModel([]int{4, 3, 5}, inits, "y", relu, tc.node))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
