package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
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
// tf32Round), relative to 1 + |value| as checkCases measures. The scores'
// operands are the same numbers on both sides and round alike, so the
// log-sum-exp keeps the float32 kernel's tolerance. The forward rounds
// each probability before it normalises it, which the reference cannot
// follow (it does not round them): a relative error of at most 2^-11 (a
// TF32 rounding) in each term of o = Σ p·v, Σ p = 1, |v| ≤ 1, so at most
// 2^-11 in o, plus float32's 2e-5.
const (
	tcLSETol = 2e-5
	tcOutTol = 0x1p-11 + 2e-5
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
	var exact []map[int][]float32 // per case, the log-sum-exps without rounding
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
		o, lse, _, _, _, _ := unfusedAttention(g, q, kt, v, do, step, seed, tf32Round)
		_, lsee, _, _, _, _ := unfusedAttention(g, q, kt, v, do, step, seed, nil)
		name := fmt.Sprintf("tc_attn_%dx%dx%dx%d", g.mats, g.tq, g.tk, g.d)
		if g.heads > 0 {
			name += fmt.Sprintf("_%dheads", g.heads)
			q, v, o = tokenMajor(g, q, g.tq), tokenMajor(g, v, g.tk), tokenMajor(g, o, g.tq)
			kt = tokenMajor(g, transposeMats(kt, g.mats, g.d, g.tk), g.tk)
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
		exact = append(exact, map[int][]float32{a + 4: lsee})
	}
	res := runCases(t, CUDA, cases)
	checkCases(t, CUDA, cases, res)
	worst := 0.0
	for i, c := range cases {
		if !strings.Contains(c.k.Doc, "tensor tiles") {
			t.Errorf("%s: kernel %q is not the tensor-tile one", c.name, c.k.Doc)
		}
		for j, want := range exact[i] {
			for e := range want {
				worst = max(worst, math.Abs(float64(res[i][j][e])-float64(want[e]))/(1+math.Abs(float64(want[e]))))
			}
		}
	}
	if worst <= tcLSETol {
		t.Errorf("the tensor-tile kernels' log-sum-exps are within %.3g of the reference without TF32 rounding (largest error %.3g): the test cannot tell whether they round", tcLSETol, worst)
	}
	t.Logf("largest log-sum-exp error against the reference without rounding: %.3g", worst)
}
