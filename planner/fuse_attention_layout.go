package planner

import (
	"fmt"
	"strings"
)

// fuseAttentionLayout lets a fused attention read its q, k and v and
// write its output token-major, [B, T, H, D], as a transformer's
// projections write and read them, in the place of the transposes that
// split the heads ([B, T, H, D] → [B, H, T, D], and kᵀ [B, H, D, T]) and
// merge them back: four copies of a layer's activations each way in a
// training step.
//
// Before: fuseAttention has run; no backward steps exist yet. After: in a
// training plan, each KAttention step whose q and v are the outputs of
// transposes [0 2 1 3] and whose kᵀ is the output of a transpose
// [0 2 3 1] of [B, T, H, D] values, each read by the attention alone, and
// whose output is read by a transpose [0 2 1 3] alone, reads those
// values (In q, k, v [B, T, H, D]) and writes that transpose's output
// [B, Tq, H, D]; its Attr.Perm is [0 2 1 3] (AttentionHeadShapes) and its
// lse stays [B, H, Tq]; the four transposes and their outputs are gone,
// and differentiate gives the step a KAttentionBwd of token-major
// operands and gradients. Other steps and buffers are unchanged.
// Inference plans keep their transposes: derive_decode.go finds the
// heads of the cached attention by them.
func fuseAttentionLayout(p *Plan) {
	removed := make([]bool, len(p.Forward))
	for i := range p.Forward {
		s := &p.Forward[i]
		if s.Kernel != KAttention || s.Attr.Perm != nil || len(p.shapeOf(s.In[0])) != 4 {
			continue
		}
		var split [3]int
		ok := true
		for k, perm := range [][]int{headsPerm, keysPerm, headsPerm} {
			split[k], ok = transposeInto(p, s.In[k], perm)
			if !ok {
				break
			}
			if r, sole := soleForwardReader(p, s.In[k]); !sole || r != i {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		m, sole := soleForwardReader(p, s.Out[0])
		if !sole || p.Forward[m].Kernel != KTranspose || !equalShapes(p.Forward[m].Attr.Perm, headsPerm) {
			continue
		}
		merge := &p.Forward[m]
		var layers []string
		for k, j := range split {
			layers = append(layers, p.Forward[j].Layer)
			s.In[k] = p.Forward[j].In[0]
		}
		layers = append(layers, merge.Layer)
		s.Out[0] = merge.Out[0]
		s.Attr.Perm = append([]int(nil), headsPerm...)
		s.Fused = append(fusedNames(s), layers...)
		for _, j := range append(split[:], m) {
			p.Forward[j].In = nil
			removed[j] = true
		}
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s + %s -> token-major attention", strings.Join(layers, " + "), s.Layer))
	}
	p.dropForward(removed)
}

// headsPerm splits a [B, T, H, D] value's heads, [B, H, T, D], and merges
// them back; keysPerm makes kᵀ [B, H, D, T] of k [B, T, H, D].
var headsPerm, keysPerm = []int{0, 2, 1, 3}, []int{0, 2, 3, 1}

// transposeInto returns the forward step that writes id as a transpose
// by perm.
func transposeInto(p *Plan, id BufID, perm []int) (int, bool) {
	for j, s := range p.Forward {
		if len(s.Out) > 0 && s.Out[0] == id {
			return j, s.Kernel == KTranspose && equalShapes(s.Attr.Perm, perm)
		}
	}
	return 0, false
}

// AttentionHeadShapes are a fused attention step's q, kᵀ and v shapes
// over its heads, [..., Tq, D], [..., D, Tk] and [..., Tk, D], from its
// operands' shapes q, k, v and its Attr.Perm: nil, they are those shapes
// (k is kᵀ); [0 2 1 3], they are token-major [B, T, H, D], k too, and
// the heads' shapes their transposes [B, H, T, D] and [B, H, D, Tk]. ok
// is false for another Perm or operands not of rank 4 with it.
func AttentionHeadShapes(q, k, v, perm []int) (qh, kt, vh []int, ok bool) {
	if perm == nil {
		return q, k, v, true
	}
	if !equalShapes(perm, headsPerm) || len(q) != 4 || len(k) != 4 || len(v) != 4 {
		return nil, nil, nil, false
	}
	permute := func(s, perm []int) []int {
		r := make([]int, len(perm))
		for i, a := range perm {
			r[i] = s[a]
		}
		return r
	}
	return permute(q, headsPerm), permute(k, keysPerm), permute(v, headsPerm), true
}
