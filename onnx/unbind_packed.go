package onnx

import (
	"fmt"
	"slices"
	"strings"
)

// A packed projection taken apart along a new first axis: timm's (and
// many a ViT's) attention writes
//
//	qkv = Linear(x).reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)
//	q, k, v = qkv.unbind(0)
//
// which PyTorch exports as a Reshape (a pending view of the dense layer),
// a Transpose that moves the batch axis to the second place, then a Split
// along axis 0 and a Squeeze of each piece (or a Gather of one index).
// mlbuild's batch axis stays first, so the Transpose alone has no
// counterpart; but each piece puts the batch first again, and it is a
// range of the dense layer's features (entry i of the axis of size 3
// holds features [i·H·d, (i+1)·H·d)). The Transpose is held pending
// (value.moved), the Split narrows it, and the Squeeze or Gather that
// takes one entry writes the piece:
//
//	dense(x, W[i·H·d : (i+1)·H·d])   [N, H·d]
//	reshape to [N, H, d], transpose to [H, N, d]
//
// A pending Transpose read by any other node is reported there.

// movedBatch is a Transpose whose perm moves the batch axis, not written.
type movedBatch struct {
	src    *value // what the Transpose reads
	perm   []int  // its perm, over the full axes
	lo, hi int    // the entries of the new first axis still held
	node   string // the Transpose, for messages
	// reported is set once a node that cannot read it was reported
	reported bool
}

// movedConsumers are the ops that read a pending moved Transpose.
var movedConsumers = map[string]bool{"Split": true, "Squeeze": true, "Gather": true}

// splitMoved imports a Split along axis 0 of a pending Transpose: each
// output holds a range of its first axis, still pending.
func (c *nodeCtx) splitMoved(m *movedBatch, ax int, sizes []int64) (string, error) {
	if ax != 0 {
		return "", unsupported("", "Split along axis %d of the output of Transpose node %s, which moves the batch axis; mlbuild takes that output apart only along its first axis", ax, m.node)
	}
	lo := m.lo
	for i, s := range sizes {
		piece := *m
		piece.lo, piece.hi = lo, lo+int(s)
		lo += int(s)
		if o := c.n.Outputs[i]; o != "" {
			c.im.vals[o] = &value{moved: &piece}
		}
	}
	return fmt.Sprintf("pending: %d pieces of the Transpose's first axis", len(sizes)), nil
}

// takeMoved writes entry i (of the whole first axis) of a pending
// Transpose: the dense layer's features of that entry, viewed and
// transposed as the Transpose's other axes say.
func (c *nodeCtx) takeMoved(m *movedBatch, i int) (string, error) {
	if i < m.lo || i >= m.hi {
		return "", unsupported("", "index %d is outside entries %d to %d", i, m.lo, m.hi-1)
	}
	p := m.perm
	if len(p) < 3 || p[1] != 0 {
		return "", unsupported("", "after taking one entry of the first axis of Transpose node %s (perm %v) the batch axis is not first; mlbuild's batch axis stays first", m.node, p)
	}
	x := m.src
	var l *Layer
	for _, cand := range c.im.out.Layers {
		if cand.Name == x.layer && cand.Op == "dense" && slices.Equal(x.lshape, cand.OutShape) {
			l = cand
		}
	}
	a := p[0] - 1 // the per-sample axis taken from
	v, lshape := x.shape, x.lshape
	if l == nil || a >= len(v) || product(v[a:]) != lshape[len(lshape)-1] || product(v[:a]) != product(lshape[:len(lshape)-1]) {
		return "", unsupported("split the projection into one Linear per piece", "Transpose node %s moves the batch axis; mlbuild takes its output apart only when it is a view of a dense layer's output whose features the axis taken splits (a packed projection)", m.node)
	}
	block := product(v[a+1:])
	piece := c.densePiece(l, i*block, (i+1)*block, i)
	out := piece
	// the piece viewed as the Transpose's input without the axis taken
	target := slices.Concat(v[:a], v[a+1:])
	if !slices.Equal(target, piece.shape) {
		r := c.pieceLayer(piece.layer+"_heads", "reshape", target)
		r.Fields = []Field{{"shape", target}}
		out = c.im.addLayer(r, out)
	}
	// the remaining axes in the Transpose's order: full axes of the source
	// without the one taken, renumbered, then per sample
	var perm []int
	ident := true
	for _, j := range p[2:] {
		if j > p[0] {
			j--
		}
		perm = append(perm, j-1)
		ident = ident && j-1 == len(perm)-1
	}
	if !ident {
		shape := make([]int, len(perm))
		for k, j := range perm {
			shape[k] = target[j]
		}
		t := c.pieceLayer(piece.layer+"_t", "transpose", shape)
		t.Fields = []Field{{"perm", perm}}
		out = c.im.addLayer(t, out)
	}
	c.layerName = out.layer
	if err := c.setOutput(out); err != nil {
		return "", err
	}
	c.im.pieces[l.Name] = append(c.im.pieces[l.Name], piece.layer)
	return fmt.Sprintf("dense (features %d to %d of %s, entry %d of Transpose %s's first axis)", i*block, (i+1)*block, l.Name, i, m.node), nil
}

// pieceLayer makes a layer named after a piece (qkv_0_heads).
func (c *nodeCtx) pieceLayer(name, op string, out []int) *Layer {
	return &Layer{Name: c.im.layerName(&Node{Name: name}, op), Op: op, OutShape: out, Source: c.name + " (" + c.n.OpType + ")"}
}

// dropPacked removes the packed dense layers that pieces replaced and
// that no layer reads any more (the Reshape and Transpose between them
// were never written).
func (im *importer) dropPacked(output string) {
	for name, pieces := range im.pieces {
		if name == output || slices.ContainsFunc(im.out.Layers, func(l *Layer) bool { return slices.Contains(l.Inputs, name) }) {
			continue
		}
		n := len(im.out.Layers)
		im.out.Layers = slices.DeleteFunc(im.out.Layers, func(l *Layer) bool { return l.Name == name })
		if len(im.out.Layers) == n {
			continue
		}
		for i, m := range im.out.Mapping {
			if m.Layer == name {
				im.out.Mapping[i].Layer = ""
				im.out.Mapping[i].How = "folded: split into dense layers " + strings.Join(pieces, ", ")
			}
		}
	}
}
