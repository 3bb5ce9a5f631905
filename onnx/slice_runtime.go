package onnx

import (
	"fmt"
	"slices"
	"strings"
)

// Slices of runtime values that are not a packed projection's features
// (split_dense.go): a ShuffleNet block splits its channels with
// x.chunk(2, dim=1), which PyTorch exports as a Split or as Slices along
// axis 1. Each piece becomes a slice layer (axis, start, end; step 1) of
// the value, per-sample axes, the batch axis whole.

// featuresOfDense reports whether the ranges lo, count (per axis of the
// full shape) take features only (the last axis) of a dense layer's
// output, which sliceDense turns into a dense layer of its own.
func (c *nodeCtx) featuresOfDense(x *value, lo, count []int) bool {
	if _, err := c.packedDense(x); err != nil {
		return false
	}
	full := x.fullDims()
	for ax := range full[:len(full)-1] {
		if lo[ax] != 0 || count[ax] != full[ax] {
			return false
		}
	}
	return true
}

// sliceRuntime imports a Slice of runtime value x with ranges lo, count
// and step per axis of the full shape as one slice layer per axis it
// narrows (none: the value itself).
func (c *nodeCtx) sliceRuntime(x *value, lo, count, step []int) (string, error) {
	full := x.fullDims()
	v := x
	var how []string
	for ax := range full {
		if ax == 0 {
			continue // importSlice refuses a slice of the batch axis
		}
		if lo[ax] == 0 && count[ax] == full[ax] && step[ax] == 1 {
			continue
		}
		if step[ax] != 1 {
			return "", unsupported("", "Slice with step %d along axis %d; mlbuild's slice takes every element of a range (step 1)", step[ax], ax)
		}
		if count[ax] == 0 {
			return "", unsupported("", "Slice of no elements along axis %d", ax)
		}
		name := c.im.layerName(c.n, "slice")
		if len(how) > 0 {
			name = c.im.layerName(&Node{Name: fmt.Sprintf("%s_%d", c.n.Name, ax), OpType: c.n.OpType}, "slice")
		}
		v = c.slicePiece(name, v, ax, lo[ax], lo[ax]+count[ax])
		how = append(how, v.layer)
	}
	if len(how) == 0 {
		return "folded: the slice keeps the whole value", c.setOutput(x)
	}
	c.layerName = strings.Join(how, ", ")
	if err := c.setOutput(v); err != nil {
		return "", err
	}
	return "slice", nil
}

// splitRuntime imports a Split of runtime value x along axis ax of the
// full shape (≥ 1) into pieces of the given sizes, one slice layer per
// output that something reads.
func (c *nodeCtx) splitRuntime(x *value, ax int, sizes []int64) (string, error) {
	var names []string
	lo := 0
	for i, s := range sizes {
		hi := lo + int(s)
		if i < len(c.n.Outputs) && c.n.Outputs[i] != "" && c.im.uses[c.n.Outputs[i]] > 0 {
			name := c.im.layerName(&Node{Name: fmt.Sprintf("%s_%d", c.n.Name, i), OpType: c.n.OpType}, "slice")
			v := c.slicePiece(name, x, ax, lo, hi)
			c.im.vals[c.n.Outputs[i]] = v
			c.im.layerValues[v.layer] = append(c.im.layerValues[v.layer], c.n.Outputs[i])
			names = append(names, v.layer)
		}
		lo = hi
	}
	c.layerName = strings.Join(names, ", ")
	return fmt.Sprintf("slice ×%d", len(names)), nil
}

// slicePiece adds a slice layer named name keeping positions lo to hi−1
// of axis ax (of the full shape, ≥ 1) of x, and returns its value.
func (c *nodeCtx) slicePiece(name string, x *value, ax, lo, hi int) *value {
	out := append([]int(nil), x.shape...)
	out[ax-1] = hi - lo
	l := &Layer{Name: name, Op: "slice", OutShape: out, Source: c.name + " (" + c.n.OpType + ")",
		Fields: []Field{{"axis", ax - 1}, {"start", lo}, {"end", hi}}}
	return c.im.addLayer(l, x)
}

// gatherRuntime imports a Gather of runtime value x at constant indices
// that are one index, or a run of consecutive ones, along a per-sample
// axis as a slice layer: nanoGPT's inference forward keeps the last
// token's features with x[:, [-1], :] before its head. A scalar index
// drops the axis (a view of the slice).
func (c *nodeCtx) gatherRuntime(x *value) (string, error) {
	idx, err := c.konst(1, "indices")
	if err != nil {
		return "", err
	}
	a, err := c.attrInt("axis", 0)
	if err != nil {
		return "", err
	}
	full := x.fullDims()
	ax, err := c.axis(a, len(full))
	if err != nil {
		return "", err
	}
	const fix = "take a range of positions (x[:, i:j]) rather than a list of them"
	if ax == 0 {
		return "", unsupported("", "Gather along the batch axis; mlbuild's batch axis is implicit")
	}
	if len(idx.dims) > 1 || idx.size() == 0 || idx.hasBatch() {
		return "", unsupported(fix, "Gather of a value that depends on the model input at indices of shape %s; mlbuild takes one index, or consecutive ones, of one axis (a slice)", shapeText(idx.dims))
	}
	n := full[ax]
	lo := int(idx.vals[0])
	if lo < 0 {
		lo += n
	}
	for i, v := range idx.vals {
		j := int(v)
		if j < 0 {
			j += n
		}
		if j != lo+i || j < 0 || j >= n {
			return "", unsupported(fix, "Gather at indices %v along axis %d (size %d); mlbuild takes one index, or consecutive ones in order, of one axis (a slice)", idx.vals, ax, n)
		}
	}
	v := c.slicePiece(c.im.layerName(c.n, "slice"), x, ax, lo, lo+idx.size())
	c.layerName = v.layer
	if len(idx.dims) == 0 {
		// a scalar index drops the axis
		s := slices.Delete(slices.Clone(v.shape), ax-1, ax)
		if len(s) == 0 {
			return "", unsupported("", "Gather leaves a scalar per sample")
		}
		return "slice (the axis dropped)", c.setOutput(c.reshaped(v, s))
	}
	return "slice", c.setOutput(v)
}
