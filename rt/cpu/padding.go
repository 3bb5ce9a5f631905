package cpu

import "math"

// Padding masks (planner's Attr.Padding): the keys whose token id is the
// padding id get the score −∞, so probability 0 and gradient 0, for every
// query (PyTorch's key_padding_mask). A query that sees no key at all
// gets probabilities of 0 (and, in a fused attention, o = 0 and lse = +∞,
// so that the backward's e^(s − lse) is 0 there too) where a softmax of
// −∞ alone would give NaN.

// maskKeys sets s[j] = −∞ where ids[j] = pad, over s's length, and
// reports whether a key is left.
func maskKeys(s, ids []float32, pad float32) bool {
	live := false
	for j, id := range ids[:len(s)] {
		if id == pad {
			s[j] = float32(math.Inf(-1))
		} else {
			live = true
		}
	}
	return live
}

// SoftmaxPaddedFwd is the softmax over the last axis of scores x
// [batch, rows, t] (rows the query rows of a sample, heads·queries) with
// the keys of sample b masked where ids[b·t + j] = pad; with causal (the
// scores square, [batch, heads, t, t]), query i sees keys 0..i only, as
// SoftmaxCausalFwd. A row without a key left is 0. The backward is
// SoftmaxBwd with axis t, inner 1: y is 0 at every masked key.
func SoftmaxPaddedFwd(x, y, ids []float32, batch, rows, t int, causal bool, pad float32) {
	ParallelFor(batch*rows, rowGrain(t), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			seen := t
			if causal {
				seen = r%t + 1
			}
			out := y[r*t : (r+1)*t]
			copy(out[:seen], x[r*t:r*t+seen])
			clear(out[seen:])
			if !maskKeys(out[:seen], ids[r/rows*t:], pad) {
				clear(out[:seen])
				continue
			}
			softmaxRow(out[:seen], out[:seen])
		}
	})
}

// padKeys is the token ids of matrix m's keys, nil without a padding
// mask: Pad [B, Tk] holds a row per sample, and Mats is B times the
// matrices of a sample (its heads).
func (a Attention) padKeys(m int) []float32 {
	if a.Pad == nil {
		return nil
	}
	b := m / (a.Mats / (len(a.Pad) / a.Tk))
	return a.Pad[b*a.Tk : (b+1)*a.Tk]
}
