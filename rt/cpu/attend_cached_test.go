package cpu

import (
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
