package cpu

import (
	"fmt"
	"testing"
)

// TestAttentionBlocksMatchReference: the CPU's fused attention against
// its reference (AttentionFwd, AttentionBwd, drawing the same dropout),
// forward and backward, on shapes that cut blocks unevenly: more queries
// than a block, a last block of one query, causal and not, fewer keys
// than queries, dropout, token-major operands, and gradients left out.
// Both sum the same products in other orders: relative errors within
// 2e-5 of each value's scale.
func TestAttentionBlocksMatchReference(t *testing.T) {
	r := newTestRand(41)
	const seed, step = 0x9e3779b9, 17
	cases := []Attention{
		{Mats: 3, Tq: 1, Tk: 1, D: 16, Scale: 0.25, Causal: true},
		{Mats: 2, Tq: 130, Tk: 130, D: 64, Scale: 0.125, Causal: true},
		{Mats: 2, Tq: 65, Tk: 65, D: 6, Scale: 0.41, Causal: true, Rate: 0.2},
		{Mats: 2, Tq: 70, Tk: 5, D: 16, Scale: 0.5},
		{Mats: 1, Tq: 33, Tk: 100, D: 16, Scale: 0.25, Rate: 0.3},
		{Mats: 6, Tq: 129, Tk: 129, D: 8, Scale: 0.3, Causal: true, Rate: 0.1, Heads: 3},
	}
	for _, a := range cases {
		t.Run(fmt.Sprintf("%dx%dx%dx%d_causal%v_rate%g_heads%d", a.Mats, a.Tq, a.Tk, a.D, a.Causal, a.Rate, a.Heads), func(t *testing.T) {
			a.Seed, a.Step = seed, step
			ref := a
			if a.Rate > 0 {
				ref.Uniform = func(i uint32) float32 { return DropoutUniform(seed, step, i) }
			}
			q := randSlice(r, a.Mats*a.Tq*a.D, 2)
			kt := randSlice(r, a.Mats*a.D*a.Tk, 2)
			v := randSlice(r, a.Mats*a.Tk*a.D, 1)
			do := randSlice(r, a.Mats*a.Tq*a.D, 1)
			wo, wlse := make([]float32, len(q)), make([]float32, a.Mats*a.Tq)
			AttentionFwd(q, kt, v, wo, wlse, ref)
			wdq, wdkt, wdv, wdelta := make([]float32, len(q)), make([]float32, len(kt)), make([]float32, len(v)), make([]float32, len(wlse))
			AttentionBwd(q, kt, v, wo, wlse, do, wdq, wdkt, wdv, wdelta, ref)

			o, lse := make([]float32, len(q)), make([]float32, len(wlse))
			AttentionBlocksFwd(q, kt, v, o, lse, a)
			dq, dkt, dv, delta := make([]float32, len(q)), make([]float32, len(kt)), make([]float32, len(v)), make([]float32, len(lse))
			AttentionBlocksBwd(q, kt, v, o, lse, do, dq, dkt, dv, delta, a)
			dq2, dv2 := make([]float32, len(q)), make([]float32, len(v))
			AttentionBlocksBwd(q, kt, v, o, lse, do, dq2, nil, nil, delta, a)
			AttentionBlocksBwd(q, kt, v, o, lse, do, nil, nil, dv2, delta, a)
			for _, c := range []attentionOutput{{"o", o, wo}, {"lse", lse, wlse}, {"dq", dq, wdq}, {"dkt", dkt, wdkt}, {"dv", dv, wdv}, {"delta", delta, wdelta},
				{"dq alone", dq2, wdq}, {"dv alone", dv2, wdv}} {
				c.check(t, 2e-5, "reference")
			}
		})
	}
}

// BenchmarkAttentionBlocks times models/gpt.cue's attention (64×6
// matrices of 256 causal tokens, D 64, dropout 0.2), the fused kernels
// against the reference.
func BenchmarkAttentionBlocks(b *testing.B) {
	r := newTestRand(43)
	a := Attention{Mats: 384, Tq: 256, Tk: 256, D: 64, Scale: 0.125, Causal: true, Rate: 0.2, Heads: 6, Seed: 1, Step: 2}
	q, kt, v, do := randSlice(r, a.Mats*a.Tq*a.D, 1), randSlice(r, a.Mats*a.Tq*a.D, 1), randSlice(r, a.Mats*a.Tq*a.D, 1), randSlice(r, a.Mats*a.Tq*a.D, 1)
	o, lse, delta := make([]float32, len(q)), make([]float32, a.Mats*a.Tq), make([]float32, a.Mats*a.Tq)
	dq, dk, dv := make([]float32, len(q)), make([]float32, len(q)), make([]float32, len(q))
	b.Run("forward", func(b *testing.B) {
		for range b.N {
			AttentionBlocksFwd(q, kt, v, o, lse, a)
		}
	})
	b.Run("backward", func(b *testing.B) {
		for range b.N {
			AttentionBlocksBwd(q, kt, v, o, lse, do, dq, dk, dv, delta, a)
		}
	})
}
