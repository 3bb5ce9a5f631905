package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttentionBlocksMatchReference: the CPU's fused attention against
// its reference (AttentionFwd, AttentionBwd, drawing the same dropout),
// forward and backward, on attentionBlockCases, and gradients left out.
// Both sum the same products in other orders: relative errors within
// 2e-5 of each value's scale.
func TestAttentionBlocksMatchReference(t *testing.T) {
	for _, a := range attentionBlockCases {
		t.Run(a.name(), func(t *testing.T) {
			in := newAttentionInputs(newTestRand(41), a)
			want := in.reference()
			got := in.blocks()
			for i, c := range got {
				c.want = want[i].got
				c.check(t, 2e-5, "reference")
			}
		})
	}
}

// attentionBlockCases are shapes that cut blocks unevenly: more queries
// than a block, a last block of one query, causal and not, fewer keys than
// queries, dropout, token-major operands, padding masks (keys padded at
// the end, at the start, so that the first queries of a causal attention
// see no key, and in the middle; a sample all padding).
var attentionBlockCases = []Attention{
	{Mats: 3, Tq: 1, Tk: 1, D: 16, Scale: 0.25, Causal: true},
	{Mats: 2, Tq: 130, Tk: 130, D: 64, Scale: 0.125, Causal: true},
	{Mats: 2, Tq: 65, Tk: 65, D: 6, Scale: 0.41, Causal: true, Rate: 0.2},
	{Mats: 2, Tq: 70, Tk: 5, D: 16, Scale: 0.5},
	{Mats: 1, Tq: 33, Tk: 100, D: 16, Scale: 0.25, Rate: 0.3},
	{Mats: 6, Tq: 129, Tk: 129, D: 8, Scale: 0.3, Causal: true, Rate: 0.1, Heads: 3},
	{Mats: 4, Tq: 128, Tk: 128, D: 64, Scale: 0.125, Causal: true, Rate: 0.2, Heads: 2},
	{Mats: 4, Tq: 70, Tk: 70, D: 16, Scale: 0.25, Causal: true, Heads: 2, PadID: testPad,
		Pad: padIDs(70, span(50, 70), append(span(0, 3), 40, 41, 69))},
	{Mats: 2, Tq: 7, Tk: 5, D: 6, Scale: 0.5, PadID: testPad, Pad: padIDs(5, []int{1, 3}, span(0, 5))},
	{Mats: 6, Tq: 129, Tk: 129, D: 8, Scale: 0.3, Causal: true, Rate: 0.1, PadID: testPad,
		Pad: padIDs(129, span(100, 129), []int{0}, nil, span(64, 129), span(1, 70), []int{128})},
}

// testPad is the padding id of the test cases' masks.
const testPad = 7

// padIDs is the token ids [len(masked), tk] of padding masks: sample b's
// keys masked[b] hold testPad, its others ids that are not.
func padIDs(tk int, masked ...[]int) []float32 {
	ids := make([]float32, len(masked)*tk)
	for b, keys := range masked {
		for j := range tk {
			ids[b*tk+j] = float32(j % testPad)
		}
		for _, j := range keys {
			ids[b*tk+j] = testPad
		}
	}
	return ids
}

// span is lo, lo+1, ..., hi−1.
func span(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

func (a Attention) name() string {
	return fmt.Sprintf("%dx%dx%dx%d_causal%v_rate%g_heads%d_padded%v", a.Mats, a.Tq, a.Tk, a.D, a.Causal, a.Rate, a.Heads, a.Pad != nil)
}

// attentionInputs are an attention's operands, drawn at random, and the
// dropout's seed and step.
type attentionInputs struct {
	a              Attention
	q, kt, v, dout []float32
}

func newAttentionInputs(r *rand.Rand, a Attention) *attentionInputs {
	a.Seed, a.Step = 0x9e3779b9, 17
	return &attentionInputs{a: a,
		q: randSlice(r, a.Mats*a.Tq*a.D, 2), kt: randSlice(r, a.Mats*a.D*a.Tk, 2),
		v: randSlice(r, a.Mats*a.Tk*a.D, 1), dout: randSlice(r, a.Mats*a.Tq*a.D, 1)}
}

// reference is the references' o, lse, dq, dkt, dv, delta, dq and dv
// (the last two again, for blocks' leaving-out), each in got.
func (in *attentionInputs) reference() []attentionOutput {
	ref := in.a
	if ref.Rate > 0 {
		ref.Uniform = func(i uint32) float32 { return DropoutUniform(in.a.Seed, in.a.Step, i) }
	}
	o, lse := make([]float32, len(in.q)), make([]float32, ref.Mats*ref.Tq)
	AttentionFwd(in.q, in.kt, in.v, o, lse, ref)
	dq, dkt, dv, delta := make([]float32, len(in.q)), make([]float32, len(in.kt)), make([]float32, len(in.v)), make([]float32, len(lse))
	AttentionBwd(in.q, in.kt, in.v, o, lse, in.dout, dq, dkt, dv, delta, ref)
	return []attentionOutput{{"o", o, nil}, {"lse", lse, nil}, {"dq", dq, nil}, {"dkt", dkt, nil}, {"dv", dv, nil}, {"delta", delta, nil},
		{"dq alone", dq, nil}, {"dv alone", dv, nil}}
}

// blocks is reference's outputs from the fused kernels, the last two from
// backward passes that leave the other gradients out.
func (in *attentionInputs) blocks() []attentionOutput {
	a := in.a
	o, lse := make([]float32, len(in.q)), make([]float32, a.Mats*a.Tq)
	AttentionBlocksFwd(in.q, in.kt, in.v, o, lse, a)
	dq, dkt, dv, delta := make([]float32, len(in.q)), make([]float32, len(in.kt)), make([]float32, len(in.v)), make([]float32, len(lse))
	AttentionBlocksBwd(in.q, in.kt, in.v, o, lse, in.dout, dq, dkt, dv, delta, a)
	dq2, dv2 := make([]float32, len(in.q)), make([]float32, len(in.v))
	AttentionBlocksBwd(in.q, in.kt, in.v, o, lse, in.dout, dq2, nil, nil, delta, a)
	AttentionBlocksBwd(in.q, in.kt, in.v, o, lse, in.dout, nil, nil, dv2, delta, a)
	return []attentionOutput{{"o", o, nil}, {"lse", lse, nil}, {"dq", dq, nil}, {"dkt", dkt, nil}, {"dv", dv, nil}, {"delta", delta, nil},
		{"dq alone", dq2, nil}, {"dv alone", dv2, nil}}
}

// TestAttentionBlocksBF16 checks the fused kernels' bf16 products: on
// rounded copies (a CPU without tiles), on the tiles' Go twin (every
// AVX-512 CPU) and on the tiles (where the CPU has them), each against the
// float32 references within bfloat16's error (1.5e-2 of each value's
// scale), each against the rounded copies within float32's sums in
// another order (2e-4: a value rounded to bfloat16 on either side of a tie
// moves a sum by 2⁻⁸ of one of its terms), and each unlike float32 somewhere
// (the rounding must show).
func TestAttentionBlocksBF16(t *testing.T) {
	defer func(f func() *amxLocal) { attnTiles = f }(attnTiles)
	ways := []string{"rounded copies", "tiles' Go twin", "tiles"}
	for _, a := range attentionBlockCases {
		t.Run(a.name(), func(t *testing.T) {
			in := newAttentionInputs(newTestRand(47), a)
			want := in.reference()
			in.a.BF16 = true
			var copies []attentionOutput
			for _, way := range ways {
				switch way {
				case "rounded copies":
					attnTiles = func() *amxLocal { return nil }
				case "tiles' Go twin":
					if twinTiles() == nil {
						t.Logf("%s: not run, no AVX-512 here", way)
						continue
					}
					attnTiles = twinTiles
				case "tiles":
					if newAMXLocal() == nil {
						t.Logf("%s: not run, no AMX here", way)
						continue
					}
					attnTiles = newAMXLocal
				}
				got := in.blocks()
				rounded := false
				for i, c := range got {
					c.want = want[i].got
					c.check(t, 1.5e-2, way+": float32's reference")
					for j := range c.got {
						rounded = rounded || math.Abs(float64(c.got[j]-c.want[j])) > 1e-5
					}
					if copies != nil {
						c.want = copies[i].got
						c.check(t, 2e-4, way+": rounded copies")
					}
				}
				if !rounded {
					t.Fatalf("%s: the same as float32 everywhere: no rounding to bfloat16", way)
				}
				if copies == nil {
					copies = got
				}
			}
		})
	}
}

// BenchmarkAttentionBlocks times models/gpt.cue's attention (64×6
// matrices of 256 causal tokens, D 64, dropout 0.2), the fused kernels in
// f32 and bf16.
func BenchmarkAttentionBlocks(b *testing.B) {
	r := newTestRand(43)
	a := Attention{Mats: 384, Tq: 256, Tk: 256, D: 64, Scale: 0.125, Causal: true, Rate: 0.2, Heads: 6, Seed: 1, Step: 2}
	q, kt, v, do := randSlice(r, a.Mats*a.Tq*a.D, 1), randSlice(r, a.Mats*a.Tq*a.D, 1), randSlice(r, a.Mats*a.Tq*a.D, 1), randSlice(r, a.Mats*a.Tq*a.D, 1)
	o, lse, delta := make([]float32, len(q)), make([]float32, a.Mats*a.Tq), make([]float32, a.Mats*a.Tq)
	dq, dk, dv := make([]float32, len(q)), make([]float32, len(q)), make([]float32, len(q))
	for _, bf16 := range []bool{false, true} {
		a.BF16 = bf16
		b.Run(fmt.Sprintf("forward/bf16=%v", bf16), func(b *testing.B) {
			for range b.N {
				AttentionBlocksFwd(q, kt, v, o, lse, a)
			}
		})
		b.Run(fmt.Sprintf("backward/bf16=%v", bf16), func(b *testing.B) {
			for range b.N {
				AttentionBlocksBwd(q, kt, v, o, lse, do, dq, dk, dv, delta, a)
			}
		})
	}
}
