package emit

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

var tokenLayerField = regexp.MustCompile(`\bTokenLayer: +"wte",`)

// TestGPTProgramsForTheGPU: the GPT specs (models/gpt.cue, the Moby-Dick
// benchmark's spec and the tiny test GPT) make programs for both GPU
// backends, each with the embedding's gather and backward kernels, the
// TokenLayer by which the host names a bad id, and fused attention
// kernels instead of a causal softmax over the scores.
func TestGPTProgramsForTheGPU(t *testing.T) {
	for _, file := range []string{"../models/gpt.cue", "../testdata/text/gpt_moby.cue", "../testdata/specs/valid/gpt_tiny.cue"} {
		for _, b := range []*Backend{Metal, CUDA} {
			files, err := b.program(backendInput(t, b, file, true, 0))
			if err != nil {
				t.Errorf("%s for %s: %v", file, b.Name, err)
				continue
			}
			text := map[string]string{}
			for _, f := range files {
				text[f.Path] = string(f.Data)
			}
			if !tokenLayerField.MatchString(text["main.go"]) {
				t.Errorf("%s for %s: main.go names no token layer", file, b.Name)
			}
			for _, want := range []string{"_embedding(", "_embedding_bwd(", "_embedding_pos_bwd(",
				"_attention(", "_attention_delta(", "_attention_bwd_kv(", "_attention_bwd_q("} {
				if !strings.Contains(text["kernels.go"], want) {
					t.Errorf("%s for %s: kernels.go has no kernel %q", file, b.Name, want)
				}
			}
			// the attention is fused: no causal softmax over scores
			if strings.Contains(text["kernels.go"], "_softmax_causal(") {
				t.Errorf("%s for %s: kernels.go has a causal softmax over the scores", file, b.Name)
			}
		}
	}
}

// TestGPUPlansFuseAttention: models/gpt.cue's training plan for each GPU
// backend holds no buffer of scores [B, H, T, T] (the CPU's holds 54) and
// its work arena is more than 2 GiB smaller than the CPU's.
func TestGPUPlansFuseAttention(t *testing.T) {
	m, err := spec.Load("../models/gpt.cue")
	if err != nil {
		t.Fatal(err)
	}
	scores := func(p *planner.Plan) int {
		n := 0
		for _, b := range p.Buffers {
			if len(b.Shape) == 4 && b.Shape[1] == 6 && b.Shape[2] == 256 && b.Shape[3] == 256 {
				n++
			}
		}
		return n
	}
	opts := planner.Options{Training: true, Fusion: true}
	cpu, err := planner.Build(m, CPU.PlanOptions(opts))
	if err != nil {
		t.Fatal(err)
	}
	if n := scores(cpu); n == 0 {
		t.Fatalf("the CPU plan has no scores buffers: the test looks for the wrong shape")
	}
	for _, b := range []*Backend{Metal, CUDA} {
		p, err := planner.Build(m, b.PlanOptions(opts))
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		drop := int64(cpu.WorkSize-p.WorkSize) * 4
		t.Logf("%s: work arena %d MiB, the CPU's %d MiB", b.Name, int64(p.WorkSize)*4>>20, int64(cpu.WorkSize)*4>>20)
		if n := scores(p); n != 0 || drop < 2<<30 {
			t.Errorf("%s: %d scores buffers, work arena %d bytes below the CPU's; want none and more than 2 GiB", b.Name, n, drop)
		}
	}
}
