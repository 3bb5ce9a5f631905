package planner

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// bf16Target is a GPU-like target whose bf16 GEMMs read bfloat16 twins
// that layer norm, element-wise chains, dropout's backward, the fused
// attention forward and backward, softmax cross-entropy's gradient and
// the given optimizers write, as emit/gpu's (which the planner cannot
// import).
func bf16Target(updates ...Kernel) Target {
	u := map[Kernel]bool{}
	for _, k := range updates {
		u[k] = true
	}
	return Target{Name: "gpu", Conv: cpuConv, UpdateTensors: 64, Attention: true, LossRows: true,
		Dense: func(_ int, want string) DenseChoice { return DenseChoice{Precision: want} },
		BF16: &BF16Twins{Producers: map[Kernel][]int{KLayerNorm: {0}, KUnary: {0}, KUnaryBwd: {0}, KDropoutBwd: {0},
			KAttention: {0}, KAttentionBwd: {0, 1, 2}, KSoftmaxXent: {1}}, Updates: u}}
}

// TestTwinOperands: in a bf16 plan for a target whose GEMMs read
// bfloat16 twins, every dense layer that reads a layer norm's or a GELU's
// output gets that output's twin and its weight's (the tiny GPT's q, k,
// v, fc, mlp and the tied head: 5 layer norms and 2 GELUs, 11 weights),
// and in a training plan proj too, which reads the fused attention's
// output (2 twins; an inference plan keeps the transpose that merges the
// heads, which writes none); in a training plan the backward GEMMs of
// every dense layer read the twins of their incoming gradients (from
// GELU's and dropout's backward, the attention's dq, dk and dv, and the
// loss's gradient: 13) with x's and W's (proj's weights: 2 more), no step
// names a twin, the weights' twins sit in the state arena after
// everything else and the activations' in the work arena, taking half
// the places; each is listed by `mlbuild plan`. An f32 plan, a target
// without the capability, and a training plan whose optimizer does not
// write twins get no weight twins.
func TestTwinOperands(t *testing.T) {
	load := func(precision string) *spec.Model {
		m, err := spec.Load("../testdata/specs/bf16/gpt_tiny_bf16.cue")
		if err != nil {
			t.Fatal(err)
		}
		m.Precision = precision
		return m
	}
	adam := bf16Target(KAdam, KAdamMulti, KSGD, KSGDMulti)
	for _, tc := range []struct {
		name                 string
		precision            string
		training             bool
		target               Target
		activations, weights int
		readers              []string // the layers whose GEMMs read twins
	}{
		{"training", "bf16", true, adam, 22, 13, []string{"h0_q", "h0_k", "h0_v", "h0_proj", "h0_fc", "h0_mlp", "h1_q", "h1_k", "h1_v", "h1_proj", "h1_fc", "h1_mlp", "lm_head"}},
		{"inference", "bf16", false, adam, 7, 11, []string{"h0_q", "h0_k", "h0_v", "h0_fc", "h0_mlp", "h1_q", "h1_k", "h1_v", "h1_fc", "h1_mlp", "lm_head"}},
		{"f32 plan", "f32", true, adam, 0, 0, nil},
		{"tf32 plan", "tf32", true, adam, 0, 0, nil},
		{"no capability", "bf16", true, Target{Name: "gpu", Conv: cpuConv, UpdateTensors: 64, Dense: adam.Dense}, 0, 0, nil},
		{"optimizer writes no twins", "bf16", true, bf16Target(KSGD), 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustBuild(t, load(tc.precision), Options{Training: tc.training, Fusion: true, Target: tc.target})
			var acts, weights int
			for _, tw := range p.Twins {
				of, b := p.Buffers[tw.Of], p.Buffers[tw.Twin]
				if b.Elem != ElemBF16 || b.Slots() != (of.Size+1)/2 || b.Name != of.Name+".bf16" {
					t.Errorf("twin %s of %s: elem %q, %d places for %d elements", b.Name, of.Name, b.Elem, b.Slots(), of.Size)
				}
				switch {
				case b.Kind == KindParamBF16 && of.Kind == KindParam && b.Arena == ArenaState:
					weights++
					for _, id := range append([]BufID{}, paramBuffers(p)...) {
						if pb := p.Buffers[id]; pb.Offset > b.Offset {
							t.Errorf("%s at %d is placed after the weight twin %s at %d", pb.Name, pb.Offset, b.Name, b.Offset)
						}
					}
				case b.Kind == of.Kind && b.Arena == ArenaWork:
					acts++
					// Live from the producer to the last GEMM reading it, not
					// through the backward that reads the float32 value.
					first, last := liveRanges(p)
					r := p.allSteps()[tw.LastRead]
					reads := (r.Kernel == KGemm || r.Kernel == KGemmBwd) && (p.root(r.In[0]) == tw.Of || r.Kernel == KGemmBwd && p.root(r.In[3]) == tw.Of)
					if last[tw.Twin] != tw.LastRead || first[tw.Twin] != first[tw.Of] || !reads {
						t.Errorf("twin %s lives from step %d to %d; want %d (its producer's) to %d (%s %s, its last reader)", b.Name, first[tw.Twin], last[tw.Twin], first[tw.Of], tw.LastRead, r.Kernel, r.Layer)
					}
				default:
					t.Errorf("twin %s (%s, %s arena) of %s (%s)", b.Name, b.Kind, b.Arena, of.Name, of.Kind)
				}
			}
			if acts != tc.activations || weights != tc.weights {
				t.Errorf("%d activation twins and %d weight twins, want %d and %d", acts, weights, tc.activations, tc.weights)
			}
			var readers []string
			for _, s := range p.Forward {
				if s.Kernel == KGemm && p.TwinOf(s.In[0]) != NoBuf && p.TwinOf(s.In[1]) != NoBuf {
					readers = append(readers, s.Layer)
				}
			}
			if !slices.Equal(readers, tc.readers) {
				t.Errorf("the GEMMs with both operands twinned are %v, want %v", readers, tc.readers)
			}
			var text bytes.Buffer
			if err := WriteText(&text, p); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(text.String(), "bf16 operands ("); got != (len(p.Twins) > 0) {
				t.Errorf("plan text lists twins: %v, want %v", got, len(p.Twins) > 0)
			}
			if len(p.Twins) > 0 && !strings.Contains(text.String(), "h0_ln1.out.bf16: written by layernorm h0_ln1, read by the GEMMs of h0_q, h0_k, h0_v") {
				t.Errorf("plan text does not say what writes and reads h0_ln1's twin:\n%s", text.String())
			}
		})
	}
}

// paramBuffers are the buffers of the state arena other than twins.
func paramBuffers(p *Plan) []BufID {
	var ids []BufID
	for i, b := range p.Buffers {
		if b.Arena == ArenaState && b.Kind != KindParamBF16 && b.AliasOf == NoBuf {
			ids = append(ids, BufID(i))
		}
	}
	return ids
}

// TestVerifyTwins: Verify refuses twins that break the contract.
func TestVerifyTwins(t *testing.T) {
	m, err := spec.Load("../testdata/specs/bf16/gpt_tiny_bf16.cue")
	if err != nil {
		t.Fatal(err)
	}
	base := mustBuild(t, m, Options{Training: true, Fusion: true, Target: bf16Target(KAdam, KAdamMulti)})
	if len(base.Twins) == 0 {
		t.Fatal("no twins to break")
	}
	for _, c := range []struct {
		name   string
		break_ func(p *Plan)
		want   string
	}{
		{"float32 twin", func(p *Plan) { p.Buffers[p.Twins[0].Twin].Elem = "" }, "bfloat16 twin"},
		{"a buffer in two twins", func(p *Plan) { p.Twins = append(p.Twins, p.Twins[0]) }, "two twins"},
		{"step names a twin", func(p *Plan) { p.Forward[0].Out[0] = p.Twins[0].Twin }, "names the twin"},
		{"bf16 buffer not a twin", func(p *Plan) { p.Twins = p.Twins[1:] }, "no twin"},
		{"another shape", func(p *Plan) { p.Twins[0].Of = p.Twins[1].Of }, "shape"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := clonePlanForTest(base)
			c.break_(p)
			if err := Verify(p); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Verify = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// clonePlanForTest copies the parts of p the cases above change.
func clonePlanForTest(p *Plan) *Plan {
	q := *p
	q.Buffers = slices.Clone(p.Buffers)
	q.Twins = slices.Clone(p.Twins)
	q.Forward = slices.Clone(p.Forward)
	for i := range q.Forward {
		q.Forward[i].Out = slices.Clone(q.Forward[i].Out)
	}
	return &q
}

// floatGemms counts the GEMMs of p's forward and backward that read a
// float32 A or B where the plan is bf16, by what each computes ("forward",
// "dW", "dx") and the kind of its layer (the name after the block's
// prefix: "q", "proj", "lm_head"): a GEMM reads bfloat16 operands
// (emit/gpu's dense lowering) when both have twins, and in the backward
// only without a fused activation, whose derivative rewrites dy first.
func floatGemms(p *Plan) map[string]int {
	kind := func(layer string) string {
		if i := strings.IndexByte(layer, '_'); i > 0 && layer[0] == 'h' {
			return layer[i+1:]
		}
		return layer
	}
	twinned := func(ids ...BufID) bool {
		for _, id := range ids {
			if p.TwinOf(id) == NoBuf {
				return false
			}
		}
		return true
	}
	n := map[string]int{}
	for _, st := range p.Forward {
		if st.Kernel == KGemm && st.Attr.Precision == PrecisionBF16 && !twinned(st.In[0], st.In[1]) {
			n["forward "+kind(st.Layer)]++
		}
	}
	for _, st := range p.Backward {
		if st.Kernel != KGemmBwd || st.Attr.Precision != PrecisionBF16 {
			continue
		}
		x, w, dy := st.In[0], st.In[1], st.In[3]
		if st.Out[1] != NoBuf && (st.Attr.Act != "" || !twinned(dy, x)) {
			n["dW "+kind(st.Layer)]++
		}
		if st.Out[0] != NoBuf && (st.Attr.Act != "" || !twinned(dy, w)) {
			n["dx "+kind(st.Layer)]++
		}
	}
	return n
}

// TestTwinOperandsGPT: in the bf16 training plan of models/gpt.cue for a
// target whose GEMMs read bfloat16 twins (as CUDA's), no GEMM of a dense
// layer reads a float32 operand: proj's forward and dW read the fused
// attention's output's twin, q's, k's and v's backward the twins of dq,
// dk and dv, and lm_head's backward the twin of the loss's gradient.
func TestTwinOperandsGPT(t *testing.T) {
	m, err := spec.Load("../models/gpt.cue")
	if err != nil {
		t.Fatal(err)
	}
	m.Precision = PrecisionBF16
	p := mustBuild(t, m, Options{Training: true, Fusion: true, Target: bf16Target(KAdam, KAdamMulti, KSGD, KSGDMulti)})
	gemms := 0
	for _, st := range p.allSteps() {
		if st.Kernel == KGemm || st.Kernel == KGemmBwd {
			gemms++
		}
	}
	if gemms != 6*6+1+6*6+1 {
		t.Fatalf("%d dense steps, want 74 (6 blocks of q, k, v, proj, fc and mlp, and lm_head, forward and backward)", gemms)
	}
	if n := floatGemms(p); len(n) != 0 {
		t.Errorf("GEMMs with a float32 operand: %v, want none", n)
	}
}
