package cpu

import (
	"testing"
	"time"
)

// gptDecode is one token of models/gpt.cue's KV-cache decode made of
// rt/cpu's kernels as its generated NextLogits calls them (6 layers of
// width 384, 6 heads, an MLP of 1536, a head of 89), at cache position
// pos, for BenchmarkDecodeToken's breakdown of where a token's time goes.
type gptDecode struct {
	layers                  int
	wq, wk, wv, wo, w1, w2  [][]float32
	head                    []float32
	g1, g2, gf              []float32
	kc, vc                  [][]float32
	x, h, q, k, v, a, o, r  []float32
	f, mean, inv, scores, y []float32
}

const (
	gptWidth, gptHeads, gptMLP, gptVocab, gptContext = 384, 6, 1536, 89, 256
)

func newGPTDecode(seed uint64) *gptDecode {
	r := newTestRand(seed)
	d := &gptDecode{layers: 6}
	W, F := gptWidth, gptMLP
	for range d.layers {
		d.wq = append(d.wq, randSlice(r, W*W, 0.05))
		d.wk = append(d.wk, randSlice(r, W*W, 0.05))
		d.wv = append(d.wv, randSlice(r, W*W, 0.05))
		d.wo = append(d.wo, randSlice(r, W*W, 0.05))
		d.w1 = append(d.w1, randSlice(r, W*F, 0.05))
		d.w2 = append(d.w2, randSlice(r, W*F, 0.05))
		d.kc = append(d.kc, randSlice(r, gptContext*W, 1))
		d.vc = append(d.vc, randSlice(r, gptContext*W, 1))
	}
	d.head = randSlice(r, gptVocab*W, 0.05)
	d.g1, d.g2, d.gf = randSlice(r, W, 1), randSlice(r, W, 1), randSlice(r, W, 1)
	d.x = randSlice(r, W, 1)
	for _, p := range []*[]float32{&d.h, &d.q, &d.k, &d.v, &d.a, &d.o, &d.r} {
		*p = make([]float32, W)
	}
	d.f = make([]float32, F)
	d.mean, d.inv = make([]float32, 1), make([]float32, 1)
	d.scores = make([]float32, gptHeads*gptContext)
	d.y = make([]float32, gptVocab)
	return d
}

// decodeKinds names the parts of gptDecode.token's breakdown.
var decodeKinds = [...]string{"dense", "attend", "norm", "gelu", "add"}

// token runs one position's steps; t, when not nil, gets each kind's time.
func (d *gptDecode) token(pos int, t *[len(decodeKinds)]time.Duration) {
	W, F := gptWidth, gptMLP
	gelu := []Unary{{Kind: UGELU}}
	lap := func(kind int, start time.Time) time.Time {
		if t == nil {
			return start
		}
		now := time.Now()
		t[kind] += now.Sub(start)
		return now
	}
	var s time.Time
	if t != nil {
		s = time.Now()
	}
	for l := range d.layers {
		LayerNormFwd(d.x, d.g1, nil, d.h, d.mean, d.inv, 1, W, 1e-5)
		s = lap(2, s)
		GemmFwd(d.h, d.wq[l], nil, d.q, 1, W, W, ActNone, 0)
		GemmFwd(d.h, d.wk[l], nil, d.k, 1, W, W, ActNone, 0)
		GemmFwd(d.h, d.wv[l], nil, d.v, 1, W, W, ActNone, 0)
		s = lap(0, s)
		AttendCached(d.q, d.k, d.v, d.a, d.kc[l], d.vc[l], d.scores, pos, gptHeads, W/gptHeads, 0.125)
		s = lap(1, s)
		GemmFwd(d.a, d.wo[l], nil, d.o, 1, W, W, ActNone, 0)
		s = lap(0, s)
		Add(d.x, d.o, d.r)
		s = lap(4, s)
		LayerNormFwd(d.r, d.g2, nil, d.h, d.mean, d.inv, 1, W, 1e-5)
		s = lap(2, s)
		GemmFwd(d.h, d.w1[l], nil, d.f, 1, W, F, ActNone, 0)
		s = lap(0, s)
		UnaryFwd(d.f, d.f, gelu)
		s = lap(3, s)
		GemmFwd(d.f, d.w2[l], nil, d.o, 1, F, W, ActNone, 0)
		s = lap(0, s)
		Add(d.r, d.o, d.x)
		s = lap(4, s)
	}
	LayerNormFwd(d.x, d.gf, nil, d.h, d.mean, d.inv, 1, W, 1e-5)
	s = lap(2, s)
	GemmFwd(d.h, d.head, nil, d.y, 1, W, gptVocab, ActNone, 0)
	lap(0, s)
}

// BenchmarkDecodeToken times one token of gptDecode at position 128 (half
// the context) and reports each kind's share in µs a token.
func BenchmarkDecodeToken(b *testing.B) {
	d := newGPTDecode(1)
	var t [len(decodeKinds)]time.Duration
	d.token(128, nil)
	b.ResetTimer()
	for range b.N {
		d.token(128, &t)
	}
	for i, k := range decodeKinds {
		b.ReportMetric(float64(t[i].Microseconds())/float64(b.N), k+"-µs/tok")
	}
}
