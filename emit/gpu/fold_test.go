package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// TestFoldBatchNormKernel runs foldBatchNormKernel in both dialects on
// the CPU against rt/cpu's FoldBatchNorm (the CPU program's fold and
// the GPU program's selftest reference): with and without the layer's
// bias, in the weight's own order and in KRSC order, where folded weight
// (o, c, t) lands at (o·taps + t)·C + c; and as launch rewrites it for a
// folded weight and bias stored in bfloat16 (a cuDNN convolution's), each
// stored value the float32 kernel's rounded to bfloat16.
func TestFoldBatchNormKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const oc, cg, rs = 6, 5, 9
	n := oc * cg * rs
	w, b := randVec(r, n, -1, 1), randVec(r, oc, -0.5, 0.5)
	gamma, beta := randVec(r, oc, 0.5, 1.5), randVec(r, oc, -1, 1)
	mean, vr := randVec(r, oc, -0.3, 0.3), randVec(r, oc, 0.2, 2)
	const eps = 1e-5
	krscOf := func(v []float32) []float32 {
		out := make([]float32, n)
		for o := range oc {
			for c := range cg {
				for t := range rs {
					out[(o*rs+t)*cg+c] = v[(o*cg+c)*rs+t]
				}
			}
		}
		return out
	}
	var cases []gpuCase
	for _, bias := range []bool{true, false} {
		wf, bf := zeros(n), zeros(oc)
		var bb []float32
		in := [][]float32{w}
		if bias {
			bb = b
			in = append(in, b)
		}
		cpu.FoldBatchNorm(w, bb, gamma, beta, mean, vr, wf, bf, oc, eps)
		in = append(in, gamma, beta, mean, vr, zeros(n), zeros(oc))
		at := len(in) - 2
		for _, krsc := range []bool{false, true} {
			want := wf
			if krsc {
				want = krscOf(wf)
			}
			name := map[bool]string{false: "fold", true: "fold_krsc"}[krsc] + map[bool]string{false: "", true: "_bias"}[bias]
			cases = append(cases, gpuCase{name: name, k: foldBatchNormKernel(oc, cg, rs, krsc, bias, eps), in: in,
				want: map[int][]float32{at: want, at + 1: bf}, tol: 1e-5})
		}
	}
	for _, d := range []*Dialect{CUDA, Metal} {
		checkCases(t, d, cases, runCases(t, d, cases))
	}

	// Stored in bfloat16: the float32 kernel's results, rounded.
	k := foldBatchNormKernel(oc, cg, rs, true, true, eps)
	sk, err := storedBF16(k, []string{"wf", "bf"})
	if err != nil {
		t.Fatal(err)
	}
	in := [][]float32{w, b, gamma, beta, mean, vr, zeros(n), zeros(oc)}
	for _, d := range []*Dialect{CUDA, Metal} {
		res := runCases(t, d, []gpuCase{{name: "fold", k: k, in: in}, {name: "fold_stored", k: sk, in: in}})
		for _, i := range []int{6, 7} {
			want, got := res[0][i], bf16Halves(res[1][i])
			for j, v := range want {
				if g := uint32(got[j]) << 16; g != uint32(bf16Want(v))<<16 {
					t.Fatalf("%s: stored %s[%d] = %v, want %v rounded to bfloat16", d.Name, k.Params[i].Name, j, math.Float32frombits(g), v)
				}
			}
		}
	}
}

// TestCastKernel runs castKernel in both dialects on the CPU: NCHW to
// channels last and back, element (n, c, s) of one at (n·inner + s)·c + c
// of the other, and a copy between tensors of one layout.
func TestCastKernel(t *testing.T) {
	const outer, c, inner = 3, 5, 7
	n := outer * c * inner
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i + 1)
	}
	last := make([]float32, n)
	for b := range outer {
		for ch := range c {
			for s := range inner {
				last[(b*inner+s)*c+ch] = x[(b*c+ch)*inner+s]
			}
		}
	}
	cases := []gpuCase{
		{name: "to_nhwc", k: castKernel(outer, c, inner, false, true), in: [][]float32{x, zeros(n)}, want: map[int][]float32{1: last}},
		{name: "to_nchw", k: castKernel(outer, c, inner, true, false), in: [][]float32{last, zeros(n)}, want: map[int][]float32{1: x}},
		{name: "copy", k: castKernel(outer, c, inner, true, true), in: [][]float32{last, zeros(n)}, want: map[int][]float32{1: last}},
	}
	for _, d := range []*Dialect{CUDA, Metal} {
		checkCases(t, d, cases, runCases(t, d, cases))
	}
}
