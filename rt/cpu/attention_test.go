package cpu

import (
	"math"
	"testing"
)

// unfusedAttention is attention as the CPU's plans run it, step by step:
// scores = q·kᵀ (MatMulFwd), scaled, the (causal, padded) softmax, the
// dropout's mask, then ·v; and the backward through each step's own
// kernel. It returns o, each row's log-sum-exp (+∞ where a query sees no
// key), and dq, dkt, dv for do.
func unfusedAttention(q, kt, v, do []float32, a Attention) (o, lse, dq, dkt, dv []float32) {
	m, tq, tk, d := a.Mats, a.Tq, a.Tk, a.D
	qs, ks, vs, ss := []int{m, tq, d}, []int{m, d, tk}, []int{m, tk, d}, []int{m, tq, tk}
	s := make([]float32, m*tq*tk)
	MatMulFwd(q, kt, s, qs, ks, ss)
	for i := range s {
		s[i] *= a.Scale
	}
	lse = make([]float32, m*tq)
	for r := range m * tq {
		row := s[r*tk : (r+1)*tk]
		n := a.seen(r % tq)
		mx := float32(math.Inf(-1))
		var sum float64
		for pass := range 2 {
			for j, x := range row[:n] {
				if ids := a.padKeys(r / tq); ids != nil && ids[j] == a.PadID {
					continue
				}
				if pass == 0 {
					mx = max(mx, x)
				} else {
					sum += math.Exp(float64(x - mx))
				}
			}
		}
		lse[r] = mx + float32(math.Log(sum))
		if sum == 0 {
			lse[r] = float32(math.Inf(1))
		}
	}
	p := make([]float32, len(s))
	switch {
	case a.Pad != nil:
		batch := len(a.Pad) / tk
		SoftmaxPaddedFwd(s, p, a.Pad, batch, m*tq/batch, tk, a.Causal, a.PadID)
	case a.Causal:
		SoftmaxCausalFwd(s, p, m, tq)
	default:
		SoftmaxFwd(s, p, m*tq, tk, 1)
	}
	mask := make([]float32, len(p))
	pd := make([]float32, len(p))
	for i := range p {
		mask[i] = a.keep(i)
		pd[i] = p[i] * mask[i]
	}
	o = make([]float32, m*tq*d)
	MatMulFwd(pd, v, o, ss, vs, qs)

	dpd, dp, ds := make([]float32, len(p)), make([]float32, len(p)), make([]float32, len(p))
	dv = make([]float32, len(v))
	MatMulBwd(pd, v, do, dpd, dv, ss, vs, qs)
	DropoutBwd(mask, dpd, dp)
	SoftmaxBwd(p, dp, ds, m*tq, tk, 1)
	for i := range ds {
		ds[i] *= a.Scale
	}
	dq, dkt = make([]float32, len(q)), make([]float32, len(kt))
	MatMulBwd(q, kt, ds, dq, dkt, qs, ks, ss)
	return o, lse, dq, dkt, dv
}

// attentionOutput is one output of an attention and what it should be.
type attentionOutput struct {
	name      string
	got, want []float32
}

// check fails t unless every element is within rel of the largest finite
// magnitude of want (at least 1), and none is NaN; an infinite want (the
// log-sum-exp of a query that sees no key) must be got exactly.
func (c attentionOutput) check(t *testing.T, rel float64, what string) {
	t.Helper()
	scale := float32(0)
	for _, x := range c.want {
		if !math.IsInf(float64(x), 0) {
			scale = max(scale, float32(math.Abs(float64(x))))
		}
	}
	for i := range c.want {
		if inf := math.IsInf(float64(c.want[i]), 0); inf && c.got[i] != c.want[i] || !inf && !(math.Abs(float64(c.got[i]-c.want[i])) <= rel*float64(max(scale, 1))) {
			t.Fatalf("%s[%d] = %g, %s %g (scale %g)", c.name, i, c.got[i], what, c.want[i], scale)
		}
	}
}

// testUniform is a stand-in for the GPU's dropout draw: any function of
// the index will do, as both sides call the same one.
func testUniform(i uint32) float32 {
	i = (i ^ 61) ^ (i >> 16)
	i *= 9
	i ^= i >> 4
	i *= 0x27d4eb2d
	i ^= i >> 15
	return float32(i>>8) / (1 << 24)
}

// TestAttentionMatchesUnfused: the fused attention's reference, forward
// and backward, against the CPU's unfused steps (matmul, scale, causal or
// plain softmax, dropout, matmul, and their backward kernels) on awkward
// shapes: one position, a head dimension of 6, 16 and 64, queries and keys
// of different counts without a mask, dropout, and padding masks (with
// queries that see no key, whose o is 0 and lse +∞). Both sum the same
// products in other orders: relative errors within 1e-5 of each value's
// scale.
func TestAttentionMatchesUnfused(t *testing.T) {
	r := newTestRand(31)
	cases := []Attention{
		{Mats: 3, Tq: 1, Tk: 1, D: 16, Scale: 0.25, Causal: true},
		{Mats: 2, Tq: 37, Tk: 37, D: 64, Scale: 0.125, Causal: true},
		{Mats: 4, Tq: 8, Tk: 8, D: 6, Scale: 0.41, Causal: true, Rate: 0.1, Uniform: testUniform},
		{Mats: 2, Tq: 7, Tk: 5, D: 16, Scale: 0.5},
		{Mats: 1, Tq: 33, Tk: 33, D: 16, Scale: 0.25, Rate: 0.3, Uniform: testUniform},
		{Mats: 4, Tq: 9, Tk: 9, D: 16, Scale: 0.25, Causal: true, Rate: 0.1, Uniform: testUniform, PadID: testPad,
			Pad: padIDs(9, span(6, 9), []int{0, 1, 4}, nil, span(0, 9))},
		{Mats: 4, Tq: 7, Tk: 5, D: 6, Scale: 0.5, PadID: testPad, Pad: padIDs(5, []int{2}, span(0, 5))},
	}
	for _, a := range cases {
		t.Run(a.name(), func(t *testing.T) {
			q := randSlice(r, a.Mats*a.Tq*a.D, 2)
			kt := randSlice(r, a.Mats*a.D*a.Tk, 2)
			v := randSlice(r, a.Mats*a.Tk*a.D, 1)
			do := randSlice(r, a.Mats*a.Tq*a.D, 1)
			wo, wlse, wdq, wdkt, wdv := unfusedAttention(q, kt, v, do, a)
			o, lse := make([]float32, len(wo)), make([]float32, len(wlse))
			AttentionFwd(q, kt, v, o, lse, a)
			dq, dkt, dv, delta := make([]float32, len(q)), make([]float32, len(kt)), make([]float32, len(v)), make([]float32, len(lse))
			AttentionBwd(q, kt, v, o, lse, do, dq, dkt, dv, delta, a)
			for _, c := range []attentionOutput{{"o", o, wo}, {"lse", lse, wlse}, {"dq", dq, wdq}, {"dkt", dkt, wdkt}, {"dv", dv, wdv}} {
				c.check(t, 1e-5, "unfused")
			}
			// dq without dkt and dv: the same dq
			dq2 := make([]float32, len(q))
			AttentionBwd(q, kt, v, o, lse, do, dq2, nil, nil, delta, a)
			for i := range dq {
				if dq2[i] != dq[i] {
					t.Fatalf("dq alone [%d] = %g, with dkt and dv %g", i, dq2[i], dq[i])
				}
			}
		})
	}
}

// TestAttentionTokenMajor: with Heads, AttentionFwd and AttentionBwd read
// q, k, v and do and write o, dq, dk and dv token-major [B, T, H, D]
// (k and dk in kt's and dkt's places), and compute exactly what they do
// over the same values as [Mats, T, D] and kᵀ [Mats, D, Tk]; dk may be
// left out.
func TestAttentionTokenMajor(t *testing.T) {
	r := newTestRand(37)
	a := Attention{Mats: 6, Tq: 9, Tk: 9, D: 5, Scale: 0.3, Causal: true, Rate: 0.2, Uniform: testUniform, Heads: 3}
	tokens := func(x []float32, rows int, kt bool) []float32 { // [Mats, rows, D] or kᵀ to [B, rows, H, D]
		y := make([]float32, len(x))
		for b := range a.Mats / a.Heads {
			for tt := range rows {
				for h := range a.Heads {
					for d := range a.D {
						src := ((b*a.Heads+h)*rows+tt)*a.D + d
						if kt {
							src = ((b*a.Heads+h)*a.D+d)*rows + tt
						}
						y[((b*rows+tt)*a.Heads+h)*a.D+d] = x[src]
					}
				}
			}
		}
		return y
	}
	q, kt, v, do := randSlice(r, a.Mats*a.Tq*a.D, 2), randSlice(r, a.Mats*a.D*a.Tk, 2), randSlice(r, a.Mats*a.Tk*a.D, 1), randSlice(r, a.Mats*a.Tq*a.D, 1)
	h := a
	h.Heads = 0
	o, lse := make([]float32, len(q)), make([]float32, a.Mats*a.Tq)
	AttentionFwd(q, kt, v, o, lse, h)
	dq, dkt, dv, delta := make([]float32, len(q)), make([]float32, len(kt)), make([]float32, len(v)), make([]float32, len(lse))
	AttentionBwd(q, kt, v, o, lse, do, dq, dkt, dv, delta, h)

	tq, tk, tv, tdo := tokens(q, a.Tq, false), tokens(kt, a.Tk, true), tokens(v, a.Tk, false), tokens(do, a.Tq, false)
	to, tlse := make([]float32, len(q)), make([]float32, len(lse))
	AttentionFwd(tq, tk, tv, to, tlse, a)
	tdq, tdk, tdv, tdelta := make([]float32, len(q)), make([]float32, len(kt)), make([]float32, len(v)), make([]float32, len(lse))
	AttentionBwd(tq, tk, tv, to, tlse, tdo, tdq, tdk, tdv, tdelta, a)
	tdq2 := make([]float32, len(q))
	AttentionBwd(tq, tk, tv, to, tlse, tdo, tdq2, nil, nil, tdelta, a)
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"o", to, tokens(o, a.Tq, false)}, {"lse", tlse, lse}, {"dq", tdq, tokens(dq, a.Tq, false)}, {"dq alone", tdq2, tokens(dq, a.Tq, false)},
		{"dk", tdk, tokens(dkt, a.Tk, true)}, {"dv", tdv, tokens(dv, a.Tk, false)}, {"delta", tdelta, delta}} {
		for i := range c.want {
			if c.got[i] != c.want[i] {
				t.Fatalf("%s[%d] = %g token-major, %g over [Mats, T, D]", c.name, i, c.got[i], c.want[i])
			}
		}
	}
}
