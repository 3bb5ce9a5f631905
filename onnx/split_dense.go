package onnx

import (
	"fmt"
	"slices"
	"strings"
)

// A packed projection split into pieces: PyTorch's attention computes q,
// k and v with one Linear and splits its output along the features, by
// `chunk` (exported as Slices) or `split` (a Split):
//
//	h = MatMul(x, W) + b        [..., 3·d]
//	q, k, v = Split(h, axis=-1) (or three Slices of the last axis)
//
// mlbuild has no slice op, and needs none here: the features of one piece
// are the rows of the weight (and the entries of the bias) that compute
// them, so each piece becomes a dense layer of its own, reading the packed
// layer's input:
//
//	q = dense(x, W[0:d]), k = dense(x, W[d:2d]), v = dense(x, W[2d:3d])
//
// The packed layer is removed once every read of it is a piece. A slice
// of anything else (an activation's output, a slice across tokens) has no
// counterpart and is reported.

// packedDense returns the dense layer whose output x is, when x is a
// dense layer's output as it produced it (no view).
func (c *nodeCtx) packedDense(x *value) (*Layer, error) {
	if x.konst == nil && x.view == nil && x.layer != "input" {
		for _, l := range c.im.out.Layers {
			if l.Name == x.layer && l.Op == "dense" && slices.Equal(x.shape, l.OutShape) {
				return l, nil
			}
		}
	}
	return nil, unsupported("split the projection into one Linear per piece", "%s of a value computed at run time; mlbuild takes pieces of the features only of a dense layer's output (a packed projection, whose pieces become dense layers of their own)", c.n.OpType)
}

// densePiece adds a dense layer computing features [lo, hi) of the
// packed layer l, named after it and the piece's number (qkv_0, qkv_1,
// qkv_2), and returns its value.
func (c *nodeCtx) densePiece(l *Layer, lo, hi, piece int) *value {
	units := l.OutShape[len(l.OutShape)-1]
	w := l.Params[0].Data
	k := len(w) / units
	name := c.im.layerName(&Node{Name: fmt.Sprintf("%s_%d", l.Name, piece), OpType: c.n.OpType}, "dense")
	p := &Layer{Name: name, Op: "dense", Inputs: slices.Clone(l.Inputs),
		OutShape: append(slices.Clone(l.OutShape[:len(l.OutShape)-1]), hi-lo),
		Source:   fmt.Sprintf("%s, features %d to %d of %s", c.name, lo, hi, l.Source)}
	for _, f := range l.Fields {
		if f.Name == "units" {
			f.Value = hi - lo
		}
		p.Fields = append(p.Fields, f)
	}
	p.Params = []Param{{Suffix: "weight", Shape: []int{hi - lo, k}, Data: slices.Clone(w[lo*k : hi*k])}}
	if len(l.Params) > 1 {
		p.Params = append(p.Params, Param{Suffix: "bias", Shape: []int{hi - lo}, Data: slices.Clone(l.Params[1].Data[lo:hi])})
	}
	c.im.out.Layers = append(c.im.out.Layers, p)
	return &value{layer: p.Name, lshape: p.OutShape, shape: p.OutShape}
}

// spendPacked records that this node's read of the packed layer l (its
// input 0) is spent, and removes l once nothing else reads it; the
// mapping of the nodes that made l then says where its features went.
func (c *nodeCtx) spendPacked(l *Layer, pieces []string) {
	c.im.uses[c.n.Inputs[0]]--
	c.im.pieces[l.Name] = append(c.im.pieces[l.Name], pieces...)
	if c.im.layerReads(l.Name) > 0 {
		return
	}
	c.im.out.Layers = slices.DeleteFunc(c.im.out.Layers, func(x *Layer) bool { return x == l })
	for i, m := range c.im.out.Mapping {
		if m.Layer == l.Name {
			c.im.out.Mapping[i].Layer = ""
			c.im.out.Mapping[i].How = "folded: split into dense layers " + strings.Join(c.im.pieces[l.Name], ", ")
		}
	}
}

// sliceDense imports a Slice of a dense layer's output along its last
// axis, step 1: ranges of the full shape, per axis of the full shape.
func (c *nodeCtx) sliceDense(x *value, lo, count, step []int) (string, error) {
	l, err := c.packedDense(x)
	if err != nil {
		return "", err
	}
	full := x.fullDims()
	last := len(full) - 1
	for ax := range full {
		if ax != last && (lo[ax] != 0 || count[ax] != full[ax]) {
			return "", unsupported("", "Slice of a dense layer's output along axis %d; mlbuild takes pieces of its features (the last axis) only", ax)
		}
	}
	if step[last] != 1 || count[last] == 0 {
		return "", unsupported("", "Slice of the features with step %d and %d elements; mlbuild takes a contiguous, non-empty piece", step[last], count[last])
	}
	v := c.densePiece(l, lo[last], lo[last]+count[last], len(c.im.pieces[l.Name]))
	c.layerName = v.layer
	if err := c.setOutput(v); err != nil {
		return "", err
	}
	c.spendPacked(l, []string{v.layer})
	return fmt.Sprintf("dense (features %d to %d of %s)", lo[last], lo[last]+count[last], l.Name), nil
}

// importSplit imports a Split of a dense layer's output along its last
// axis as dense layers, and of any other runtime value along a per-sample
// axis as slice layers (sizes from the split attribute before opset 13,
// its input from 13, or equal pieces, num_outputs from 18).
func importSplit(c *nodeCtx) (string, error) {
	if !c.has(0) {
		return "", unsupported("", "Split needs an input")
	}
	x := c.ins[0]
	if x.konst != nil {
		return "", unsupported("", "Split of a constant")
	}
	a, err := c.attrInt("axis", 0)
	if err != nil {
		return "", err
	}
	if m := x.moved; m != nil {
		ax, err := c.axis(a, len(m.perm))
		if err != nil {
			return "", err
		}
		sizes, err := c.splitSizes(m.hi - m.lo)
		if err != nil {
			return "", err
		}
		return c.splitMoved(m, ax, sizes)
	}
	full := x.fullDims()
	ax, err := c.axis(a, len(full))
	if err != nil {
		return "", err
	}
	if ax == 0 {
		return "", unsupported("", "Split along the batch axis; mlbuild splits the axes of each sample")
	}
	sizes, err := c.splitSizes(full[ax])
	if err != nil {
		return "", err
	}
	l, err := c.packedDense(x)
	if err != nil || ax != len(full)-1 {
		return c.splitRuntime(x, ax, sizes)
	}
	var names []string
	lo := 0
	for i, s := range sizes {
		o := c.n.Outputs[i]
		hi := lo + int(s)
		if o != "" && c.im.uses[o] > 0 {
			v := c.densePiece(l, lo, hi, i)
			c.im.vals[o] = v
			c.im.layerValues[v.layer] = append(c.im.layerValues[v.layer], o)
			names = append(names, v.layer)
		}
		lo = hi
	}
	c.layerName = strings.Join(names, ", ")
	c.spendPacked(l, names)
	return fmt.Sprintf("dense ×%d (pieces of the features of %s)", len(names), l.Name), nil
}

// splitSizes reads a Split's sizes for an axis of n entries: the split
// attribute before opset 13, its input from 13, or equal pieces (as many
// as outputs, or num_outputs from opset 18, the last maybe smaller). Each
// is at least 1, and they add up to n.
func (c *nodeCtx) splitSizes(n int) ([]int64, error) {
	var sizes []int64
	var err error
	if c.im.opset < 13 {
		sizes, _, err = c.attrInts("split")
		if err != nil {
			return nil, err
		}
	} else if c.has(1) {
		k, err := c.konst(1, "split")
		if err != nil {
			return nil, err
		}
		for _, v := range k.vals {
			sizes = append(sizes, int64(v))
		}
	}
	outs := len(c.n.Outputs)
	if sizes == nil {
		parts := int64(outs)
		if np, err := c.attrInt("num_outputs", 0); err != nil {
			return nil, err
		} else if np > 0 {
			parts = np
		}
		if parts != int64(outs) || parts <= 0 {
			return nil, unsupported("", "Split into %d pieces with %d outputs", parts, outs)
		}
		each := (int64(n) + parts - 1) / parts
		for i := range parts {
			sizes = append(sizes, min(each, int64(n)-i*each))
		}
	}
	if len(sizes) != outs {
		return nil, unsupported("", "Split sizes %v for %d outputs", sizes, outs)
	}
	total := int64(0)
	for _, s := range sizes {
		if s <= 0 {
			return nil, unsupported("", "Split sizes %v: mlbuild takes non-empty pieces", sizes)
		}
		total += s
	}
	if total != int64(n) {
		return nil, unsupported("", "Split sizes %v do not add up to the %d entries of the axis", sizes, n)
	}
	return sizes, nil
}
