package cpu

import (
	"math"
	"math/rand"
	"testing"
)

// geluInputs are the awkward values and a sweep: zeros of both signs,
// denormals, the clamp at 14 and past it, the exponential's floor, the
// derivative's zero near −0.75, and normal and wide random values.
func geluInputs() []float32 {
	xs := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 1e-30, -1e-30, 14, -14, 13.99, -13.99, 14.5, -14.5,
		20, -20, 1e6, -1e6, 13.2, -13.2, -0.7517916, 0.5, -0.5, 1, -1, 3, -3, 5, -5, 9, -9}
	return sweepInputs(xs, -15, 15, 1.0/64, 7, 20000)
}

// TestGELUAgainstFloat64: the float32 GELU is within 8 ulps of the float64
// formula rounded once (or 1e-37 absolutely, where both are about zero),
// its derivative within 3e-7 relative to max(1, |GELU'|); a NaN stays NaN.
func TestGELUAgainstFloat64(t *testing.T) {
	xs := geluInputs()
	y := make([]float32, len(xs))
	d := make([]float32, len(xs))
	ones := make([]float32, len(xs))
	for i := range ones {
		ones[i] = 1
	}
	geluFwd(xs, y)
	geluBwd(xs, ones, d)
	for i, x := range xs {
		v := float64(x)
		want := 0.5 * v * math.Erfc(-v/math.Sqrt2)
		wantD := 0.5*math.Erfc(-v/math.Sqrt2) + v*math.Exp(-0.5*v*v)/math.Sqrt(2*math.Pi)
		ulp := float64(math.Nextafter32(float32(math.Abs(want)), float32(math.Inf(1))) - float32(math.Abs(want)))
		if err := math.Abs(float64(y[i]) - want); err > 8*ulp && err > 1e-37 {
			t.Errorf("GELU(%g) = %g, want %g (%.1f ulps)", x, y[i], want, err/ulp)
		}
		if err := math.Abs(float64(d[i]) - wantD); err > 3e-7*math.Max(1, math.Abs(wantD)) {
			t.Errorf("GELU'(%g) = %g, want %g", x, d[i], wantD)
		}
	}
	nan := []float32{float32(math.NaN())}
	geluFwd(nan, y[:1])
	geluBwd(nan, ones[:1], d[:1])
	if y[0] == y[0] || d[0] == d[0] {
		t.Errorf("GELU(NaN) = %g, GELU'(NaN) = %g, want NaN", y[0], d[0])
	}
}

// TestGELUPathsAreTheGoTwin: every GEMM path's GELU kernels (AVX-512
// assembly where the machine has it) give geluCore's bits, on every length
// up to 40 (ragged tails), a long one, in place, and on the inputs above
// with NaN.
func TestGELUPathsAreTheGoTwin(t *testing.T) {
	defer SetGemmPath("")
	xs := append(geluInputs(), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)))
	r := rand.New(rand.NewSource(8))
	dy := make([]float32, len(xs))
	for i := range dy {
		dy[i] = float32(r.NormFloat64())
	}
	wantY := make([]float32, len(xs))
	wantDx := make([]float32, len(xs))
	for i, x := range xs {
		phi, e := geluCore(x)
		wantY[i] = x * phi
		wantDx[i] = dy[i] * (phi + float32(x*float32(e*geluInvSqrt2π)))
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
			off := len(xs) - n - 3*(n%5) // vary where the slice starts
			if off < 0 {
				off = 0
			}
			x, g := xs[off:off+n], dy[off:off+n]
			y := make([]float32, n+1)
			dx := make([]float32, n+1)
			y[n], dx[n] = 42, 42 // past the end: must stay
			geluFwd(x, y[:n])
			geluBwd(x, g, dx[:n])
			inPlace := append([]float32(nil), g...)
			geluBwd(x, inPlace, inPlace)
			for i := 0; i < n; i++ {
				if !same(y[i], wantY[off+i]) || !same(dx[i], wantDx[off+i]) || !same(inPlace[i], wantDx[off+i]) {
					t.Fatalf("%s, n %d, x = %g: y %g dx %g (in place %g), the Go twin %g %g", path, n, x[i], y[i], dx[i], inPlace[i], wantY[off+i], wantDx[off+i])
				}
			}
			if y[n] != 42 || dx[n] != 42 {
				t.Fatalf("%s, n %d: wrote past the end", path, n)
			}
		}
	}
}
