package emit

import (
	"bytes"
	"regexp"
	"testing"
)

// TestTokenModelSource: the gpt_tiny program calls the causal softmax
// (the mask reaches the kernel), the embedding with its layer's name for
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
		{"cpu.SoftmaxCausalFwd(in0[:], out0[:], 8, 8)", 4},
		{"cpu.SoftmaxCausalFwd(in0[:], out0[:], 2, 8)", 2},
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
	if bytes.Contains(src, []byte("cpu.SoftmaxFwd(")) {
		t.Error("a softmax of gpt_tiny runs without its causal mask")
	}
}
