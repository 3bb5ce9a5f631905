package planner

import "fmt"

// attention checks a fused attention step (KAttention, KAttentionBwd):
// over the heads (AttentionHeadShapes of its operands and Attr.Perm),
// q [..., Tq, D], kᵀ [..., D, Tk], v [..., Tk, D] with one set of leading
// axes; o shaped like the operand q, the log-sum-exp (and the backward's
// delta) [..., Tq], a square causal mask, a finite scale, a dropout rate
// in [0, 1) and, with a padding mask, token ids [B, Tk] as the last input.
func (r shapeRules) attention(s *Step) error {
	qs := r.sh(s.In[0])
	q, kt, v, ok := AttentionHeadShapes(qs, r.sh(s.In[1]), r.sh(s.In[2]), s.Attr.Perm)
	if !ok {
		return fmt.Errorf("operands q %s, k %s, v %s in the layout %v (want none, or [0 2 1 3] of [B,T,H,D] operands)", shapeString(qs), shapeString(r.sh(s.In[1])), shapeString(r.sh(s.In[2])), s.Attr.Perm)
	}
	n := len(q)
	if n < 3 || len(kt) != n || len(v) != n || !equalShapes(q[:n-2], kt[:n-2]) || !equalShapes(q[:n-2], v[:n-2]) ||
		q[n-1] != kt[n-2] || v[n-2] != kt[n-1] || v[n-1] != q[n-1] {
		return fmt.Errorf("q %s, kᵀ %s and v %s do not fit (want [...,Tq,D], [...,D,Tk] and [...,Tk,D])", shapeString(q), shapeString(kt), shapeString(v))
	}
	if q[n-1] > MaxAttentionDim {
		return fmt.Errorf("head dimension %d above the fused kernels' %d", q[n-1], MaxAttentionDim)
	}
	a := s.Attr
	switch {
	case a.Causal && q[n-2] != kt[n-1]:
		return fmt.Errorf("a causal mask over %d queries and %d keys (want as many)", q[n-2], kt[n-1])
	case a.Rate < 0 || a.Rate >= 1:
		return fmt.Errorf("dropout rate %g outside [0, 1)", a.Rate)
	case a.Scale != a.Scale || a.Scale > 1e38 || a.Scale < -1e38:
		return fmt.Errorf("scale %g is not finite", a.Scale)
	}
	if a.Padding {
		if err := r.is("token ids", s.In[len(s.In)-1], []int{qs[0], kt[n-1]}); err != nil {
			return err
		}
	}
	rows := q[:n-1]
	if s.Kernel == KAttention {
		return first(r.is("o", s.Out[0], qs), r.is("lse", s.Out[1], rows), r.kindIs(s.Out[1], KindScratch))
	}
	return first(r.is("o", s.In[3], qs), r.is("lse", s.In[4], rows), r.is("do", s.In[5], qs),
		r.same("dq", s.Out[0], s.In[0]), r.same("dkᵀ", s.Out[1], s.In[1]), r.same("dv", s.Out[2], s.In[2]),
		r.is("delta", s.Out[3], rows), r.kindIs(s.Out[3], KindScratch))
}
