package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/cpu"
)

// tokenPlan is a hand plan of causal attention scores [B, H, T, T] and
// per-token logits [B, T, C] with their loss, and optionally an embedding
// of the input ids.
func tokenPlan(embedding bool) *planner.Plan {
	const b, h, t, c = 2, 3, 4, 5
	p := &planner.Plan{Model: "tokens", Batch: b, Training: true}
	ids := testBuffer(p, "input", planner.KindInput, b, t)
	s := testBuffer(p, "scores", planner.KindActivation, b, h, t, t)
	a := testBuffer(p, "attn", planner.KindActivation, b, h, t, t)
	z := testBuffer(p, "logits", planner.KindActivation, b, t, c)
	lab := testBuffer(p, "labels", planner.KindLabels, b, t, c)
	loss := testBuffer(p, "loss", planner.KindLoss, 1)
	dz := testBuffer(p, "logits.grad", planner.KindGrad, b, t, c)
	p.Input, p.Labels, p.Output, p.Loss = ids, lab, z, loss
	p.Forward = planner.Phase{{Kernel: planner.KSoftmax, Layer: "attn", In: []planner.BufID{s}, Out: []planner.BufID{a}, Attr: planner.Attr{Axis: 3, Causal: true}}}
	if embedding {
		w := testBuffer(p, "wte.weight", planner.KindParam, 7, c)
		pos := testBuffer(p, "wte.pos", planner.KindParam, t, c)
		dw := testBuffer(p, "wte.weight.grad", planner.KindParamGrad, 7, c)
		dpos := testBuffer(p, "wte.pos.grad", planner.KindParamGrad, t, c)
		p.Forward = append(p.Forward, planner.Step{Kernel: planner.KEmbedding, Layer: "wte", In: []planner.BufID{ids, w, pos}, Out: []planner.BufID{z}})
		p.Backward = planner.Phase{{Kernel: planner.KEmbeddingBwd, Layer: "wte", In: []planner.BufID{ids, dz}, Out: []planner.BufID{dw, dpos}}}
	}
	p.Backward = append(planner.Phase{{Kernel: planner.KSoftmaxXent, Layer: "head", In: []planner.BufID{z, lab}, Out: []planner.BufID{loss, dz}}}, p.Backward...)
	return p
}

// TestLowerCausalSoftmaxAndTokenLoss: a causal softmax launches the causal
// kernel, one threadgroup per row of the B·H score matrices, and the loss
// over per-token logits runs over all B·T rows; an embedding launches its
// gather, one thread per output value, and its backward the table's
// kernel, a threadgroup per table row (of 7, its 5 columns one block, 5
// lanes over one row slice for 8 ids), and the positions', one thread per
// gradient value.
func TestLowerCausalSoftmaxAndTokenLoss(t *testing.T) {
	for _, d := range []*Dialect{Metal, CUDA} {
		prog, err := Lower(tokenPlan(false), d)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		text := describe(prog)
		if !strings.Contains(text, "softmax_causal 24x") {
			t.Errorf("%s: no causal softmax over 2·3·4 rows:\n%s", d.Name, text)
		}
		var docs []string
		for _, k := range prog.Kernels {
			docs = append(docs, k.Doc)
		}
		if j := strings.Join(docs, "\n"); !strings.Contains(j, "causal softmax of 6 score matrices of 4×4") || !strings.Contains(j, "softmax cross-entropy, batch 8, 5 classes") {
			t.Errorf("%s: kernels:\n%s", d.Name, j)
		}
		prog, err = Lower(tokenPlan(true), d)
		if err != nil {
			t.Fatalf("%s: lowering an embedding: %v", d.Name, err)
		}
		text = describe(prog)
		for _, want := range []string{"embedding 1x256", "embedding_bwd 7x5", "embedding_pos_bwd 1x256"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: no %q in:\n%s", d.Name, want, text)
			}
		}
	}
}

// embeddingCases are the embedding's kernels on awkward sizes (widths
// that do not divide the threadgroup, ids repeated within the batch so
// that the backward adds several dy rows into one table row, and a row of
// the table no id reads), against rt/cpu's EmbeddingFwd and EmbeddingBwd,
// and the forward on ids out of range, which it clamps into the table.
func embeddingCases(t *testing.T) []gpuCase {
	r := rand.New(rand.NewPCG(3, 4))
	var cs []gpuCase
	for _, tc := range []struct {
		batch, seq, vocab, dim int
		positions              bool
	}{{3, 5, 7, 13, true}, {4, 9, 3, 33, false}, {2, 4, 65, 1, true},
		// float4 rows in three column blocks; more rows than a
		// threadgroup's first round, a partial second, and one id
		// in two fifths of the rows (a space in text)
		{64, 40, 11, 24, true}, {2, 6, 5, 8, false}} {
		g := embeddingGeom{rows: tc.batch * tc.seq, seq: tc.seq, vocab: tc.vocab, dim: tc.dim, positions: tc.positions}
		ids := make([]float32, g.rows)
		for i := range ids {
			ids[i] = float32(r.IntN(max(g.vocab-1, 1))) // the last row is read by no id
		}
		ids[1], ids[g.rows-1] = ids[0], ids[0] // repeated ids
		if g.rows > 1000 {
			for i := 0; i < g.rows; i += 5 {
				ids[i], ids[i+1] = 3, 3
			}
		}
		w, pos := randVec(r, g.vocab*g.dim, -1, 1), randVec(r, g.seq*g.dim, -1, 1)
		var posRef []float32
		in := [][]float32{ids, w}
		if tc.positions {
			posRef = pos
			in = append(in, pos)
		}
		y := zeros(g.rows * g.dim)
		cpu.EmbeddingFwd("wte", ids, w, posRef, y, g.rows, g.seq, g.vocab, g.dim)
		name := fmt.Sprintf("embedding_%dx%d_v%d_d%d", tc.batch, tc.seq, tc.vocab, tc.dim)
		cs = append(cs, gpuCase{name: name, k: embeddingKernel(g), in: append(in, randVec(r, len(y), 5, 6)), want: map[int][]float32{len(in): y}})

		dy := randVec(r, g.rows*g.dim, -1, 1)
		dw, dpos := zeros(g.vocab*g.dim), zeros(g.seq*g.dim)
		cpu.EmbeddingBwd(ids, dy, dw, dpos, g.rows, g.seq, g.vocab, g.dim)
		cs = append(cs,
			gpuCase{name: name + "_bwd", k: embeddingBwdKernel(g), in: [][]float32{ids, dy, randVec(r, len(dw), 5, 6)}, want: map[int][]float32{2: dw}},
			gpuCase{name: name + "_pos_bwd", k: embeddingPosBwdKernel(g), in: [][]float32{dy, randVec(r, len(dpos), 5, 6)}, want: map[int][]float32{1: dpos}})
	}
	// Ids out of range (which the host refuses before a launch): the
	// kernels clamp them into the table, NaN to row 0.
	g := embeddingGeom{rows: 6, seq: 3, vocab: 4, dim: 5, positions: true}
	ids := []float32{-1, 4, 1e9, float32(math.NaN()), float32(math.Inf(-1)), 2}
	clamped := []float32{0, 3, 3, 0, 0, 2}
	w, pos := randVec(r, g.vocab*g.dim, -1, 1), randVec(r, g.seq*g.dim, -1, 1)
	y := zeros(g.rows * g.dim)
	cpu.EmbeddingFwd("wte", clamped, w, pos, y, g.rows, g.seq, g.vocab, g.dim)
	cs = append(cs, gpuCase{name: "embedding_clamped", k: embeddingKernel(g), in: [][]float32{ids, w, pos, zeros(len(y))}, want: map[int][]float32{3: y}})
	dy := randVec(r, g.rows*g.dim, -1, 1)
	dw := zeros(g.vocab * g.dim)
	cpu.EmbeddingBwd(clamped, dy, dw, nil, g.rows, g.seq, g.vocab, g.dim)
	cs = append(cs, gpuCase{name: "embedding_clamped_bwd", k: embeddingBwdKernel(g), in: [][]float32{ids, dy, zeros(len(dw))}, want: map[int][]float32{2: dw}})
	for i := range cs {
		cs[i].tol = 2e-5
	}
	return cs
}

// TestEmbeddingKernelsOnCPU runs the embedding's kernels in both dialects
// (g++ through the shims) against rt/cpu, and requires its results to the
// bit where the kernel adds as the CPU does: the forward copies and adds,
// and the positions' gradient sums the batch in order. The table's
// gradient adds in a tree over row slices (embeddingBwdKernel), a fixed
// order of its own, so it is checked to the cases' tolerance.
func TestEmbeddingKernelsOnCPU(t *testing.T) {
	cases := embeddingCases(t)
	for _, d := range []*Dialect{Metal, CUDA} {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			res := runCases(t, d, cases)
			checkCases(t, d, cases, res)
			for i, c := range cases {
				if strings.HasSuffix(c.name, "_bwd") && !strings.HasSuffix(c.name, "_pos_bwd") {
					continue // the table's gradient: another order than the CPU's
				}
				for j, want := range c.want {
					for e := range want {
						if math.Float32bits(res[i][j][e]) != math.Float32bits(want[e]) {
							t.Errorf("%s: %s[%d] is %v, rt/cpu's is %v: not the same bits", c.name, c.k.Params[j].Name, e, res[i][j][e], want[e])
							break
						}
					}
				}
			}
		})
	}
}
