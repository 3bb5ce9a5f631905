package cpu

import (
	"math"
	"testing"
)

func TestSGDHandComputedSteps(t *testing.T) {
	// lr 0.1, momentum 0.9, weight decay 0.01, two steps on one weight:
	// step 1: g = 0.5 + 0.01·2 = 0.52, v = 0.52, p = 2 - 0.052 = 1.948
	// step 2: g = 0.5 + 0.01·1.948 = 0.51948, v = 0.9·0.52 + 0.51948 = 0.98748,
	//         p = 1.948 - 0.098748 = 1.849252
	p, g, v := []float32{2}, []float32{0.5}, []float32{0}
	SGD(p, g, v, 0.1, 0.9, 0.01)
	if math.Abs(float64(p[0])-1.948) > 1e-6 || math.Abs(float64(v[0])-0.52) > 1e-6 {
		t.Errorf("SGD step 1: p, v = %v, %v, want 1.948, 0.52", p[0], v[0])
	}
	SGD(p, g, v, 0.1, 0.9, 0.01)
	if math.Abs(float64(p[0])-1.849252) > 1e-6 || math.Abs(float64(v[0])-0.98748) > 1e-6 {
		t.Errorf("SGD step 2: p, v = %v, %v, want 1.849252, 0.98748", p[0], v[0])
	}
	// Without momentum the velocity is not needed.
	p = []float32{1, -1}
	SGD(p, []float32{1, 2}, nil, 0.5, 0, 0)
	if p[0] != 0.5 || p[1] != -2 {
		t.Errorf("plain SGD: p = %v, want [0.5 -2]", p)
	}
}

func TestAdamHandComputedSteps(t *testing.T) {
	// lr 0.01, betas 0.9/0.999, eps 1e-8, weight decay 0.1, p = 1, g = 0.5.
	// Adam (L2): g' = 0.5 + 0.1 = 0.6; m = 0.06, v = 0.00036;
	//   m̂ = 0.6, v̂ = 0.36, p = 1 - 0.01·0.6/(0.6+1e-8) ≈ 0.99
	// AdamW: p shrinks to 1 - 0.01·0.1 = 0.999, g stays 0.5: m = 0.05,
	//   v = 0.00025, m̂/sqrt(v̂) = 1, p = 0.999 - 0.01 = 0.989
	for _, tc := range []struct {
		name      string
		decoupled bool
		want      float64
		wantM     float64
	}{{"adam", false, 0.99, 0.06}, {"adamw", true, 0.989, 0.05}} {
		p, m, v := []float32{1}, []float32{0}, []float32{0}
		Adam(p, []float32{0.5}, m, v, 0.01, 0.9, 0.999, 1e-8, 0.1, 1, tc.decoupled)
		if math.Abs(float64(p[0])-tc.want) > 1e-6 || math.Abs(float64(m[0])-tc.wantM) > 1e-7 {
			t.Errorf("%s step 1: p, m = %v, %v, want %v, %v", tc.name, p[0], m[0], tc.want, tc.wantM)
		}
	}
	// Step 2 of plain Adam without decay, g = 0.5 then -0.25, written out.
	p, m, v := []float32{1}, []float32{0}, []float32{0}
	Adam(p, []float32{0.5}, m, v, 0.01, 0.9, 0.999, 1e-8, 0, 1, false)
	Adam(p, []float32{-0.25}, m, v, 0.01, 0.9, 0.999, 1e-8, 0, 2, false)
	m2 := 0.9*0.05 + 0.1*-0.25
	v2 := 0.999*0.00025 + 0.001*0.0625
	want := 0.99 - 0.01*(m2/(1-0.81))/(math.Sqrt(v2)/math.Sqrt(1-0.998001)+1e-8)
	if math.Abs(float64(p[0])-want) > 1e-6 {
		t.Errorf("adam step 2: p = %v, want %v", p[0], want)
	}
}

func TestRandDeterministicAndInRange(t *testing.T) {
	a, b, c := NewRand(42), NewRand(42), NewRand(43)
	same, differ := true, false
	for i := 0; i < 100; i++ {
		x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
		same = same && x == y
		differ = differ || x != z
	}
	if !same || !differ {
		t.Fatalf("Rand: same seed equal = %v (want true), other seed differs = %v (want true)", same, differ)
	}
	r := NewRand(0)
	var counts [10]int
	const draws = 100000
	for i := 0; i < draws; i++ {
		f := r.Float32()
		if f < 0 || f >= 1 {
			t.Fatalf("Float32() = %v, outside [0,1)", f)
		}
		counts[r.Intn(10)]++
	}
	for k, n := range counts {
		if math.Abs(float64(n)-draws/10) > 5*math.Sqrt(draws/10) {
			t.Errorf("Intn(10) drew %d %d times of %d; not uniform", k, n, draws)
		}
	}
	perm := []int{0, 1, 2, 3, 4, 5, 6, 7}
	r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	seen := map[int]bool{}
	for _, v := range perm {
		seen[v] = true
	}
	if len(seen) != len(perm) {
		t.Errorf("Shuffle produced %v, not a permutation", perm)
	}
	u := make([]float32, 1000)
	FillUniform(u, 0.25, NewRand(1))
	lo, hi := float32(1), float32(-1)
	for _, v := range u {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < -0.25 || hi > 0.25 || lo > -0.2 || hi < 0.2 {
		t.Errorf("FillUniform(0.25) spans [%v, %v], want about [-0.25, 0.25]", lo, hi)
	}
}

func TestDropout(t *testing.T) {
	n := 20000
	x := make([]float32, n)
	Fill(x, 2)
	y, mask := make([]float32, n), make([]float32, n)
	DropoutFwd(x, y, mask, 0.25, NewRand(7), true)
	kept := 0
	for i := range y {
		switch mask[i] {
		case 0:
		case float32(1 / 0.75):
			kept++
		default:
			t.Fatalf("mask[%d] = %v, want 0 or 1/(1-rate)", i, mask[i])
		}
		if y[i] != x[i]*mask[i] {
			t.Fatalf("y[%d] = %v, want x·mask = %v", i, y[i], x[i]*mask[i])
		}
	}
	if frac := float64(kept) / float64(n); math.Abs(frac-0.75) > 0.02 {
		t.Errorf("dropout kept %.3f of the elements, want about 0.75", frac)
	}
	y2, mask2 := make([]float32, n), make([]float32, n)
	DropoutFwd(x, y2, mask2, 0.25, NewRand(7), true)
	if closeTo(mask2, mask, 0) != "" {
		t.Errorf("dropout with the same seed gave a different mask")
	}
	dy := make([]float32, n)
	Fill(dy, 3)
	dx := make([]float32, n)
	DropoutBwd(mask, dy, dx)
	for i := range dx {
		if dx[i] != 3*mask[i] {
			t.Fatalf("DropoutBwd: dx[%d] = %v, want %v", i, dx[i], 3*mask[i])
		}
	}
	Fill(mask2, -1)
	DropoutFwd(x, y2, mask2, 0.25, NewRand(7), false)
	if closeTo(y2, x, 0) != "" || mask2[0] != -1 {
		t.Errorf("dropout in evaluation must copy x and leave the mask alone")
	}
}

func TestArgmaxNonFinite(t *testing.T) {
	if got := Argmax([]float32{1, 5, 5, -2}); got != 1 {
		t.Errorf("Argmax = %d, want 1 (first of the tied maxima)", got)
	}
	if got := Argmax(nil); got != -1 {
		t.Errorf("Argmax(nil) = %d, want -1", got)
	}
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		x    []float32
		want int
	}{
		{[]float32{1, 2, 3}, -1},
		{[]float32{1, float32(math.NaN()), inf}, 1},
		{[]float32{0, -inf}, 1},
		{[]float32{math.MaxFloat32, 0, inf}, 2},
	} {
		if got := NonFinite(tc.x); got != tc.want {
			t.Errorf("NonFinite(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
}

// TestClipGradNorm: gradients (3, 0) and (0, 4, 0) have norm 5; clipped to
// 1 they become (0.6, 0) and (0, 0.8, 0), whose norm is 1 (to the 1e-6 of
// the divisor); clipped to 10 they stay as they are.
func TestClipGradNorm(t *testing.T) {
	a, b := []float32{3, 0}, []float32{0, 4, 0}
	sums := make([]float32, 3)
	ClipGradNorm([][]float32{a, b}, 1, sums)
	want := []float32{0.6, 0, 0, 0.8, 0}
	for i, v := range append(append([]float32(nil), a...), b...) {
		if math.Abs(float64(v-want[i])) > 1e-6 {
			t.Errorf("clipped to 1: element %d = %v, want %v", i, v, want[i])
		}
	}
	if sums[0] != 9 || sums[1] != 16 || math.Abs(float64(sums[2])-0.2) > 1e-7 {
		t.Errorf("sums %v, want [9 16 0.2]", sums)
	}
	var norm float64
	for _, v := range append(a, b...) {
		norm += float64(v) * float64(v)
	}
	if math.Abs(math.Sqrt(norm)-1) > 1e-6 {
		t.Errorf("norm after clipping %v, want 1", math.Sqrt(norm))
	}
	a, b = []float32{3, 0}, []float32{0, 4, 0}
	ClipGradNorm([][]float32{a, b}, 10, sums)
	if a[0] != 3 || b[1] != 4 || sums[2] != 1 {
		t.Errorf("below the limit: %v %v scale %v, want unchanged and scale 1", a, b, sums[2])
	}
}
