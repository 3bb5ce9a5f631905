package cpu

import "math"

// Attention is the geometry of a fused attention step: Mats independent
// (batch, head) matrices, each Tq queries and Tk keys of dimension D.
type Attention struct {
	Mats, Tq, Tk, D int
	// Scale multiplies the scores q·k.
	Scale float32
	// Causal lets query i see keys 0..i only (Tq = Tk).
	Causal bool
	// Rate is the dropout of the probabilities: element (m, i, j) is kept,
	// times 1/(1−Rate), where Uniform((m·Tq + i)·Tk + j) ≥ Rate; 0: none.
	Rate float32
	// Uniform draws the dropout's uniform of an element's index (the GPU
	// programs' rt/gpuhost.DropoutUniform at the step's seed) for the
	// references AttentionFwd and AttentionBwd; nil when Rate is 0.
	Uniform func(index uint32) float32
	// Seed and Step are the draws of AttentionBlocksFwd and
	// AttentionBlocksBwd: DropoutUniform(Seed, Step, index).
	Seed, Step uint32
	// Heads, when positive, makes the operands token-major (planner's
	// Attr.Perm [0 2 1 3]): q, v, o, do, dq and dv [B, T, Heads, D], and
	// k and dk [B, Tk, Heads, D] in kt's and dkt's places, matrix
	// m = b·Heads + h; lse and delta stay [Mats, Tq].
	Heads int
	// BF16 makes the fused kernels' products (AttentionBlocksFwd's and
	// AttentionBlocksBwd's q·kᵀ, p·v and their gradients) read
	// bfloat16-rounded operands and accumulate in float32, as BF16's
	// dense products: on AMX tiles where the CPU has them, else in
	// float32 on rounded copies (the same products, at float32's speed).
	// The softmax, its statistics and the dropout stay float32; the
	// references ignore it.
	BF16 bool
	// Pad, when not nil, is the keys' token ids [B, Tk] (float32, as the
	// model input holds them; Mats a multiple of B), and PadID the id of
	// padding: key j of matrix m is masked, its score −∞, where
	// Pad[b·Tk + j] = PadID, b the matrix's sample (padding.go). A query
	// that sees no key gets o = 0 and lse = +∞.
	Pad   []float32
	PadID float32
}

// heads copies x [B, rows, Heads, D] to [Mats, rows, D], and, where kt,
// on to [Mats, D, rows]; nil stays nil.
func (a Attention) heads(x []float32, rows int, kt bool) []float32 {
	if x == nil {
		return nil
	}
	y := make([]float32, len(x))
	for m := range a.Mats {
		for t := range rows {
			src := x[((m/a.Heads*rows+t)*a.Heads+m%a.Heads)*a.D:][:a.D]
			if !kt {
				copy(y[(m*rows+t)*a.D:], src)
				continue
			}
			for d, v := range src {
				y[(m*a.D+d)*rows+t] = v
			}
		}
	}
	return y
}

// tokens copies y, as heads returned it, back to x [B, rows, Heads, D].
func (a Attention) tokens(y, x []float32, rows int, kt bool) {
	if x == nil {
		return
	}
	for m := range a.Mats {
		for t := range rows {
			dst := x[((m/a.Heads*rows+t)*a.Heads+m%a.Heads)*a.D:][:a.D]
			for d := range dst {
				if kt {
					dst[d] = y[(m*a.D+d)*rows+t]
				} else {
					dst[d] = y[(m*rows+t)*a.D+d]
				}
			}
		}
	}
}

// keep is the dropout's multiplier of element index: 0 or 1/(1−Rate).
func (a Attention) keep(index int) float32 {
	if a.Rate <= 0 || a.Uniform == nil {
		return 1
	}
	if a.Uniform(uint32(index)) >= a.Rate {
		return 1 / (1 - a.Rate)
	}
	return 0
}

// seen is the number of keys query i sees.
func (a Attention) seen(i int) int {
	if a.Causal {
		return min(i+1, a.Tk)
	}
	return a.Tk
}

// scores writes s[j] = Scale·q_i·k_j of matrix m for the keys query i
// sees (−∞ for a padding key), and returns their count; k is [Mats, Tk,
// D], a key a row.
func (a Attention) scores(q, k []float32, m, i int, s []float32) int {
	n := a.seen(i)
	qi := q[(m*a.Tq+i)*a.D : (m*a.Tq+i+1)*a.D]
	for j := range n {
		kj := k[(m*a.Tk+j)*a.D : (m*a.Tk+j+1)*a.D]
		var acc float32
		for d, x := range qi {
			acc += x * kj[d]
		}
		s[j] = a.Scale * acc
	}
	if ids := a.padKeys(m); ids != nil {
		maskKeys(s[:n], ids, a.PadID)
	}
	return n
}

// keyRows returns kt [Mats, D, Tk] as k [Mats, Tk, D], a key a row, so the
// loops over a key's D values read memory in order; nil stays nil.
func (a Attention) keyRows(kt []float32) []float32 {
	if kt == nil {
		return nil
	}
	k := make([]float32, len(kt))
	for m := range a.Mats {
		for d := range a.D {
			for j, x := range kt[(m*a.D+d)*a.Tk : (m*a.D+d+1)*a.Tk] {
				k[(m*a.Tk+j)*a.D+d] = x
			}
		}
	}
	return k
}

// keyColumns writes k [Mats, Tk, D] into kt [Mats, D, Tk].
func (a Attention) keyColumns(k, kt []float32) {
	for m := range a.Mats {
		for d := range a.D {
			row := kt[(m*a.D+d)*a.Tk : (m*a.D+d+1)*a.Tk]
			for j := range row {
				row[j] = k[(m*a.Tk+j)*a.D+d]
			}
		}
	}
}

// AttentionFwd is the reference of the GPU's fused attention
// (planner.KAttention), a row at a time and never the scores of a whole
// matrix: o = dropout(softmax(Scale·q·kᵀ))·v, with q [Mats,Tq,D], kt
// (kᵀ) [Mats,D,Tk], v [Mats,Tk,D], o [Mats,Tq,D], and lse [Mats,Tq] each
// row's log Σ_j exp(s_j) for the backward.
func AttentionFwd(q, kt, v, o, lse []float32, a Attention) {
	if a.Heads > 0 {
		oh := make([]float32, len(o))
		h := a
		h.Heads = 0
		h.forward(a.heads(q, a.Tq, false), a.heads(kt, a.Tk, false), a.heads(v, a.Tk, false), oh, lse)
		a.tokens(oh, o, a.Tq, false)
		return
	}
	a.forward(q, a.keyRows(kt), v, o, lse)
}

// forward is AttentionFwd on keys k [Mats, Tk, D].
func (a Attention) forward(q, k, v, o, lse []float32) {
	ParallelFor(a.Mats, 1, func(lo, hi int) {
		s := make([]float32, a.Tk)
		for m := lo; m < hi; m++ {
			for i := range a.Tq {
				n := a.scores(q, k, m, i, s)
				mx := float32(math.Inf(-1))
				for _, x := range s[:n] {
					mx = max(mx, x)
				}
				oi := o[(m*a.Tq+i)*a.D : (m*a.Tq+i+1)*a.D]
				clear(oi)
				if math.IsInf(float64(mx), -1) { // every key masked
					lse[m*a.Tq+i] = float32(math.Inf(1))
					continue
				}
				var sum float64
				for j := range n {
					s[j] = float32(math.Exp(float64(s[j] - mx)))
					sum += float64(s[j])
				}
				lse[m*a.Tq+i] = mx + float32(math.Log(sum))
				inv := float32(1 / sum)
				for j := range n {
					p := s[j] * inv * a.keep((m*a.Tq+i)*a.Tk+j)
					vj := v[(m*a.Tk+j)*a.D : (m*a.Tk+j+1)*a.D]
					for d, x := range vj {
						oi[d] += p * x
					}
				}
			}
		}
	})
}

// AttentionBwd is the reference of the GPU's fused attention backward
// (planner.KAttentionBwd): from q, kt, v, o, the forward's lse and do
// (shaped like o), it writes delta [Mats,Tq] = rowsum(do∘o), then dq, dkt
// and dv (each may be nil), recomputing each row's probabilities
// p_j = exp(s_j − lse) and the dropout's mask:
//
//	dv_j += p_j·keep_j·do_i,  ds_j = p_j·(keep_j·do_i·v_j − delta_i),
//	dq_i += Scale·Σ_j ds_j·k_j,  dk_j += Scale·ds_j·q_i.
func AttentionBwd(q, kt, v, o, lse, do, dq, dkt, dv, delta []float32, a Attention) {
	if a.Heads > 0 {
		h := a
		h.Heads = 0
		dqh, dkh, dvh := a.heads(dq, a.Tq, false), a.heads(dkt, a.Tk, false), a.heads(dv, a.Tk, false)
		h.backward(a.heads(q, a.Tq, false), a.heads(kt, a.Tk, false), a.heads(v, a.Tk, false), a.heads(o, a.Tq, false), lse, a.heads(do, a.Tq, false),
			dqh, dkh, dvh, delta)
		a.tokens(dqh, dq, a.Tq, false)
		a.tokens(dkh, dkt, a.Tk, false)
		a.tokens(dvh, dv, a.Tk, false)
		return
	}
	var dk []float32
	if dkt != nil {
		dk = make([]float32, len(dkt))
	}
	a.backward(q, a.keyRows(kt), v, o, lse, do, dq, dk, dv, delta)
	if dkt != nil {
		a.keyColumns(dk, dkt)
	}
}

// backward is AttentionBwd on keys k and their gradient dk [Mats, Tk, D].
func (a Attention) backward(q, k, v, o, lse, do, dq, dk, dv, delta []float32) {
	ParallelFor(a.Mats, 1, func(lo, hi int) {
		s := make([]float32, a.Tk)
		for m := lo; m < hi; m++ {
			if dq != nil {
				clear(dq[m*a.Tq*a.D : (m+1)*a.Tq*a.D])
			}
			if dk != nil {
				clear(dk[m*a.Tk*a.D : (m+1)*a.Tk*a.D])
			}
			if dv != nil {
				clear(dv[m*a.Tk*a.D : (m+1)*a.Tk*a.D])
			}
			for i := range a.Tq {
				r := m*a.Tq + i
				var dd float32
				for d := range a.D {
					dd += do[r*a.D+d] * o[r*a.D+d]
				}
				delta[r] = dd
			}
			for i := range a.Tq {
				r := m*a.Tq + i
				n := a.scores(q, k, m, i, s)
				qi, doi := q[r*a.D:(r+1)*a.D], do[r*a.D:(r+1)*a.D]
				for j := range n {
					p := float32(math.Exp(float64(s[j] - lse[r])))
					keep := a.keep(r*a.Tk + j)
					vj := v[(m*a.Tk+j)*a.D : (m*a.Tk+j+1)*a.D]
					var dp float32
					for d, x := range doi {
						dp += x * vj[d]
					}
					if dv != nil {
						dvj := dv[(m*a.Tk+j)*a.D : (m*a.Tk+j+1)*a.D]
						for d, x := range doi {
							dvj[d] += p * keep * x
						}
					}
					ds := a.Scale * p * (keep*dp - delta[r])
					if dq != nil {
						kj, dqi := k[(m*a.Tk+j)*a.D:(m*a.Tk+j+1)*a.D], dq[r*a.D:(r+1)*a.D]
						for d, x := range kj {
							dqi[d] += ds * x
						}
					}
					if dk != nil {
						dkj := dk[(m*a.Tk+j)*a.D : (m*a.Tk+j+1)*a.D]
						for d, x := range qi {
							dkj[d] += ds * x
						}
					}
				}
			}
		}
	})
}
