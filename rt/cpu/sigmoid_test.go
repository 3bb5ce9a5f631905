package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// sigmoidInputs are the awkward values and a sweep: zeros of both signs,
// denormals, tanh's switch between its polynomial and its exponential,
// where sigmoid turns denormal and underflows, where tanh rounds to ±1,
// huge values and infinities, and random values of many scales.
func sigmoidInputs() []float32 {
	xs := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 1e-30, -1e-30, 1e-4, -1e-4,
		0.9, -0.9, 0.89999998, -0.89999998, 0.90000004, -0.90000004, 0.5, -0.5, 1, -1, 9, -9, 9.1, -9.1,
		-87.3, -87.4, -100, -103.2, -103.3, -104, -105, 87.3, 88.8, 104, 1e6, -1e6, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1))}
	return sweepInputs(xs, -106, 106, 1.0/128, 17, 60000)
}

// ulpsOff returns |got − want| in ulps of want rounded to float32 (the
// least denormal's spacing below the normal range).
func ulpsOff(got float32, want float64) float64 {
	w := float32(want)
	a := math.Abs(float64(w))
	ulp := float64(math.Nextafter32(float32(a), float32(math.Inf(1)))) - a
	if a < 0x1p-126 {
		ulp = 0x1p-149
	}
	return math.Abs(float64(got)-want) / ulp
}

// TestSigmoidTanhAgainstFloat64: the float32 sigmoid is within 3 ulps of
// 1/(1+e^(−x)) in float64 and tanh within 3 ulps of math.Tanh, their signs
// and saturations those of the float64 forms rounded (±Inf give 1 and 0,
// ±1; tanh keeps −0), and NaN stays NaN, through sigmoidFwd and tanhFwd on
// this machine's path.
func TestSigmoidTanhAgainstFloat64(t *testing.T) {
	xs := sigmoidInputs()
	s := make([]float32, len(xs))
	th := make([]float32, len(xs))
	sigmoidFwd(xs, s)
	tanhFwd(xs, th)
	worstS, worstT := 0.0, 0.0
	for i, x := range xs {
		v := float64(x)
		wantS, wantT := 1/(1+math.Exp(-v)), math.Tanh(v)
		if e := ulpsOff(s[i], wantS); e > 3 {
			t.Errorf("sigmoid(%g) = %g, want %g (%.1f ulps)", x, s[i], wantS, e)
		} else {
			worstS = max(worstS, e)
		}
		if e := ulpsOff(th[i], wantT); e > 3 || math.Signbit(float64(th[i])) != math.Signbit(wantT) {
			t.Errorf("tanh(%g) = %g, want %g (%.1f ulps)", x, th[i], wantT, e)
		} else {
			worstT = max(worstT, e)
		}
	}
	t.Logf("worst: sigmoid %.2f ulps, tanh %.2f ulps", worstS, worstT)
	for _, c := range []struct{ x, s, th float32 }{
		{float32(math.Inf(1)), 1, 1}, {float32(math.Inf(-1)), 0, -1}, {1e6, 1, 1}, {-1e6, 0, -1},
	} {
		sigmoidFwd([]float32{c.x}, s[:1])
		tanhFwd([]float32{c.x}, th[:1])
		if s[0] != c.s || th[0] != c.th {
			t.Errorf("x = %g: sigmoid %g, tanh %g, want %g and %g", c.x, s[0], th[0], c.s, c.th)
		}
	}
	nan := []float32{float32(math.NaN())}
	sigmoidFwd(nan, s[:1])
	tanhFwd(nan, th[:1])
	if s[0] == s[0] || th[0] == th[0] {
		t.Errorf("sigmoid(NaN) = %g, tanh(NaN) = %g, want NaN", s[0], th[0])
	}
}

// TestSiLUIsSigmoidThenProduct: USiLU gives the bits of the graph it
// stands for, USigmoid then BinaryFwd's product of x and its output, on
// every path (so a plan that fuses them computes what the unfused one
// did), and is within 4 ulps of x/(1+e^(−x)) in float64 (or 1e-38
// absolutely, where the sigmoid is a denormal and its product with a
// large x carries its spacing).
func TestSiLUIsSigmoidThenProduct(t *testing.T) {
	defer SetGemmPath("")
	xs := append(sigmoidInputs(), float32(math.NaN()))
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		s, want, got := make([]float32, len(xs)), make([]float32, len(xs)), make([]float32, len(xs))
		UnaryFwd(xs, s, []Unary{{Kind: USigmoid}})
		shape := []int{1, len(xs)}
		BinaryFwd(BMul, xs, s, want, shape, shape, shape)
		UnaryFwd(xs, got, []Unary{{Kind: USiLU}})
		for i, x := range xs {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("%s: silu(%g) = %g, sigmoid then product %g", path, x, got[i], want[i])
			}
			v := float64(x)
			ref := v / (1 + math.Exp(-v))
			if math.IsInf(v, 0) || x != x {
				continue
			}
			if e := ulpsOff(got[i], ref); e > 4 && math.Abs(float64(got[i])-ref) > 1e-38 {
				t.Errorf("%s: silu(%g) = %g, want %g (%.1f ulps)", path, x, got[i], ref, e)
			}
		}
	}
}

// TestSigmoidTanhPathsAreTheGoTwin: every GEMM path's sigmoid, tanh and
// SiLU (AVX-512 assembly, and AVX2's for sigmoid and SiLU, where the
// machine has them) give their Go twins' bits, on every length up to 40
// (ragged tails), a long one, in place, and on the inputs above with NaN.
func TestSigmoidTanhPathsAreTheGoTwin(t *testing.T) {
	defer SetGemmPath("")
	xs := append(sigmoidInputs(), float32(math.NaN()))
	r := rand.New(rand.NewSource(18))
	r.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, f := range []struct {
		name string
		fwd  func(x, y []float32)
		core func(float32) float32
	}{{"sigmoid", sigmoidFwd, sigmoidCore}, {"tanh", tanhFwd, tanhCore}, {"silu", siluFwd, func(x float32) float32 { return x * sigmoidCore(x) }}} {
		want := make([]float32, len(xs))
		for i, x := range xs {
			want[i] = f.core(x)
		}
		for _, path := range GemmPaths() {
			if err := SetGemmPath(path); err != nil {
				t.Fatal(err)
			}
			if k := epilogue(); f.name != "tanh" && (path == "avx512" || path == "avx2") && (k == nil || k.sigmoid == nil || k.silu == nil) {
				t.Errorf("%s: no vector sigmoid or SiLU; the Go twin would be tested against itself", path)
			}
			lengths := []int{len(xs)}
			for n := 0; n <= 40; n++ {
				lengths = append(lengths, n)
			}
			for _, n := range lengths {
				off := max(0, len(xs)-n-3*(n%5))
				x := xs[off : off+n]
				y := make([]float32, n+1)
				y[n] = 42
				f.fwd(x, y[:n])
				inPlace := append([]float32(nil), x...)
				f.fwd(inPlace, inPlace)
				for i := 0; i < n; i++ {
					if !same(y[i], want[off+i]) || !same(inPlace[i], want[off+i]) {
						t.Fatalf("%s, %s, n %d: at %g: %g (in place %g), the Go twin %g", f.name, path, n, x[i], y[i], inPlace[i], want[off+i])
					}
				}
				if y[n] != 42 {
					t.Fatalf("%s, %s, n %d: wrote past the end", f.name, path, n)
				}
			}
		}
	}
}

// TestSiLUBwd: a lone USiLU's backward is within 3e-7 of the float64
// derivative σ + x·σ·(1−σ) relative to max(1, |SiLU'|), NaN staying NaN,
// and every path's (AVX-512 assembly where the machine has it) gives the
// Go loop's bits, on every length up to 40, a long one, and in place.
func TestSiLUBwd(t *testing.T) {
	defer SetGemmPath("")
	xs := append(sigmoidInputs(), float32(math.NaN()))
	ones := make([]float32, len(xs))
	for i := range ones {
		ones[i] = 1
	}
	d := make([]float32, len(xs))
	UnaryBwd(xs, ones, d, []Unary{{Kind: USiLU}})
	for i, x := range xs {
		v := float64(x)
		sg := 1 / (1 + math.Exp(-v))
		want := sg + v*sg*(1-sg)
		if x != x || math.IsInf(v, 0) {
			if x != x && d[i] == d[i] {
				t.Errorf("SiLU'(NaN) = %g, want NaN", d[i])
			}
			continue
		}
		if err := math.Abs(float64(d[i]) - want); err > 3e-7*math.Max(1, math.Abs(want)) {
			t.Errorf("SiLU'(%g) = %g, want %g", x, d[i], want)
		}
	}
	r := rand.New(rand.NewSource(19))
	dy := make([]float32, len(xs))
	for i := range dy {
		dy[i] = float32(r.NormFloat64())
	}
	want := make([]float32, len(xs))
	for i, x := range xs {
		s, c := sigmoidPair(x)
		if math.Float32bits(s) != math.Float32bits(sigmoidCore(x)) && x == x {
			t.Fatalf("sigmoidPair(%g)'s σ %g, sigmoidCore's %g", x, s, sigmoidCore(x))
		}
		want[i] = dy[i] * float32(s*(1+float32(x*c)))
	}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		lengths := []int{len(xs)}
		for n := 0; n <= 40; n++ {
			lengths = append(lengths, n)
		}
		for _, n := range lengths {
			off := max(0, len(xs)-n-3*(n%5))
			x, g := xs[off:off+n], dy[off:off+n]
			dx := make([]float32, n+1)
			dx[n] = 42
			siluBwd(x, g, dx[:n])
			inPlace := append([]float32(nil), g...)
			siluBwd(x, inPlace, inPlace)
			for i := 0; i < n; i++ {
				if !same(dx[i], want[off+i]) || !same(inPlace[i], want[off+i]) {
					t.Fatalf("%s, n %d: at %g: dx %g (in place %g), the Go loop %g", path, n, x[i], dx[i], inPlace[i], want[off+i])
				}
			}
			if dx[n] != 42 {
				t.Fatalf("%s, n %d: wrote past the end", path, n)
			}
		}
	}
}

// BenchmarkSiLU times UnaryFwd's SiLU on one thread against the pair it
// replaces (sigmoid, then BinaryFwd's product), on a block that stays in
// L2 and on one of EfficientNet's batch-1 activations (96×112×112).
func BenchmarkSiLU(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(1)
	for _, n := range []int{16 << 10, 96 * 112 * 112} {
		x, s, y := make([]float32, n), make([]float32, n), make([]float32, n)
		r := rand.New(rand.NewSource(1))
		for i := range x {
			x[i] = float32(r.NormFloat64() * 3)
		}
		shape := []int{1, n}
		b.Run(fmt.Sprintf("silu/%d", n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for i := 0; i < b.N; i++ {
				UnaryFwd(x, y, []Unary{{Kind: USiLU}})
			}
		})
		b.Run(fmt.Sprintf("sigmoid+mul/%d", n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for i := 0; i < b.N; i++ {
				UnaryFwd(x, s, []Unary{{Kind: USigmoid}})
				BinaryFwd(BMul, x, s, y, shape, shape, shape)
			}
		})
	}
}
