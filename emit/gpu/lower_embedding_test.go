package gpu

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// tokenPlan is a hand plan of causal attention scores [B, H, T, T] and
// per-token logits [B, T, C] with their loss, and optionally an embedding
// of the input ids.
func tokenPlan(embedding bool) *planner.Plan {
	const b, h, t, c = 2, 3, 4, 5
	p := &planner.Plan{Model: "tokens", Batch: b, Training: true}
	ids := testBuffer(p, "input", planner.KindInput, b, t)
	s := testBuffer(p, "scores", planner.KindActivation, b, h, t, t)
	a := testBuffer(p, "attn", planner.KindActivation, b, h, t, t)
	z := testBuffer(p, "logits", planner.KindActivation, b, t, c)
	lab := testBuffer(p, "labels", planner.KindLabels, b, t, c)
	loss := testBuffer(p, "loss", planner.KindLoss, 1)
	dz := testBuffer(p, "logits.grad", planner.KindGrad, b, t, c)
	p.Input, p.Labels, p.Output, p.Loss = ids, lab, z, loss
	p.Forward = planner.Phase{{Kernel: planner.KSoftmax, Layer: "attn", In: []planner.BufID{s}, Out: []planner.BufID{a}, Attr: planner.Attr{Axis: 3, Causal: true}}}
	if embedding {
		w := testBuffer(p, "wte.weight", planner.KindParam, 7, c)
		p.Forward = append(p.Forward, planner.Step{Kernel: planner.KEmbedding, Layer: "wte", In: []planner.BufID{ids, w, planner.NoBuf}, Out: []planner.BufID{z}})
	}
	p.Backward = planner.Phase{{Kernel: planner.KSoftmaxXent, Layer: "head", In: []planner.BufID{z, lab}, Out: []planner.BufID{loss, dz}}}
	return p
}

// TestLowerCausalSoftmaxAndTokenLoss: a causal softmax launches the causal
// kernel, one threadgroup per row of the B·H score matrices, and the loss
// over per-token logits runs over all B·T rows; an embedding is refused
// with the layer's name.
func TestLowerCausalSoftmaxAndTokenLoss(t *testing.T) {
	for _, d := range []*Dialect{Metal, CUDA} {
		prog, err := Lower(tokenPlan(false), d)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		text := describe(prog)
		if !strings.Contains(text, "softmax_causal 24x") {
			t.Errorf("%s: no causal softmax over 2·3·4 rows:\n%s", d.Name, text)
		}
		var docs []string
		for _, k := range prog.Kernels {
			docs = append(docs, k.Doc)
		}
		if j := strings.Join(docs, "\n"); !strings.Contains(j, "causal softmax of 6 score matrices of 4×4") || !strings.Contains(j, "softmax cross-entropy, batch 8, 5 classes") {
			t.Errorf("%s: kernels:\n%s", d.Name, j)
		}
		_, err = Lower(tokenPlan(true), d)
		if err == nil || !strings.Contains(err.Error(), "layer wte: an embedding step has no GPU kernel yet") {
			t.Errorf("%s: lowering an embedding: %v, want the refusal naming the layer", d.Name, err)
		}
	}
}
