package cpu

import (
	"math"
	"testing"
)

// TestAttentionKernelsMatchGo: the fused attention's vector loops
// (archAttention) give the Go loops' bits, on rows of every length from 1
// to 70 (tails of every size) with and without the dropout's mask, and
// rowMaxOf gives rowMax's answer on rows with a NaN, an infinity, zeros
// of both signs and a maximum in the tail.
func TestAttentionKernelsMatchGo(t *testing.T) {
	k := archAttention(GemmPaths()[0])
	if k == nil {
		t.Logf("no vector loops on path %s: the Go loops against themselves", GemmPaths()[0])
	}
	r := newTestRand(44)
	for n := 1; n <= 70; n++ {
		p, ds, mask := randSlice(r, n, 1), randSlice(r, n, 1), randSlice(r, n, 1.25)
		for _, rate := range []float32{0, 0.2} {
			a := Attention{Scale: 0.125, Rate: rate}
			got, want := cloneF(ds), cloneF(ds)
			a.scoreGrads(k, p, got, mask, 0.3)
			a.scoreGrads(nil, p, want, mask, 0.3)
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("n %d rate %g: ds[%d] = %g, the Go loop gives %g", n, rate, j, got[j], want[j])
				}
			}
		}
		rows := map[string][]float32{"random": randSlice(r, n, 3)}
		last := randSlice(r, n, 1)
		last[n-1] = 9
		rows["max last"] = last
		nan := randSlice(r, n, 1)
		nan[n/2] = float32(math.NaN())
		rows["NaN"] = nan
		inf := randSlice(r, n, 1)
		inf[n/3] = float32(math.Inf(1))
		rows["+Inf"] = inf
		zeros := make([]float32, n)
		for j := range zeros {
			zeros[j] = -float32(j % 2)
		}
		zeros[0] = float32(math.Copysign(0, -1))
		rows["zeros and -1s"] = zeros
		for name, x := range rows {
			got, want := k.rowMaxOf(x), rowMax(x)
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Errorf("n %d %s: rowMaxOf = %g, rowMax %g", n, name, got, want)
			}
		}
	}
}

// TestAttentionRowDots: rowDots, four rows at a time, gives each row's
// sum in d's order bit for bit, on row counts that leave every remainder
// of four and strides wider than D.
func TestAttentionRowDots(t *testing.T) {
	r := newTestRand(45)
	for _, rows := range []int{1, 3, 4, 5, 7, 8, 66} {
		a := Attention{D: 13}
		ldd, ldo := 17, 29
		do, o := randSlice(r, rows*ldd, 1), randSlice(r, rows*ldo, 1)
		got := make([]float32, rows)
		a.rowDots(do, ldd, o, ldo, got)
		for i := range rows {
			var want float32
			for d := range a.D {
				want += do[i*ldd+d] * o[i*ldo+d]
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Errorf("%d rows: delta[%d] = %g, the one-chain sum %g", rows, i, got[i], want)
			}
		}
	}
}
