package onnx

import (
	"slices"
	"strings"
	"testing"
)

// fixedModel is graphModel with the batch fixed at 1, as torch.onnx.export
// writes it without dynamic_axes, and every Reshape target an initializer
// of plain numbers.
func fixedModel(shape []int, targets map[string][]int64, out string, nodes ...*Node) *Model {
	var inits []*Tensor
	for name, v := range targets {
		inits = append(inits, NewInt64Tensor(name, []int64{int64(len(v))}, v))
	}
	slices.SortFunc(inits, func(a, b *Tensor) int { return strings.Compare(a.Name, b.Name) })
	m := graphModel(shape, inits, out, nodes...)
	m.Graph.Inputs[0].Dims[0] = Dim{Value: 1, Known: true}
	return m
}

func perm(p ...int64) *Attribute { return &Attribute{Name: "perm", Type: AttrInts, Ints: p} }

// TestImportFixedBatchAttention: nn.MultiheadAttention's views exported
// with the batch fixed at 1. x [1, 3, 4] is transposed to [T, B, D] =
// [3, 1, 4] and viewed as [3, 2, 2], where the batch's 1 may belong to the
// tokens ([T·B, H, d]) or to the heads ([T, B·H, d]); the MatMul of the
// heads decides (its batch must lead the first axis: B·H), and the view
// back to [T·B, D] = [3, 4], read by a Softmax over the features, and to
// [T, B, D] = [3, 1, 4], transposed to [B, T, D], bring the batch first.
// The spec is the attention's per-sample computation, with no node
// reported.
func TestImportFixedBatchAttention(t *testing.T) {
	im, err := Import(fixedModel([]int{3, 4}, map[string][]int64{"heads": {3, 2, 2}, "merged": {3, 4}, "back": {3, 1, 4}}, "y",
		node("Transpose", "/T", []string{"x"}, []string{"tbd"}, perm(1, 0, 2)),
		node("Reshape", "/R", []string{"tbd", "heads"}, []string{"q"}),
		node("Transpose", "/Tq", []string{"q"}, []string{"qh"}, perm(1, 0, 2)),
		node("Transpose", "/Tk", []string{"q"}, []string{"kh"}, perm(1, 2, 0)),
		node("MatMul", "/att", []string{"qh", "kh"}, []string{"a"}),
		node("Softmax", "/sm", []string{"a"}, []string{"p"}, &Attribute{Name: "axis", Type: AttrInt, I: -1}),
		node("MatMul", "/av", []string{"p", "qh"}, []string{"o"}),
		node("Transpose", "/To", []string{"o"}, []string{"ot"}, perm(1, 0, 2)),
		node("Reshape", "/Rm", []string{"ot", "merged"}, []string{"m"}),
		node("Softmax", "/sm2", []string{"m"}, []string{"s"}, &Attribute{Name: "axis", Type: AttrInt, I: -1}),
		node("Reshape", "/Rb", []string{"s", "back"}, []string{"b"}),
		node("Transpose", "/Tb", []string{"b"}, []string{"y"}, perm(1, 0, 2))))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range im.Layers {
		got = append(got, l.Op+shapeText(l.OutShape))
	}
	// [3, 2, 2] per sample, the heads first for the MatMuls ([2, 3, 2]
	// and [2, 2, 3]), the result's tokens first again ([3, 2, 2] = [3, 4])
	want := "reshape3×2×2 transpose2×3×2 transpose2×2×3 matmul2×3×3 softmax2×3×3 transpose2×3×2 matmul2×3×2 transpose3×2×2 reshape3×4 softmax3×4"
	if strings.Join(got, " ") != want {
		t.Errorf("layers\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if !slices.Equal(im.Input, []int{3, 4}) || !slices.Equal(im.Layers[len(im.Layers)-1].OutShape, []int{3, 4}) {
		t.Errorf("input %v, output %v", im.Input, im.Layers[len(im.Layers)-1].OutShape)
	}
}

// TestImportFixedBatchMergedTokens: x.reshape(-1, C) of [1, T, C] with the
// batch fixed at 1 is [B·T, C]: a Softmax over C (and the Erf form of
// GELU) runs per token, and the view back as [1, T, C] puts the batch
// first again, with no layer for either view.
func TestImportFixedBatchMergedTokens(t *testing.T) {
	inits := map[string][]int64{"merge": {-1, 4}, "back": {1, 3, 4}}
	m := fixedModel([]int{3, 4}, inits, "y",
		node("Reshape", "/R", []string{"x", "merge"}, []string{"m"}),
		node("Softmax", "/sm", []string{"m"}, []string{"s"}, &Attribute{Name: "axis", Type: AttrInt, I: -1}),
		node("Reshape", "/Rb", []string{"s", "back"}, []string{"y"}))
	im, err := Import(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 1 || im.Layers[0].Op != "softmax" || !slices.Equal(im.Layers[0].OutShape, []int{3, 4}) || !slices.Equal(im.Layers[0].Inputs, []string{"input"}) {
		t.Errorf("layers %+v", im.Layers)
	}
}

// TestImportFixedBatchRefused: where the place of the batch's 1 cannot be
// told, the node is reported, naming the Reshape that wrote the 1, and
// the report ends with the fix (export with dynamic_axes).
func TestImportFixedBatchRefused(t *testing.T) {
	sm := func(name, in, out string) *Node {
		return node("Softmax", name, []string{in}, []string{out}, &Attribute{Name: "axis", Type: AttrInt, I: -1})
	}
	for _, tc := range []struct {
		name  string
		nodes []*Node
		want  string
	}{
		// [3, 1, 4] viewed as [3, 4] is [T·B, D] or [T, B·D]; transposed
		// to [4, 3], a view as [12] orders the batch differently for each
		{"regrouped twice", []*Node{
			node("Transpose", "/T", []string{"x"}, []string{"tbd"}, perm(1, 0, 2)),
			node("Reshape", "/R1", []string{"tbd", "flat2"}, []string{"r"}),
			node("Transpose", "/T2", []string{"r"}, []string{"rt"}, perm(1, 0)),
			node("Reshape", "/R2", []string{"rt", "flat1"}, []string{"y"}),
		}, `node "/R2" (Reshape, opset 13): the batch (a fixed 1) that Reshape node "/R1" wrote into its target shape is not placed yet`},
		// the Softmax of the transposed view needs the batch in its
		// first axis ([B·D, T]), the Softmax of the view itself needs it
		// outside its last ([T·B, D]): no place serves both
		{"two readers disagree", []*Node{
			node("Transpose", "/T", []string{"x"}, []string{"tbd"}, perm(1, 0, 2)),
			node("Reshape", "/R1", []string{"tbd", "flat2"}, []string{"r"}),
			node("Transpose", "/T2", []string{"r"}, []string{"rt"}, perm(1, 0)),
			sm("/sm1", "rt", "a"),
			sm("/sm2", "r", "y"),
		}, `node "/sm2" (Softmax, opset 13): the last axis holds the batch here; mlbuild's batch axis stays first (the batch here is the 1 that Reshape node "/R1" wrote into its target shape`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.nodes[len(tc.nodes)-1].Outputs[0]
			m := fixedModel([]int{3, 4}, map[string][]int64{"flat2": {3, 4}, "flat1": {12}}, out, tc.nodes...)
			ie := problemsOf(t, m)
			if !strings.Contains(ie.Error(), tc.want) {
				t.Errorf("got\n%s\nwant %q", ie.Error(), tc.want)
			}
			if !strings.Contains(ie.Hint, "dynamic_axes") {
				t.Errorf("hint %q", ie.Hint)
			}
		})
	}
}
