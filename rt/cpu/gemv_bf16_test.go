package cpu

import (
	"math"
	"slices"
	"testing"
)

// TestGemvBF16Bits: GemvBF16 (the vector kernel where one runs, four rows
// at a time, dotBF16Go for the rest) gives dotBF16Go's bits for every row,
// on lengths around the kernels' step of 32 and the tail, row counts that
// leave 0 to 3 rows to the Go loop, on 1, 2, 3 and 16 threads; both
// kernels where this CPU runs them; and dotBF16Go is the float64 sum of
// the rounded operands to within float32 rounding.
func TestGemvBF16Bits(t *testing.T) {
	defer SetThreads(Threads())
	defer func(dp, widen bool) { dotBF16DP, dotBF16Widen = dp, widen }(dotBF16DP, dotBF16Widen)
	kernels := []string{"go"}
	if dotBF16DP {
		kernels = append(kernels, "vdpbf16ps")
	}
	if dotBF16Widen {
		kernels = append(kernels, "widen")
	}
	t.Logf("kernels here: %v", kernels)
	r := newTestRand(16)
	for _, in := range []int{1, 15, 16, 31, 32, 33, 64, 100, 384, 1536} {
		for _, out := range []int{1, 3, 4, 5, 7, 89, 384} {
			xf, wf := randSlice(r, in, 1), randSlice(r, in*out, 1)
			x, w, xb := make([]uint16, in), make([]uint16, len(wf)), make([]uint16, in+3)
			ToBF16(x, xf)
			ToBF16(w, wf)
			want := make([]float32, out)
			for j := range want {
				want[j] = dotBF16Go(x, w[j*in:(j+1)*in])
				var s float64
				for i := range x {
					s += float64(bf16Value(x[i])) * float64(bf16Value(w[j*in+i]))
				}
				if d := math.Abs(float64(want[j]) - s); d > 1e-6*float64(in) {
					t.Fatalf("in=%d out=%d: dotBF16Go row %d = %v, the float64 sum %v", in, out, j, want[j], s)
				}
			}
			for _, k := range kernels {
				dotBF16Supported = k != "go"
				dotBF16DP = k == "vdpbf16ps"
				for _, threads := range []int{1, 2, 3, 16} {
					SetThreads(threads)
					y := make([]float32, out)
					GemvBF16(xf, xb, w, nil, y, in, out, ActNone, 0)
					for j := range y {
						if math.Float32bits(y[j]) != math.Float32bits(want[j]) {
							t.Fatalf("%s in=%d out=%d threads=%d: y[%d] = %v, dotBF16Go gives %v", k, in, out, threads, j, y[j], want[j])
						}
					}
				}
			}
			dotBF16Supported = dotBF16DP || dotBF16Widen
		}
	}
}

// TestGemvBF16BiasAct: GemvBF16 adds the bias and applies the activation
// after the sum, as GemmFwd does.
func TestGemvBF16BiasAct(t *testing.T) {
	r := newTestRand(5)
	in, out := 96, 13
	x, wf, b := randSlice(r, in, 1), randSlice(r, in*out, 1), randSlice(r, out, 1)
	xb, w := make([]uint16, in), make([]uint16, in*out)
	ToBF16(w, wf)
	y := make([]float32, out)
	GemvBF16(x, xb, w, b, y, in, out, ActReLU, 0)
	for j := range y {
		want := max(dotBF16Go(xb, w[j*in:(j+1)*in])+b[j], 0)
		if math.Float32bits(y[j]) != math.Float32bits(want) {
			t.Errorf("y[%d] = %v, want relu(dot + b) = %v", j, y[j], want)
		}
	}
}

// TestToBF16 rounds as RoundBF16 does, NaN and infinities included, and
// flushes what is below bfloat16's smallest normal to a zero of its sign.
func TestToBF16(t *testing.T) {
	src := []float32{0, 1, -1.00390625, 1.0078125, 3.14159, float32(math.Inf(1)), float32(math.NaN()), 3.4e38, -1e-39, 1e-40, 1.2e-38}
	dst := make([]uint16, len(src))
	ToBF16(dst, src)
	for i, v := range src {
		got, want := bf16Value(dst[i]), RoundBF16(v)
		if math.Abs(float64(want)) < 0x1p-126 {
			want = float32(math.Copysign(0, float64(v)))
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("ToBF16(%v) = %v (%#04x), want %v", v, got, dst[i], want)
		}
	}
	// a long slice, split over threads, as its pieces one by one
	defer SetThreads(Threads())
	SetThreads(3)
	long := randSlice(newTestRand(4), 1<<17+5, 1)
	got, want := make([]uint16, len(long)), make([]uint16, len(long))
	ToBF16(got, long)
	for i := 0; i < len(long); i += 1000 {
		ToBF16(want[i:min(i+1000, len(long))], long[i:min(i+1000, len(long))])
	}
	if !slices.Equal(got, want) {
		t.Error("ToBF16 of 131077 values on 3 threads differs from its pieces'")
	}
}
