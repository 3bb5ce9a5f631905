package cpu

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

func TestRoundBF16(t *testing.T) {
	f := math.Float32frombits
	inf := float32(math.Inf(1))
	for _, c := range []struct{ in, want float32 }{
		{1, 1},
		{f(0x3f808000), 1},             // a tie rounds to the even 0x3f80
		{f(0x3f818000), f(0x3f820000)}, // a tie rounds to the even 0x3f82
		{f(0x3f808001), f(0x3f810000)}, // above the tie rounds up
		{f(0x3f807fff), 1},             // below it rounds down
		{-2.5, -2.5},
		{f(0xbf808001), f(0xbf810000)},
		{f(0x7f7fffff), inf}, // too large for bfloat16
		{inf, inf},
		{0, 0},
	} {
		if got := RoundBF16(c.in); got != c.want {
			t.Errorf("RoundBF16(%#08x) = %#08x, want %#08x", math.Float32bits(c.in), math.Float32bits(got), math.Float32bits(c.want))
		}
	}
	if nan := RoundBF16(float32(math.NaN())); nan == nan {
		t.Errorf("RoundBF16(NaN) = %v, want a NaN", nan)
	}
	if nan := RoundBF16(f(0x7f800001)); nan == nan { // a NaN whose payload lies in the low half
		t.Errorf("RoundBF16(0x7f800001) = %#08x, want a NaN", math.Float32bits(nan))
	}
}

// bf16Ref is C = A·B in float64 over the operands rounded to bfloat16, the
// exact value that BF16's float32 accumulation approximates, and the
// scale Σ|a||b| of each entry.
func bf16Ref(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, round bool) (ref, scale []float64) {
	ref, scale = make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				if round {
					av, bv = RoundBF16(av), RoundBF16(bv)
				}
				s += float64(av) * float64(bv)
				sa += math.Abs(float64(av) * float64(bv))
			}
			ref[i*n+j], scale[i*n+j] = s, sa
		}
	}
	return ref, scale
}

// bf16TestOperands are random A and B of an m×k times k×n product with
// row strides longer than their rows.
func bf16TestOperands(rng *rand.Rand, transA, transB bool, m, n, k int) (a []float32, lda int, b []float32, ldb int) {
	lda, ldb = k+3, n+1
	if transA {
		lda = m + 2
	}
	if transB {
		ldb = k + 5
	}
	return randSlice(rng, max(m, k)*lda, 1), lda, randSlice(rng, max(n, k)*ldb, 1), ldb
}

// TestSgemmBF16 checks BF16's products, stored and added to C, against
// float64 sums of the rounded operands, for every transpose and sizes that
// are not multiples of any tile (and 64×96×2500, which AMX takes in passes
// along k), and that they are not float32 products: the rounding must
// show.
func TestSgemmBF16(t *testing.T) {
	rng := newTestRand(3)
	for _, sz := range [][3]int{{37, 45, 70}, {250, 10, 256}, {16, 32, 32}, {3, 5, 1}, {64, 96, 300}, {64, 70, 40}, {96, 512, 33}, {64, 96, 2500}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			transA, transB := tr[0], tr[1]
			a, lda, b, ldb := bf16TestOperands(rng, transA, transB, m, n, k)
			c := make([]float32, m*n)
			BF16.gemm(transA, transB, m, n, k, a, lda, b, ldb, c, n)
			ref, scale := bf16Ref(transA, transB, m, n, k, a, lda, b, ldb, true)
			exact, _ := bf16Ref(transA, transB, m, n, k, a, lda, b, ldb, false)
			var worst, fromExact float64
			for i := range c {
				worst = max(worst, math.Abs(float64(c[i])-ref[i])/scale[i])
				fromExact = max(fromExact, math.Abs(float64(c[i])-exact[i])/scale[i])
			}
			if worst > 2e-6*math.Sqrt(float64(k)) {
				t.Errorf("%dx%dx%d trans %v: bf16 product is %.3g of its scale from the rounded operands' product", m, n, k, tr, worst)
			}
			if k >= 32 && fromExact < 1e-4 {
				t.Errorf("%dx%dx%d trans %v: bf16 product within %.3g of the float32 operands' product: were the operands rounded?", m, n, k, tr, fromExact)
			}
			// C += A·B: the same product added to what C holds.
			before := randSlice(rng, m*n, 1)
			copy(c, before)
			BF16.gemmAdd(transA, transB, m, n, k, a, lda, b, ldb, c, n)
			for i := range c {
				if d := math.Abs(float64(c[i]) - ref[i] - float64(before[i])); d > 2e-6*math.Sqrt(float64(k))*(scale[i]+1) {
					t.Fatalf("%dx%dx%d trans %v: C += A·B gives C[%d] = %v, want %v + %v", m, n, k, tr, i, c[i], before[i], ref[i])
				}
			}
		}
	}
}

// TestDenseBF16 runs a dense layer's forward and backward in BF16 and FP32 on
// the same data: they agree to bfloat16's precision, and not to float32's.
func TestDenseBF16(t *testing.T) {
	rng := newTestRand(5)
	batch, in, out := 40, 70, 33
	x, w, bias := randSlice(rng, batch*in, 1), randSlice(rng, out*in, 1), randSlice(rng, out, 1)
	run := func(p *Precision) (y, dx, dw, db []float32) {
		y, dx, dw, db = make([]float32, batch*out), make([]float32, batch*in), make([]float32, out*in), make([]float32, out)
		p.GemmFwd(x, w, bias, y, batch, in, out, ActReLU, 0)
		dy := make([]float32, batch*out)
		for i := range dy {
			dy[i] = float32(math.Sin(float64(i)))
		}
		p.GemmBwd(x, w, y, dy, dx, dw, db, batch, in, out, ActReLU, 0)
		return
	}
	y32, dx32, dw32, db32 := run(FP32)
	y16, dx16, dw16, db16 := run(BF16)
	for _, c := range []struct {
		name     string
		got, ref []float32
	}{{"y", y16, y32}, {"dx", dx16, dx32}, {"dw", dw16, dw32}, {"db", db16, db32}} {
		var diff, norm float64
		for i := range c.ref {
			diff = max(diff, math.Abs(float64(c.got[i]-c.ref[i])))
			norm = max(norm, math.Abs(float64(c.ref[i])))
		}
		if diff > 2e-2*norm || (c.name != "db" && diff < 1e-6*norm) {
			t.Errorf("%s: bf16 and f32 differ by %.3g (largest |value| %.3g)", c.name, diff, norm)
		}
	}
}

// TestPackBF16 checks the AMX path's packed operands against the rounded
// float32 operands, padding included, for both orientations.
func TestPackBF16(t *testing.T) {
	rng := newTestRand(7)
	m, k, n := 37, 45, 19
	mp, kp, np := 64, 64, 32
	for _, trans := range []bool{false, true} {
		lda, ldb := k+2, n+3
		if trans {
			lda, ldb = m+1, k+4
		}
		a := randSlice(rng, max(m, k)*lda, 1)
		b := randSlice(rng, max(n, k)*ldb, 1)
		pa := make([]uint16, mp*kp)
		pb := make([]uint32, kp/2*np)
		for i := range pa {
			pa[i] = 0xffff // the packer must overwrite the padding too
		}
		for i := range pb {
			pb[i] = 0xffffffff
		}
		packBF16A(trans, a, lda, m, k, pa, mp, kp)
		packBF16B(trans, b, ldb, k, n, pb, kp, np)
		bf := func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
		for i := 0; i < mp; i++ {
			for p := 0; p < kp; p++ {
				var want float32
				if i < m && p < k {
					want = a[i*lda+p]
					if trans {
						want = a[p*lda+i]
					}
					want = RoundBF16(want)
				}
				if got := bf(pa[amxAAt(i, p, kp)]); got != want {
					t.Fatalf("trans %v: A[%d][%d] packed as %v, want %v", trans, i, p, got, want)
				}
			}
		}
		for p := 0; p < kp; p++ {
			for j := 0; j < np; j++ {
				var want float32
				if p < k && j < n {
					want = b[p*ldb+j]
					if trans {
						want = b[j*ldb+p]
					}
					want = RoundBF16(want)
				}
				pair := pb[amxBAt(p/2, j, kp)]
				if p%2 == 1 {
					pair >>= 16
				}
				if got := bf(uint16(pair)); got != want {
					t.Fatalf("trans %v: B[%d][%d] packed as %v, want %v", trans, p, j, got, want)
				}
			}
		}
	}
}

// TestBF16Native reports which path TestSgemmBF16 took, so that a run on an
// AMX machine shows it tested the tiles.
func TestBF16Native(t *testing.T) {
	t.Logf("BF16Native: %v", BF16Native())
	if os.Getenv("MLBUILD_WANT_AMX") == "1" && !BF16Native() {
		t.Fatal("MLBUILD_WANT_AMX=1 but this CPU or OS gives no AMX tiles")
	}
}

// TestBF16InferenceKeeps checks that BF16Inference, which keeps packed
// weights between calls on AMX, gives BF16's results call after call while
// the weights change in place: one element changed (past bfloat16's
// rounding), one changed below it, a zero's sign flipped, and a new matrix
// at another address.
func TestBF16InferenceKeeps(t *testing.T) {
	rng := newTestRand(11)
	batch, in, out := 40, 70, 33
	x, w, bias := randSlice(rng, batch*in, 1), randSlice(rng, out*in, 1), randSlice(rng, out, 1)
	w[5] = 0
	check := func(step string) {
		t.Helper()
		want, got := make([]float32, batch*out), make([]float32, batch*out)
		BF16.GemmFwd(x, w, bias, want, batch, in, out, ActNone, 0)
		BF16Inference.GemmFwd(x, w, bias, got, batch, in, out, ActNone, 0)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: y[%d] = %v with kept weights, %v packed afresh", step, i, got[i], want[i])
			}
		}
	}
	check("first call")
	check("same weights")
	w[3*in+7] += 0.5
	check("one weight changed")
	w[4*in+2] = math.Float32frombits(math.Float32bits(w[4*in+2]) ^ 1) // below bfloat16's precision
	check("one weight changed in its last bit")
	w[5] = float32(math.Copysign(0, -1))
	check("a zero weight's sign flipped")
	w = append([]float32(nil), w...)
	w[0] = -w[0]
	check("a new weight matrix")
}

// TestRoundRow: roundRow (bf16RoundRow's vector loop where the CPU has
// AVX-512) gives RoundBF16's bits for every element, ties, infinities,
// NaNs and subnormals among them, at lengths with and without a tail.
func TestRoundRow(t *testing.T) {
	rng := newTestRand(23)
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), math.Float32frombits(0x7f7fffff), math.Float32frombits(0x00000001), math.Float32frombits(0xff80_0001)}
	for _, n := range []int{1, 15, 16, 33, 100} {
		src := randSlice(rng, n, 100)
		for i := range src {
			if i%3 == 0 {
				src[i] = special[(i/3)%len(special)]
			}
		}
		dst := make([]float32, n)
		roundRow(dst, src)
		for i, v := range src {
			if want := RoundBF16(v); math.Float32bits(dst[i]) != math.Float32bits(want) {
				t.Fatalf("n %d: roundRow(%#x) = %#x, want %#x", n, math.Float32bits(v), math.Float32bits(dst[i]), math.Float32bits(want))
			}
		}
	}
}

// TestGemmBwdAdd: in both precisions GemmBwdAdd writes GemmBwd's dw and db
// and adds its dx to what dx held (to float32's rounding of the sum), with
// the activation's derivative applied to dy first.
func TestGemmBwdAdd(t *testing.T) {
	rng := newTestRand(29)
	for _, sz := range [][3]int{{40, 70, 33}, {64, 64, 96}} {
		batch, in, out := sz[0], sz[1], sz[2]
		x, w := randSlice(rng, batch*in, 1), randSlice(rng, out*in, 1)
		y, dy0, held := randSlice(rng, batch*out, 1), randSlice(rng, batch*out, 1), randSlice(rng, batch*in, 1)
		for _, p := range []*Precision{FP32, BF16} {
			dy := append([]float32(nil), dy0...)
			dx, dw, db := make([]float32, batch*in), make([]float32, out*in), make([]float32, out)
			p.GemmBwd(x, w, y, dy, dx, dw, db, batch, in, out, ActReLU, 0)
			dy = append(dy[:0], dy0...)
			sum, dw2, db2 := append([]float32(nil), held...), make([]float32, out*in), make([]float32, out)
			p.GemmBwdAdd(x, w, y, dy, sum, dw2, db2, batch, in, out, ActReLU, 0)
			if !slices.Equal(dw, dw2) || !slices.Equal(db, db2) {
				t.Fatalf("%s %v: GemmBwdAdd's dw or db differ from GemmBwd's", p, sz)
			}
			for i := range sum {
				want := held[i] + dx[i]
				if d := math.Abs(float64(sum[i] - want)); d > 1e-5*(math.Abs(float64(held[i]))+math.Abs(float64(dx[i]))+1) {
					t.Fatalf("%s %v: dx[%d] = %v + %v = %v, GemmBwdAdd %v", p, sz, i, held[i], dx[i], want, sum[i])
				}
			}
		}
	}
}
