package onnx

import (
	"fmt"
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
