package gpuhost

import (
	"math"
	"testing"
)

// TestPrecisionRound checks each precision's rounding on values whose
// rounding is known: ties to even, carries into the exponent, and the
// values that must pass through.
func TestPrecisionRound(t *testing.T) {
	f := math.Float32frombits
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		p       Precision
		in, out float32
	}{
		{PrecisionF32, f(0x3f800001), f(0x3f800001)},
		{PrecisionBF16, f(0x3f808000), f(0x3f800000)}, // tie, even below
		{PrecisionBF16, f(0x3f818000), f(0x3f820000)}, // tie, even above
		{PrecisionBF16, f(0x3f808001), f(0x3f810000)}, // above the tie
		{PrecisionBF16, f(0x7f7fffff), inf},           // too large: infinity
		{PrecisionTF32, f(0x3f801000), f(0x3f800000)}, // tie, even below
		{PrecisionTF32, f(0x3f803000), f(0x3f804000)}, // tie, even above
		{PrecisionTF32, f(0x3f800fff), f(0x3f800000)}, // below the tie
		{PrecisionTF32, f(0x3fffffff), f(0x40000000)}, // carry into the exponent
		{PrecisionTF32, f(0x7f7fffff), inf},
		{PrecisionTF32, inf, inf},
		{PrecisionTF32, -1.5, -1.5},
	} {
		if got := c.p.Round(c.in); math.Float32bits(got) != math.Float32bits(c.out) {
			t.Errorf("%v.Round(%#08x) = %#08x, want %#08x", c.p, math.Float32bits(c.in), math.Float32bits(got), math.Float32bits(c.out))
		}
	}
	for _, p := range []Precision{PrecisionF32, PrecisionBF16, PrecisionTF32} {
		if n := p.Round(float32(math.NaN())); n == n {
			t.Errorf("%v.Round(NaN) = %v", p, n)
		}
	}
	if PrecisionBF16.String() != "bf16" || PrecisionTF32.String() != "tf32" || PrecisionF32.String() != "f32" || Precision(9).Valid() {
		t.Error("precision names")
	}
}

// TestTolerancePerPrecision: a step whose GEMMs run in bf16 or tf32 gets
// u·sqrt(K) of the scale, more than float32's; an f32 step keeps float32's.
func TestTolerancePerPrecision(t *testing.T) {
	const k = 4608
	f32, bf16, tf32 := tolerance(k, 2, PrecisionF32), tolerance(k, 2, PrecisionBF16), tolerance(k, 2, PrecisionTF32)
	if f32 != 4e-6*k*2 || math.Abs(bf16-0x1p-8*math.Sqrt(k)*2) > 1e-12 || math.Abs(tf32-0x1p-11*math.Sqrt(k)*2) > 1e-12 || tolerance(16, 1, PrecisionBF16) != 0x1p-8*4 {
		t.Errorf("tolerances f32 %g bf16 %g tf32 %g", f32, bf16, tf32)
	}
	st := &PlanStep{Ops: []Op{{Kernel: "k"}, {Gemm: &GemmOp{Shape: GemmShape{Precision: PrecisionTF32}}}, {Gemm: &GemmOp{Shape: GemmShape{Precision: PrecisionBF16}}}}}
	if p := stepPrecision(st); p != PrecisionBF16 {
		t.Errorf("stepPrecision %v, want bf16 (the coarsest)", p)
	}
	if p := stepPrecision(&PlanStep{Ops: []Op{{Kernel: "k"}}}); p != PrecisionF32 {
		t.Errorf("stepPrecision of a step without GEMMs %v", p)
	}
	// a step whose own kernels multiply on tensor tiles (the fused
	// attention's): their precision, and the coarser of it and its GEMMs'
	if p := stepPrecision(&PlanStep{Ops: []Op{{Kernel: "k"}}, Precision: PrecisionTF32}); p != PrecisionTF32 {
		t.Errorf("stepPrecision of a step of tile kernels %v, want tf32", p)
	}
	st.Precision = PrecisionTF32
	if p := stepPrecision(st); p != PrecisionBF16 {
		t.Errorf("stepPrecision %v, want bf16 (its GEMMs', the coarser)", p)
	}
}

// TestAbsDiff: the selftest's difference is 0 for equal values, two NaNs
// and the same infinity (the +Inf log-sum-exp of a fused attention's
// query that sees no key, on both sides), and +Inf for a NaN against a
// number or for infinities that differ.
func TestAbsDiff(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, c := range []struct {
		a, b float32
		want float64
	}{{1, 1, 0}, {1, 3, 2}, {nan, nan, 0}, {inf, inf, 0}, {-inf, -inf, 0}, {nan, 1, math.Inf(1)}, {1, nan, math.Inf(1)}, {inf, 1, math.Inf(1)}, {inf, -inf, math.Inf(1)}} {
		if got := absDiff(c.a, c.b); got != c.want {
			t.Errorf("absDiff(%g, %g) = %g, want %g", c.a, c.b, got, c.want)
		}
	}
}
