package cpu

import "math"

// GELU (exact, erf form) in float32 arithmetic that vector registers can
// run: Φ(x) = ½·erfc(−x/√2) from erfc(z) = t·P(t)·e^(−z²), t = 1/(1+0.4z),
// P a degree-9 polynomial fitted here (least squares reweighted towards the
// largest relative error, on z in [0, 10]: 8e-9), and e^(−x²/2) from a
// degree-6 polynomial after the usual reduction by ln 2, with x² split into
// a product exact in float32 and a small rest so that the tails keep their
// relative accuracy, scaled by 2ⁿ with one rounding (so Φ underflows to 0
// as it should, and GELU(x) is −0 for x below −14). Against the float64 formula rounded once: GELU within
// 7 ulps (median 0.3) for finite x; its derivative Φ(x) + x·φ(x), whose
// exponential is the same e^(−x²/2), within 2.3e-7 absolutely (it crosses
// zero at x ≈ −0.75, so ulps mean little there). The float64 form costs
// about 30 ns an element in math.Erf and math.Exp, which made GELU and its
// backward 60% of a small GPT's training step (testdata/text/gpt_moby.cue).
//
// geluCore is the Go twin of the AVX-512 kernels (gelu_amd64.s): the same
// float32 operations in the same order, so both give the same bits; the
// explicit float32 conversions keep the compiler from fusing a product and
// a sum into one FMA (the assembly fuses none either).
const (
	geluClamp     = 16         // |x| beyond which Φ is exactly 0 or 1 in float32
	geluT         = 0.4        // t = 1/(1 + geluT·z)
	geluMagic     = 12582912.0 // 1.5·2²³: adding and subtracting it rounds to an integer
	geluLog2e     = 1.4426950216293335
	geluLn2Hi     = 0.693359375 // ln 2 = geluLn2Hi + geluLn2Lo, the first exact in 9 bits
	geluLn2Lo     = -0.00021219444170128554
	geluInvSqrt2  = 0.7071067690849304
	geluInvSqrt2π = 0.3989422917366028
)

// geluErfc is P: erfc(z)·e^(z²) = t·P(t), lowest power first.
var geluErfc = [10]float32{
	0.22570692002773285, 0.22495192289352417, 0.2149198353290558, 0.12967683374881744, 0.27207228541374207,
	-0.2843741774559021, 0.547439694404602, -0.49881109595298767, 0.19801147282123566, -0.029593724757432938,
}

// geluExp is e^r on [−ln2/2, ln2/2], lowest power first (relative error 2e-9).
var geluExp = [7]float32{1, 1, 0.49999991059303284, 0.16666419804096222, 0.04166822507977486, 0.008374805562198162, 0.0013836773578077555}

// geluCore returns Φ(x) and e^(−x²/2), |x| taken as at most geluClamp
// (beyond which Φ is 0 or 1 and the exponential 0 in float32). A NaN x
// gives NaN for both.
func geluCore(x float32) (phi, e float32) {
	ax := min(math.Float32frombits(math.Float32bits(x)&0x7fffffff), geluClamp)
	z := ax * geluInvSqrt2
	// x²/2 = hh + hl: xh has 12 significant bits, so xh² is exact.
	xh := math.Float32frombits(math.Float32bits(ax) & 0xfffff000)
	xl := ax - xh
	hl := float32(xh*xl) + float32(float32(xl*xl)*0.5)
	v := -(float32(xh*xh) * 0.5)
	n := float32(float32(v*geluLog2e)+geluMagic) - geluMagic
	r := float32(float32(v-float32(n*geluLn2Hi))-float32(n*geluLn2Lo)) - hl
	p := geluExp[6]
	for k := 5; k >= 0; k-- {
		p = float32(p*r) + geluExp[k]
	}
	// p·2ⁿ rounded once, to a denormal or zero too (n ≥ −185 here).
	e = float32(float64(p) * math.Float64frombits(uint64(int64(n)+1023)<<52))
	t := 1 / (1 + float32(geluT*z))
	q := geluErfc[9]
	for k := 8; k >= 0; k-- {
		q = float32(q*t) + geluErfc[k]
	}
	half := 0.5 * float32(float32(t*q)*e)
	if x < 0 {
		return half, e
	}
	return 1 - half, e
}

// geluFwd writes y = GELU(x) = x·Φ(x); y may alias x.
func geluFwd(x, y []float32) {
	y = y[:len(x)]
	done := 0
	if ek := epilogue(); ek != nil && ek.gelu != nil && len(x) > 0 {
		done = len(x)
		ek.gelu(&x[0], &y[0], done)
	}
	for i := done; i < len(x); i++ {
		phi, _ := geluCore(x[i])
		y[i] = x[i] * phi
	}
}

// geluBwd writes dx = dy·GELU'(x) = dy·(Φ(x) + x·φ(x)), φ(x) =
// e^(−x²/2)/√(2π); dx may alias dy.
func geluBwd(x, dy, dx []float32) {
	x, dy = x[:len(dx)], dy[:len(dx)]
	done := 0
	if ek := epilogue(); ek != nil && ek.geluBwd != nil && len(dx) > 0 {
		done = len(dx)
		ek.geluBwd(&x[0], &dy[0], &dx[0], done)
	}
	for i := done; i < len(dx); i++ {
		phi, e := geluCore(x[i])
		dx[i] = dy[i] * (phi + float32(x[i]*float32(e*geluInvSqrt2π)))
	}
}
