package planner

import (
	"fmt"
	"math"
	"strings"
)

// fuseAttention replaces each scaled dot-product attention of the forward
// pass by one KAttention step, for a target whose kernels fuse it
// (Target.Attention): the scores [..., Tq, Tk], their scaled copy, the
// probabilities and their dropout mask are then never in memory, and
// differentiate gives the step one KAttentionBwd, which recomputes the
// probabilities from q, kᵀ and each row's log-sum-exp instead of reading
// them. The pattern is the one lower.go makes of a spec's attention:
//
//	matmul(q, kᵀ) → [unary(mulconst c)] → softmax(last axis, causal or
//	not, padded or not) → [dropout] → matmul(·, v)
//
// with q [..., Tq, D], kᵀ [..., D, Tk] and v [..., Tk, D] sharing their
// leading axes (no broadcasting), D ≤ MaxAttentionDim, and each
// intermediate value read by the next step alone (not the plan's output,
// no view of it but the one an inference plan's dropout makes of the
// probabilities).
//
// Before: Forward is lowered and element-wise fusion has run (a scale is
// a one-op unary chain); no backward steps exist yet. After: each such
// chain is one KAttention step in the place of its last matmul, named
// after its first (the layer of q·kᵀ), In q, kᵀ, v, Out the second
// matmul's output and a new scratch buffer "LAYER.lse" [..., Tq], Attr Scale (c, or 1 without a mulconst), Causal,
// Padding and PadID (the softmax's; a padded step reads the token ids as a
// fourth input), and Rate (the dropout's, in a training plan; 0 in an inference plan,
// where dropout is the identity), Fused listing the layers it took. The
// intermediate buffers are gone. Other steps and buffers are unchanged.
// A target without Attention gets no change.
func fuseAttention(p *Plan, t Target) {
	if !t.Attention {
		return
	}
	removed := make([]bool, len(p.Forward))
	for i := range p.Forward {
		if removed[i] {
			continue
		}
		m, ok := matchAttention(p, i)
		if !ok {
			continue
		}
		last := &p.Forward[m.steps[len(m.steps)-1]]
		var layers []string
		for _, j := range m.steps {
			layers = append(layers, fusedNames(&p.Forward[j])...)
		}
		lseShape := append([]int(nil), p.shapeOf(m.q)[:len(p.shapeOf(m.q))-1]...)
		lse := p.addBuffer(uniqueName(p, layers[0]+".lse"), KindScratch, lseShape)
		rate := 0.0
		if p.Training {
			rate = m.rate
		}
		in := []BufID{m.q, m.kt, m.v}
		if m.padding {
			in = append(in, m.ids)
		}
		*last = Step{Kernel: KAttention, Layer: layers[0], In: in, Out: []BufID{last.Out[0], lse},
			Attr: Attr{Scale: m.scale, Causal: m.causal, Padding: m.padding, PadID: m.padID, Rate: rate}, Fused: layers}
		for _, j := range m.steps[:len(m.steps)-1] {
			p.Forward[j].In = nil
			removed[j] = true
		}
		kind := "attention"
		if m.causal {
			kind = "causal attention"
		}
		if m.padding {
			kind += fmt.Sprintf(" (padding id %d)", m.padID)
		}
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s -> %s (scale %g, dropout %g)", strings.Join(layers, " + "), kind, m.scale, rate))
	}
	p.dropForward(removed)
}

// MaxAttentionDim is the largest head dimension D that fuseAttention
// fuses: the GPU kernels keep a query's D values in a threadgroup's memory
// and its output in registers, sized for heads of up to 128 (emit/gpu's
// attention kernels).
const MaxAttentionDim = 128

// attentionMatch is one attention fuseAttention recognised: its operands,
// its attributes and the forward steps it replaces, in order (the last is
// the matmul with v).
type attentionMatch struct {
	q, kt, v BufID
	scale    float64
	causal   bool
	// padding masks the keys whose token id in ids is padID
	padding bool
	padID   int
	ids     BufID
	rate    float64
	steps   []int
}

// matchAttention recognises the attention whose first matmul is forward
// step i.
func matchAttention(p *Plan, i int) (attentionMatch, bool) {
	s := p.Forward[i]
	m := attentionMatch{scale: 1, steps: []int{i}}
	if s.Kernel != KMatMul {
		return m, false
	}
	m.q, m.kt = s.In[0], s.In[1]
	qs, ks := p.shapeOf(m.q), p.shapeOf(m.kt)
	r := len(qs)
	if r < 2 || len(ks) != r || !equalShapes(qs[:r-2], ks[:r-2]) || qs[r-1] != ks[r-2] || qs[r-1] > MaxAttentionDim {
		return m, false
	}
	next := func(id BufID) (int, Step, bool) {
		j, ok := soleForwardReader(p, id)
		if !ok {
			return 0, Step{}, false
		}
		return j, p.Forward[j], true
	}
	j, st, ok := next(s.Out[0])
	if !ok {
		return m, false
	}
	if st.Kernel == KUnary && len(st.Attr.Chain) == 1 && st.Attr.Chain[0].Op == "mulconst" {
		m.scale = st.Attr.Chain[0].Alpha
		m.steps = append(m.steps, j)
		if j, st, ok = next(st.Out[0]); !ok {
			return m, false
		}
	}
	if st.Kernel != KSoftmax || st.Attr.Axis != r-1 || math.IsNaN(m.scale) || math.IsInf(m.scale, 0) {
		return m, false
	}
	m.causal = st.Attr.Causal
	if m.padding, m.padID = st.Attr.Padding, st.Attr.PadID; m.padding {
		m.ids = st.In[1]
	}
	m.steps = append(m.steps, j)
	probs := st.Out[0]
	if j, st, ok = next(probs); ok && st.Kernel == KDropout {
		m.rate = st.Attr.Rate
		m.steps = append(m.steps, j)
		probs = st.Out[0]
		j, st, ok = next(probs)
	} else if !ok {
		// an inference plan's dropout: a view of the probabilities
		if j, ok = soleViewReader(p, probs); ok {
			st = p.Forward[j]
			probs = st.In[0]
		}
	}
	if !ok || st.Kernel != KMatMul || st.In[0] != probs {
		return m, false
	}
	m.v = st.In[1]
	vs := p.shapeOf(m.v)
	if len(vs) != r || !equalShapes(vs[:r-2], qs[:r-2]) || vs[r-2] != ks[r-1] || vs[r-1] != qs[r-1] {
		return m, false
	}
	m.steps = append(m.steps, j)
	return m, true
}

// uniqueName returns base, or base with a counter when a buffer of p has
// that name.
func uniqueName(p *Plan, base string) string {
	taken := map[string]bool{}
	for _, b := range p.Buffers {
		taken[b.Name] = true
	}
	n := base
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s.%d", base, i)
	}
	return n
}
