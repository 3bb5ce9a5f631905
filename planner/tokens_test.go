package planner

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// tokens is a one-head causal attention over token ids: an embedding with
// learned positions, causal softmax, logits per token and the mean
// cross-entropy over every token.
func tokens() *spec.Model {
	b := newModel("tokens", 6)
	x := b.add(spec.Node{Name: "wte", Op: spec.OpEmbedding, Vocab: 7, Dim: 8, Positions: true}, func(in [][]int) []int {
		return []int{in[0][0], 8}
	})
	q := b.dense("q", 8, x)
	k := b.dense("k", 8, x)
	v := b.dense("v", 8, x)
	kt := b.add(spec.Node{Name: "kt", Op: spec.OpTranspose, Perm: []int{1, 0}}, func(in [][]int) []int {
		return []int{in[0][1], in[0][0]}
	}, k)
	mm := func(in [][]int) []int { return []int{in[0][0], in[1][1]} }
	s := b.add(spec.Node{Name: "scores", Op: spec.OpMatMul}, mm, q, kt)
	a := b.add(spec.Node{Name: "attn", Op: spec.OpSoftmax, Axis: 1, Causal: true}, same, s)
	c := b.add(spec.Node{Name: "ctx", Op: spec.OpMatMul}, mm, a, v)
	r := b.add(spec.Node{Name: "res", Op: spec.OpAdd}, same, x, c)
	b.dense("head", 7, r)
	return b.model()
}

// TestTokenModelPlan: the embedding's tables get their gradients from one
// embedding_bwd, the ids none; the causal softmax keeps its mask; the loss
// reads logits and labels per token.
func TestTokenModelPlan(t *testing.T) {
	p := mustBuild(t, tokens(), Options{Batch: 3, Training: true, Fusion: true, Target: cpuUnfused})
	var emb, bwd, soft *Step
	for _, s := range p.allSteps() {
		switch s.Kernel {
		case KEmbedding:
			emb = s
		case KEmbeddingBwd:
			bwd = s
		case KSoftmax:
			soft = s
		}
	}
	if emb == nil || bwd == nil || soft == nil {
		t.Fatalf("plan lacks an embedding (%v), its backward (%v) or the softmax (%v)", emb != nil, bwd != nil, soft != nil)
	}
	if emb.In[0] != p.Input || p.Buffers[emb.In[1]].Name != "wte.weight" || p.Buffers[emb.In[2]].Name != "wte.pos" {
		t.Errorf("embedding reads %v, want the input, wte.weight and wte.pos", emb.In)
	}
	if got := []string{p.Buffers[bwd.Out[0]].Name, p.Buffers[bwd.Out[1]].Name}; got[0] != "wte.weight.grad" || got[1] != "wte.pos.grad" {
		t.Errorf("embedding_bwd writes %v, want wte.weight.grad and wte.pos.grad", got)
	}
	if !soft.Attr.Causal || soft.Attr.Axis != 2 {
		t.Errorf("softmax attr %+v, want causal along axis 2", soft.Attr)
	}
	if got := p.shapeOf(p.Labels); !equalShapes(got, []int{3, 6, 7}) {
		t.Errorf("labels %v, want one-hot per token [3 6 7]", got)
	}
	var text strings.Builder
	if err := WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "softmax(axis 2 causal)") {
		t.Errorf("the plan text does not show the causal softmax:\n%s", text.String())
	}
}

// TestTokenModelRefusals: an embedding must read the model input, a causal
// softmax square scores over its last axis, and per-token logits need an
// embedding.
func TestTokenModelRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(m *spec.Model)
		want   string
	}{
		{"causal over another axis", func(m *spec.Model) { m.Node("attn").Axis = 0 }, "causal softmax needs scores"},
		{"causal log-softmax", func(m *spec.Model) { m.Node("attn").Op = spec.OpLogSoftmax }, "causal softmax needs scores"},
	} {
		m := tokens()
		tc.break_(m)
		_, err := Build(m, Options{Batch: 2, Training: true, Fusion: true, Target: CPU})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Build error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestEmbeddingReadsTheInput: ids computed by the model are refused,
// with the layer's position.
func TestEmbeddingReadsTheInput(t *testing.T) {
	b := newModel("computed_ids", 4)
	b.unary("twice", spec.OpMulConst, 2)
	b.add(spec.Node{Name: "wte", Op: spec.OpEmbedding, Vocab: 9, Dim: 3}, func(in [][]int) []int { return []int{in[0][0], 3} })
	b.flatten("flat")
	b.dense("head", 2)
	_, err := Build(b.model(), Options{Batch: 2, Training: true, Target: CPU})
	if err == nil || !strings.Contains(err.Error(), `computed_ids.cue:3:3: layer wte: embedding reads token ids, which only the model input holds; its input "twice" is computed by the model`) {
		t.Errorf("Build error %v, want the refusal of computed ids", err)
	}
}

// TestPerTokenLossNeedsTokens: logits [T, C] without an embedding are
// still refused, as the schema refuses them.
func TestPerTokenLossNeedsTokens(t *testing.T) {
	b := newModel("rank2", 4, 5)
	b.dense("head", 3)
	_, err := Build(b.model(), Options{Batch: 2, Training: true, Target: CPU})
	if err == nil || !strings.Contains(err.Error(), "softmax_cross_entropy needs an output of shape [classes] (or [tokens, classes] after an embedding), got [4,3]") {
		t.Errorf("Build error %v, want the refusal of [4 3] logits without token ids", err)
	}
}

// TestTiedHead: a dense head tied to the embedding reads the embedding's
// weight and declares none of its own; the gemm's backward and the
// embedding's each write a part of wte.weight's gradient, which one
// accumulate step sums into it, after both.
func TestTiedHead(t *testing.T) {
	m := tokens()
	head := &m.Nodes[len(m.Nodes)-1]
	head.Tie = "wte"
	p := mustBuild(t, m, Options{Batch: 3, Training: true, Fusion: true, Target: CPU})
	var w, g BufID = NoBuf, NoBuf
	for _, pr := range p.Params {
		if pr.Name == "head.weight" {
			t.Errorf("the tied head declares a weight of its own")
		}
		if pr.Name == "wte.weight" {
			w, g = pr.Buf, pr.Grad
		}
	}
	var gemm *Step
	for i := range p.Forward {
		if p.Forward[i].Layer == "head" {
			gemm = &p.Forward[i]
		}
	}
	if gemm == nil || gemm.In[1] != w {
		t.Fatalf("the head's step %+v does not read wte.weight (%d)", gemm, w)
	}
	writers, at := 0, -1
	var parts []BufID
	for i, s := range p.Backward {
		for _, o := range s.Out {
			if o == g {
				writers++
				at = i
			}
		}
		if s.Kernel == KGemmBwd && s.Layer == "head" || s.Kernel == KEmbeddingBwd {
			parts = append(parts, s.Out[map[Kernel]int{KGemmBwd: 1, KEmbeddingBwd: 0}[s.Kernel]])
		}
	}
	if writers != 1 || p.Backward[at].Kernel != KAccumulate {
		t.Fatalf("wte.weight.grad written by %d steps, the last %v; want one accumulate", writers, p.Backward[at].Kernel)
	}
	acc := p.Backward[at]
	if len(parts) != 2 || !(acc.In[0] == parts[0] && acc.In[1] == parts[1]) {
		t.Errorf("accumulate sums %v, want the parts %v of the head's and the embedding's backward", acc.In, parts)
	}
	for _, s := range p.Backward[at+1:] {
		for _, id := range s.In {
			if id == parts[0] || id == parts[1] {
				t.Errorf("step %s reads a part after the sum", s.Kernel)
			}
		}
	}
	// A tie to something that is not an embedding is refused.
	m = tokens()
	m.Nodes[len(m.Nodes)-1].Tie = "q"
	if _, err := Build(m, Options{Batch: 3, Training: true, Target: CPU}); err == nil || !strings.Contains(err.Error(), "ties only to an embedding") {
		t.Errorf("tie to a dense layer: %v", err)
	}
}
