package cpu

import "math"

// AttendCached is the causal attention of one new position p over the
// positions 0..p with a KV cache (a language model's decode step): it
// writes k and v ([heads·hd], the new position's key and value rows) at
// row p of kc and vc ([T, heads·hd]), then for each head h
//
//	s_j = scale·q_h·kc[j]_h for j ≤ p,  y_h = Σ_j softmax(s)_j·vc[j]_h
//
// which is row p of softmax_causal(scale·Q·Kᵀ)·V per head, computed with
// one position's work instead of T's. scores is scratch of at least p+1.
func AttendCached(q, k, v, y, kc, vc, scores []float32, p, heads, hd int, scale float32) {
	w := heads * hd
	copy(kc[p*w:(p+1)*w], k[:w])
	copy(vc[p*w:(p+1)*w], v[:w])
	s := scores[:p+1]
	for h := range heads {
		qh := q[h*hd : (h+1)*hd]
		mx := float32(math.Inf(-1))
		for j := range s {
			kj := kc[j*w+h*hd : j*w+(h+1)*hd]
			s[j] = dot(qh, kj) * scale
			mx = max(mx, s[j])
		}
		var sum float32
		for j, x := range s {
			e := float32(math.Exp(float64(x - mx)))
			s[j] = e
			sum += e
		}
		yh := y[h*hd : (h+1)*hd]
		clear(yh)
		inv := 1 / sum
		for j, a := range s {
			a *= inv
			vj := vc[j*w+h*hd : j*w+(h+1)*hd]
			for d, x := range vj {
				yh[d] += a * x
			}
		}
	}
}
