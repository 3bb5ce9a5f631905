package cpu

import (
	"math"
	"math/rand"
	"testing"
)

// expInputs are the awkward values and a sweep: zeros, where the result
// turns denormal, underflows and overflows, infinities, and random values.
func expInputs() []float32 {
	xs := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1, -1, 0.5, -0.5, 0.34657359, -0.34657359,
		-87.3, -87.4, -100, -103.2, -103.3, -104, -1e6, 88.7, 88.72, 88.73, 89, 1e6,
		float32(math.Inf(1)), float32(math.Inf(-1))}
	return sweepInputs(xs, -105, 90, 1.0/128, 9, 40000)
}

// sweepInputs appends to xs the values from lo to hi in steps of step,
// then normal values of random scales (4⁻² … 4²) drawn from seed, to n
// values in all.
func sweepInputs(xs []float32, lo, hi, step float64, seed int64, n int) []float32 {
	for v := lo; v <= hi; v += step {
		xs = append(xs, float32(v))
	}
	r := rand.New(rand.NewSource(seed))
	for len(xs) < n {
		xs = append(xs, float32(r.NormFloat64()*math.Pow(4, float64(r.Intn(5)-2))))
	}
	return xs
}

// TestExpAgainstFloat64: the float32 exponential is within 2 ulps of
// math.Exp rounded to float32 (1 ulp of the least denormal below 2⁻¹²⁶),
// +Inf past the range, 0 below it; NaN stays NaN.
func TestExpAgainstFloat64(t *testing.T) {
	xs := expInputs()
	y := make([]float32, len(xs))
	expShift(xs, y, 0)
	for i, x := range xs {
		want := float32(math.Exp(float64(x)))
		tol := 2 * float64(math.Nextafter32(want, float32(math.Inf(1)))-want)
		if want < 0x1p-126 {
			tol = 0x1p-149
		}
		if math.IsInf(float64(want), 1) {
			if !math.IsInf(float64(y[i]), 1) {
				t.Errorf("exp(%g) = %g, want +Inf", x, y[i])
			}
			continue
		}
		if math.Abs(float64(y[i])-float64(want)) > tol {
			t.Errorf("exp(%g) = %g, want %g (%.1f ulps)", x, y[i], want, math.Abs(float64(y[i])-float64(want))/tol*2)
		}
	}
	nan := []float32{float32(math.NaN())}
	expShift(nan, y[:1], 0)
	if y[0] == y[0] {
		t.Errorf("exp(NaN) = %g, want NaN", y[0])
	}
}

// TestExpPathsAreTheGoTwin: every GEMM path's expShift and expShiftSum
// (AVX-512 assembly where the machine has it) give expCore's bits, on every
// length up to 40, a long one, in place, with a shift, and NaN; and
// expShiftSum's sum is the elements' within float32's rounding.
func TestExpPathsAreTheGoTwin(t *testing.T) {
	defer SetGemmPath("")
	xs := append(expInputs(), float32(math.NaN()))
	const m = 1.75
	want := make([]float32, len(xs))
	for i, x := range xs {
		want[i] = expCore(x - m)
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
			x := xs[off : off+n]
			y := make([]float32, n+1)
			y[n] = 42
			expShift(x, y[:n], m)
			inPlace := append([]float32(nil), x...)
			expShift(inPlace, inPlace, m)
			summed := append([]float32(nil), x...)
			sum := expShiftSum(summed, summed, m)
			var sum64 float64
			for i := 0; i < n; i++ {
				if !same(y[i], want[off+i]) || !same(inPlace[i], want[off+i]) || !same(summed[i], want[off+i]) {
					t.Fatalf("%s, n %d: exp(%g − %g) = %g (in place %g, summed %g), the Go twin %g", path, n, x[i], m, y[i], inPlace[i], summed[i], want[off+i])
				}
				sum64 += float64(want[off+i])
			}
			if d := math.Abs(float64(sum) - sum64); !(d <= 1e-6*math.Abs(sum64)) && !(sum != sum && sum64 != sum64) {
				t.Fatalf("%s, n %d: expShiftSum's sum %g, the elements' %g", path, n, sum, sum64)
			}
			if y[n] != 42 {
				t.Fatalf("%s, n %d: wrote past the end", path, n)
			}
		}
	}
}

// TestRowMaxAndNaNRows: rowMax is the largest element for every length up
// to 40 (the maximum anywhere in the row, −Inf included), and a NaN
// anywhere in a row makes its whole softmax NaN, as the max builtin's NaN
// did.
func TestRowMaxAndNaNRows(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	for n := 1; n <= 40; n++ {
		for at := 0; at < n; at++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			x[at] = 10
			if got := rowMax(x); got != 10 {
				t.Fatalf("rowMax of %d with 10 at %d = %g", n, at, got)
			}
			x[at] = float32(math.Inf(-1))
			want := float32(math.Inf(-1))
			for _, v := range x {
				want = max(want, v)
			}
			if got := rowMax(x); got != want {
				t.Fatalf("rowMax of %v = %g, want %g", x, got, want)
			}
			x[at] = float32(math.NaN())
			y := make([]float32, n)
			softmaxRow(x, y)
			for i, v := range y {
				if v == v {
					t.Fatalf("softmax of a row with NaN at %d of %d: y[%d] = %g, want NaN", at, n, i, v)
				}
			}
		}
	}
}
