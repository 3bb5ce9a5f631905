package cpu

import "math"

// A float32 e^x that vector registers can run, for the softmaxes and the
// cross-entropy: n = round(x·log₂e), r = x − n·ln 2 (ln 2 in two parts),
// e^r from a degree-6 polynomial (gelu.go's geluExp, relative error 2e-9),
// scaled by 2ⁿ with one rounding, so results that underflow become
// denormals or 0 and those past float32's range +Inf, as a correctly
// rounded exponential's do. Within 2 ulps of math.Exp rounded to float32
// (TestExpAgainstFloat64), and about 1 ns a value in Go where math.Exp in
// float64 took 10–15; the AVX-512 kernel (exp_amd64.s) does 16 at a time.
//
// expCore is the Go twin of that kernel: the same float32 operations in the
// same order (no fused multiply-adds), so both give the same bits.
const (
	expMin = -104 // e^−104 is below half the least denormal: 0
	expMax = 89   // e^89 is past float32's range: +Inf
)

// expCore returns e^v; NaN stays NaN.
func expCore(v float32) float32 {
	v = min(max(v, expMin), expMax)
	n := float32(float32(v*geluLog2e)+geluMagic) - geluMagic
	r := float32(v-float32(n*geluLn2Hi)) - float32(n*geluLn2Lo)
	p := geluExp[6]
	for k := 5; k >= 0; k-- {
		p = float32(p*r) + geluExp[k]
	}
	return float32(float64(p) * math.Float64frombits(uint64(int64(n)+1023)<<52))
}

// expShift writes y[i] = e^(x[i]−m), x[i]−m rounded to float32 first; y may
// alias x.
func expShift(x, y []float32, m float32) {
	y = y[:len(x)]
	done := 0
	if ek := epilogue(); ek != nil && ek.expShift != nil && len(x) > 0 {
		done = len(x)
		ek.expShift(&x[0], &y[0], done, m)
	}
	for i := done; i < len(x); i++ {
		y[i] = expCore(x[i] - m)
	}
}

// expShiftSum is expShift returning Σ y in float32: summed in vector lanes
// added at the end where the machine has the loop, else by sum64, rounded.
func expShiftSum(x, y []float32, m float32) float32 {
	if ek := epilogue(); ek != nil && ek.expShiftSum != nil && len(x) > 0 {
		_ = y[len(x)-1] // the assembly does no bounds checks
		return ek.expShiftSum(&x[0], &y[0], len(x), m)
	}
	expShift(x, y, m)
	return float32(sum64(y[:len(x)]))
}

// sum64 returns Σ x in float64, in four interleaved partial sums (lanes i
// mod 4) added at the end, the same order for any caller, so results
// depend only on x.
func sum64(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += float64(x[i])
		s1 += float64(x[i+1])
		s2 += float64(x[i+2])
		s3 += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}
