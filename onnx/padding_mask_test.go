package onnx

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestImportPaddingMask: Equal of the token ids with one id, viewed as
// [batch, 1, 1, T] (two Unsqueezes, one, or a Reshape), cast to bool and
// applied with Where(mask, -inf, scores) — masked_fill — or cast to
// float, multiplied by -1e9 and added, before or after a causal mask or
// alone, gives the Softmax over the keys pad: 4 (and causal: true with
// the causal mask). Each other shape of mask, fill, id or reader is
// reported, saying what was found.
func TestImportPaddingMask(t *testing.T) {
	const T, V, pad = 4, 5, 4
	tril := make([]float32, T*T)
	for i := range T {
		for j := range i + 1 {
			tril[i*T+j] = 1
		}
	}
	i64 := func(name string, dims []int64, v ...int64) *Tensor { return NewInt64Tensor(name, dims, v) }
	f32 := func(name string, v float32) *Tensor { return NewFloatTensor(name, nil, []float32{v}) }
	inits := []*Tensor{
		NewFloatTensor("wte", []int64{V, T}, ones(V*T)), NewFloatTensor("bias", []int64{1, 1, T, T}, tril),
		i64("pad", nil, pad), i64("pad3", nil, 3), i64("pads", []int64{T}, 4, 4, 4, 3),
		i64("ax1", []int64{1}, 1), i64("ax2", []int64{1}, 2), i64("ax12", []int64{2}, 1, 2), i64("ax13", []int64{2}, 1, 3),
		i64("view", []int64{4}, 0, 1, 1, T),
		f32("inf", float32(math.Inf(-1))), f32("zero", 0), f32("big", -1e9), f32("half", -0.5),
	}
	cast := func(in, out string, to DataType) *Node {
		return node("Cast", "/Cast_"+out, []string{in}, []string{out}, &Attribute{Name: "to", Type: AttrInt, I: int64(to)})
	}
	softmax := func(in string, axis int64) *Node {
		return node("Softmax", "/Softmax", []string{in}, []string{"y"}, &Attribute{Name: "axis", Type: AttrInt, I: axis})
	}
	// scores x [1, T, T] per sample: the embedding of the ids, unsqueezed
	scores := []*Node{
		node("Gather", "/wte/Gather", []string{"wte", "ids"}, []string{"e"}),
		node("Unsqueeze", "/Unsqueeze_x", []string{"e", "ax1"}, []string{"x"}),
	}
	// the padding mask mb [1, 1, T] per sample, as nanoGPT's
	// (idx == PAD)[:, None, None, :] exports
	mask := []*Node{
		node("Equal", "/Equal", []string{"ids", "pad"}, []string{"eq"}),
		node("Unsqueeze", "/Unsqueeze_1", []string{"eq", "ax1"}, []string{"m1"}),
		node("Unsqueeze", "/Unsqueeze_2", []string{"m1", "ax2"}, []string{"m"}),
		cast("m", "mb", Bool),
	}
	causal := []*Node{
		node("Equal", "/Equal_tril", []string{"bias", "zero"}, []string{"tm"}),
	}
	where := func(cond, fill, x, out string) *Node {
		return node("Where", "/Where_"+out, []string{cond, fill, x}, []string{out})
	}
	model := func(groups ...[]*Node) *Model {
		var nodes []*Node
		for _, g := range groups {
			nodes = append(nodes, g...)
		}
		return tokenModel(T, inits, "y", nodes...)
	}
	one := func(n ...*Node) []*Node { return n }
	for _, c := range []struct {
		name   string
		m      *Model
		causal bool
		want   string // "" when the import must give a softmax with pad: 4
	}{
		{"after the causal mask", model(scores, mask, causal, one(where("tm", "inf", "x", "c"), where("mb", "inf", "c", "s"), softmax("s", -1))), true, ""},
		{"before the causal mask", model(scores, mask, causal, one(where("mb", "inf", "x", "p"), where("tm", "inf", "p", "s"), softmax("s", 3))), true, ""},
		{"alone, one Unsqueeze", model(scores, one(node("Equal", "/Equal", []string{"pad", "ids"}, []string{"eq"}),
			node("Unsqueeze", "/Unsqueeze", []string{"eq", "ax12"}, []string{"m"}), where("m", "big", "x", "s"), softmax("s", -1))), false, ""},
		{"view", model(scores, one(node("Equal", "/Equal", []string{"ids", "pad"}, []string{"eq"}),
			node("Reshape", "/Reshape", []string{"eq", "view"}, []string{"m"}), cast("m", "mb", Bool), where("mb", "inf", "x", "s"), softmax("s", -1))), false, ""},
		{"additive", model(scores, mask[:3], causal, one(cast("m", "mf", Float), node("Mul", "/Mul", []string{"mf", "big"}, []string{"ma"}),
			where("tm", "inf", "x", "c"), node("Add", "/Add", []string{"c", "ma"}, []string{"s"}), softmax("s", -1))), true, ""},

		{"not a constant id", model(scores, one(node("Equal", "/Equal", []string{"ids", "ids"}, []string{"eq"}), softmax("x", -1))), false,
			"Equal of the token ids with a value that depends on the model input"},
		{"several ids", model(scores, one(node("Equal", "/Equal", []string{"ids", "pads"}, []string{"eq"}), softmax("x", -1))), false,
			"Equal of the token ids with a constant of shape 4; a padding mask compares them with one integer id"},
		{"queries", model(scores, mask[:1], one(node("Unsqueeze", "/Unsqueeze", []string{"eq", "ax13"}, []string{"m"}), where("m", "inf", "x", "s"), softmax("s", -1))), false,
			"the padding mask of node \"/Equal\" has shape 1×4×1 per sample against scores 1×4×4; it must hide keys"},
		{"not unsqueezed", model(scores, mask[:1], one(where("eq", "inf", "x", "s"), softmax("s", -1))), false,
			"has shape 4 per sample against scores 1×4×4"},
		{"fill", model(scores, mask, one(where("mb", "half", "x", "s"), softmax("s", -1))), false,
			"Where filling the padding keys with -0.5"},
		{"inverted", model(scores, mask, one(where("mb", "x", "inf", "s"), softmax("s", -1))), false,
			"Where(padding mask, x, y) choosing a runtime value where the ids are padding"},
		{"times -inf", model(scores, mask[:3], one(cast("m", "mf", Float), node("Mul", "/Mul", []string{"mf", "inf"}, []string{"ma"}),
			node("Add", "/Add", []string{"x", "ma"}, []string{"s"}), softmax("s", -1))), false, "Mul of the padding mask by -inf"},
		{"unscaled", model(scores, mask[:3], one(cast("m", "mf", Float), node("Add", "/Add", []string{"x", "mf"}, []string{"s"}), softmax("s", -1))), false,
			"Add of the padding mask of node \"/Equal\" to a constant, to another mask, or before a Mul gives it its fill"},
		{"mask reader", model(scores, mask, one(node("Relu", "/Relu", []string{"mb"}, []string{"y"}))), false,
			"reads the padding mask of node \"/Equal\" (the token ids == 4) as input 0"},
		{"mask output", model(scores, one(node("Equal", "/Equal", []string{"ids", "pad"}, []string{"y"}))), false,
			"the padding mask computed from the token ids is the model's output"},
		{"two ids", model(scores, mask, one(node("Equal", "/Equal_3", []string{"ids", "pad3"}, []string{"eq3"}),
			node("Unsqueeze", "/Unsqueeze_3", []string{"eq3", "ax12"}, []string{"m3"}),
			where("mb", "inf", "x", "p"), where("m3", "inf", "p", "s"), softmax("s", -1))), false,
			"the scores are masked at padding id 4 by node \"/Where_p\" and at id 3 here"},
		{"scores reader", model(scores, mask, one(where("mb", "inf", "x", "s"), node("Relu", "/Relu", []string{"s"}, []string{"y"}))), false,
			"reads attention scores masked by node \"/Where_s\""},
		{"scores plus", model(scores, mask, one(where("mb", "inf", "x", "p"), node("Add", "/Add", []string{"p", "half"}, []string{"s"}), softmax("s", -1))), false,
			"Add of attention scores masked by node \"/Where_p\""},
		{"axis", model(scores, mask, one(where("mb", "inf", "x", "s"), softmax("s", 2))), false,
			"Softmax over axis 2 of scores masked by node \"/Where_s\""},
		{"scores output", model(scores, mask, one(where("mb", "inf", "x", "y"))), false,
			"the output is attention scores masked by node \"/Where_y\""},
		{"causal scores output", model(scores, causal, one(where("tm", "inf", "x", "y"))), false,
			"the output is attention scores masked by node \"/Where_y\""},
	} {
		im, ok := importCase(t, c.name, c.m, c.want)
		if !ok {
			continue
		}
		i := slices.IndexFunc(im.Layers, func(l *Layer) bool { return l.Op == "softmax" })
		if i < 0 || i != len(im.Layers)-1 {
			t.Errorf("%s: layers %+v; want a softmax last", c.name, im.Layers)
			continue
		}
		l := im.Layers[i]
		want := []Field{{"pad", pad}}
		if c.causal {
			want = []Field{{"causal", true}, {"pad", pad}}
		}
		if !slices.Equal(l.Fields, want) || !slices.Equal(l.OutShape, []int{1, T, T}) {
			t.Errorf("%s: softmax %+v; want fields %v over 1×4×4", c.name, l, want)
		}
		if m := im.Mapping[len(im.Mapping)-1]; !strings.Contains(m.How, "pad: 4, the mask of") {
			t.Errorf("%s: the mapping says %q", c.name, m.How)
		}
	}
}
