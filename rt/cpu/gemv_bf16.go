package cpu

import "math"

// Generation at batch 1 reads every weight once a token, so a core makes
// tokens at the rate it streams the weights. GemvBF16 reads them as
// bfloat16, half the bytes of float32: the weights are rounded once
// (ToBF16, when generate runs with --precision bf16), the row they
// multiply once a step, and the products of two bfloat16 are summed in
// float32, as a bf16 GEMM is everywhere else in mlbuild (precision.go).
//
// Where the CPU has AVX512-BF16 the kernel is VDPBF16PS, 32 products an
// instruction; on AVX-512 without it, the pairs are widened (a bfloat16 is
// the top half of its float32) into fused multiply-adds; elsewhere
// dotBF16Go. All three sum in the same order, so a result is the same bits
// on any number of threads and, but for sums below float32's smallest
// normal (which VDPBF16PS and dotBF16Go flush to zero, the widening
// kernel does not), on any machine.

// ToBF16 writes src rounded to bfloat16 into dst, which must hold
// len(src) values: ties to even as RoundBF16, but a value below bfloat16's
// smallest normal becomes a zero of its sign (VDPBF16PS reads one as
// zero). A long src (a model's weights, 22-34 ms for models/gpt.cue's
// 10.65M on one core here) is split over the threads.
func ToBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	if len(src) < 1<<16 {
		toBF16(dst, src)
		return
	}
	ParallelFor(len(src), 1<<15, func(lo, hi int) { toBF16(dst[lo:hi], src[lo:hi]) })
}

func toBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		b := bf16Bits(v)
		if b&0x7f80 == 0 {
			b &= 0x8000
		}
		dst[i] = b
	}
}

// GemvBF16 is GemmFwd at batch 1 on bfloat16 operands: x rounded into
// xb (ToBF16; len(xb) ≥ in), then y[j] = act(Σ_i xb[i]·w[j·in+i] + b[j])
// for j < out, w [out,in] (PyTorch's layout) as ToBF16 wrote it, b nil
// for none. Outputs split over the decode team (team.go; parts of at
// least teamPartBytes of w), or through ParallelFor where the team is
// busy; each is one thread's sum in dotBF16Go's order, so y does not
// depend on Threads().
func GemvBF16(x []float32, xb, w []uint16, b, y []float32, in, out int, act Act, alpha float32) {
	x, xb, w, y = x[:in], xb[:in], w[:in*out], y[:out]
	ToBF16(xb, x)
	if t, ok := teamLock(); ok {
		if parts := t.rowParts(out, 2*in); parts > 1 {
			t.gemv16 = gemvBF16Job{x: xb, w: w, b: b, y: y, out: out, act: act, alpha: alpha}
			t.run(&t.gemv16, parts)
			return
		}
		t.alone()
		gemvBF16Rows(xb, w, b, y, act, alpha, 0, out)
		return
	}
	grain := max(1, (32<<10)/max(1, in))
	if Threads() == 1 || out <= grain {
		gemvBF16Rows(xb, w, b, y, act, alpha, 0, out)
		return
	}
	ParallelFor(out, grain, func(lo, hi int) {
		gemvBF16Rows(xb, w, b, y, act, alpha, lo, hi)
	})
}

// gemvBF16Rows is GemvBF16's work for outputs lo ≤ j < hi.
func gemvBF16Rows(x, w []uint16, b, y []float32, act Act, alpha float32, lo, hi int) {
	in := len(x)
	dotRowsBF16(x, w[lo*in:hi*in], y[lo:hi])
	if b != nil {
		for j := lo; j < hi; j++ {
			y[j] += b[j]
		}
	}
	applyAct(y[lo:hi], act, alpha)
}

// dotRowsBF16 writes y[j] = dotBF16Go(x, w[j·len(x):]) for j < len(y), four
// rows at a time through the vector kernel where one runs.
func dotRowsBF16(x, w []uint16, y []float32) {
	in := len(x)
	j := 0
	if n := in &^ 31; n > 0 && dotBF16Supported {
		var s [4]float32
		for ; j+4 <= len(y); j += 4 {
			dot4BF16(x, w[j*in:(j+4)*in], in, n, &s)
			for r, v := range s {
				y[j+r] = v + dotBF16Tail(x[n:], w[(j+r)*in+n:(j+r+1)*in])
			}
		}
	}
	for ; j < len(y); j++ {
		y[j] = dotBF16Go(x, w[j*in:(j+1)*in])
	}
}

// dotBF16Go is Σ x[i]·w[i] over bfloat16 x and w in the kernels' order:
// over the longest multiple-of-32 prefix, in blocks of 32, two sets of
// sixteen lanes, the even blocks into the first and the odd ones into the
// second, lane l adding the products of its block's elements 2l+1 and
// then 2l (each product exact in float32, each sum rounded and flushed to
// zero below the smallest normal, as VDPBF16PS's); the second set added
// into the first, whose lanes are folded in halves (l + l+8, then
// l + l+4, l + l+2, l + l+1); then the rest added one by one.
func dotBF16Go(x, w []uint16) float32 {
	w = w[:len(x)]
	n := len(x) &^ 31
	var sets [2][16]float32
	for i := 0; i < n; i += 32 {
		xs, ws, acc := x[i:i+32], w[i:i+32], &sets[i/32%2]
		for l := range acc {
			a := acc[l] + bf16Value(xs[2*l+1])*bf16Value(ws[2*l+1])
			a = flushDenormal(a) + bf16Value(xs[2*l])*bf16Value(ws[2*l])
			acc[l] = flushDenormal(a)
		}
	}
	acc := &sets[0]
	for l := range acc {
		acc[l] += sets[1][l]
	}
	for h := 8; h >= 1; h /= 2 {
		for l := range h {
			acc[l] += acc[l+h]
		}
	}
	return acc[0] + dotBF16Tail(x[n:], w[n:])
}

// dotBF16Tail is Σ x[i]·w[i] one product at a time, from +0.
func dotBF16Tail(x, w []uint16) float32 {
	var s float32
	for i, v := range x {
		s += bf16Value(v) * bf16Value(w[i])
	}
	return s
}

// bf16Value is the float32 a bfloat16 stands for.
func bf16Value(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// flushDenormal is f, or a zero of its sign where f is below the smallest
// normal float32.
func flushDenormal(f float32) float32 {
	if u := math.Float32bits(f); u&0x7f800000 == 0 {
		return math.Float32frombits(u & 0x80000000)
	}
	return f
}
