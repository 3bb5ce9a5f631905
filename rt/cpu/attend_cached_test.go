package cpu

import (
	"fmt"
	"math"
	"testing"
)

// TestAttendCached: position by position on awkward sizes (3 heads of 5,
// 7 positions), each call's output against the causal attention of
// row p computed in float64 from all the keys and values so far, and the
// caches' rows p against the new key and value.
func TestAttendCached(t *testing.T) {
	const T, H, hd = 7, 3, 5
	w := H * hd
	rng := NewRand(3)
	r := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*4 - 2
		}
		return x
	}
	Q, K, V := r(T*w), r(T*w), r(T*w)
	kc, vc, y, scores := make([]float32, T*w), make([]float32, T*w), make([]float32, w), make([]float32, T)
	const scale = 0.4
	for p := range T {
		AttendCached(Q[p*w:], K[p*w:], V[p*w:], y, kc, vc, scores, p, H, hd, scale)
		for i := range w {
			if kc[p*w+i] != K[p*w+i] || vc[p*w+i] != V[p*w+i] {
				t.Fatalf("p=%d: the caches' row is not the new key and value", p)
			}
		}
		for h := range H {
			s := make([]float64, p+1)
			mx := math.Inf(-1)
			for j := range s {
				for d := range hd {
					s[j] += float64(Q[p*w+h*hd+d]) * float64(K[j*w+h*hd+d])
				}
				s[j] *= scale
				mx = math.Max(mx, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for d := range hd {
				var want float64
				for j := range s {
					want += s[j] / sum * float64(V[j*w+h*hd+d])
				}
				if got := y[h*hd+d]; math.Abs(float64(got)-want) > 1e-5 {
					t.Errorf("p=%d head %d dim %d: %v, want %v", p, h, d, got, want)
				}
			}
		}
	}
}

// attendCachedScalar is AttendCached without its vector and parallel
// paths (one head after another, Go loops; the softmax's e^x expCore, the
// Go twin of the vector kernel, summed by sum64 as softmaxRow does): the
// numerics those must keep bit for bit.
func attendCachedScalar(q, k, v, y, kc, vc, scores []float32, p, heads, hd int, scale float32) {
	w := heads * hd
	copy(kc[p*w:(p+1)*w], k[:w])
	copy(vc[p*w:(p+1)*w], v[:w])
	s := scores[:p+1]
	for h := range heads {
		qh := q[h*hd : (h+1)*hd]
		mx := float32(math.Inf(-1))
		for j := range s {
			s[j] = dot(qh, kc[j*w+h*hd:j*w+(h+1)*hd]) * scale
			mx = max(mx, s[j])
		}
		for j, x := range s {
			s[j] = expCore(x - mx)
		}
		yh := y[h*hd : (h+1)*hd]
		clear(yh)
		inv := float32(1 / sum64(s))
		for j, a := range s {
			a *= inv
			for d, x := range vc[j*w+h*hd : j*w+(h+1)*hd] {
				yh[d] += a * x
			}
		}
	}
}

// TestAttendCachedBits: AttendCached against attendCachedScalar bit for
// bit, at every position of head sizes with and without a vector part
// (64, 20 = 16+4, 5), with one scratch row (heads one after another) and
// a row per head (heads on 1, 2, 3 and 7 threads), vectors on and off.
// The scores' dot products go through dot in both (its vector sum or its
// Go loop, as dotUseVector says).
func TestAttendCachedBits(t *testing.T) {
	defer SetThreads(Threads())
	defer func() { dotUseVector = true }()
	const T, H = 40, 6
	for _, hd := range []int{64, 20, 5} {
		w := H * hd
		rng := NewRand(uint64(hd))
		r := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = rng.Float32()*4 - 2
			}
			return x
		}
		Q, K, V := r(T*w), r(T*w), r(T*w)
		for _, vector := range []bool{true, false} {
			dotUseVector = vector
			ref := func(q, k, v, y, kc, vc, scores []float32, p int) {
				attendCachedScalar(q, k, v, y, kc, vc, scores, p, H, hd, 0.3)
			}
			rkc, rvc, want := make([]float32, T*w), make([]float32, T*w), make([][]float32, T)
			for p := range T {
				want[p] = make([]float32, w)
				ref(Q[p*w:], K[p*w:], V[p*w:], want[p], rkc, rvc, make([]float32, T), p)
			}
			for _, threads := range []int{1, 2, 3, 7} {
				SetThreads(threads)
				for _, perHead := range []bool{false, true} {
					kc, vc, y := make([]float32, T*w), make([]float32, T*w), make([]float32, w)
					scores := make([]float32, T)
					if perHead {
						scores = make([]float32, H*T)
					}
					for p := range T {
						AttendCached(Q[p*w:], K[p*w:], V[p*w:], y, kc, vc, scores, p, H, hd, 0.3)
						for i := range y {
							if math.Float32bits(y[i]) != math.Float32bits(want[p][i]) {
								t.Fatalf("hd=%d vector=%v threads=%d per-head scratch=%v p=%d: y[%d] = %v, want %v bit for bit",
									hd, vector, threads, perHead, p, i, y[i], want[p][i])
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkAttendCached: one position of models/gpt.cue's decode attending
// over 200 cached ones (6 heads of 64), with a scratch row a head (the
// heads on the threads) and with one (one head after another).
func BenchmarkAttendCached(b *testing.B) {
	const T, H, hd, p = 256, 6, 64, 200
	r := newTestRand(3)
	q, kc, vc, y := randSlice(r, H*hd, 1), randSlice(r, T*H*hd, 1), randSlice(r, T*H*hd, 1), make([]float32, H*hd)
	for _, rows := range []int{H, 1} {
		b.Run(fmt.Sprintf("scratch-rows=%d", rows), func(b *testing.B) {
			scores := make([]float32, rows*T)
			for n := 0; n < b.N; n++ {
				AttendCached(q, q, q, y, kc, vc, scores, p, H, hd, 0.125)
			}
		})
	}
}
