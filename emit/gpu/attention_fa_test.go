package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// The tolerances of the fragment kernels against the reference whose
// products round their operands to bfloat16 (unfusedAttention with
// cpu.RoundBF16), relative to 1 + |value| as checkCases measures. The
// scores' operands round alike on both sides and their products are
// exact in float32, so the log-sum-exp keeps the float32 kernel's
// tolerance. The forward rounds each probability to bfloat16 before it
// normalises it, which the reference cannot follow: at most 2^-9 of
// each term of o = Σ p·v (Σ p = 1, |v| ≤ 1), plus float32's 2e-5; the
// bound is 2^-8 to leave room for the sums of the tensor cores, whose
// order and rounding are not float32's.
//
// The backward rounds the same products' operands as the reference
// (p·keep, do, v, ds, q, kᵀ), so the gradients agree within 1e-6 over
// these cases but where a recomputed probability, a few float32 units
// from the reference's, lies next to a bfloat16 rounding boundary: then
// one term differs by one bfloat16 unit of p·keep (≤ 1.25), at most
// 2^-7·|do| (one dv element of these cases, by 1.8e-3).
const (
	faLSETol  = 2e-5
	faOutTol  = 0x1p-8 + 2e-5
	faGradTol = 0x1p-7
)

// fragTestGeoms are the fragment kernels' cases beyond attnTestGeoms:
// contexts long enough that a tile of keys lies wholly before a block's
// first query (the forward's unmasked tiles), ragged and not, causal and
// not.
var fragTestGeoms = []attnGeom{
	{mats: 4, tq: 80, tk: 80, d: 32, heads: 2, scale: 0.17, causal: true, rate: 0.1},
	{mats: 2, tq: 20, tk: 64, d: 16, scale: 0.25},
	{mats: 1, tq: 128, tk: 128, d: 64, scale: 0.125, causal: true},
}

// TestAttentionFragKernelsOnCPU runs the fused attention's fragment
// forward (kernels_attention_fa.go) in the CUDA dialect on the CPU, the
// fragments emulated lane by lane by the shim (testdata/shim/cuda_shim.h,
// the PTX layouts that TestFragmentEmulationIsPTX checks), against the
// unfused reference whose products round their operands to bfloat16,
// over every case of attnTestGeoms and fragTestGeoms (head dimensions not a multiple of 16
// padded with zeros), with the dropout of the unfused step. The same
// log-sum-exps miss the reference without rounding by more than the
// tolerance somewhere: the emulation rounds, and the test sees it.
func TestAttentionFragKernelsOnCPU(t *testing.T) {
	const step, seed = 7, 1234
	r := rand.New(rand.NewPCG(31, 16))
	tl, err := attnTilingFor(CUDA, "")
	if err != nil {
		t.Fatal(err)
	}
	var cases []gpuCase
	var exact []map[int][]float32
	for _, g := range append(attnTestGeoms[:len(attnTestGeoms):len(attnTestGeoms)], fragTestGeoms...) {
		g.tiling = tl
		if _, ok := g.fragFwdBlock(CUDA.Fragments); !ok {
			t.Fatalf("%s: no fragment forward block fits %d bytes", g, tl.shared)
		}
		q := randVec(r, g.mats*g.tq*g.d, -2, 2)
		kt := randVec(r, g.mats*g.d*g.tk, -2, 2)
		v := randVec(r, g.mats*g.tk*g.d, -1, 1)
		do := randVec(r, g.mats*g.tq*g.d, -1, 1)
		o, lse, delta, dq, dkt, dv := unfusedAttention(g, q, kt, v, do, step, seed, cpu.RoundBF16)
		_, lsee, _, _, _, _ := unfusedAttention(g, q, kt, v, do, step, seed, nil)
		name := fmt.Sprintf("fa_attn_%dx%dx%dx%d", g.mats, g.tq, g.tk, g.d)
		if g.heads > 0 {
			name += fmt.Sprintf("_%dheads", g.heads)
			q, v, o, do, dv = tokenMajor(g, q, g.tq), tokenMajor(g, v, g.tk), tokenMajor(g, o, g.tq), tokenMajor(g, do, g.tq), tokenMajor(g, dv, g.tk)
			kt, dkt = tokenMajor(g, transposeMats(kt, g.mats, g.d, g.tk), g.tk), tokenMajor(g, transposeMats(dkt, g.mats, g.d, g.tk), g.tk)
			dq = tokenMajor(g, dq, g.tq)
		}
		var in [][]float32
		a := 0
		if g.rate > 0 {
			in, a = append(in, argsVec(0.1, step, seed)), 1
		}
		cases = append(cases, gpuCase{name: name, k: attentionFwdFragKernel(g, CUDA.Fragments), tols: map[int]float64{a + 3: faOutTol, a + 4: faLSETol},
			in:   append(in, q, kt, v, zeros(len(o)), zeros(len(lse))),
			want: map[int][]float32{a + 3: o, a + 4: lse}})
		exact = append(exact, map[int][]float32{a + 4: lsee})
		args := func(ins ...[]float32) [][]float32 { return append(append([][]float32{}, in...), ins...) }
		if _, ok := g.fragKeysBlock(CUDA.Fragments); ok {
			cases = append(cases,
				gpuCase{name: name + "_kv", k: attentionBwdKeysFragKernel(g, CUDA.Fragments, true, true), tol: faGradTol,
					in:   args(q, kt, v, do, lse, delta, zeros(len(dkt)), zeros(len(dv))),
					want: map[int][]float32{a + 6: dkt, a + 7: dv}},
				gpuCase{name: name + "_v", k: attentionBwdKeysFragKernel(g, CUDA.Fragments, false, true), tol: faGradTol,
					in:   args(q, kt, v, do, lse, delta, zeros(len(dv))),
					want: map[int][]float32{a + 6: dv}})
			exact = append(exact, nil, nil)
		} else if g.d <= fragBwdMaxDim {
			t.Errorf("%s: no fragment key block", g)
		}
		if _, ok := g.fragQueriesBlock(CUDA.Fragments); ok {
			cases = append(cases, gpuCase{name: name + "_q", k: attentionBwdQueriesFragKernel(g, CUDA.Fragments), tol: faGradTol,
				in:   args(q, kt, v, do, lse, delta, zeros(len(dq))),
				want: map[int][]float32{a + 6: dq}})
			exact = append(exact, nil)
		} else if g.d <= fragBwdMaxDim {
			t.Errorf("%s: no fragment query block", g)
		}
	}
	res := runCases(t, CUDA, cases)
	checkCases(t, CUDA, cases, res)
	worst := 0.0
	for i, c := range cases {
		if !strings.Contains(c.k.Doc, "register fragments") {
			t.Errorf("%s: kernel %q is not the fragment one", c.name, c.k.Doc)
		}
		for j, want := range exact[i] {
			for e := range want {
				worst = max(worst, math.Abs(float64(res[i][j][e])-float64(want[e]))/(1+math.Abs(float64(want[e]))))
			}
		}
	}
	if worst <= faLSETol {
		t.Errorf("the fragment forward's log-sum-exps are within %.3g of the reference without bfloat16 rounding (largest error %.3g): the test cannot tell whether it rounds", faLSETol, worst)
	}
	t.Logf("largest log-sum-exp error against the reference without rounding: %.3g", worst)
}

// TestAttentionFragBlocks: under the CUDA dialect's policy, for every
// head dimension up to 128 and contexts short and long, the fragment
// forward has a block and the key and query kernels have one up to
// fragBwdMaxDim; each kernel keeps its threadgroup arrays within the
// dialect's shared memory and is a whole number of warps, at most 4; at
// models/gpt.cue's d 64, T 256 the forward is 64 queries × 64 keys, the
// key kernel 64 keys × 32 queries and the query kernel 64 queries × 64
// keys. Metal has no fragments, and a dialect whose fragments are not
// the shape the kernels are written for gets none of them.
func TestAttentionFragBlocks(t *testing.T) {
	tl, err := attnTilingFor(CUDA, "")
	if err != nil {
		t.Fatal(err)
	}
	f := CUDA.Fragments
	for d := 1; d <= 128; d++ {
		for _, tt := range []int{1, 8, 37, 256, 1024} {
			g := attnGeom{mats: 2, tq: tt, tk: tt, d: d, scale: 1, causal: true, tiling: tl}
			fb, fok := g.fragFwdBlock(f)
			kb, kok := g.fragKeysBlock(f)
			qb, qok := g.fragQueriesBlock(f)
			if !fok || kok != (d <= fragBwdMaxDim) || qok != (d <= fragBwdMaxDim) {
				t.Fatalf("d %d, t %d: forward block %v, key block %v, query block %v (want them up to d %d)", d, tt, fok, kok, qok, fragBwdMaxDim)
			}
			ks := []*Kernel{attentionFwdFragKernel(g, f)}
			if kok {
				ks = append(ks, attentionBwdKeysFragKernel(g, f, true, true))
			}
			if qok {
				ks = append(ks, attentionBwdQueriesFragKernel(g, f))
			}
			for _, k := range ks {
				shared := 0
				for _, s := range k.Body {
					switch s := s.(type) {
					case Shared:
						shared += 4 * s.Size
					case SharedPairs:
						shared += 4 * s.Size
					}
				}
				if shared > tl.shared || k.Threadgroup%32 != 0 || k.Threadgroup > 128 {
					t.Errorf("d %d, t %d: %s: %d bytes of threadgroup memory, %d threads", d, tt, k.Doc, shared, k.Threadgroup)
				}
			}
			if d == 64 && tt == 256 && (fb != fragBlock{4, 64, 64, 64} || kb != fragBlock{4, 64, 32, 64} || qb != fragBlock{4, 64, 64, 64}) {
				t.Errorf("at d 64, T 256: forward %+v, keys %+v, queries %+v", fb, kb, qb)
			}
		}
	}
	g := attnGeom{mats: 2, tq: 64, tk: 64, d: 64, scale: 1, tiling: tl}
	if _, ok := g.fragFwdBlock(Metal.Fragments); ok || AttentionFragments(Metal, 64) {
		t.Error("Metal, which has no fragments, has a fragment block")
	}
	var b strings.Builder
	if err := PrintKernel(&b, Metal, attentionFwdFragKernel(g, f)); err == nil || !strings.Contains(err.Error(), "no register fragments") {
		t.Errorf("printing a fragment kernel for Metal: error %v, want one saying it has no register fragments", err)
	}
	// accToA follows the tables: with c0 and c1 swapped, a0 comes from c1
	swapped := *f
	swapped.Layout[FragC] = append([]FragPlace{f.Layout[FragC][1], f.Layout[FragC][0]}, f.Layout[FragC][2:]...)
	if src, ok := accToA(&swapped); !ok || src[0] != (accSource{0, 1}) || src[4] != (accSource{1, 1}) || !fragShapeOK(&swapped) {
		t.Errorf("with c0 and c1 swapped, accToA gives %v, %v", src, ok)
	}
	if src, ok := accToA(f); !ok || src[0] != (accSource{0, 0}) || src[3] != (accSource{0, 3}) || src[6] != (accSource{1, 2}) {
		t.Errorf("accToA gives %v, %v; want a_i from accumulator i/4, element i%%4", src, ok)
	}
	// rows that depend on the lane's place in its group: no quad shares a row
	odd := *f
	odd.Layout[FragC] = append([]FragPlace{{RowT: 1, ColG: 1}}, f.Layout[FragC][1:]...)
	if fragShapeOK(&odd) {
		t.Error("fragments whose accumulator rows depend on threadID_in_group pass fragShapeOK")
	}
}

// fragPadGeoms are fragTestGeoms over 4 samples, to pad: their long
// causal contexts run the kernels' unmasked tiles, which must still mask
// padding (the left padding lies in them).
var fragPadGeoms = []attnGeom{
	{mats: 8, tq: 80, tk: 80, d: 32, heads: 2, scale: 0.17, causal: true, rate: 0.1},
	{mats: 4, tq: 20, tk: 64, d: 16, scale: 0.25},
	{mats: 4, tq: 128, tk: 128, d: 64, scale: 0.125, causal: true},
}

// TestAttentionFragPaddedOnCPU runs the fragment kernels with a padding
// mask against the padded unfused reference rounding to bfloat16, over
// attnPadGeoms and fragPadGeoms, at the tolerances of
// TestAttentionFragKernelsOnCPU.
func TestAttentionFragPaddedOnCPU(t *testing.T) {
	tl, err := attnTilingFor(CUDA, "")
	if err != nil {
		t.Fatal(err)
	}
	f := CUDA.Fragments
	cases := padCases(t, "fa_attn", append(attnPadGeoms[:len(attnPadGeoms):len(attnPadGeoms)], fragPadGeoms...), func(g attnGeom) (fwd, kv, q *Kernel) {
		if _, ok := g.fragFwdBlock(f); ok {
			fwd = attentionFwdFragKernel(g, f)
		}
		if _, ok := g.fragKeysBlock(f); ok {
			kv = attentionBwdKeysFragKernel(g, f, true, true)
		}
		if _, ok := g.fragQueriesBlock(f); ok {
			q = attentionBwdQueriesFragKernel(g, f)
		}
		return fwd, kv, q
	}, tl, cpu.RoundBF16, faOutTol, faLSETol, faGradTol, 16)
	for _, c := range cases {
		if !strings.Contains(c.k.Doc, "register fragments") {
			t.Errorf("%s: kernel %q is not the fragment one", c.name, c.k.Doc)
		}
	}
	checkCases(t, CUDA, cases, runCases(t, CUDA, cases))
}
