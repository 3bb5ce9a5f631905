package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// attentionTarget is a GPU-like target with fused attention kernels.
var attentionTarget = Target{Name: "gpu", Conv: CPU.Conv, Attention: true}

// cpuUnfused is the CPU target without fused attention: a target whose
// plans keep attention's matmul, softmax and dropout steps.
var cpuUnfused = func() Target { t := CPU; t.Name, t.Attention = "cpu-unfused", false; return t }()

// scoresBuffers counts the buffers shaped like a layer's scores
// [B, H, T, T] (the scores, their scaled copy, the probabilities, the
// dropout's mask and output, and their gradients).
func scoresBuffers(p *Plan, b, h, tt int) int {
	n := 0
	for _, buf := range p.Buffers {
		if equalShapes(buf.Shape, []int{b, h, tt, tt}) {
			n++
		}
	}
	return n
}

// TestFuseAttentionGPT: models/gpt.cue's plans for a target with fused
// attention have one attention step per block (and one attention_bwd in
// training), no buffer of scores [B, H, T, T] left, and a work arena
// smaller by at least the scores it no longer keeps; the CPU's plans
// fuse it the same way (AttentionBlocksFwd and Bwd), while a target
// without fused attention keeps every scores buffer, and so do plans
// without fusion.
func TestFuseAttentionGPT(t *testing.T) {
	m, err := spec.Load("../models/gpt.cue")
	if err != nil {
		t.Fatal(err)
	}
	const b, h, tt, layers = 64, 6, 256, 6
	for _, training := range []bool{true, false} {
		cpu := mustBuild(t, m, Options{Training: training, Fusion: true, Target: cpuUnfused})
		gpu := mustBuild(t, m, Options{Training: training, Fusion: true, Target: attentionTarget})
		if n := countKernel(mustBuild(t, m, Options{Training: training, Fusion: true}).Forward, KAttention); n != layers {
			t.Errorf("training %v: the CPU's plan has %d attention steps, want %d", training, n, layers)
		}
		unfused := mustBuild(t, m, Options{Training: training, Fusion: false, Target: attentionTarget})
		fwd, bwd := countKernel(gpu.Forward, KAttention), countKernel(gpu.Backward, KAttentionBwd)
		wantBwd := 0
		if training {
			wantBwd = layers
		}
		if fwd != layers || bwd != wantBwd {
			t.Errorf("training %v: %d attention and %d attention_bwd steps, want %d and %d", training, fwd, bwd, layers, wantBwd)
		}
		for _, s := range gpu.Forward {
			if s.Kernel == KMatMul || s.Kernel == KSoftmax {
				t.Errorf("training %v: a %s step (%s) is left", training, s.Kernel, s.Layer)
			}
			if s.Kernel == KAttention {
				// an inference plan's dropout is a view, no step; a
				// training plan's attention took the head transposes too
				// (fuse_attention_layout.go)
				if fused := map[bool]int{true: 9, false: 4}[training]; !s.Attr.Causal || s.Attr.Scale != 0.125 || len(s.Fused) != fused {
					t.Errorf("training %v: %s: causal %v, scale %g, fused %q; want causal, 1/√64 and %d layers", training, s.Layer, s.Attr.Causal, s.Attr.Scale, s.Fused, fused)
				}
				if want := map[bool]float64{true: 0.2, false: 0}[training]; s.Attr.Rate != want {
					t.Errorf("training %v: %s: dropout %g, want %g", training, s.Layer, s.Attr.Rate, want)
				}
			}
		}
		for _, p := range []*Plan{cpu, unfused} {
			if n := countKernel(p.Forward, KAttention); n != 0 {
				t.Errorf("training %v, target %s, fusion %v: %d attention steps, want none", training, p.Model, p.Fusion, n)
			}
		}
		n := scoresBuffers(gpu, b, h, tt)
		if n != 0 {
			t.Errorf("training %v: %d buffers of scores [%d,%d,%d,%d] left", training, n, b, h, tt, tt)
		}
		nCPU := scoresBuffers(cpu, b, h, tt)
		// per layer: scores, scaled, probabilities, (training) mask and
		// dropout's output, and the gradients of those not computed in
		// place
		if want := map[bool]int{true: 9, false: 4}[training] * layers; nCPU != want {
			t.Errorf("training %v: the unfused plan has %d scores buffers, want %d (unchanged)", training, nCPU, want)
		}
		// Training keeps each layer's probabilities and mask from the
		// forward to the backward: the work arena shrinks by more than two
		// of a layer's scores (25 Mi float32s) a layer (5.6 GiB to 3.5
		// GiB). Inference's peak is the MLP's, so it shrinks less.
		least := 2 * layers * b * h * tt * tt
		if !training {
			least = 1
		}
		drop := cpu.WorkSize - gpu.WorkSize
		t.Logf("training %v: work arena %.1f MiB unfused, %.1f MiB with fused attention (%d scores buffers gone)",
			training, float64(cpu.WorkSize)*4/(1<<20), float64(gpu.WorkSize)*4/(1<<20), nCPU)
		if drop < least {
			t.Errorf("training %v: the work arena shrinks by %d float32s, want at least %d", training, drop, least)
		}
	}
}

// countKernel counts the steps of ph that run kernel k.
func countKernel(ph Phase, k Kernel) int {
	n := 0
	for _, s := range ph {
		if s.Kernel == k {
			n++
		}
	}
	return n
}

// TestFuseAttentionPlain: transformer_block's attention, with no mask
// and no dropout, fuses with its scale and Causal false; with the
// probabilities read twice (the model's output is the softmax) nothing
// fuses.
func TestFuseAttentionPlain(t *testing.T) {
	m, err := spec.Load("../testdata/specs/valid/transformer_block.cue")
	if err != nil {
		t.Fatal(err)
	}
	p := mustBuild(t, m, Options{Training: true, Fusion: true, Target: attentionTarget})
	if n := countKernel(p.Forward, KAttention); n != 1 {
		t.Fatalf("%d attention steps, want 1", n)
	}
	for _, s := range p.Forward {
		if s.Kernel == KAttention && (s.Attr.Causal || s.Attr.Scale != 0.5 || s.Attr.Rate != 0) {
			t.Errorf("attention attr %+v, want scale 0.5, no mask, no dropout", s.Attr)
		}
	}
	if n := countKernel(p.Backward, KAttentionBwd); n != 1 {
		t.Errorf("%d attention_bwd steps, want 1", n)
	}
	// The probabilities are the output: nothing fuses.
	m.Output = "attn"
	p = mustBuild(t, m, Options{Training: false, Fusion: true, Target: attentionTarget})
	if n := countKernel(p.Forward, KAttention); n != 0 {
		t.Errorf("the probabilities are the model's output, yet %d attention steps", n)
	}
}

// TestFuseAttentionTiny: gpt_tiny's attention_bwd computes dq, dkᵀ and
// dv, with a scratch delta [B, H, T] and the forward's attributes.
func TestFuseAttentionTiny(t *testing.T) {
	m, err := spec.Load("../testdata/specs/valid/gpt_tiny.cue")
	if err != nil {
		t.Fatal(err)
	}
	p := mustBuild(t, m, Options{Training: true, Fusion: true, Target: attentionTarget})
	var bwd *Step
	for i, s := range p.Backward {
		if s.Kernel == KAttentionBwd {
			bwd = &p.Backward[i]
			break
		}
	}
	if bwd == nil {
		t.Fatal("no attention_bwd step")
	}
	// dq, dkᵀ and dv all needed (q, k and v come from trained weights),
	// delta a scratch [B, H, T]
	for k, name := range []string{"dq", "dkt", "dv"} {
		if bwd.Out[k] == NoBuf {
			t.Errorf("attention_bwd computes no %s", name)
		}
	}
	if d := p.Buffers[bwd.Out[3]]; d.Kind != KindScratch || !equalShapes(d.Shape, []int{4, 2, 8}) {
		t.Errorf("delta %s is %s %v, want scratch [4 2 8]", d.Name, d.Kind, d.Shape)
	}
	if bwd.Attr.Rate != 0.1 || !bwd.Attr.Causal {
		t.Errorf("attention_bwd attr %+v, want the forward's (causal, dropout 0.1)", bwd.Attr)
	}
}

// TestGPTShape pins models/gpt.cue to nanoGPT's shakespeare-char shape, as
// issue #31 asks: 6 blocks of 6 heads, width 384, context 256, batch 64,
// and 10,754,304 parameters with Moby-Dick's 89 characters (the token
// table 89·384, the position table 256·384, per block 12·384² and its two
// layer norms' gains, 384 each, and the final norm's gain: no biases, as
// nanoGPT's bias=False; the head is tied to the token table).
func TestGPTShape(t *testing.T) {
	m, err := spec.Load("../models/gpt.cue")
	if err != nil {
		t.Fatal(err)
	}
	p := mustBuild(t, m, Options{Training: true, Fusion: true})
	n := 0
	for _, pr := range p.Params {
		n += p.Buffers[pr.Buf].Size
	}
	const d, vocab, context, layers = 384, 89, 256, 6
	if want := vocab*d + context*d + layers*(12*d*d+2*d) + d; n != want || want != 10_754_304 {
		t.Errorf("%d parameters, want %d", n, want)
	}
	if p.Batch != 64 || countKernel(p.Forward, KAttention) != layers || p.Buffers[p.Input].Shape[1] != context {
		t.Errorf("batch %d, %d attention steps, input %v", p.Batch, countKernel(p.Forward, KAttention), p.Buffers[p.Input].Shape)
	}
	for _, s := range p.Forward {
		if s.Kernel == KAttention && s.In[0] != NoBuf {
			if q := p.Buffers[s.In[0]].Shape; q[2] != 6 || q[3] != d/6 {
				t.Errorf("attention %s: q %v, want 6 heads of %d", s.Layer, q, d/6)
			}
		}
	}
}
