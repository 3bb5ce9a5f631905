package cpu

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestEmbeddingAgainstFiniteDifferences(t *testing.T) {
	r := newTestRand(41)
	batch, seq, vocab, dim := 3, 4, 5, 6
	rows := batch * seq
	ids := make([]float32, rows)
	for i := range ids {
		ids[i] = float32(r.IntN(vocab))
	}
	ids[0], ids[5] = 2, 2 // one id read twice: its gradient is a sum
	w := randSlice(r, vocab*dim, 1)
	pos := randSlice(r, seq*dim, 1)
	y := make([]float32, rows*dim)
	fwd := func() []float32 { EmbeddingFwd("emb", ids, w, pos, y, rows, seq, vocab, dim); return y }
	fwd()
	for i := 0; i < rows; i++ {
		for j := 0; j < dim; j++ {
			want := w[int(ids[i])*dim+j] + pos[(i%seq)*dim+j]
			if y[i*dim+j] != want {
				t.Fatalf("y[%d,%d] = %v, want %v", i, j, y[i*dim+j], want)
			}
		}
	}
	proj := randSlice(r, rows*dim, 1)
	dw := randSlice(r, vocab*dim, 9) // stale values must be overwritten
	dpos := randSlice(r, seq*dim, 9)
	EmbeddingBwd(ids, proj, dw, dpos, rows, seq, vocab, dim)
	smoothCheck.run(t, "embedding", proj, fwd, gradInput{"weight", w, dw}, gradInput{"pos", pos, dpos})

	// without positions
	EmbeddingFwd("emb", ids, w, nil, y, rows, seq, vocab, dim)
	if y[dim] != w[int(ids[1])*dim] {
		t.Errorf("without positions y[1,0] = %v, want w[%v,0] = %v", y[dim], ids[1], w[int(ids[1])*dim])
	}
}

func TestEmbeddingRefusesBadIDs(t *testing.T) {
	for _, tc := range []struct {
		id   float32
		want string
	}{
		{5, "token id 5 at position 2 of the batch is outside the vocabulary of 5 (ids are 0 to 4)"},
		{-1, "token id -1 at position 2 of the batch is outside the vocabulary of 5"},
		{1.5, "token id 1.5 at position 2 of the batch is not an integer"},
		{float32(math.NaN()), "token id NaN at position 2"},
		{float32(math.Inf(1)), "token id +Inf at position 2"},
	} {
		ids := []float32{0, 4, tc.id, 1}
		y := make([]float32, 4*2)
		func() {
			defer func() {
				r := recover()
				err, ok := r.(error)
				var te *TokenIDError
				if !ok || !errors.As(err, &te) {
					t.Fatalf("id %v: recovered %v, want a *TokenIDError", tc.id, r)
				}
				if !strings.Contains(err.Error(), "wte: "+tc.want) {
					t.Errorf("id %v: %q does not say %q", tc.id, err, tc.want)
				}
			}()
			EmbeddingFwd("wte", ids, make([]float32, 5*2), nil, y, 4, 4, 5, 2)
		}()
	}
}

func TestSoftmaxCausal(t *testing.T) {
	r := newTestRand(42)
	outer, n := 3, 5
	x := randSlice(r, outer*n*n, 3)
	y := make([]float32, len(x))
	SoftmaxCausalFwd(x, y, outer, n)
	for o := 0; o < outer; o++ {
		for i := 0; i < n; i++ {
			row := y[(o*n+i)*n : (o*n+i+1)*n]
			var s float64
			for k, v := range row {
				if k > i && v != 0 {
					t.Fatalf("y[%d,%d,%d] = %v past the diagonal, want 0", o, i, k, v)
				}
				s += float64(v)
			}
			if math.Abs(s-1) > 1e-6 {
				t.Errorf("row %d,%d sums to %v", o, i, s)
			}
		}
	}
	// Hand-made: row 0 is all on key 0; row 1 the softmax of (0, ln 3) = (1/4, 3/4).
	h := []float32{7, 100, 0, float32(math.Log(3))}
	hy := make([]float32, 4)
	SoftmaxCausalFwd(h, hy, 1, 2)
	if hy[0] != 1 || hy[1] != 0 || math.Abs(float64(hy[2])-0.25) > 1e-6 || math.Abs(float64(hy[3])-0.75) > 1e-6 {
		t.Errorf("causal softmax of %v = %v, want [1 0 0.25 0.75]", h, hy)
	}
	// A future score changes nothing before it.
	x2 := append([]float32(nil), x...)
	x2[0*n*n+1*n+3] += 5 // query 1, key 3
	y2 := make([]float32, len(x))
	SoftmaxCausalFwd(x2, y2, outer, n)
	for i := range y {
		if y[i] != y2[i] {
			t.Fatalf("changing a future key's score changed y[%d] from %v to %v", i, y[i], y2[i])
		}
	}
	// SoftmaxBwd is the backward: masked entries get gradient 0.
	proj := randSlice(r, len(x), 1)
	dx := make([]float32, len(x))
	SoftmaxBwd(y, proj, dx, outer*n, n, 1)
	for o := 0; o < outer; o++ {
		for i := 0; i < n; i++ {
			for k := i + 1; k < n; k++ {
				if g := dx[(o*n+i)*n+k]; g != 0 {
					t.Fatalf("dx[%d,%d,%d] = %v past the diagonal, want 0", o, i, k, g)
				}
			}
		}
	}
	smoothCheck.run(t, "softmax_causal", proj, func() []float32 { SoftmaxCausalFwd(x, y, outer, n); return y }, gradInput{"x", x, dx})
}

// TestSoftmaxXentPerToken: a [N, T, V] loss is SoftmaxXent over N·T rows,
// the mean over every token.
func TestSoftmaxXentPerToken(t *testing.T) {
	// two tokens: logits (0, 0) target 0 costs ln 2; (ln 3, 0) target 0 costs ln(4/3).
	logits := []float32{0, 0, float32(math.Log(3)), 0}
	labels := []float32{1, 0, 1, 0}
	d := make([]float32, 4)
	got := SoftmaxXent(logits, labels, d, 2, 2)
	want := (math.Log(2) + math.Log(4.0/3)) / 2
	if math.Abs(float64(got)-want) > 1e-6 {
		t.Errorf("loss = %v, want %v", got, want)
	}
	if math.Abs(float64(d[0])-(-0.25)) > 1e-6 || math.Abs(float64(d[2])-(-0.125)) > 1e-6 {
		t.Errorf("dlogits = %v, want [-0.25 0.25 -0.125 0.125]", d)
	}
}
