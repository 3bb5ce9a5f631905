package onnx

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// tokenModel builds a model of opset 17 whose input ids is int64 token
// ids [batch, t] with a dynamic batch, and whose output is out.
func tokenModel(t int, inits []*Tensor, out string, nodes ...*Node) *Model {
	return &Model{Opsets: []OpsetID{{Version: 17}}, Graph: &Graph{
		Nodes:        nodes,
		Initializers: inits,
		Inputs:       []*ValueInfo{{Name: "ids", ElemType: Int64, HasShape: true, Dims: []Dim{{Param: "N"}, {Value: int64(t), Known: true}}}},
		Outputs:      []*ValueInfo{{Name: out, ElemType: Float}},
	}}
}

func field(l *Layer, name string) any {
	for _, f := range l.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return nil
}

// TestImportEmbeddingPositions: Gather of a table at the token ids is an
// embedding over ids [T]; an Add of the position table gathered at
// Range(0, T, 1) (nanoGPT's wpe(arange(T)), folded; [1, T, D] when the
// positions are unsqueezed, as old nanoGPT does, [T, D] when not, and
// either operand order) becomes its positions, the "pos" param holding
// the table's first T rows.
func TestImportEmbeddingPositions(t *testing.T) {
	const T, V, D, P = 3, 5, 4, 6 // the position table has more rows than tokens
	i64 := func(name string, v ...int64) *Tensor { return NewInt64Tensor(name, nil, v) }
	for _, unsqueezed := range []bool{true, false} {
		inits := []*Tensor{NewFloatTensor("wte", []int64{V, D}, ones(V*D)), NewFloatTensor("wpe", []int64{P, D}, ones(P*D)),
			i64("zero", 0), i64("one", 1), NewInt64Tensor("axes", []int64{1}, []int64{0})}
		pos := node("Unsqueeze", "/Unsqueeze", []string{"pos", "axes"}, []string{"pos1"})
		add := node("Add", "/Add", []string{"tok", "pe"}, []string{"y"})
		if !unsqueezed {
			pos = node("Identity", "/Identity", []string{"pos"}, []string{"pos1"})
			add.Inputs = []string{"pe", "tok"}
		}
		im, err := Import(tokenModel(T, inits, "y",
			node("Shape", "/Shape", []string{"ids"}, []string{"shape"}),
			node("Gather", "/Gather", []string{"shape", "one"}, []string{"t"}),
			node("Range", "/Range", []string{"zero", "t", "one"}, []string{"pos"}),
			pos,
			node("Gather", "/wte/Gather", []string{"wte", "ids"}, []string{"tok"}),
			node("Gather", "/wpe/Gather", []string{"wpe", "pos1"}, []string{"pe"}),
			add))
		if err != nil {
			t.Fatalf("unsqueezed %v: %v", unsqueezed, err)
		}
		if len(im.Layers) != 1 || !slices.Equal(im.Input, []int{T}) {
			t.Fatalf("unsqueezed %v: input %v, layers %+v; want one embedding over [%d]", unsqueezed, im.Input, im.Layers, T)
		}
		l := im.Layers[0]
		if l.Name != "wte" || l.Op != "embedding" || field(l, "vocab") != V || field(l, "dim") != D || field(l, "positions") != true || l.Inputs[0] != "input" {
			t.Fatalf("unsqueezed %v: layer %+v", unsqueezed, l)
		}
		if len(l.Params) != 2 || l.Params[1].Suffix != "pos" || !slices.Equal(l.Params[1].Shape, []int{T, D}) || !slices.Equal(l.Params[1].Data, ones(P * D)[:T*D]) {
			t.Errorf("unsqueezed %v: params %+v", unsqueezed, l.Params)
		}
		if !slices.Equal(l.Params[0].Data, ones(V*D)) {
			t.Errorf("unsqueezed %v: weight %v", unsqueezed, l.Params[0].Data)
		}
	}
}

// TestImportCausalMask: masked_fill(tril == 0, -inf) (Where), or an Add
// of 0 / -inf, before a Softmax over the keys is a causal softmax; a
// mask that is not causal, a fill that is not -inf, a softmax over
// another axis, or any other reader of the masked scores is reported.
func TestImportCausalMask(t *testing.T) {
	const T = 4
	tril := make([]float32, T*T)
	additive := make([]float32, T*T)
	diag := make([]float32, T*T) // masks the diagonal too
	for i := range T {
		for j := range T {
			if j <= i {
				tril[i*T+j] = 1
			} else {
				additive[i*T+j] = float32(math.Inf(-1))
			}
			if j < i {
				diag[i*T+j] = 1
			}
		}
	}
	inf := NewFloatTensor("inf", nil, []float32{float32(math.Inf(-1))})
	zero := NewFloatTensor("zero", nil, []float32{0})
	where := func(bufData []float32, fill string, reader *Node) *Model {
		return graphModel([]int{2, T, T}, []*Tensor{NewFloatTensor("bias", []int64{1, 1, T, T}, bufData), inf, zero}, "y",
			node("Equal", "/Equal", []string{"bias", "zero"}, []string{"m"}),
			node("Where", "/Where", []string{"m", fill, "x"}, []string{"s"}),
			reader)
	}
	softmax := func(axis int64) *Node {
		return node("Softmax", "/Softmax", []string{"s"}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: axis})
	}
	for _, c := range []struct {
		name string
		m    *Model
		want string // "" when the import must give a causal softmax
	}{
		{"where", where(tril, "inf", softmax(-1)), ""},
		{"additive", graphModel([]int{2, T, T}, []*Tensor{NewFloatTensor("mask", []int64{T, T}, additive)}, "y",
			node("Add", "/Add", []string{"x", "mask"}, []string{"s"}), softmax(3)), ""},
		{"not causal", where(diag, "inf", softmax(-1)), "the mask (shape 1×1×4×4) is not causal"},
		{"fill", where(tril, "zero", softmax(-1)), "Where filling with 0"},
		{"axis", where(tril, "inf", softmax(2)), "Softmax over axis 2 of scores masked by node \"/Where\""},
		{"reader", where(tril, "inf", node("Relu", "/Relu", []string{"s"}, []string{"y"})), "reads attention scores masked by node \"/Where\""},
	} {
		im, ok := importCase(t, c.name, c.m, c.want)
		if !ok {
			continue
		}
		if len(im.Layers) != 1 || im.Layers[0].Op != "softmax" || field(im.Layers[0], "causal") != true {
			t.Errorf("%s: layers %+v; want one causal softmax", c.name, im.Layers)
		}
	}
}

// TestImportTokenIDsOnlyEmbedding: token ids read other than by an
// embedding's Gather are reported, as is an integer input that is not
// [batch, tokens].
func TestImportTokenIDsOnlyEmbedding(t *testing.T) {
	m := tokenModel(3, nil, "y", node("Cast", "/Cast", []string{"ids"}, []string{"y"}, &Attribute{Name: "to", Type: AttrInt, I: int64(Float)}))
	if _, err := Import(m); err == nil || !strings.Contains(err.Error(), "reads the model's token ids as input 0; mlbuild reads token ids only through an embedding") {
		t.Errorf("got %v", err)
	}
	m.Graph.Inputs[0].Dims = append(m.Graph.Inputs[0].Dims, Dim{Value: 2, Known: true})
	if _, err := Import(m); err == nil || !strings.Contains(err.Error(), "mlbuild reads an integer input only as token ids [batch, tokens]") {
		t.Errorf("rank 3: got %v", err)
	}
}

// TestImportTiedHead: a MatMul by the transpose of the embedding's table
// (nanoGPT's lm_head tied to wte, exported as a transposed copy) is a
// dense layer tied to the embedding, with no weight of its own; by any
// other matrix it keeps its weight.
func TestImportTiedHead(t *testing.T) {
	const V, D = 5, 4
	table := ones(V * D)
	tr := make([]float32, D*V)
	for v := range V {
		for d := range D {
			tr[d*V+v] = table[v*D+d]
		}
	}
	for _, tied := range []bool{true, false} {
		head := slices.Clone(tr)
		if !tied {
			head[3] += 0.5
		}
		im, err := Import(tokenModel(3, []*Tensor{NewFloatTensor("wte", []int64{V, D}, table), NewFloatTensor("head", []int64{D, V}, head)}, "y",
			node("Gather", "/wte/Gather", []string{"wte", "ids"}, []string{"e"}),
			node("MatMul", "/lm_head/MatMul", []string{"e", "head"}, []string{"y"})))
		if err != nil {
			t.Fatal(err)
		}
		l := im.Layers[1]
		if tied && (field(l, "tie") != "wte" || len(l.Params) != 0) || !tied && (field(l, "tie") != nil || len(l.Params) != 1) {
			t.Errorf("tied %v: head %+v", tied, l)
		}
		if m := im.Mapping[len(im.Mapping)-1]; strings.HasSuffix(m.How, ", tied to wte") != tied {
			t.Errorf("tied %v: the mapping says %q", tied, m.How)
		}
	}
}

// TestImportInfiniteWeight: an infinite scalar constant is taken (a
// mask's fill value), but one folded into a weight is reported.
func TestImportInfiniteWeight(t *testing.T) {
	inits := []*Tensor{NewFloatTensor("w", []int64{2, 2}, ones(4)), NewFloatTensor("inf", nil, []float32{float32(math.Inf(1))})}
	_, err := Import(graphModel([]int{2}, inits, "y",
		node("MatMul", "/fc/MatMul", []string{"x", "w"}, []string{"h"}),
		node("Add", "/fc/Add", []string{"h", "inf"}, []string{"y"})))
	if err == nil || !strings.Contains(err.Error(), "fc.bias would hold +Inf at element 0") {
		t.Errorf("got %v", err)
	}
}

// TestImportGatherRuntime: a Gather of a runtime value at one constant
// index, or consecutive ones, of a per-sample axis is a slice
// (nanoGPT's x[:, [-1], :]); a scalar index drops the axis; other
// indices, or the batch axis, are reported.
func TestImportGatherRuntime(t *testing.T) {
	for _, c := range []struct {
		name    string
		idx     *Tensor
		axis    int64
		start   int
		out     []int
		refused string
	}{
		{"last", NewInt64Tensor("i", []int64{1}, []int64{-1}), 1, 4, []int{1, 3}, ""},
		{"run", NewInt64Tensor("i", []int64{2}, []int64{1, 2}), 1, 1, []int{2, 3}, ""},
		{"scalar", NewInt64Tensor("i", nil, []int64{2}), 2, 2, []int{5}, ""},
		{"gaps", NewInt64Tensor("i", []int64{2}, []int64{0, 2}), 1, 0, nil, "Gather at indices [0 2] along axis 1 (size 5)"},
		{"batch", NewInt64Tensor("i", []int64{1}, []int64{0}), 0, 0, nil, "Gather along the batch axis"},
	} {
		im, err := Import(graphModel([]int{5, 3}, []*Tensor{c.idx}, "y",
			node("Gather", "/Gather", []string{"x", "i"}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: c.axis})))
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%s: got %v; want %q", c.name, err, c.refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		l := im.Layers[0]
		n := int(c.idx.NumElements())
		if l.Op != "slice" || field(l, "axis") != int(c.axis)-1 || field(l, "start") != c.start || field(l, "end") != c.start+n {
			t.Errorf("%s: layer %+v; want a slice of axis %d from %d to %d", c.name, l, c.axis-1, c.start, c.start+n)
		}
		if out := im.Layers[len(im.Layers)-1].OutShape; !slices.Equal(out, c.out) {
			t.Errorf("%s: output %v; want %v", c.name, out, c.out)
		}
	}
}

// importCase imports the test model m of case name: where want is not
// "", the import must fail with an error that says it; else it must
// succeed, and ok says that im is there to check further.
func importCase(t *testing.T, name string, m *Model, want string) (im *Imported, ok bool) {
	t.Helper()
	im, err := Import(m)
	switch {
	case want != "":
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v; want an error saying %q", name, err, want)
		}
		return nil, false
	case err != nil:
		t.Errorf("%s: %v", name, err)
		return nil, false
	}
	return im, true
}
