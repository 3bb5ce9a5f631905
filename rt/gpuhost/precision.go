package gpuhost

import (
	"math"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// Precision is the arithmetic of a GEMM's products (Gemm.Precision,
// GemmShape.Precision). The result is float32 in every precision, and so
// are the operands unless a bf16 GEMM reads them as bfloat16 (Operand.Elem,
// written rounded by their producers); a fast precision lets the device
// round each element of float32 A and B to a shorter mantissa before it
// multiplies, and still sums the products in float32. The zero value is
// exact float32.
type Precision uint8

// The precisions, named as the plan's (planner's Attr.Precision).
const (
	// PrecisionF32 multiplies the float32 operands as they are.
	PrecisionF32 Precision = iota
	// PrecisionBF16 rounds each element of A and B to bfloat16 (8 bits of
	// mantissa, to nearest, ties to even), then multiplies and sums in
	// float32: CUBLAS_COMPUTE_32F_FAST_16BF on CUDA.
	PrecisionBF16
	// PrecisionTF32 rounds each element of A and B to TF32 (10 bits of
	// mantissa, to nearest, ties to even), then multiplies and sums in
	// float32: CUBLAS_COMPUTE_32F_FAST_TF32 on CUDA.
	PrecisionTF32
	precisionCount
)

var precisionNames = [precisionCount]string{"f32", "bf16", "tf32"}

// String is the plan's name of p ("f32", "bf16", "tf32").
func (p Precision) String() string {
	if p < precisionCount {
		return precisionNames[p]
	}
	return "unknown precision"
}

// Valid reports whether p is one of the precisions above.
func (p Precision) Valid() bool { return p < precisionCount }

// Round is x as a GEMM of precision p reads it: x itself in f32, else x
// rounded to nearest (ties to even) to p's mantissa. NaNs stay NaNs and
// infinities infinite.
func (p Precision) Round(x float32) float32 {
	switch p {
	case PrecisionBF16:
		return cpu.RoundBF16(x)
	case PrecisionTF32:
		u := math.Float32bits(x)
		if u&0x7fffffff >= 0x7f800000 { // NaN or infinity: unchanged
			return x
		}
		// Keep the top 10 of the 23 mantissa bits: add half the dropped
		// unit, less one unless the kept unit is odd, then clear.
		u += 0xfff + (u>>13)&1
		return math.Float32frombits(u &^ 0x1fff)
	}
	return x
}

// unitRoundoff is the largest relative error of one rounding to p's
// mantissa (half its last place: 2^-p for p bits of precision, the
// implicit one included), 0 for f32, whose own rounding selftest's
// float32 tolerance covers.
func (p Precision) unitRoundoff() float64 {
	switch p {
	case PrecisionBF16:
		return 0x1p-8 // 7 stored bits: 8 bits of precision
	case PrecisionTF32:
		return 0x1p-11 // 10 stored bits: 11 bits of precision
	}
	return 0
}
