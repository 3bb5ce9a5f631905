package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// unfusedAttention runs attention as rt/cpu runs the unfused plan, step by
// step: scores = q·kᵀ (MatMulFwd), scaled, the causal (SoftmaxCausalFwd)
// or plain softmax, the GPU's dropout mask (DropoutUniform at seed and
// step), then ·v; and the backward through each step's own kernel
// (MatMulBwd, DropoutBwd, SoftmaxBwd). It returns o, each row's
// log-sum-exp, delta = rowsum(do∘o) and dq, dkᵀ, dv for do.
//
// With round set, the products' operands are rounded by it first, as
// tensor tiles round them (tf32Round): q and kᵀ for the scores, v for o
// (but not the probabilities, which the fused forward rounds before it
// normalises them, by factors that are no powers of two), p·keep, do and
// v for dp and dv, and the unscaled ds with q and kᵀ for dq and dkᵀ,
// which are scaled after (as the kernels scale them); ds is then
// p·(dp − delta) with delta = rowsum(do∘o), as the kernels compute it.
func unfusedAttention(g attnGeom, q, kt, v, do []float32, step, seed uint32, round func(float32) float32) (o, lse, delta, dq, dkt, dv []float32) {
	return unfusedPadded(g, q, kt, v, do, nil, step, seed, round)
}

// unfusedPadded is unfusedAttention with g's padding mask, where g is
// padded: the token ids [g.batch, tk] mask the scores (−∞) before the
// log-sum-exp, which is +Inf for a query that sees no key, and the
// softmax is rt/cpu's padded one (SoftmaxPaddedFwd, its backward the
// plain SoftmaxBwd), as the unfused plan runs them.
func unfusedPadded(g attnGeom, q, kt, v, do, ids []float32, step, seed uint32, round func(float32) float32) (o, lse, delta, dq, dkt, dv []float32) {
	m, tq, tk, d := g.mats, g.tq, g.tk, g.d
	qs, ks, vs, ss := []int{m, tq, d}, []int{m, d, tk}, []int{m, tk, d}, []int{m, tq, tk}
	r := func(x []float32) []float32 {
		if round == nil {
			return x
		}
		y := make([]float32, len(x))
		for i, e := range x {
			y[i] = round(e)
		}
		return y
	}
	s := make([]float32, m*tq*tk)
	cpu.MatMulFwd(r(q), r(kt), s, qs, ks, ss)
	for i := range s {
		s[i] *= g.scale
	}
	masked := slices.Clone(s)
	if g.padded {
		for i := range masked {
			if b, j := i/tk/tq/(m/g.batch), i%tk; ids[b*tk+j] == g.padID {
				masked[i] = float32(math.Inf(-1))
			}
		}
	}
	lse = make([]float32, m*tq)
	for r := range m * tq {
		n := tk
		if g.causal {
			n = r%tq + 1
		}
		mx := float32(math.Inf(-1))
		for _, x := range masked[r*tk : r*tk+n] {
			mx = max(mx, x)
		}
		if math.IsInf(float64(mx), -1) { // no key seen
			lse[r] = float32(math.Inf(1))
			continue
		}
		var sum float64
		for _, x := range masked[r*tk : r*tk+n] {
			sum += math.Exp(float64(x - mx))
		}
		lse[r] = mx + float32(math.Log(sum))
	}
	p := make([]float32, len(s))
	if g.padded {
		cpu.SoftmaxPaddedFwd(s, p, ids, g.batch, m/g.batch*tq, tk, g.causal, g.padID)
	} else if g.causal {
		cpu.SoftmaxCausalFwd(s, p, m, tq)
	} else {
		cpu.SoftmaxFwd(s, p, m*tq, tk, 1)
	}
	mask, pd := make([]float32, len(p)), make([]float32, len(p))
	for i := range p {
		mask[i] = 1
		if g.rate > 0 {
			mask[i] = 0
			if gpuhost.DropoutUniform(seed, step, uint32(i)) >= g.rate {
				mask[i] = 1 / (1 - g.rate)
			}
		}
		pd[i] = p[i] * mask[i]
	}
	o = make([]float32, m*tq*d)
	cpu.MatMulFwd(pd, r(v), o, ss, vs, qs)
	delta = make([]float32, m*tq)
	for r := range delta {
		for k := range d {
			delta[r] += do[r*d+k] * o[r*d+k]
		}
	}
	dpd, dp, ds := make([]float32, len(p)), make([]float32, len(p)), make([]float32, len(p))
	dv = make([]float32, len(v))
	cpu.MatMulBwd(r(pd), r(v), r(do), dpd, dv, ss, vs, qs)
	cpu.DropoutBwd(mask, dpd, dp)
	dq, dkt = make([]float32, len(q)), make([]float32, len(kt))
	if round != nil {
		// ds = p·(dp − delta), delta = rowsum(do∘o) as the kernels take
		// it: with rounded products, Σ p·dp is delta only to a TF32 unit
		for i := range ds {
			ds[i] = p[i] * (dp[i] - delta[i/tk])
		}
	} else {
		cpu.SoftmaxBwd(p, dp, ds, m*tq, tk, 1)
	}
	if round == nil {
		for i := range ds {
			ds[i] *= g.scale
		}
		cpu.MatMulBwd(q, kt, ds, dq, dkt, qs, ks, ss)
		return o, lse, delta, dq, dkt, dv
	}
	cpu.MatMulBwd(r(q), r(kt), r(ds), dq, dkt, qs, ks, ss)
	for _, x := range [][]float32{dq, dkt} {
		for i := range x {
			x[i] *= g.scale
		}
	}
	return o, lse, delta, dq, dkt, dv
}

// TestAttentionKernelsOnCPU runs the fused attention kernels, forward and
// backward, in both dialects on the CPU (g++ through the shims) against
// rt/cpu's unfused attention: one position; a context not a multiple of
// the tiles (19, 37, 70); head dimensions 6 (gpt_tiny's), 16, 40 (output
// dimensions of a thread past d), 64 and 128 (the smallest blocks); keys
// fewer and more than queries without a mask (a thread's micro-tile of 2
// columns in each kernel); dropout drawn as the unfused dropout step
// draws it; and operands token-major ([B, T, H, D], k for kᵀ). Both sides sum the same products in other orders: forward
// outputs within 2e-5 and gradients within 1e-4 relative to 1 + |value|
// (checkCases).
func TestAttentionKernelsOnCPU(t *testing.T) {
	const step, seed = 7, 1234
	r := rand.New(rand.NewPCG(31, 3))
	dialects := []*Dialect{Metal, CUDA}
	cases := map[*Dialect][]gpuCase{}
	covered := map[string][][3]attnBlock{} // dialect and policy: blocks run
	for _, g := range attnTestGeoms {
		q := randVec(r, g.mats*g.tq*g.d, -2, 2)
		kt := randVec(r, g.mats*g.d*g.tk, -2, 2)
		v := randVec(r, g.mats*g.tk*g.d, -1, 1)
		do := randVec(r, g.mats*g.tq*g.d, -1, 1)
		o, lse, delta, dq, dkt, dv := unfusedAttention(g, q, kt, v, do, step, seed, nil)
		name := fmt.Sprintf("attn_%dx%dx%dx%d", g.mats, g.tq, g.tk, g.d)
		if g.heads > 0 {
			// the kernels' operands token-major, k and dk too
			name += fmt.Sprintf("_%dheads", g.heads)
			q, v, do, o, dq, dv = tokenMajor(g, q, g.tq), tokenMajor(g, v, g.tk), tokenMajor(g, do, g.tq), tokenMajor(g, o, g.tq), tokenMajor(g, dq, g.tq), tokenMajor(g, dv, g.tk)
			kt, dkt = tokenMajor(g, transposeMats(kt, g.mats, g.d, g.tk), g.tk), tokenMajor(g, transposeMats(dkt, g.mats, g.d, g.tk), g.tk)
		}
		args := func(ins ...[]float32) [][]float32 {
			if g.rate > 0 {
				return append([][]float32{argsVec(0.1, step, seed)}, ins...)
			}
			return ins
		}
		a := 0 // the index of the first buffer after the step arguments
		if g.rate > 0 {
			a = 1
		}
		for _, d := range dialects {
			cases[d] = append(cases[d], gpuCase{name: name + "_delta", k: attentionDeltaKernel(g), tol: 2e-5,
				in: [][]float32{o, do, zeros(len(delta))}, want: map[int][]float32{2: delta}})
			var seen [][3]attnBlock // the blocks of the policies before: one run each
			for _, p := range attnPolicies {
				tl, err := attnTilingFor(d, p.name)
				if err != nil {
					t.Fatal(err)
				}
				g.tiling = tl
				blocks := [3]attnBlock{g.fwdBlock(), g.bwdKeysBlock(), g.bwdQueriesBlock()}
				if slices.Contains(seen, blocks) {
					continue
				}
				seen = append(seen, blocks)
				pn := name + "_" + p.name
				cases[d] = append(cases[d],
					gpuCase{name: pn, k: attentionFwdKernel(g), tol: 2e-5,
						in:   args(q, kt, v, zeros(len(o)), zeros(len(lse))),
						want: map[int][]float32{a + 3: o, a + 4: lse}},
					gpuCase{name: pn + "_kv", k: attentionBwdKeysKernel(g, true, true), tol: 1e-4,
						in:   args(q, kt, v, do, lse, delta, zeros(len(dkt)), zeros(len(dv))),
						want: map[int][]float32{a + 6: dkt, a + 7: dv}},
					gpuCase{name: pn + "_v", k: attentionBwdKeysKernel(g, false, true), tol: 1e-4,
						in:   args(q, kt, v, do, lse, delta, zeros(len(dv))),
						want: map[int][]float32{a + 6: dv}},
					gpuCase{name: pn + "_q", k: attentionBwdQueriesKernel(g), tol: 1e-4,
						in:   args(q, kt, v, do, lse, delta, zeros(len(dq))),
						want: map[int][]float32{a + 6: dq}},
				)
				covered[d.Name+" "+p.name] = append(covered[d.Name+" "+p.name], blocks)
			}
		}
	}
	for _, d := range dialects {
		for _, p := range attnPolicies {
			// every policy ran under every dialect, its own blocks somewhere
			if len(covered[d.Name+" "+p.name]) == 0 {
				t.Errorf("%s: policy %s chose no block of its own in any case", d.Name, p.name)
			}
		}
	}
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			checkCases(t, d, cases[d], runCases(t, d, cases[d]))
		})
	}
}

// attnTestGeoms are the attention kernels' test cases: one position; a
// context not a multiple of the tiles (19, 37, 70); head dimensions 6
// (gpt_tiny's), 16, 40 (output dimensions of a thread past d), 64 and
// 128 (the smallest blocks); keys fewer and more than queries without a
// mask; dropout; and operands token-major.
var attnTestGeoms = []attnGeom{
	{mats: 3, tq: 1, tk: 1, d: 16, scale: 0.25, causal: true},
	{mats: 2, tq: 37, tk: 37, d: 64, scale: 0.125, causal: true},
	{mats: 4, tq: 8, tk: 8, d: 6, scale: 0.408, causal: true, rate: 0.1},
	{mats: 2, tq: 7, tk: 5, d: 16, scale: 0.5},
	{mats: 1, tq: 70, tk: 70, d: 64, scale: 0.125, causal: true, rate: 0.2},
	{mats: 1, tq: 20, tk: 20, d: 128, scale: 0.088, causal: true},
	{mats: 2, tq: 19, tk: 19, d: 40, scale: 0.16, causal: true, rate: 0.1},           // 3 dimensions a thread, 8 of the 48 past d
	{mats: 1, tq: 3, tk: 45, d: 16, scale: 0.25},                                     // more keys than queries: two tiles of keys, 2 keys a thread
	{mats: 2, tq: 45, tk: 3, d: 16, scale: 0.25},                                     // more queries than keys: 2 queries a thread in dk and dv
	{mats: 6, tq: 37, tk: 37, d: 16, heads: 3, scale: 0.25, causal: true, rate: 0.2}, // token-major: 2 batches of 3 heads
	{mats: 4, tq: 7, tk: 45, d: 40, heads: 2, scale: 0.16},                           // token-major, more keys than queries
	{mats: 4, tq: 45, tk: 7, d: 6, heads: 4, scale: 0.4},                             // token-major, more queries than keys
}

// tokenMajor is x [mats, rows, d] as [B, rows, H, d] for g's H heads
// (mat = b·H + h).
func tokenMajor(g attnGeom, x []float32, rows int) []float32 {
	y := make([]float32, len(x))
	h := g.heads
	for m := range g.mats {
		for t := range rows {
			copy(y[((m/h*rows+t)*h+m%h)*g.d:][:g.d], x[(m*rows+t)*g.d:][:g.d])
		}
	}
	return y
}

// transposeMats is x [mats, r, c] as [mats, c, r].
func transposeMats(x []float32, mats, r, c int) []float32 {
	y := make([]float32, len(x))
	for m := range mats {
		for i := range r {
			for j := range c {
				y[(m*c+j)*r+i] = x[(m*r+i)*c+j]
			}
		}
	}
	return y
}

// TestAttentionTilingFitsMetal: under every block policy and dialect,
// for every head dimension up to 128 and contexts short and long, each
// kernel's threadgroup arrays fit the dialect's MaxSharedBytes (Metal's
// 32 KiB with room to spare), its threadgroup is 16 to 256 threads, and a
// thread keeps at most 16 output dimensions of a row and 4 scores, its
// columns single (16 threads across, or 32 where the policy allows) or in
// fours (8 threads across). At d 64 and T 256 (models/gpt.cue) each
// kernel's block is the one the policy's comment (attnPolicies) names.
func TestAttentionTilingFitsMetal(t *testing.T) {
	// rows×cols/threads of the forward, dk and dv, dq at d 64, T 256
	gpt := map[string]string{
		"metal base": "32×32/64 16×32/64 16×32/64", "cuda base": "32×32/64 16×32/64 16×32/64",
		"cuda ilp": "64×32/128 32×32/128 32×32/128",
	}
	for _, dl := range []*Dialect{Metal, CUDA} {
		for _, p := range attnPolicies {
			tl, err := attnTilingFor(dl, p.name)
			if err != nil {
				t.Fatal(err)
			}
			for d := 1; d <= 128; d++ {
				for _, tt := range []int{1, 8, 37, 256, 1024} {
					g := attnGeom{mats: 2, tq: tt, tk: tt, d: d, scale: 1, causal: true, tiling: tl}
					for _, k := range []*Kernel{attentionFwdKernel(g), attentionBwdKeysKernel(g, true, true), attentionBwdQueriesKernel(g)} {
						shared := 0
						for _, s := range k.Body {
							if sh, ok := s.(Shared); ok {
								shared += 4 * sh.Size
							}
						}
						if shared > dl.MaxSharedBytes || shared > tl.shared || k.Threadgroup > 256 || k.Threadgroup < 16 {
							t.Errorf("%s %s, d %d, t %d: %s: %d bytes of threadgroup memory, %d threads", dl.Name, p.name, d, tt, k.Doc, shared, k.Threadgroup)
						}
					}
					bs := []attnBlock{g.fwdBlock(), g.bwdKeysBlock(), g.bwdQueriesBlock()}
					for _, b := range bs {
						cts := map[int]bool{attnWideCols: b.cw == 4}
						for _, ct := range p.cts {
							cts[ct] = b.cw == 1
						}
						if b.dn > 16 || b.cn > 4 || b.dw() < d || b.dw()%(b.ct*b.cw) != 0 || b.rows%attnRows != 0 || b.cols != b.cn*b.ct ||
							b.cn%b.cw != 0 || !cts[b.ct] || b.rows > p.maxRows {
							t.Errorf("%s %s, d %d, t %d: block %+v", dl.Name, p.name, d, tt, b)
						}
					}
					if want, ok := gpt[dl.Name+" "+p.name]; ok && d == 64 && tt == 256 {
						var got []string
						for _, b := range bs {
							got = append(got, fmt.Sprintf("%d×%d/%d", b.rows, b.cols, b.threads()))
						}
						if strings.Join(got, " ") != want {
							t.Errorf("%s %s at d 64, T 256: blocks %s, want %s", dl.Name, p.name, strings.Join(got, " "), want)
						}
					}
				}
			}
		}
	}
	if _, err := attnTilingFor(CUDA, "nonesuch"); err == nil || !strings.Contains(err.Error(), "base") {
		t.Errorf("an unknown policy: error %v, want one naming the policies", err)
	}
}

// attnPadGeoms are the padded cases of the attention kernels, four
// samples each (padIDs: right padding, left padding whose first causal
// queries see no key, padding in the middle, a sample all padding):
// causal and not, more keys than queries and fewer, dropout, operands
// token-major, and head dimensions the tiles take (16, 40, 64) and not
// (6).
var attnPadGeoms = []attnGeom{
	{mats: 8, tq: 19, tk: 19, d: 16, scale: 0.25, causal: true},
	{mats: 4, tq: 7, tk: 45, d: 40, scale: 0.16},
	{mats: 4, tq: 37, tk: 37, d: 64, scale: 0.125, causal: true, rate: 0.1},
	{mats: 8, tq: 37, tk: 37, d: 16, heads: 2, scale: 0.25, causal: true, rate: 0.2},
	{mats: 4, tq: 8, tk: 8, d: 6, scale: 0.4, causal: true},
	{mats: 4, tq: 45, tk: 7, d: 6, heads: 1, scale: 0.4},
}

// attnPadID is the padding id of the padded cases (not 0, which a
// kernel that ignored the id would match by chance).
const attnPadID = 7

// padded is g masked by token ids of 4 samples.
func padded(g attnGeom) attnGeom {
	g.padded, g.batch, g.padID = true, 4, attnPadID
	return g
}

// padIDs is token ids [batch, tk] whose sample b is padded as b%4 says:
// 0 at the right (the last third of the keys), 1 at the left (the first
// quarter, at least one: a causal query before the first real key sees
// none), 2 in the middle (every third key from the second), 3 all
// padding. The other ids are anything but pad.
func padIDs(r *rand.Rand, batch, tk int, pad float32) []float32 {
	ids := make([]float32, batch*tk)
	for b := range batch {
		for j := range tk {
			id := float32(r.IntN(40))
			if id >= pad {
				id++
			}
			switch {
			case b%4 == 0 && j >= tk-tk/3, b%4 == 1 && j < max(1, tk/4), b%4 == 2 && j%3 == 1, b%4 == 3:
				id = pad
			}
			ids[b*tk+j] = id
		}
	}
	return ids
}

// attnData is one attention case's operands, in the kernels' layout (g's
// heads), and the reference's results (unfusedPadded) for them.
type attnData struct {
	q, kt, v, do, ids          []float32
	o, lse, delta, dq, dkt, dv []float32
}

// newAttnData draws the operands of g (and its token ids where padded)
// and computes the reference with round.
func newAttnData(g attnGeom, r *rand.Rand, step, seed uint32, round func(float32) float32) attnData {
	var a attnData
	a.q = randVec(r, g.mats*g.tq*g.d, -2, 2)
	a.kt = randVec(r, g.mats*g.d*g.tk, -2, 2)
	a.v = randVec(r, g.mats*g.tk*g.d, -1, 1)
	a.do = randVec(r, g.mats*g.tq*g.d, -1, 1)
	if g.padded {
		a.ids = padIDs(r, g.batch, g.tk, g.padID)
	}
	a.o, a.lse, a.delta, a.dq, a.dkt, a.dv = unfusedPadded(g, a.q, a.kt, a.v, a.do, a.ids, step, seed, round)
	if g.heads > 0 {
		a.q, a.v, a.do, a.o, a.dq, a.dv = tokenMajor(g, a.q, g.tq), tokenMajor(g, a.v, g.tk), tokenMajor(g, a.do, g.tq), tokenMajor(g, a.o, g.tq), tokenMajor(g, a.dq, g.tq), tokenMajor(g, a.dv, g.tk)
		a.kt, a.dkt = tokenMajor(g, transposeMats(a.kt, g.mats, g.d, g.tk), g.tk), tokenMajor(g, transposeMats(a.dkt, g.mats, g.d, g.tk), g.tk)
	}
	return a
}

// attnPadKernels are one family's kernels of g: the forward, the key
// kernel (dk and dv) and the query kernel (dq); nil where the family
// has none for g.
type attnPadKernels func(g attnGeom) (fwd, kv, q *Kernel)

// padCases are the padded cases of geoms for the kernels of family
// (those it has), under tiling, with the reference's products
// rounded by round, tolerances fwdTol (o), lseTol and gradTol: the
// forward, dk and dv, dq, each reading the token ids last. It fails
// unless some query of the cases sees no key (lse +Inf).
func padCases(t *testing.T, name string, geoms []attnGeom, family attnPadKernels, tiling attnTiling, round func(float32) float32, fwdTol, lseTol, gradTol float64, seedR uint64) []gpuCase {
	t.Helper()
	const step, seed = 7, 1234
	r := rand.New(rand.NewPCG(seedR, 41))
	var cases []gpuCase
	blind := 0
	for _, g := range geoms {
		g = padded(g)
		g.tiling = tiling
		fwd, kv, qk := family(g)
		if fwd == nil && kv == nil && qk == nil {
			continue
		}
		a := newAttnData(g, r, step, seed, round)
		for _, x := range a.lse {
			if math.IsInf(float64(x), 1) {
				blind++
			}
		}
		cn := fmt.Sprintf("%s_pad_%dx%dx%dx%d", name, g.mats, g.tq, g.tk, g.d)
		if g.heads > 0 {
			cn += fmt.Sprintf("_%dheads", g.heads)
		}
		args := func(ins ...[]float32) [][]float32 {
			ins = append(ins, a.ids)
			if g.rate > 0 {
				return append([][]float32{argsVec(0.1, step, seed)}, ins...)
			}
			return ins
		}
		at := 0 // the first buffer after the step arguments
		if g.rate > 0 {
			at = 1
		}
		if fwd != nil {
			cases = append(cases, gpuCase{name: cn, k: fwd, tols: map[int]float64{at + 3: fwdTol, at + 4: lseTol},
				in: args(a.q, a.kt, a.v, zeros(len(a.o)), zeros(len(a.lse))), want: map[int][]float32{at + 3: a.o, at + 4: a.lse}})
		}
		if kv != nil {
			cases = append(cases, gpuCase{name: cn + "_kv", k: kv, tol: gradTol,
				in: args(a.q, a.kt, a.v, a.do, a.lse, a.delta, zeros(len(a.dkt)), zeros(len(a.dv))), want: map[int][]float32{at + 6: a.dkt, at + 7: a.dv}})
		}
		if qk != nil {
			cases = append(cases, gpuCase{name: cn + "_q", k: qk, tol: gradTol,
				in: args(a.q, a.kt, a.v, a.do, a.lse, a.delta, zeros(len(a.dq))), want: map[int][]float32{at + 6: a.dq}})
		}
	}
	if blind == 0 {
		t.Errorf("%s: no padded case has a query that sees no key", name)
	}
	return cases
}

// TestAttentionPaddedOnCPU runs the SIMT attention kernels with a
// padding mask (planner.Attr.Padding) in both dialects on the CPU
// against the unfused reference (rt/cpu's padded softmax): masked keys
// get no probability and no gradient, and a query that sees no key o =
// 0, lse = +Inf and no gradient. Also the delta kernel, which needs no
// mask, on such rows (o = 0: delta 0).
func TestAttentionPaddedOnCPU(t *testing.T) {
	for _, d := range []*Dialect{Metal, CUDA} {
		tl, err := attnTilingFor(d, "")
		if err != nil {
			t.Fatal(err)
		}
		cases := padCases(t, "attn", attnPadGeoms, func(g attnGeom) (*Kernel, *Kernel, *Kernel) {
			return attentionFwdKernel(g), attentionBwdKeysKernel(g, true, true), attentionBwdQueriesKernel(g)
		}, tl, nil, 2e-5, 2e-5, 1e-4, 31)
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			checkCases(t, d, cases, runCases(t, d, cases))
		})
	}
}
