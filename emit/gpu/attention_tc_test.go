package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// tf32Round is x rounded to TF32 as the CUDA tiles round their operands
// (cvt.rna.tf32.f32: the top 10 of 23 mantissa bits, to nearest, ties
// away from zero), and as the shims' emulation does.
func tf32Round(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7fffffff >= 0x7f800000 {
		return x
	}
	return math.Float32frombits((u + 0x1000) &^ 0x1fff)
}

// The tolerances of the tensor-tile kernels against the reference whose
// products round their operands as the tiles do (unfusedAttention with
// tf32Round), relative to 1 + |value| as checkCases measures.
//
// The scores' operands are the same numbers on both sides and round
// alike, so the log-sum-exp keeps the float32 kernel's tolerance. The
// forward rounds each probability before it normalises it, which the
// reference cannot follow (it does not round them): a relative error of
// at most 2^-11 (a TF32 rounding) in each term of o = Σ p·v, Σ p = 1,
// |v| ≤ 1, so at most 2^-11 in o, plus float32's 2e-5.
//
// The backward's probabilities and ds are computed alike on both sides
// (from the same lse and delta), a few float32 units apart, so their
// TF32 roundings differ only where such a value lies next to a rounding
// boundary (about one in 2^12), and then by one TF32 unit of that one
// term: the gradients stay within 1.5e-5 over these cases, and 1e-4
// leaves room for other data while staying below the errors that
// rounding itself makes (the reference without it misses by more,
// which the test checks).
const (
	tcLSETol  = 2e-5
	tcOutTol  = 0x1p-11 + 2e-5
	tcGradTol = 1e-4
)

// TestAttentionTCKernelsOnCPU runs the fused attention's tensor-tile
// kernels (kernels_attention_tc.go) in the CUDA dialect on the CPU, the
// tiles emulated by the shim (testdata/shim/cuda_shim.h), against the
// unfused reference whose products round their operands to TF32, over
// every case of attnTestGeoms whose head dimension the tiles take (a
// multiple of 8), under the CUDA dialect's block policy. The same
// outputs miss the reference without rounding by more than the
// tolerance somewhere: the emulation rounds, and the test sees it.
func TestAttentionTCKernelsOnCPU(t *testing.T) {
	const step, seed = 7, 1234
	r := rand.New(rand.NewPCG(31, 8))
	tl, err := attnTilingFor(CUDA, "")
	if err != nil {
		t.Fatal(err)
	}
	var cases []gpuCase
	// per case, outputs of the reference without rounding, by kind
	var exact []map[string]map[int][]float32
	for _, g := range attnTestGeoms {
		if g.d%8 != 0 {
			continue
		}
		g.tiling = tl
		if !tcTiles(CUDA, g) {
			t.Fatalf("%s: the CUDA tiles do not take it", g)
		}
		if _, ok := g.tcFwdBlock(); !ok {
			t.Fatalf("%s: no tensor-tile forward block fits %d bytes", g, tl.shared)
		}
		q := randVec(r, g.mats*g.tq*g.d, -2, 2)
		kt := randVec(r, g.mats*g.d*g.tk, -2, 2)
		v := randVec(r, g.mats*g.tk*g.d, -1, 1)
		do := randVec(r, g.mats*g.tq*g.d, -1, 1)
		o, lse, delta, dq, dkt, dv := unfusedAttention(g, q, kt, v, do, step, seed, tf32Round)
		_, lsee, _, dqe, dkte, dve := unfusedAttention(g, q, kt, v, do, step, seed, nil)
		name := fmt.Sprintf("tc_attn_%dx%dx%dx%d", g.mats, g.tq, g.tk, g.d)
		if g.heads > 0 {
			name += fmt.Sprintf("_%dheads", g.heads)
			q, v, o, do, dv = tokenMajor(g, q, g.tq), tokenMajor(g, v, g.tk), tokenMajor(g, o, g.tq), tokenMajor(g, do, g.tq), tokenMajor(g, dv, g.tk)
			kt, dkt = tokenMajor(g, transposeMats(kt, g.mats, g.d, g.tk), g.tk), tokenMajor(g, transposeMats(dkt, g.mats, g.d, g.tk), g.tk)
			dve, dkte = tokenMajor(g, dve, g.tk), tokenMajor(g, transposeMats(dkte, g.mats, g.d, g.tk), g.tk)
			dq, dqe = tokenMajor(g, dq, g.tq), tokenMajor(g, dqe, g.tq)
		}
		args := func(ins ...[]float32) [][]float32 {
			if g.rate > 0 {
				return append([][]float32{argsVec(0.1, step, seed)}, ins...)
			}
			return ins
		}
		a := 0
		if g.rate > 0 {
			a = 1
		}
		cases = append(cases, gpuCase{name: name, k: attentionFwdTCKernel(g), tols: map[int]float64{a + 3: tcOutTol, a + 4: tcLSETol},
			in:   args(q, kt, v, zeros(len(o)), zeros(len(lse))),
			want: map[int][]float32{a + 3: o, a + 4: lse}})
		exact = append(exact, map[string]map[int][]float32{"lse": {a + 4: lsee}})
		if _, ok := g.tcQueriesBlock(); ok {
			cases = append(cases, gpuCase{name: name + "_q", k: attentionBwdQueriesTCKernel(g), tol: tcGradTol,
				in:   args(q, kt, v, do, lse, delta, zeros(len(dq))),
				want: map[int][]float32{a + 6: dq}})
			exact = append(exact, map[string]map[int][]float32{"grad": {a + 6: dqe}})
		}
		if _, ok := g.tcKeysBlock(); !ok {
			continue // the SIMT kernel's (TestAttentionTCBlocks says where)
		}
		cases = append(cases,
			gpuCase{name: name + "_kv", k: attentionBwdKeysTCKernel(g, true, true), tol: tcGradTol,
				in:   args(q, kt, v, do, lse, delta, zeros(len(dkt)), zeros(len(dv))),
				want: map[int][]float32{a + 6: dkt, a + 7: dv}},
			gpuCase{name: name + "_v", k: attentionBwdKeysTCKernel(g, false, true), tol: tcGradTol,
				in:   args(q, kt, v, do, lse, delta, zeros(len(dv))),
				want: map[int][]float32{a + 6: dv}})
		exact = append(exact, map[string]map[int][]float32{"grad": {a + 6: dkte, a + 7: dve}}, map[string]map[int][]float32{"grad": {a + 6: dve}})
	}
	res := runCases(t, CUDA, cases)
	checkCases(t, CUDA, cases, res)
	worst := map[string]float64{}
	for i, c := range cases {
		if !strings.Contains(c.k.Doc, "tensor tiles") {
			t.Errorf("%s: kernel %q is not the tensor-tile one", c.name, c.k.Doc)
		}
		for kind, params := range exact[i] {
			for j, want := range params {
				for e := range want {
					worst[kind] = max(worst[kind], math.Abs(float64(res[i][j][e])-float64(want[e]))/(1+math.Abs(float64(want[e]))))
				}
			}
		}
	}
	for kind, tol := range map[string]float64{"lse": tcLSETol, "grad": tcGradTol} {
		if worst[kind] <= tol {
			t.Errorf("the tensor-tile kernels' %s outputs are within %.3g of the reference without TF32 rounding (largest error %.3g): the test cannot tell whether they round", kind, tol, worst[kind])
		}
		t.Logf("largest %s error against the reference without rounding: %.3g", kind, worst[kind])
	}
}

// TestAttentionTCBlocks: under the CUDA dialect's policy, for every head
// dimension the tiles take (multiples of 8 up to 128) and contexts short
// and long, each tensor-tile kernel that has a block keeps its
// threadgroup arrays within the dialect's shared memory, is a whole
// number of warps (one per 16 rows), and its tile offsets and leading
// dimensions are aligned as TileLoad and TileStore require; the forward
// always has one, the key and query kernels up to head dimensions
// tcKeysMaxDim and tcQueriesMaxDim (past them the lowering keeps the SIMT
// kernels), and at models/gpt.cue's d 64, T 256 the blocks are 64
// queries (4 warps), 32 keys (2 warps) and 32 queries (2 warps).
func TestAttentionTCBlocks(t *testing.T) {
	tl, err := attnTilingFor(CUDA, "")
	if err != nil {
		t.Fatal(err)
	}
	for d := 8; d <= 128; d += 8 {
		for _, tt := range []int{1, 8, 37, 256, 1024} {
			g := attnGeom{mats: 2, tq: tt, tk: tt, d: d, scale: 1, causal: true, tiling: tl}
			fb, fok := g.tcFwdBlock()
			kb, kok := g.tcKeysBlock()
			qb, qok := g.tcQueriesBlock()
			if !fok || kok != (d <= tcKeysMaxDim) || qok != (d <= tcQueriesMaxDim) {
				t.Errorf("d %d, t %d: forward block %v, key block %v (want one up to d %d), query block %v (up to d %d)", d, tt, fok, kok, tcKeysMaxDim, qok, tcQueriesMaxDim)
			}
			var ks []*Kernel
			if fok {
				ks = append(ks, attentionFwdTCKernel(g))
			}
			if kok {
				ks = append(ks, attentionBwdKeysTCKernel(g, true, true))
			}
			if qok {
				ks = append(ks, attentionBwdQueriesTCKernel(g))
			}
			for _, k := range ks {
				shared := 0
				for _, s := range k.Body {
					if sh, ok := s.(Shared); ok {
						shared += 4 * sh.Size
					}
				}
				if shared > tl.shared || k.Threadgroup%32 != 0 || k.Threadgroup > 256 {
					t.Errorf("d %d, t %d: %s: %d bytes of threadgroup memory, %d threads", d, tt, k.Doc, shared, k.Threadgroup)
				}
				checkTileAlignment(t, k)
			}
			if d == 64 && tt == 256 && (fb.rows != 64 || fb.threads() != 128 || kb.rows != 32 || kb.threads() != 64 || qb.rows != 32 || qb.threads() != 64) {
				t.Errorf("at d 64, T 256: forward %d rows of %d threads, keys %d of %d, queries %d of %d", fb.rows, fb.threads(), kb.rows, kb.threads(), qb.rows, qb.threads())
			}
		}
	}
}

// checkTileAlignment checks every tile load and store of k: a leading
// dimension that is a multiple of 4 and an offset that is a multiple of
// 8 for every value of the warp (0 … threads/32 − 1), the loops' variables
// at their first values (the offsets the generators write are constants
// plus warp·16·ld terms).
func checkTileAlignment(t *testing.T, k *Kernel) {
	t.Helper()
	var walk func(ss []Stmt)
	walk = func(ss []Stmt) {
		for _, s := range ss {
			var off Expr
			var ld int
			switch s := s.(type) {
			case TileLoad:
				off, ld = s.Offset, s.Ld
			case TileStore:
				off, ld = s.Offset, s.Ld
			case If:
				walk(s.Then)
				walk(s.Else)
			case For:
				walk(s.Body)
			}
			if off == nil {
				continue
			}
			for w := 0; w < k.Threadgroup/32; w++ {
				v, ok := evalInt(off, map[string]int{"warp": w})
				if !ok || v%8 != 0 || ld%4 != 0 {
					t.Errorf("%s: a tile at offset %v (%d for warp %d, known %v) with leading dimension %d", k.Doc, off, v, w, ok, ld)
				}
			}
		}
	}
	walk(k.Body)
}

// evalInt evaluates an integer expression of literals, +, * and the
// variables vars; ok false for anything else.
func evalInt(e Expr, vars map[string]int) (int, bool) {
	switch e := e.(type) {
	case IntLit:
		return int(e.V), true
	case Var:
		v, ok := vars[e.Name]
		return v, ok
	case Binary:
		l, lok := evalInt(e.L, vars)
		r, rok := evalInt(e.R, vars)
		switch {
		case !lok || !rok:
			return 0, false
		case e.Op == OpAdd:
			return l + r, true
		case e.Op == OpMul:
			return l * r, true
		}
	}
	return 0, false
}

// attnPlan is a hand plan of one fused attention, forward and backward,
// over 2 matrices of 24 queries and keys of dimension d, in precision
// precision.
func attnPlan(d int, precision string) *planner.Plan {
	const m, tt = 2, 24
	p := &planner.Plan{Model: "attn", Batch: 1, Training: true}
	q := testBuffer(p, "q", planner.KindInput, m, tt, d)
	kt := testBuffer(p, "kt", planner.KindActivation, m, d, tt)
	v := testBuffer(p, "v", planner.KindActivation, m, tt, d)
	o := testBuffer(p, "o", planner.KindActivation, m, tt, d)
	lse := testBuffer(p, "lse", planner.KindActivation, m, tt)
	do := testBuffer(p, "o.grad", planner.KindGrad, m, tt, d)
	dq := testBuffer(p, "q.grad", planner.KindGrad, m, tt, d)
	dkt := testBuffer(p, "kt.grad", planner.KindGrad, m, d, tt)
	dv := testBuffer(p, "v.grad", planner.KindGrad, m, tt, d)
	delta := testBuffer(p, "delta", planner.KindActivation, m, tt)
	attr := planner.Attr{Scale: 0.25, Causal: true, Precision: precision}
	p.Forward = planner.Phase{{Kernel: planner.KAttention, Layer: "attn", In: []planner.BufID{q, kt, v}, Out: []planner.BufID{o, lse}, Attr: attr}}
	p.Backward = planner.Phase{{Kernel: planner.KAttentionBwd, Layer: "attn", In: []planner.BufID{q, kt, v, o, lse, do}, Out: []planner.BufID{dq, dkt, dv, delta}, Attr: attr}}
	return p
}

// TestAttentionLowersToTiles: a CUDA plan whose attention is bf16
// launches the register-fragment kernels (each launch saying it rounds
// to bf16, what selftest widens its tolerance for), whatever its head
// dimension up to fragBwdMaxDim, and past it the fragment forward and
// the tensor-tile backward (saying tf32); a tf32 plan the tensor-tile
// kernels only, where its head dimension is a multiple of 8; an f32
// plan and every Metal plan the SIMT kernels only, with no precision.
func TestAttentionLowersToTiles(t *testing.T) {
	for _, c := range []struct {
		d         *Dialect
		dim       int
		precision string
		tiles     []string // launches of tile kernels, by kind
		frags     []string // launches of fragment kernels
	}{
		{CUDA, 16, "bf16", nil, []string{"attention", "attention_bwd_kv", "attention_bwd_q"}},
		{CUDA, 16, "tf32", []string{"attention", "attention_bwd_kv", "attention_bwd_q"}, nil},
		{CUDA, 16, "f32", nil, nil},
		{CUDA, 16, "", nil, nil},
		{CUDA, 12, "bf16", nil, []string{"attention", "attention_bwd_kv", "attention_bwd_q"}},
		{CUDA, 12, "tf32", nil, nil},
		{CUDA, 96, "bf16", []string{"attention_bwd_kv", "attention_bwd_q"}, []string{"attention"}},
		{Metal, 16, "bf16", nil, nil},
	} {
		prog, err := Lower(attnPlan(c.dim, c.precision), c.d)
		if err != nil {
			t.Fatalf("%s, d %d, %q: %v", c.d.Name, c.dim, c.precision, err)
		}
		docs := map[string]string{}
		for _, k := range prog.Kernels {
			docs[k.Name] = k.Doc
		}
		var tiles, frags []string
		for _, op := range append(prog.Forward, prog.Backward...) {
			ln := op.Launch
			kind := ln.Kernel[strings.Index(ln.Kernel, "_")+1:]
			want := ""
			if strings.Contains(docs[ln.Kernel], "tensor tiles") {
				tiles, want = append(tiles, kind), "tf32"
			}
			if strings.Contains(docs[ln.Kernel], "register fragments") {
				frags, want = append(frags, kind), "bf16"
			}
			if ln.Precision != want {
				t.Errorf("%s, d %d, %q: launch of %s has precision %q, want %q", c.d.Name, c.dim, c.precision, ln.Kernel, ln.Precision, want)
			}
		}
		if strings.Join(tiles, " ") != strings.Join(c.tiles, " ") || strings.Join(frags, " ") != strings.Join(c.frags, " ") {
			t.Errorf("%s, d %d, %q: tile kernels %v, want %v; fragment kernels %v, want %v", c.d.Name, c.dim, c.precision, tiles, c.tiles, frags, c.frags)
		}
		if c.tiles == nil && strings.Contains(prog.Source, "wmma") {
			t.Errorf("%s, d %d, %q: the source has the tile header", c.d.Name, c.dim, c.precision)
		}
		if c.frags == nil && strings.Contains(prog.Source, "m16n8k16") {
			t.Errorf("%s, d %d, %q: the source has the fragment header", c.d.Name, c.dim, c.precision)
		}
	}
	// the build hook keeps every plan on the SIMT kernels
	attnNoTiles = "1"
	defer func() { attnNoTiles = "" }()
	prog, err := Lower(attnPlan(16, "bf16"), CUDA)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(prog.Source, "wmma") || strings.Contains(prog.Source, "m16n8k16") {
		t.Error("with attnNoTiles set, a bf16 CUDA plan still uses tiles or fragments")
	}
	// the other keeps a bf16 plan on the tiles
	attnNoTiles, attnNoFrags = "", "1"
	defer func() { attnNoFrags = "" }()
	prog, err = Lower(attnPlan(16, "bf16"), CUDA)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prog.Source, "wmma") || strings.Contains(prog.Source, "m16n8k16") {
		t.Error("with attnNoFrags set, a bf16 CUDA plan does not use the tiles alone")
	}
}

// tcPadGradTol is the tolerance of the tensor-tile gradients of padded
// cases: a query that sees few keys has probabilities near 1, where one
// TF32 unit of p·keep (≤ 1.25 with dropout), the flip that a rounding
// boundary between the kernel's and the reference's p makes, is up to
// 2^-10, times |do| ≤ 1 in dv (seeds 8 to 12 of these cases: 3.4e-4 at
// most, 1.5e-5 in most runs). A masking error is far larger: a key that
// should be masked moves a gradient by 0.1 to 60 in these cases.
const tcPadGradTol = 0x1p-10 + tcGradTol

// TestAttentionTCPaddedOnCPU runs the tensor-tile kernels with a padding
// mask against the padded unfused reference rounding to TF32, over the
// cases of attnPadGeoms the tiles take, at the tolerances of
// TestAttentionTCKernelsOnCPU but the gradients' (tcPadGradTol).
func TestAttentionTCPaddedOnCPU(t *testing.T) {
	tl, err := attnTilingFor(CUDA, "")
	if err != nil {
		t.Fatal(err)
	}
	cases := padCases(t, "tc_attn", attnPadGeoms, func(g attnGeom) (fwd, kv, q *Kernel) {
		if !tcTiles(CUDA, g) {
			return nil, nil, nil
		}
		if _, ok := g.tcFwdBlock(); ok {
			fwd = attentionFwdTCKernel(g)
		}
		if _, ok := g.tcKeysBlock(); ok {
			kv = attentionBwdKeysTCKernel(g, true, true)
		}
		if _, ok := g.tcQueriesBlock(); ok {
			q = attentionBwdQueriesTCKernel(g)
		}
		return fwd, kv, q
	}, tl, tf32Round, tcOutTol, tcLSETol, tcPadGradTol, 8)
	for _, c := range cases {
		if !strings.Contains(c.k.Doc, "tensor tiles") {
			t.Errorf("%s: kernel %q is not the tensor-tile one", c.name, c.k.Doc)
		}
	}
	checkCases(t, CUDA, cases, runCases(t, CUDA, cases))
}
