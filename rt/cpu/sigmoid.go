package cpu

import "math"

// The logistic sigmoid and tanh in float32 arithmetic that vector
// registers can run, on exp.go's e^x, where they took math.Exp and
// math.Tanh in float64 (10–20 ns an element; an EfficientNet's SiLUs spent
// most of its inference there).
//
// sigmoid(x) = 1/(1+t) for x ≥ 0 and t/(1+t) for x < 0, t = e^(−|x|) in
// (0, 1]: no overflow, and for x far below 0 the result is t's denormal or
// 0, as the float64 formula rounded to float32 gives. Within 3 ulps of that
// formula (TestSigmoidTanhAgainstFloat64); ±Inf give 1 and 0, NaN stays
// NaN.
//
// tanh(x) is tanh(a), a = |x|, with x's sign: for a < tanhSmall, a +
// a·z·P(z), z = a², P a degree-5 polynomial fitted here (least squares
// reweighted towards the largest relative error: 1.6e-8); beyond it,
// (1−t)/(1+t) with t = e^(−2a) at most e^(−1.8), so 1−t loses nothing to
// cancellation. Within
// 3 ulps of math.Tanh rounded to float32; ±Inf give ±1, −0 stays −0, NaN
// stays NaN.
//
// sigmoidCore and tanhCore are the Go twins of the AVX-512 kernels
// (exp_amd64.s): the same float32 operations in the same order, the
// explicit float32 conversions keeping the compiler from fusing a product
// and a sum (the assembly fuses none), so both give the same bits.
const tanhSmall = 0.9

// tanhPoly is P: tanh(x)/x − 1 = z·P(z), lowest power first.
var tanhPoly = [6]float32{
	-0.3333321213722229, 0.13330361247062683, -0.05372155085206032,
	0.020904285833239555, -0.00686024921014905, 0.0013040461344644427,
}

// negAbs returns −|x| (x with its sign bit set).
func negAbs(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) | 0x80000000)
}

// sigmoidCore returns 1/(1+e^(−x)).
func sigmoidCore(x float32) float32 {
	t := expCore(negAbs(x))
	num := float32(1)
	if x < 0 {
		num = t
	}
	return num / (1 + t)
}

// tanhCore returns tanh(x): tanh(|x|) with x's sign.
func tanhCore(x float32) float32 {
	sign := math.Float32bits(x) & 0x80000000
	a := math.Float32frombits(math.Float32bits(x) &^ 0x80000000)
	var r float32
	if a < tanhSmall {
		z := a * a
		p := tanhPoly[5]
		for k := 4; k >= 0; k-- {
			p = float32(p*z) + tanhPoly[k]
		}
		r = a + float32(a*float32(z*p))
	} else {
		na := -a
		t := expCore(na + na)
		r = (1 - t) / (1 + t)
	}
	return math.Float32frombits(math.Float32bits(r) | sign)
}

// sigmoidFwd writes y = sigmoid(x); y may alias x.
func sigmoidFwd(x, y []float32) {
	y = y[:len(x)]
	done := 0
	if ek := epilogue(); ek != nil && ek.sigmoid != nil && len(x) > 0 {
		done = len(x) - len(x)%max(1, ek.sigmoidTail)
		if done > 0 {
			ek.sigmoid(&x[0], &y[0], done)
		}
	}
	for i := done; i < len(x); i++ {
		y[i] = sigmoidCore(x[i])
	}
}

// tanhFwd writes y = tanh(x); y may alias x.
func tanhFwd(x, y []float32) {
	y = y[:len(x)]
	done := 0
	if ek := epilogue(); ek != nil && ek.tanh != nil && len(x) > 0 {
		done = len(x)
		ek.tanh(&x[0], &y[0], done)
	}
	for i := done; i < len(x); i++ {
		y[i] = tanhCore(x[i])
	}
}

// siluFwd writes y = x·sigmoid(x), the float32 product; y may alias x.
func siluFwd(x, y []float32) {
	y = y[:len(x)]
	done := 0
	if ek := epilogue(); ek != nil && ek.silu != nil && len(x) > 0 {
		done = len(x) - len(x)%max(1, ek.sigmoidTail)
		if done > 0 {
			ek.silu(&x[0], &y[0], done)
		}
	}
	for i := done; i < len(x); i++ {
		y[i] = x[i] * sigmoidCore(x[i])
	}
}

// sigmoidPair returns σ(x) (sigmoidCore's bits) and 1−σ(x) = σ(−x), each
// from t = e^(−|x|) with one division, so that both keep their relative
// accuracy (1−σ rounded from σ near 1 would not).
func sigmoidPair(x float32) (s, c float32) {
	t := expCore(negAbs(x))
	d := 1 + t
	num, cnum := float32(1), t
	if x < 0 {
		num, cnum = t, 1
	}
	return num / d, cnum / d
}

// siluBwd writes dx = dy·SiLU'(x), SiLU'(x) = σ·(1 + x·(1−σ)) in float32
// from sigmoidPair: within 3e-7 of the float64 derivative relative to
// max(1, |SiLU'|) (it crosses zero at x ≈ −1.28, where ulps mean little);
// dx may alias dy.
func siluBwd(x, dy, dx []float32) {
	x, dy = x[:len(dx)], dy[:len(dx)]
	done := 0
	if ek := epilogue(); ek != nil && ek.siluBwd != nil && len(dx) > 0 {
		done = len(dx)
		ek.siluBwd(&x[0], &dy[0], &dx[0], done)
	}
	for i := done; i < len(dx); i++ {
		s, c := sigmoidPair(x[i])
		dx[i] = dy[i] * float32(s*(1+float32(x[i]*c)))
	}
}
