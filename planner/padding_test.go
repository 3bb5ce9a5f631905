package planner

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestPaddingMask: gpt_tiny_pad.cue's softmaxes mask padding id 95. In
// plans that keep attention's steps, each softmax reads the model input
// as its second operand and its backward does not; fused, each attention
// reads it as its fourth operand and its backward as its seventh, with
// the id in the steps' attributes and the fusion's line; Verify refuses
// a mask whose ids are not [B, Tk]; the decode plan drops the mask and
// says which id it was.
func TestPaddingMask(t *testing.T) {
	m, err := spec.Load("../testdata/specs/valid/gpt_tiny_pad.cue")
	if err != nil {
		t.Fatal(err)
	}
	padded := func(a Attr) bool { return a.Padding && a.PadID == 95 }
	unfused := mustBuild(t, m, Options{Training: true, Fusion: true, Target: cpuUnfused})
	n := 0
	for _, s := range unfused.Forward {
		if s.Kernel == KSoftmax {
			n++
			if !padded(s.Attr) || len(s.In) != 2 || s.In[1] != unfused.Input {
				t.Errorf("softmax %s: %+v reading %v; want padding id 95 and the input %d second", s.Layer, s.Attr, s.In, unfused.Input)
			}
		}
	}
	for _, s := range unfused.Backward {
		if s.Kernel == KSoftmaxBwd && (len(s.In) != 2 || s.Attr.Padding) {
			t.Errorf("softmax_bwd %s reads %v with %+v; want y and dy alone", s.Layer, s.In, s.Attr)
		}
	}
	if n != 2 {
		t.Fatalf("%d softmax steps, want 2", n)
	}

	fused := mustBuild(t, m, Options{Training: true, Fusion: true, Target: attentionTarget})
	fwd, bwd := 0, 0
	for _, s := range fused.Forward {
		if s.Kernel == KAttention {
			fwd++
			if !padded(s.Attr) || len(s.In) != 4 || s.In[3] != fused.Input {
				t.Errorf("attention %s: %+v reading %v; want padding id 95 and the input fourth", s.Layer, s.Attr, s.In)
			}
		}
	}
	for _, s := range fused.Backward {
		if s.Kernel == KAttentionBwd {
			bwd++
			if !padded(s.Attr) || len(s.In) != 7 || s.In[6] != fused.Input {
				t.Errorf("attention_bwd %s: %+v reading %v; want padding id 95 and the input seventh", s.Layer, s.Attr, s.In)
			}
		}
	}
	if fwd != 2 || bwd != 2 {
		t.Fatalf("%d attention and %d attention_bwd steps, want 2 and 2", fwd, bwd)
	}
	if f := strings.Join(fused.Fusions, "\n"); strings.Count(f, "causal attention (padding id 95)") != 2 {
		t.Errorf("fusions do not name the mask twice:\n%s", f)
	}

	// ids of the wrong shape: the scores' scratch lse [B, H, T] instead
	for i, s := range fused.Forward {
		if s.Kernel == KAttention {
			bad := clonePlanForTest(fused)
			bad.Forward[i].In[3] = s.Out[1]
			if err := Verify(bad); err == nil || !strings.Contains(err.Error(), "token ids") {
				t.Errorf("Verify of an attention whose ids are its lse: %v; want an error about the token ids", err)
			}
			break
		}
	}

	for _, target := range []Target{cpuUnfused, attentionTarget} {
		d, err := DeriveDecode(mustBuild(t, m, Options{Batch: 1, Fusion: true, Target: target}))
		if err != nil {
			t.Fatalf("%s: %v", target.Name, err)
		}
		if !d.Padded || d.PadID != 95 {
			t.Errorf("%s: decode plan Padded %v, PadID %d; want true, 95", target.Name, d.Padded, d.PadID)
		}
	}
	// the attentions masking different ids: no decode plan
	other := *m
	other.Nodes = append([]spec.Node(nil), m.Nodes...)
	for i := range other.Nodes {
		if other.Nodes[i].Name == "h1_att" {
			id := 3
			other.Nodes[i].Pad = &id
		}
	}
	if _, err := DeriveDecode(mustBuild(t, &other, Options{Batch: 1, Fusion: true, Target: attentionTarget})); err == nil || !strings.Contains(err.Error(), "different padding ids (95 and 3)") {
		t.Errorf("DeriveDecode with two padding ids: %v; want an error naming both", err)
	}
}
