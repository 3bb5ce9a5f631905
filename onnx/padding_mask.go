package onnx

import (
	"fmt"
	"math"
)

// A key padding mask hides from attention the keys whose token id is the
// padding id. A nanoGPT-style model masks them as
//
//	att = att.masked_fill((idx == PAD)[:, None, None, :], float('-inf'))
//
// before or after the causal mask, and PyTorch 1.13 exports that, at
// opsets 13 and 17, as
//
//	Equal(idx, PAD) [B, T] → Unsqueeze(1) → Unsqueeze(2) → Cast(bool) [B, 1, 1, T]
//	→ Where(mask, -inf, scores [B, H, T, T])
//
// ((idx == PAD).view(B, 1, 1, T) writes a Reshape to [batch, 1, 1, T] in
// place of the Unsqueezes). The additive form,
// att + (idx == PAD)[:, None, None, :].float() * -1e9, writes Cast(float),
// a Mul by the fill and an Add. The importer follows the mask from the
// Equal as a value with no layer (value.keyPad), marks the scores that
// the Where or Add masks (value.padded), and the Softmax over the keys
// that reads them becomes one softmax with `pad: PAD` (and `causal:
// true` when the causal mask is there too): mlbuild's padding mask reads
// the model input, the same token ids [T] that the embedding reads.

// keyPadding is a padding mask computed from the model's token ids: true
// (or 1, once cast to float) where an id is the padding id.
type keyPadding struct {
	id    int    // the padding token id
	equal string // the Equal node that compares the ids with it
	// float is set once the mask is cast to float; scaled once a Mul
	// gives it its fill, the additive mask's value at padded keys.
	float  bool
	scaled bool
	fill   float64
}

// paddedScores marks attention scores masked at the padding keys, pending
// until a Softmax over the keys takes the mask as its pad field.
type paddedScores struct {
	id int    // the padding token id
	by string // the Where or Add node that applied the mask
}

// padMaskFix says how to write a padding mask that the importer takes.
const padMaskFix = "mask padding keys with att.masked_fill((idx == PAD)[:, None, None, :], float('-inf')) right before the softmax, idx being the model's input ids and PAD one integer id"

// padMaskReaders are the ops that may read a padding mask, and at which
// input (-1: either).
var padMaskReaders = map[string]int{"Unsqueeze": 0, "Reshape": 0, "Cast": 0, "Identity": 0, "Where": 0, "Mul": -1, "Add": -1}

// padMaskRead refuses a node that reads a padding mask other than on its
// way to attention scores.
func padMaskRead(n *Node, j int, v *value) error {
	if v.keyPad == nil {
		return nil
	}
	if at, ok := padMaskReaders[n.OpType]; ok && (at < 0 || at == j) {
		return nil
	}
	return unsupported(padMaskFix, "reads the padding mask of node %s (the token ids == %d) as input %d; mlbuild takes a padding mask only to mask attention scores: Unsqueeze or Reshape to [batch, 1, …, 1, T], then Where(mask, -inf, scores) (masked_fill), or Cast to float, Mul by a fill of -1e9 or below and Add to the scores", v.keyPad.equal, v.keyPad.id, j)
}

// maskedBy names the node whose mask on attention scores v is pending
// (the causal mask's first), or "" when none is.
func (v *value) maskedBy() string {
	switch {
	case v.causal != "":
		return v.causal
	case v.padded != nil:
		return v.padded.by
	}
	return ""
}

// equalTokenIDs imports Equal of the model's token ids with one integer
// id as a padding mask.
func equalTokenIDs(c *nodeCtx) (string, error) {
	ids, other := c.ins[0], c.ins[1]
	if !ids.tokenIDs {
		ids, other = other, ids
	}
	if other.konst == nil {
		return "", unsupported(padMaskFix, "Equal of the token ids with a value that depends on the model input; mlbuild takes Equal of the token ids only as a padding mask, the ids == one constant id")
	}
	k := other.konst
	v, ok := k.scalar()
	if !ok || k.size() != 1 || !k.ints || v < 0 || v > math.MaxInt32 {
		return "", unsupported(padMaskFix, "Equal of the token ids with %s; a padding mask compares them with one integer id, 0 or more", constText(k))
	}
	mask := &keyPadding{id: int(v), equal: c.name}
	return fmt.Sprintf("folded: padding mask (token ids == %d), taken by the softmax that reads the masked scores", mask.id),
		c.setOutput(&value{shape: ids.shape, lshape: ids.shape, keyPad: mask})
}

// viewPadMask gives the padding mask v the per-sample shape s (Unsqueeze
// or Reshape; the batch axis stays first).
func (c *nodeCtx) viewPadMask(v *value, s []int) (string, error) {
	return "folded: padding mask viewed as " + shapeText(s), c.setOutput(&value{shape: s, lshape: s, keyPad: v.keyPad})
}

// castPadMask imports a Cast of a padding mask: to bool it stays the
// mask, to float it becomes 1 where the ids are padding (the additive
// form, which a Mul gives its fill).
func (c *nodeCtx) castPadMask(v *value, to DataType) (string, error) {
	mask := *v.keyPad
	switch to {
	case Bool:
	case Float:
		if mask.scaled {
			return "", unsupported(padMaskFix, "Cast of an additive padding mask")
		}
		mask.float = true
	default:
		return "", unsupported(padMaskFix, "Cast of the padding mask of node %s to %v; mlbuild takes it as bool (masked_fill) or float32 (an additive mask)", mask.equal, to)
	}
	return "folded: padding mask cast to " + to.String(), c.setOutput(&value{shape: v.shape, lshape: v.shape, keyPad: &mask})
}

// binaryPadMask imports a Mul of a padding mask cast to float by its fill
// (a scalar constant of -1e9 or below), and an Add of the scaled mask to
// attention scores.
func (c *nodeCtx) binaryPadMask(a, b *value) (string, error) {
	m, other := a, b
	if m.keyPad == nil {
		m, other = b, a
	}
	mask := *m.keyPad
	switch c.n.OpType {
	case "Mul":
		if other.konst == nil || !mask.float || mask.scaled {
			return "", unsupported(padMaskFix, "Mul of the padding mask of node %s by a value that depends on the model input, or of a mask that is not a float 0/1 mask; an additive padding mask is (idx == PAD).float() times one constant fill", mask.equal)
		}
		fill, ok := other.konst.scalar()
		switch {
		case !ok || other.konst.size() != 1:
			return "", unsupported(padMaskFix, "Mul of the padding mask by %s; an additive padding mask multiplies it by one fill", constText(other.konst))
		case math.IsInf(fill, -1):
			return "", unsupported(padMaskFix, "Mul of the padding mask by -inf: where an id is not padding that is 0 · -inf, NaN (in PyTorch too), and the softmax's every probability is NaN; use masked_fill, or a finite fill such as -1e9")
		case !maskFill(fill):
			return "", unsupported(padMaskFix, "Mul of the padding mask by %v; an additive padding mask fills with -1e9 or below, whose exp is 0", fill)
		}
		mask.scaled, mask.fill = true, fill
		return fmt.Sprintf("folded: additive padding mask (%v where the token ids == %d)", fill, mask.id),
			c.setOutput(&value{shape: m.shape, lshape: m.shape, keyPad: &mask})
	case "Add":
		if other.konst != nil || other.keyPad != nil || !mask.scaled {
			return "", unsupported(padMaskFix, "Add of the padding mask of node %s to a constant, to another mask, or before a Mul gives it its fill; an additive padding mask is (idx == PAD).float() * -1e9 added to attention scores", mask.equal)
		}
		return c.padScores(m, other)
	}
	return "", unsupported(padMaskFix, "%s of a padding mask", c.n.OpType)
}

// wherePadMask imports Where(mask, fill, scores) of a padding mask —
// masked_fill(mask, -inf) — as padded scores.
func (c *nodeCtx) wherePadMask(cond, a, b *value) (string, error) {
	if cond.keyPad.float {
		return "", unsupported(padMaskFix, "Where whose condition is the padding mask cast to float")
	}
	if a.konst == nil || b.konst != nil {
		return "", unsupported(padMaskFix, "Where(padding mask, x, y) choosing a runtime value where the ids are padding; mlbuild takes it only as masked_fill(mask, -inf) of attention scores, Where(mask, -inf, scores)")
	}
	fill, ok := a.konst.scalar()
	if !ok || !maskFill(fill) {
		return "", unsupported(padMaskFix, "Where filling the padding keys with %s; a padding mask fills with -inf (or -1e9 and below)", constText(a.konst))
	}
	return c.padScores(cond, b)
}

// padScores marks the attention scores x masked at the keys where the
// padding mask m holds: m must be [1, …, 1, T] per sample, of x's rank
// (so that its batch axis is x's), T being the number of token ids and
// x's last axis, the keys.
func (c *nodeCtx) padScores(m, x *value) (string, error) {
	mask := m.keyPad
	t := product(m.shape) // the number of token ids
	if x.lazy != nil || len(x.shape) < 2 || x.shape[len(x.shape)-1] != t {
		return "", unsupported(padMaskFix, "the padding mask of node %s (of %d token ids) masks a value of shape %s; a padding mask applies to attention scores [..., queries, %d keys]", mask.equal, t, shapeText(x.shape), t)
	}
	if len(m.shape) != len(x.shape) || m.shape[len(m.shape)-1] != t {
		return "", unsupported(padMaskFix, "the padding mask of node %s has shape %s per sample against scores %s; it must hide keys, the scores' last axis, for every query and head: [1, …, 1, %d] of the scores' rank ((idx == PAD)[:, None, None, :])", mask.equal, shapeText(m.shape), shapeText(x.shape), t)
	}
	if x.padded != nil && x.padded.id != mask.id {
		return "", unsupported(padMaskFix, "the scores are masked at padding id %d by node %s and at id %d here; mlbuild masks one padding id per softmax", x.padded.id, x.padded.by, mask.id)
	}
	name := c.im.materialize(x)
	out := &value{layer: name, lshape: x.shape, shape: x.shape, causal: x.causal, standIn: x.standIn, padded: &paddedScores{id: mask.id, by: c.name}}
	return fmt.Sprintf("folded: padding mask (token ids == %d), taken by the softmax that reads it", mask.id), c.setOutput(out)
}
