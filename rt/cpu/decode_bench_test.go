package cpu

import (
	"runtime"
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
	// bf16 runs the dense steps as GemvBF16 on w16's copies
	bf16 bool
	w16  map[*float32][]uint16
	xb   []uint16
}

// dense is the token's dense step y = x·wᵀ in the decode's precision.
func (d *gptDecode) dense(x, w, y []float32, in, out int) {
	if !d.bf16 {
		GemvF32(x, w, nil, y, in, out, ActNone, 0)
		return
	}
	GemvBF16(x, d.xb, d.w16[&w[0]], nil, y, in, out, ActNone, 0)
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
	d.w16, d.xb = map[*float32][]uint16{}, make([]uint16, F)
	for _, ws := range [][][]float32{d.wq, d.wk, d.wv, d.wo, d.w1, d.w2, {d.head}} {
		for _, w := range ws {
			b := make([]uint16, len(w))
			ToBF16(b, w)
			d.w16[&w[0]] = b
		}
	}
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
		d.dense(d.h, d.wq[l], d.q, W, W)
		d.dense(d.h, d.wk[l], d.k, W, W)
		d.dense(d.h, d.wv[l], d.v, W, W)
		s = lap(0, s)
		AttendCached(d.q, d.k, d.v, d.a, d.kc[l], d.vc[l], d.scores, pos, gptHeads, W/gptHeads, 0.125)
		s = lap(1, s)
		d.dense(d.a, d.wo[l], d.o, W, W)
		s = lap(0, s)
		Add(d.x, d.o, d.r)
		s = lap(4, s)
		LayerNormFwd(d.r, d.g2, nil, d.h, d.mean, d.inv, 1, W, 1e-5)
		s = lap(2, s)
		d.dense(d.h, d.w1[l], d.f, W, F)
		s = lap(0, s)
		UnaryFwd(d.f, d.f, gelu)
		s = lap(3, s)
		d.dense(d.f, d.w2[l], d.o, F, W)
		s = lap(0, s)
		Add(d.r, d.o, d.x)
		s = lap(4, s)
	}
	LayerNormFwd(d.x, d.gf, nil, d.h, d.mean, d.inv, 1, W, 1e-5)
	s = lap(2, s)
	d.dense(d.h, d.head, d.y, W, gptVocab)
	lap(0, s)
}

// BenchmarkDecodeToken times one token of gptDecode at position 128 (half
// the context), in f32 and bf16, on the team and (-pool) through
// ParallelFor, and reports each kind's share in µs a token.
//
// Its threads are GOMAXPROCS (go test -cpu N), the team's size.
func BenchmarkDecodeToken(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(runtime.GOMAXPROCS(0))
	d := newGPTDecode(1)
	defer func() { teamUse = true }()
	for _, c := range []struct {
		name       string
		bf16, team bool
	}{{"f32", false, true}, {"bf16", true, true}, {"f32-pool", false, false}, {"bf16-pool", true, false}} {
		d.bf16, teamUse = c.bf16, c.team
		b.Run(c.name, func(b *testing.B) {
			var t [len(decodeKinds)]time.Duration
			d.token(128, nil)
			b.ResetTimer()
			for range b.N {
				d.token(128, &t)
			}
			for i, k := range decodeKinds {
				b.ReportMetric(float64(t[i].Microseconds())/float64(b.N), k+"-µs/tok")
			}
		})
	}
}

// noopJob is a step with nothing to do: BenchmarkTeamStep's.
type noopJob struct{}

func (noopJob) runPart(part, parts int) {}

// BenchmarkTeamStep times the decode team's synchronisation alone: a step
// of empty parts, one a member, on a team of GOMAXPROCS (go test -cpu N),
// so ns/op is what every step of a token pays on top of its work.
func BenchmarkTeamStep(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(runtime.GOMAXPROCS(0))
	defer DecodeTeamRest()
	t, ok := teamLock()
	if !ok || t.size < 2 {
		if ok {
			t.alone()
		}
		b.Skip("one thread: no team")
	}
	t.run(noopJob{}, t.size)
	b.ResetTimer()
	for range b.N {
		t, _ := teamLock()
		t.run(noopJob{}, t.size)
	}
	b.ReportMetric(float64(t.size), "parts")
}
