package emit

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

var tokenLayerField = regexp.MustCompile(`\bTokenLayer: +"wte",`)

// TestGPTProgramsForTheGPU: the GPT specs (models/gpt.cue, the Moby-Dick
// benchmark's spec, the tiny test GPT and the one whose attention masks
// padding) make programs for both GPU backends, each with the embedding's
// gather and backward kernels, the TokenLayer by which the host names a
// bad id, and fused attention kernels instead of a causal softmax over
// the scores; the padded GPT's attention kernels mask its pad id, 95.
func TestGPTProgramsForTheGPU(t *testing.T) {
	for _, file := range []string{"../models/gpt.cue", "../testdata/text/gpt_moby.cue", "../testdata/specs/valid/gpt_tiny.cue", "../testdata/specs/valid/gpt_tiny_pad.cue"} {
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
			if strings.Contains(text["kernels.go"], "_softmax_causal(") || strings.Contains(text["kernels.go"], "_softmax_padded(") {
				t.Errorf("%s for %s: kernels.go has a causal softmax over the scores", file, b.Name)
			}
			// kernels_attention.go's attnGeom.String, in each kernel's doc
			if pad := strings.Count(text["kernels.go"], "padding id 95"); strings.HasSuffix(file, "_pad.cue") != (pad > 0) {
				t.Errorf("%s for %s: %d attention kernels mask padding", file, b.Name, pad)
			}
		}
	}
}

// TestGPUPlansFuseAttention: models/gpt.cue's training plan for each GPU
// backend holds no buffer of scores [B, H, T, T] (the same plan without
// fused attention holds 54) and its work arena is more than 2 GiB smaller
// than that plan's.
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
	unfused := CPU.PlanOptions(opts) // the CPU's plan with attention's steps one by one
	unfused.Target.Attention = false
	cpu, err := planner.Build(m, unfused)
	if err != nil {
		t.Fatal(err)
	}
	if n := scores(cpu); n == 0 {
		t.Fatalf("the unfused plan has no scores buffers: the test looks for the wrong shape")
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

// TestGPUDropoutStreams: in models/gpt.cue's CUDA program, whose 13
// dropout layers have one shape and whose 6 attentions drop
// probabilities, the kernels that draw a mask xor 19 different streams
// into the step's seed (were they alike, the layers would drop the same
// elements in a step), 13 of them in the dropout kernels, and the CPU
// references draw with the same 19.
func TestGPUDropoutStreams(t *testing.T) {
	src, err := CUDA.RenderGPU(backendInput(t, CUDA, "../models/gpt.cue", true, 0))
	if err != nil {
		t.Fatal(err)
	}
	set := func(re, text string, base int) map[uint64]bool {
		m := map[uint64]bool{}
		for _, s := range regexp.MustCompile(re).FindAllStringSubmatch(text, -1) {
			v, err := strconv.ParseUint(s[1], base, 32)
			if err != nil {
				t.Fatal(err)
			}
			m[v] = true
		}
		return m
	}
	kernels := set(`args\[2\] \^ ([0-9]+)u`, src.KernelSource, 10)
	dropout := set(`dropout rate 0\.2, stream 0x([0-9a-f]+)`, src.KernelSource, 16)
	refs := set(`dropoutUniform\(seed\^0x([0-9a-f]+)`, string(src.Main), 16)
	if len(kernels) != 19 || len(dropout) != 13 || len(refs) != 19 {
		t.Errorf("%d streams in the kernels, %d in the dropout kernels, %d in the references: want 19, 13, 19", len(kernels), len(dropout), len(refs))
	}
	for s := range dropout {
		if !kernels[s] {
			t.Errorf("stream %#x of a dropout kernel's name is not in its draws", s)
		}
	}
	for s := range kernels {
		if !refs[s] {
			t.Errorf("no CPU reference draws with the kernels' stream %#x", s)
		}
	}
}
