package emit

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// TestTokenModelSource: the gpt_tiny program calls the fused causal
// attention (the mask reaches the kernel; training's with the dropout it
// draws, and its backward with the same draw), the embedding with its layer's name for
// the range error, the scatter-add backward, the loss over every token,
// and tells the runtime that its input holds ids of a vocabulary of 96.
func TestTokenModelSource(t *testing.T) {
	src, err := ModelSource(inputFor(t, "../testdata/specs/valid/gpt_tiny.cue", true))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		text  string
		count int
	}{
		// two blocks of batch·heads score matrices, in the training and
		// batch-4 inference plans (4·2) and the batch-1 plan (2)
		{"cpu.Attention{Mats: 8, Tq: 8, Tk: 8, D: 6, Scale: 0.4082483, Causal: true, Heads: 2, Rate: 0.1, Seed: uint32(attentionDraws[0]), Step: uint32(attentionDraws[0] >> 32)})", 2},
		{"cpu.Attention{Mats: 8, Tq: 8, Tk: 8, D: 6, Scale: 0.4082483, Causal: true})", 2},
		{"cpu.Attention{Mats: 2, Tq: 8, Tk: 8, D: 6, Scale: 0.4082483, Causal: true})", 2},
		{"attentionDraws[1] = dropoutRand.Uint64()", 1},
		{"cpu.AttentionBlocksBwd(", 2},
		{`cpu.EmbeddingFwd("wte", in0[:], in1[:], in2[:], out0[:], 32, 8, 96, 12)`, 2},
		{`cpu.EmbeddingFwd("wte", in0[:], in1[:], in2[:], out0[:], 8, 8, 96, 12)`, 1},
		{"cpu.EmbeddingBwd(in0[:], in1[:], out0[:], out1[:], 32, 8, 96, 12)", 1},
		{"cpu.SoftmaxXent(in0[:], in1[:], out1[:], 32, 96)", 1},
	} {
		if n := bytes.Count(src, []byte(want.text)); n != want.count {
			t.Errorf("the program has %d of %q, want %d", n, want.text, want.count)
		}
	}
	if !regexp.MustCompile(`\bVocab: +96,`).Match(src) {
		t.Error("the program's Meta does not say that its input holds token ids of a vocabulary of 96")
	}
	if bytes.Contains(src, []byte("cpu.SoftmaxFwd(")) || bytes.Contains(src, []byte("cpu.SoftmaxCausalFwd(")) {
		t.Error("a softmax of gpt_tiny runs outside the fused attention")
	}
}

// TestTokenModelSourceBF16: in a bf16 gpt_tiny, every fused attention of
// the CPU program multiplies in bf16 (its plans give the steps bf16) and
// no attention of the f32 program does.
func TestTokenModelSourceBF16(t *testing.T) {
	in := inputFor(t, "../testdata/specs/valid/gpt_tiny.cue", true)
	f32, err := ModelSource(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Model.Precision = planner.PrecisionBF16
	var plans []*planner.Plan
	for _, o := range []planner.Options{{Training: true, Fusion: true}, {Fusion: true}, {Fusion: true, Batch: 1}} {
		p, err := planner.Build(in.Model, o)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	in.Train, in.Infer, in.Infer1 = plans[0], plans[1], plans[2]
	bf, err := ModelSource(in)
	if err != nil {
		t.Fatal(err)
	}
	attn := regexp.MustCompile(`cpu\.Attention\{[^}]*\}`)
	for _, c := range []struct {
		name string
		src  []byte
		want bool
	}{{"f32", f32, false}, {"bf16", bf, true}} {
		lits := attn.FindAll(c.src, -1)
		if len(lits) != 8 { // as TestTokenModelSource counts them: 2 forward in each plan, 2 backward
			t.Errorf("%s: %d attention literals, want 8", c.name, len(lits))
		}
		for _, l := range lits {
			if got := bytes.Contains(l, []byte("BF16: true")); got != c.want {
				t.Errorf("%s: %s", c.name, l)
			}
		}
	}
}
