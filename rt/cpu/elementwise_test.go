package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// unaryRef is each element-wise function written out directly.
func unaryRef(u Unary, v float64) float64 {
	a := float64(u.Alpha)
	switch u.Kind {
	case UReLU:
		return math.Max(v, 0)
	case ULeakyReLU:
		if v < 0 {
			return a * v
		}
		return v
	case USigmoid:
		return 1 / (1 + math.Exp(-v))
	case UTanh:
		return math.Tanh(v)
	case UGELU:
		return v * 0.5 * math.Erfc(-v/math.Sqrt2)
	case UExp:
		return math.Exp(v)
	case ULog:
		return math.Log(v)
	case UAddConst:
		return v + a
	case UMulConst:
		return v * a
	case USqrt:
		return math.Sqrt(v)
	case UPowConst:
		return math.Pow(v, a)
	case UErf:
		return 1 - math.Erfc(v)
	case UReLU6:
		if v < 0 {
			return 0
		}
		if v > 6 {
			return 6
		}
		return v
	case USiLU:
		return v / (1 + math.Exp(-v))
	}
	panic("unknown unary")
}

func TestUnaryChainsMatchReferenceAndFiniteDifferences(t *testing.T) {
	long := make([]Unary, 0, 20)
	for i := 0; i < 10; i++ {
		long = append(long, Unary{Kind: UTanh}, Unary{Kind: UMulConst, Alpha: 1.2})
	}
	chains := []struct {
		name  string
		chain []Unary
		lo    float32 // inputs uniform in [lo, lo+2)
		kinky bool
	}{
		{"relu", []Unary{{Kind: UReLU}}, -1, true},
		{"leakyrelu", []Unary{{Kind: ULeakyReLU, Alpha: 0.1}}, -1, true},
		{"sigmoid", []Unary{{Kind: USigmoid}}, -1, false},
		{"silu", []Unary{{Kind: USiLU}}, -1, false},
		{"mulconst silu (a wide range)", []Unary{{Kind: UMulConst, Alpha: 4}, {Kind: USiLU}}, -1, false},
		{"tanh", []Unary{{Kind: UTanh}}, -1, false},
		{"gelu", []Unary{{Kind: UGELU}}, -1, false},
		{"exp", []Unary{{Kind: UExp}}, -1, false},
		{"log", []Unary{{Kind: ULog}}, 0.5, false},
		{"addconst mulconst", []Unary{{Kind: UAddConst, Alpha: 0.7}, {Kind: UMulConst, Alpha: -3}}, -1, false},
		{"sqrt", []Unary{{Kind: USqrt}}, 0.5, false},
		{"powconst 2", []Unary{{Kind: UPowConst, Alpha: 2}}, -1, false},
		{"powconst 3", []Unary{{Kind: UPowConst, Alpha: 3}}, -1, false},
		{"powconst -1", []Unary{{Kind: UPowConst, Alpha: -1}}, 0.5, false},
		{"powconst 1.5", []Unary{{Kind: UPowConst, Alpha: 1.5}}, 0.5, false},
		{"erf", []Unary{{Kind: UErf}}, -1, false},
		{"relu6 below 0", []Unary{{Kind: UReLU6}}, -1, true},
		{"mulconst relu6 about 6", []Unary{{Kind: UMulConst, Alpha: 6}, {Kind: UReLU6}}, 0, true},
		{"addconst sqrt (layer norm's std)", []Unary{{Kind: UAddConst, Alpha: 1e-5}, {Kind: USqrt}}, 0.5, false},
		{"sigmoid log", []Unary{{Kind: USigmoid}, {Kind: ULog}}, -1, false},
		{"mulconst gelu exp", []Unary{{Kind: UMulConst, Alpha: 2}, {Kind: UGELU}, {Kind: UExp}}, -1, false},
		{"relu addconst tanh", []Unary{{Kind: UReLU}, {Kind: UAddConst, Alpha: -0.5}, {Kind: UTanh}}, -1, true},
		{"20 steps", long, -1, false},
	}
	r := newTestRand(20)
	for _, c := range chains {
		x := randSlice(r, 101, 1)
		for i := range x {
			x[i] += c.lo + 1
		}
		y := make([]float32, len(x))
		UnaryFwd(x, y, c.chain)
		want := make([]float32, len(x))
		for i, v := range x {
			w := float64(v)
			for _, u := range c.chain {
				w = unaryRef(u, w)
			}
			want[i] = float32(w)
		}
		if msg := closeTo(y, want, 1e-5); msg != "" {
			t.Errorf("UnaryFwd %s: %s", c.name, msg)
		}
		proj := randSlice(r, len(x), 1)
		dx := make([]float32, len(x))
		UnaryBwd(x, proj, dx, c.chain)
		check := smoothCheck
		if len(c.chain) > 10 {
			// A deep composition curves sharply: shorten the step.
			check = gradCheck{h: 1e-3, rtol: 2e-2, atol: 5e-3, maxProbes: 40}
		}
		if c.kinky {
			check = kinkyCheck
		}
		check.run(t, "unary "+c.name, proj, func() []float32 { UnaryFwd(x, y, c.chain); return y }, gradInput{"x", x, dx})
	}
}

// binaryRef computes y = a ∘ b by walking y's multi-index.
func binaryRef(op BinOp, a, b []float32, aShape, bShape, yShape []int) []float32 {
	y := make([]float32, size(yShape))
	idx := make([]int, len(yShape))
	for i := range y {
		q := i
		for d := len(yShape) - 1; d >= 0; d-- {
			idx[d] = q % yShape[d]
			q /= yShape[d]
		}
		at := func(shape []int) int {
			off := 0
			for d, n := range shape {
				off = off*n + idx[d]%n
			}
			return off
		}
		av, bv := a[at(aShape)], b[at(bShape)]
		switch op {
		case BAdd:
			y[i] = av + bv
		case BSub:
			y[i] = av - bv
		case BMul:
			y[i] = av * bv
		case BDiv:
			y[i] = av / bv
		}
	}
	return y
}

func TestBinaryBroadcastingMatchesReferenceAndFiniteDifferences(t *testing.T) {
	cases := [][3][]int{
		{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
		{{2, 3, 4, 5}, {1, 3, 1, 1}, {2, 3, 4, 5}},
		{{1, 3, 1, 1}, {2, 3, 4, 5}, {2, 3, 4, 5}},
		{{2, 1, 4}, {1, 3, 1}, {2, 3, 4}},
		{{3, 1}, {1, 1}, {3, 1}},
		{{2, 3, 5}, {1, 1, 5}, {2, 3, 5}},
		{{4, 1, 3, 1}, {4, 2, 1, 1}, {4, 2, 3, 1}},
		{{5, 7}, {5, 1}, {5, 7}},
		{{2, 3, 4, 5}, {2, 3, 1, 1}, {2, 3, 4, 5}},
		{{2, 3, 1, 1}, {2, 3, 4, 5}, {2, 3, 4, 5}},
	}
	r := newTestRand(21)
	for _, c := range cases {
		aShape, bShape, yShape := c[0], c[1], c[2]
		for _, op := range []struct {
			name string
			op   BinOp
		}{{"add", BAdd}, {"sub", BSub}, {"mul", BMul}, {"div", BDiv}} {
			name := fmt.Sprintf("binary %s %v %v", op.name, aShape, bShape)
			a, b := randSlice(r, size(aShape), 1), randSlice(r, size(bShape), 1)
			if op.op == BDiv {
				// divisors in ±[0.5, 1.5), away from the pole at 0
				for i, v := range b {
					b[i] = v/2 + float32(math.Copysign(1, float64(v)))
				}
			}
			y := make([]float32, size(yShape))
			BinaryFwd(op.op, a, b, y, aShape, bShape, yShape)
			if msg := closeTo(y, binaryRef(op.op, a, b, aShape, bShape, yShape), 0); msg != "" {
				t.Errorf("%s: %s", name, msg)
			}
			proj := randSlice(r, len(y), 1)
			da, db := randSlice(r, len(a), 9), randSlice(r, len(b), 9)
			BinaryBwd(op.op, a, b, proj, da, db, aShape, bShape, yShape)
			fwd := func() []float32 { BinaryFwd(op.op, a, b, y, aShape, bShape, yShape); return y }
			smoothCheck.run(t, name, proj, fwd, gradInput{"a", a, da}, gradInput{"b", b, db})
			// Each gradient alone equals the pair.
			da2 := make([]float32, len(a))
			BinaryBwd(op.op, a, b, proj, da2, nil, aShape, bShape, yShape)
			if msg := closeTo(da2, da, 0); msg != "" {
				t.Errorf("%s: da alone: %s", name, msg)
			}
		}
	}
}

func TestSoftmaxesMatchReferenceAndFiniteDifferences(t *testing.T) {
	r := newTestRand(22)
	for _, sz := range [][3]int{{4, 7, 1}, {2, 5, 3}, {1, 1, 4}} {
		outer, axis, inner := sz[0], sz[1], sz[2]
		x := randSlice(r, outer*axis*inner, 3)
		y := make([]float32, len(x))
		want, wantLog := make([]float32, len(x)), make([]float32, len(x))
		for o := 0; o < outer; o++ {
			for i := 0; i < inner; i++ {
				var s float64
				for k := 0; k < axis; k++ {
					s += math.Exp(float64(x[(o*axis+k)*inner+i]))
				}
				for k := 0; k < axis; k++ {
					j := (o*axis+k)*inner + i
					want[j] = float32(math.Exp(float64(x[j])) / s)
					wantLog[j] = float32(float64(x[j]) - math.Log(s))
				}
			}
		}
		SoftmaxFwd(x, y, outer, axis, inner)
		if msg := closeTo(y, want, 1e-6); msg != "" {
			t.Errorf("SoftmaxFwd %v: %s", sz, msg)
		}
		proj := randSlice(r, len(y), 1)
		dx := make([]float32, len(x))
		SoftmaxBwd(y, proj, dx, outer, axis, inner)
		smoothCheck.run(t, fmt.Sprintf("softmax %v", sz), proj, func() []float32 { SoftmaxFwd(x, y, outer, axis, inner); return y }, gradInput{"x", x, dx})

		LogSoftmaxFwd(x, y, outer, axis, inner)
		if msg := closeTo(y, wantLog, 1e-6); msg != "" {
			t.Errorf("LogSoftmaxFwd %v: %s", sz, msg)
		}
		LogSoftmaxBwd(y, proj, dx, outer, axis, inner)
		smoothCheck.run(t, fmt.Sprintf("logsoftmax %v", sz), proj, func() []float32 { LogSoftmaxFwd(x, y, outer, axis, inner); return y }, gradInput{"x", x, dx})
	}
	// Large logits neither overflow nor lose precision.
	x := []float32{1000, 1001, 999}
	y := make([]float32, 3)
	SoftmaxFwd(x, y, 1, 3, 1)
	LogSoftmaxFwd(x, y, 1, 3, 1)
	if NonFinite(y) >= 0 || math.Abs(float64(y[1])+0.40760596) > 1e-5 {
		t.Errorf("LogSoftmaxFwd(%v) = %v, want finite with y[1] ≈ -0.4076", x, y)
	}
}

func TestSoftmaxXentAgainstFormulaAndFiniteDifferences(t *testing.T) {
	r := newTestRand(23)
	batch, classes := 6, 5
	logits := randSlice(r, batch*classes, 4)
	labels := make([]float32, batch*classes)
	for i := 0; i < batch; i++ {
		labels[i*classes+r.IntN(classes)] = 1
	}
	d := make([]float32, len(logits))
	got := SoftmaxXent(logits, labels, d, batch, classes)
	var want float64
	for i := 0; i < batch; i++ {
		var s float64
		for j := 0; j < classes; j++ {
			s += math.Exp(float64(logits[i*classes+j]))
		}
		for j := 0; j < classes; j++ {
			if labels[i*classes+j] == 1 {
				want += -math.Log(math.Exp(float64(logits[i*classes+j])) / s)
			}
		}
	}
	want /= float64(batch)
	if math.Abs(float64(got)-want) > 1e-5*math.Max(1, want) {
		t.Errorf("SoftmaxXent = %.7g, want %.7g", got, want)
	}
	// The loss is the "output" and its gradient is dlogits.
	smoothCheck.run(t, "softmax_xent", []float32{1}, func() []float32 {
		return []float32{SoftmaxXent(logits, labels, nil, batch, classes)}
	}, gradInput{"logits", logits, d})
	// Stable for huge logits: the correct class far ahead costs ~0, far behind ~the gap.
	big := []float32{1e4, -1e4, 0, 0}
	loss := SoftmaxXent(big, []float32{1, 0, 0, 1}, make([]float32, 4), 2, 2)
	if NonFinite([]float32{loss}) >= 0 || math.Abs(float64(loss)-(0+0.6931472)/2) > 1e-4 {
		t.Errorf("SoftmaxXent of huge logits = %v, want ≈ 0.3466", loss)
	}
}

func TestMSEAgainstFormulaAndFiniteDifferences(t *testing.T) {
	r := newTestRand(24)
	n := 13
	pred, target := randSlice(r, n, 2), randSlice(r, n, 2)
	d := make([]float32, n)
	got := MSE(pred, target, d, n)
	var want float64
	for i := range pred {
		e := float64(pred[i]) - float64(target[i])
		want += e * e / float64(n)
	}
	if math.Abs(float64(got)-want) > 1e-6*math.Max(1, want) {
		t.Errorf("MSE = %.7g, want %.7g", got, want)
	}
	smoothCheck.run(t, "mse", []float32{1}, func() []float32 { return []float32{MSE(pred, target, nil, n)} }, gradInput{"pred", pred, d})
}

// TestUnaryBwdFromOutput: for every op whose derivative its output gives,
// the backward from y equals UnaryBwd from x bit for bit, at the kinks
// (0, -0, 6) and on random values.
func TestUnaryBwdFromOutput(t *testing.T) {
	xs := []float32{0, float32(math.Copysign(0, -1)), 6, -6, 1e-30, -1e-30, 5.999999, 6.000001, 40, -40}
	r := rand.New(rand.NewSource(3))
	for len(xs) < 4096 {
		xs = append(xs, float32(r.NormFloat64()*4))
	}
	dy := make([]float32, len(xs))
	for i := range dy {
		dy[i] = float32(r.NormFloat64())
	}
	for _, u := range []Unary{{Kind: UReLU}, {Kind: ULeakyReLU, Alpha: 0.1}, {Kind: ULeakyReLU}, {Kind: UReLU6}, {Kind: USigmoid}, {Kind: UTanh}, {Kind: UExp}} {
		y := make([]float32, len(xs))
		UnaryFwd(xs, y, []Unary{u})
		want, got := make([]float32, len(xs)), make([]float32, len(xs))
		UnaryBwd(xs, dy, want, []Unary{u})
		UnaryBwdFromOutput(y, dy, got, u)
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] == 0 && got[i] == 0) {
				t.Errorf("kind %d: x %g: from y %g, from x %g", u.Kind, xs[i], got[i], want[i])
				break
			}
		}
	}
}

// TestUnaryFloat32PathIsTheReference: UnaryFwd's float32 loops (chains of
// ReLU, leaky ReLU, ReLU6 and constant adds and products) give the bits of
// the float64 reference, rounded per op, on every input that matters:
// zeros of both signs, infinities, NaN, values about the clamps and
// random ones over many scales; in place as well; on every GEMM path
// (whose epilogue kernels hold the vector clamp).
func TestUnaryFloat32PathIsTheReference(t *testing.T) {
	defer SetGemmPath("")
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		t.Run(path, testUnaryFloat32Path)
	}
}

func testUnaryFloat32Path(t *testing.T) {
	xs := []float32{0, float32(math.Copysign(0, -1)), 6, -6, 5.9999995, 6.0000005, 1e-30, -1e-30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}
	r := rand.New(rand.NewSource(5))
	for len(xs) < 3*unaryBlock+17 { // blocks and a ragged end
		xs = append(xs, float32(r.NormFloat64()*math.Pow(10, float64(r.Intn(12)-6))))
	}
	for _, chain := range [][]Unary{
		{{Kind: UReLU}}, {{Kind: ULeakyReLU, Alpha: 0.01}}, {{Kind: ULeakyReLU, Alpha: -0.3}}, {{Kind: UReLU6}},
		{{Kind: UAddConst, Alpha: 3}, {Kind: UReLU6}, {Kind: UMulConst, Alpha: 1.0 / 6}}, // hardsigmoid
		{{Kind: UMulConst, Alpha: 0.1}, {Kind: UAddConst, Alpha: -1e-7}, {Kind: ULeakyReLU, Alpha: 0.2}, {Kind: UReLU}},
	} {
		if !allExactInFloat32(chain) {
			t.Fatalf("%v: not on the float32 path", chain)
		}
		got := make([]float32, len(xs))
		UnaryFwd(xs, got, chain)
		inPlace := append([]float32(nil), xs...)
		UnaryFwd(inPlace, inPlace, chain)
		for i, x := range xs {
			v := float64(x)
			for _, u := range chain {
				v = float64(float32(u.eval(v)))
			}
			want := float32(v)
			same := func(g float32) bool {
				return math.Float32bits(g) == math.Float32bits(want) || g == 0 && want == 0 || g != g && want != want
			}
			if !same(got[i]) || !same(inPlace[i]) {
				t.Errorf("%v at x = %g: got %g (in place %g), the reference %g", chain, x, got[i], inPlace[i], want)
				break
			}
		}
	}
}

// TestUnaryTranscendentalsAreAt: UnaryFwd of sigmoid, exp, tanh, GELU,
// SiLU and log (the vector kernels' float32 forms and a float64 loop) gives at's
// bits, the values UnaryBwd recomputes, on 1 and 3 threads, in a chain
// too; the float32 forms' accuracy has its own tests (sigmoid_test.go,
// exp_test.go, gelu_test.go).
func TestUnaryTranscendentalsAreAt(t *testing.T) {
	defer SetThreads(Threads())
	xs := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 3, -3, 10, -10}
	r := rand.New(rand.NewSource(6))
	for len(xs) < unaryBlock+1001 {
		xs = append(xs, float32(r.NormFloat64()*math.Pow(10, float64(r.Intn(6)-3))))
	}
	for _, chain := range [][]Unary{{{Kind: USigmoid}}, {{Kind: UExp}}, {{Kind: UTanh}}, {{Kind: UGELU}},
		{{Kind: USiLU}}, {{Kind: UTanh}, {Kind: UMulConst, Alpha: 3}, {Kind: USigmoid}, {Kind: UExp}, {Kind: ULog}}} {
		for _, threads := range []int{1, 3} {
			SetThreads(threads)
			got := make([]float32, len(xs))
			UnaryFwd(xs, got, chain)
			for i, x := range xs {
				want := x
				for _, u := range chain {
					want = u.at(want)
				}
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("%v on %d threads at %v: %v, at gives %v", chain, threads, x, got[i], want)
				}
			}
		}
	}
}

// TestUnaryBwdOfConstantDerivatives: chains of constant adds and products
// (attention's score scale) take UnaryBwd's short path, which must give
// the general loop's bits: dy times each op's derivative in float64, last
// op first, rounded once.
func TestUnaryBwdOfConstantDerivatives(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	dy := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32}
	for len(dy) < 5000 {
		dy = append(dy, float32(r.NormFloat64()*math.Pow(10, float64(r.Intn(20)-10))))
	}
	x := make([]float32, len(dy))
	for _, chain := range [][]Unary{
		{{Kind: UMulConst, Alpha: 0.25}}, {{Kind: UMulConst, Alpha: 0.1}}, {{Kind: UAddConst, Alpha: 3}},
		{{Kind: UMulConst, Alpha: 0.7}, {Kind: UAddConst, Alpha: -1}, {Kind: UMulConst, Alpha: 3.3}},
	} {
		if !constantDerivative(chain) {
			t.Fatalf("%v: not a chain of constant derivatives", chain)
		}
		got := make([]float32, len(dy))
		UnaryBwd(x, dy, got, chain)
		for i, g := range dy {
			d := float64(g)
			for k := len(chain) - 1; k >= 0; k-- {
				d *= float64(unaryRefDeriv(chain[k]))
			}
			want := float32(d)
			if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
				t.Fatalf("%v: dy %g: dx %g, want %g", chain, g, got[i], want)
			}
		}
	}
}

// unaryRefDeriv is the constant derivative of a constant add or product.
func unaryRefDeriv(u Unary) float32 {
	if u.Kind == UMulConst {
		return u.Alpha
	}
	return 1
}

// binaryGradRef is the gradient of one operand of y = a ∘ b (a's when
// first), walking y's elements in order: dy times the partial derivative,
// added into the operand's element when it was broadcast (the general
// loop's order), written when not.
func binaryGradRef(op BinOp, first bool, a, b, dy []float32, aShape, bShape, yShape []int) []float32 {
	selfShape := aShape
	if !first {
		selfShape = bShape
	}
	reduced := size(selfShape) != size(yShape)
	dz := make([]float32, size(selfShape))
	idx := make([]int, len(yShape))
	at := func(shape []int) int {
		off := 0
		for d, n := range shape {
			off = off*n + idx[d]%n
		}
		return off
	}
	for i, g := range dy {
		q := i
		for d := len(yShape) - 1; d >= 0; d-- {
			idx[d] = q % yShape[d]
			q /= yShape[d]
		}
		av, bv := a[at(aShape)], b[at(bShape)]
		switch {
		case op == BMul && first:
			g *= bv
		case op == BMul:
			g *= av
		case op == BDiv && first:
			g /= bv
		case op == BDiv:
			g *= -av / (bv * bv)
		case op == BSub && !first:
			g *= -1
		}
		z := at(selfShape)
		if reduced {
			dz[z] += g
		} else {
			dz[z] = g
		}
	}
	return dz
}

// TestBinaryRowsAreTheReference: BinaryFwd and BinaryBwd give the bits of
// the loops that walk y's multi-index, on 1 and 3 threads, for the shapes
// of their row loops (equal shapes split by elements, a value per channel
// plane on either side, a row broadcast down a column) and a general one.
func TestBinaryRowsAreTheReference(t *testing.T) {
	defer SetThreads(Threads())
	cases := [][3][]int{
		{{4, 6, 30, 31}, {4, 6, 30, 31}, {4, 6, 30, 31}},
		{{4, 6, 30, 31}, {4, 6, 1, 1}, {4, 6, 30, 31}},
		{{4, 6, 1, 1}, {4, 6, 30, 31}, {4, 6, 30, 31}},
		{{1, 6, 1, 1}, {4, 6, 30, 31}, {4, 6, 30, 31}},
		{{300, 70}, {300, 1}, {300, 70}},
		{{300, 70}, {1, 70}, {300, 70}},
		{{4, 1, 30, 1}, {4, 6, 1, 31}, {4, 6, 30, 31}},
	}
	r := newTestRand(36)
	for _, threads := range []int{1, 3} {
		SetThreads(threads)
		for _, c := range cases {
			aShape, bShape, yShape := c[0], c[1], c[2]
			a, b := randSlice(r, size(aShape), 1), randSlice(r, size(bShape), 1)
			dy := randSlice(r, size(yShape), 1)
			for _, op := range []BinOp{BAdd, BSub, BMul, BDiv} {
				y := make([]float32, size(yShape))
				BinaryFwd(op, a, b, y, aShape, bShape, yShape)
				if msg := closeTo(y, binaryRef(op, a, b, aShape, bShape, yShape), 0); msg != "" {
					t.Errorf("op %d %v %v on %d threads: forward: %s", op, aShape, bShape, threads, msg)
				}
				da, db := make([]float32, len(a)), make([]float32, len(b))
				BinaryBwd(op, a, b, dy, da, db, aShape, bShape, yShape)
				for _, g := range []struct {
					name      string
					got, want []float32
				}{{"da", da, binaryGradRef(op, true, a, b, dy, aShape, bShape, yShape)}, {"db", db, binaryGradRef(op, false, a, b, dy, aShape, bShape, yShape)}} {
					for i := range g.got {
						if math.Float32bits(g.got[i]) != math.Float32bits(g.want[i]) {
							t.Errorf("op %d %v %v on %d threads: %s[%d] = %g, the reference %g", op, aShape, bShape, threads, g.name, i, g.got[i], g.want[i])
							break
						}
					}
				}
			}
		}
	}
}

// TestBinaryBwdOfAResidualAdd: the backward of an add of equal shapes (a
// residual connection) gives dy to each gradient asked for, over several
// parallel chunks, leaving a nil one alone.
func TestBinaryBwdOfAResidualAdd(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(3)
	r := newTestRand(35)
	shape := []int{3, 300, 257}
	dy := randSlice(r, size(shape), 1)
	for _, withA := range []bool{true, false} {
		var da []float32
		if withA {
			da = make([]float32, len(dy))
		}
		db := make([]float32, len(dy))
		BinaryBwd(BAdd, nil, nil, dy, da, db, shape, shape, shape)
		if msg := closeTo(db, dy, 0); msg != "" {
			t.Errorf("db: %s", msg)
		}
		if withA {
			if msg := closeTo(da, dy, 0); msg != "" {
				t.Errorf("da: %s", msg)
			}
		}
	}
}

// TestBinaryReLUFwd: a residual sum with its ReLU (operands of one shape,
// in blocks on 3 threads) and a broadcast one give max(a ∘ b, 0), NaN
// kept, for every op.
func TestBinaryReLUFwd(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(3)
	r := newTestRand(36)
	nan := float32(math.NaN())
	for _, c := range []struct{ a, b []int }{{[]int{2, 64, 257}, []int{2, 64, 257}}, {[]int{2, 64, 257}, []int{1, 64, 1}}} {
		a, b := randSlice(r, size(c.a), 1), randSlice(r, size(c.b), 1)
		a[5] = nan
		y := make([]float32, size(c.a))
		for _, op := range []BinOp{BAdd, BSub, BMul} {
			BinaryReLUFwd(op, a, b, y, c.a, c.b, c.a)
			want := make([]float32, len(y))
			BinaryFwd(op, a, b, want, c.a, c.b, c.a)
			for i, v := range want {
				if v < 0 {
					want[i] = 0
				}
			}
			for i := range y {
				if y[i] != want[i] && !(y[i] != y[i] && want[i] != want[i]) {
					t.Fatalf("%v op %d: y[%d] = %v, want %v", c.b, op, i, y[i], want[i])
				}
			}
		}
	}
}

// TestBinaryRowKernelsAreTheGoLoops: on every GEMM path, binaryRow,
// rowScalar and scalarRow give the bits of the Go loops for every op, on
// lengths from 0 to 40 and a long ragged one, with zeros of both signs,
// infinities and NaNs among the operands; a and b end at a guard page
// and y's element past the end stays untouched.
func TestBinaryRowKernelsAreTheGoLoops(t *testing.T) {
	defer SetGemmPath("")
	r := newTestRand(37)
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-38, -3}
	same := func(got, want []float32) int {
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				return i
			}
		}
		return -1
	}
	lengths := []int{1037}
	for n := 0; n <= 40; n++ {
		lengths = append(lengths, n)
	}
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, n := range lengths {
			a, b := guardedFloats(t, n), guardedFloats(t, n)
			copy(a, randSlice(r, n, 2))
			copy(b, randSlice(r, n, 2))
			for i := 0; i < n; i += 5 {
				a[i] = special[(i/5)%len(special)]
				b[min(n-1, i+1)] = special[(i/5+3)%len(special)]
			}
			for _, s := range []float32{0.75, 0, float32(math.Inf(-1))} {
				for _, op := range []BinOp{BAdd, BSub, BMul, BDiv} {
					for _, c := range []struct {
						name      string
						got, want func(y []float32)
					}{
						{"binaryRow", func(y []float32) { binaryRow(op, a, b, y) }, func(y []float32) { binaryRowGo(op, a, b, y) }},
						{"rowScalar", func(y []float32) { rowScalar(op, a, s, y) }, func(y []float32) { rowScalarGo(op, a, s, y) }},
						{"scalarRow", func(y []float32) { scalarRow(op, s, b, y) }, func(y []float32) {
							for i := range y {
								y[i] = binaryOne(op, s, b[i])
							}
						}},
					} {
						got, want := make([]float32, n+1), make([]float32, n)
						got[n] = 42
						c.got(got[:n])
						c.want(want)
						if i := same(got[:n], want); i >= 0 {
							t.Errorf("%s: %s op %d, n %d, s %g: y[%d] = %g, the Go loop's %g", path, c.name, op, n, s, i, got[i], want[i])
						}
						if got[n] != 42 {
							t.Errorf("%s: %s op %d, n %d: wrote past y's end", path, c.name, op, n)
						}
					}
				}
			}
		}
	}
}

// TestUnaryLoneReLU: UnaryFwd with a chain of one ReLU, on every GEMM
// path and on 1 and 2 threads, gives max(x, 0) with x's NaN kept (a zero
// of either sign for −0), on lengths from 0 to 40 and past ParallelFor's
// grain, in place and not, writing nothing past y's end.
func TestUnaryLoneReLU(t *testing.T) {
	defer SetGemmPath("")
	defer SetThreads(Threads())
	r := newTestRand(38)
	chain := []Unary{{Kind: UReLU}}
	lengths := []int{1 << 16, 1<<15 + 13}
	for n := 0; n <= 40; n++ {
		lengths = append(lengths, n)
	}
	for _, path := range GemmPaths() {
		if err := SetGemmPath(path); err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			for _, n := range lengths {
				x := randSlice(r, n, 3)
				for i := 0; i < n; i += 7 {
					x[i] = []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.Inf(1))}[(i/7)%4]
				}
				for _, inPlace := range []bool{false, true} {
					y := make([]float32, n+1)
					y[n] = 42
					src := x
					if inPlace {
						copy(y, x)
						src = y[:n]
					}
					UnaryFwd(src, y[:n], chain)
					for i, v := range x {
						want := max(v, 0)
						if y[i] != want && !(v != v && y[i] != y[i]) {
							t.Errorf("%s, %d threads, n %d, in place %v: relu(%g) = %g", path, threads, n, inPlace, v, y[i])
							break
						}
					}
					if y[n] != 42 {
						t.Errorf("%s, n %d: wrote past y's end", path, n)
					}
				}
			}
		}
	}
}

// TestSoftmaxXentIgnoresZeroRows: a label row of zeros (a padded position)
// costs nothing and gets no gradient, and every other row's gradient, and
// the loss, are bit for bit those of the formula without the rule (a copy
// of the code before it), whose divisor is still every row of the batch.
func TestSoftmaxXentIgnoresZeroRows(t *testing.T) {
	r := newTestRand(31)
	batch, classes := 37, 11 // three blocks of xentBlock rows, the last partial
	logits := randSlice(r, batch*classes, 6)
	labels := make([]float32, batch*classes)
	ignored := func(i int) bool { return i%3 == 1 || i >= 33 }
	for i := range batch {
		if !ignored(i) {
			labels[i*classes+r.IntN(classes)] = 1
		}
	}
	d := make([]float32, len(logits))
	for i := range d {
		d[i] = 7 // the ignored rows must be written
	}
	got := SoftmaxXent(logits, labels, d, batch, classes)
	want, wantD := softmaxXentBefore(logits, labels, batch, classes)
	if got != want {
		t.Errorf("loss %v, want %v bit for bit", got, want)
	}
	for i := range batch {
		for j := range classes {
			k := i*classes + j
			switch {
			case ignored(i) && d[k] != 0:
				t.Fatalf("row %d has zero labels but dlogits[%d] = %v, want 0", i, j, d[k])
			case !ignored(i) && math.Float32bits(d[k]) != math.Float32bits(wantD[k]):
				t.Fatalf("row %d: dlogits[%d] = %v, want %v bit for bit", i, j, d[k], wantD[k])
			}
		}
	}
	if l := SoftmaxXent(logits, make([]float32, len(labels)), nil, batch, classes); l != 0 {
		t.Errorf("a batch of ignored rows costs %v, want 0", l)
	}
}

// softmaxXentBefore is SoftmaxXent's arithmetic before zero rows were
// ignored, on one thread: the loss in blocks of xentBlock rows and
// dlogits = (softmax - labels)/batch for every row.
func softmaxXentBefore(logits, labels []float32, batch, classes int) (float32, []float32) {
	d := make([]float32, len(logits))
	invBatch := float32(1 / float64(batch))
	var total float64
	for b := 0; b*xentBlock < batch; b++ {
		var loss float64
		for r := b * xentBlock; r < min((b+1)*xentBlock, batch); r++ {
			z, t, e := logits[r*classes:(r+1)*classes], labels[r*classes:(r+1)*classes], d[r*classes:(r+1)*classes]
			m := rowMax(z)
			expShift(z, e, m)
			s := sum64(e)
			lse := float64(m) + math.Log(s)
			for j, v := range t {
				if v != 0 {
					loss -= float64(v) * (float64(z[j]) - lse)
				}
			}
			inv := float32(1 / s)
			for j, v := range t {
				e[j] = (e[j]*inv - v) * invBatch
			}
		}
		total += loss
	}
	return float32(total / float64(batch)), d
}
