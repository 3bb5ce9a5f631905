package onnx

import (
	"fmt"
	"slices"
	"strings"
)

// Exporters before ONNX opset 17 (which has LayerNormalization) write
// layer normalisation out: PyTorch's nn.LayerNorm becomes
//
//	mean = ReduceMean(x), d = Sub(x, mean), Pow(d, 2) (or Mul(d, d)),
//	var = ReduceMean(·), Add(var, eps), std = Sqrt(·), Div(d, std),
//	Mul(·, weight), Add(·, bias)
//
// findWrittenLayerNorm finds those sub-graphs, so the importer can write
// them as one layernorm layer whose weight and bias are the constants of
// the last Mul and Add (either may be missing: no affine transform).
//
// Before: the chain above, both ReduceMeans over the same axes and
// keeping them, eps a scalar constant, every intermediate value read only
// inside the pattern (d by the square and the Div).
// After: every node of a pattern maps to it. At the first node, once x's
// shape is known, importWrittenLayerNorm checks that the axes are the
// trailing per-sample axes; if not, the nodes are imported one by one.

// writtenLayerNorm is one recognised pattern.
type writtenLayerNorm struct {
	x            string // the value normalised
	means        [2]int // the two ReduceMean nodes
	eps          float64
	scale, bias  string // constant value names, "" when absent
	last         int    // the node whose output is the result
	nodes        []int  // every node, in graph order
	axis         int    // the first normalised per-sample axis, set at the first node
	fallback     bool   // the checks at the first node failed: import the nodes one by one
	checkedFirst bool
}

// findWrittenLayerNorm returns the patterns by the index of each of their
// nodes. isConst reports whether a value is known before any node runs
// (an initializer or a Constant node's output).
func findWrittenLayerNorm(g *Graph, scalarOf func(name string) (float64, bool), isConst func(name string) bool, uses map[string]int) map[int]*writtenLayerNorm {
	producer := map[string]int{}
	consumers := map[string][]int{}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			producer[o] = i
		}
		for _, in := range n.Inputs {
			consumers[in] = append(consumers[in], i)
		}
	}
	near := func(name string, want float64) bool {
		v, ok := scalarOf(name)
		return ok && v == want
	}
	// only returns the single consumer (of op) of a value read once.
	only := func(name, op string) (int, bool) {
		cs := consumers[name]
		if uses[name] != 1 || len(cs) != 1 || g.Nodes[cs[0]].OpType != op || len(g.Nodes[cs[0]].Outputs) < 1 {
			return 0, false
		}
		return cs[0], true
	}
	// constOperand returns the operand of a two-input node other than
	// name when it is a constant.
	constOperand := func(n *Node, name string) (string, bool) {
		if len(n.Inputs) != 2 {
			return "", false
		}
		o := n.Inputs[0]
		if o == name {
			o = n.Inputs[1]
		} else if n.Inputs[1] != name {
			return "", false
		}
		return o, o != name && isConst(o)
	}
	out := map[int]*writtenLayerNorm{}
	for im1, m1 := range g.Nodes {
		if m1.OpType != "ReduceMean" || len(m1.Inputs) < 1 || len(m1.Outputs) != 1 {
			continue
		}
		x, mean := m1.Inputs[0], m1.Outputs[0]
		is, ok := only(mean, "Sub")
		if !ok || g.Nodes[is].Inputs[0] != x || g.Nodes[is].Inputs[1] != mean {
			continue
		}
		d := g.Nodes[is].Outputs[0]
		// d is read by the square and by the Div
		var isq, idiv = -1, -1
		for _, ci := range consumers[d] {
			c := g.Nodes[ci]
			switch {
			case c.OpType == "Pow" && len(c.Inputs) == 2 && c.Inputs[0] == d && near(c.Inputs[1], 2):
				isq = ci
			case c.OpType == "Mul" && len(c.Inputs) == 2 && c.Inputs[0] == d && c.Inputs[1] == d:
				isq = ci
			case c.OpType == "Div" && len(c.Inputs) == 2 && c.Inputs[0] == d:
				idiv = ci
			}
		}
		wantUses := 2
		if isq >= 0 && g.Nodes[isq].OpType == "Mul" {
			wantUses = 3
		}
		if isq < 0 || idiv < 0 || uses[d] != wantUses || len(consumers[d]) != wantUses {
			continue
		}
		im2, ok := only(g.Nodes[isq].Outputs[0], "ReduceMean")
		if !ok || g.Nodes[im2].Inputs[0] != g.Nodes[isq].Outputs[0] {
			continue
		}
		iadd, ok := only(g.Nodes[im2].Outputs[0], "Add")
		if !ok {
			continue
		}
		epsName, ok := constOperand(g.Nodes[iadd], g.Nodes[im2].Outputs[0])
		eps, isScalar := scalarOf(epsName)
		if !ok || !isScalar {
			continue
		}
		isqrt, ok := only(g.Nodes[iadd].Outputs[0], "Sqrt")
		if !ok {
			continue
		}
		std := g.Nodes[isqrt].Outputs[0]
		if cs := consumers[std]; uses[std] != 1 || len(cs) != 1 || cs[0] != idiv || g.Nodes[idiv].Inputs[1] != std {
			continue
		}
		p := &writtenLayerNorm{x: x, means: [2]int{im1, im2}, eps: shortFloat(float32(eps)), last: idiv,
			nodes: []int{im1, is, isq, im2, iadd, isqrt, idiv}}
		// the affine transform: Mul by a constant, then Add of one
		y := g.Nodes[idiv].Outputs[0]
		if imul, ok := only(y, "Mul"); ok {
			if w, ok := constOperand(g.Nodes[imul], y); ok {
				p.scale, p.last = w, imul
				p.nodes = append(p.nodes, imul)
				y = g.Nodes[imul].Outputs[0]
			}
		}
		if iadd2, ok := only(y, "Add"); ok {
			if b, ok := constOperand(g.Nodes[iadd2], y); ok {
				p.bias, p.last = b, iadd2
				p.nodes = append(p.nodes, iadd2)
			}
		}
		slices.Sort(p.nodes)
		if p.nodes[0] != im1 {
			continue // the chain is not in graph order from its first mean
		}
		for _, i := range p.nodes {
			out[i] = p
		}
	}
	return out
}

// meanAxes reads a ReduceMean's axes (per-sample, sorted) and keepdims
// before the node is imported, for the pattern's check.
func (im *importer) meanAxes(n *Node, rank int) ([]int, bool, error) {
	var axes []int64
	if im.opset < 18 {
		if a := n.Attr("axes"); a != nil && a.Type == AttrInts {
			axes = a.Ints
		}
	} else if len(n.Inputs) > 1 && n.Inputs[1] != "" {
		v, ok := im.vals[n.Inputs[1]]
		if !ok || v.konst == nil {
			return nil, false, fmt.Errorf("the axes of %s are not known at import time", n.OpType)
		}
		for _, f := range v.konst.vals {
			axes = append(axes, int64(f))
		}
	}
	keep := true
	if a := n.Attr("keepdims"); a != nil && a.Type == AttrInt && a.I == 0 {
		keep = false
	}
	if len(axes) == 0 {
		return nil, false, fmt.Errorf("no axes")
	}
	var out []int
	for _, a := range axes {
		if a < 0 {
			a += int64(rank) + 1
		}
		if a < 1 || a > int64(rank) || slices.Contains(out, int(a-1)) {
			return nil, false, fmt.Errorf("axis %d", a)
		}
		out = append(out, int(a-1))
	}
	slices.Sort(out)
	return out, keep, nil
}

// importWrittenLayerNorm imports node i, which belongs to pattern p.
func (im *importer) importWrittenLayerNorm(i int, n *Node, p *writtenLayerNorm) {
	name := nodeName(i, n)
	g := im.m.Graph
	if !p.checkedFirst {
		p.checkedFirst = true
		p.fallback = !im.checkWrittenLayerNorm(p)
	}
	if p.fallback {
		im.node(i, n)
		return
	}
	if i != p.last {
		im.out.Mapping = append(im.out.Mapping, Mapping{Node: name, Op: n.OpType, How: "folded: part of the written-out layer normalisation, one layernorm layer at node " + nodeName(p.last, g.Nodes[p.last])})
		return
	}
	x := im.vals[p.x]
	var src []string
	for _, j := range p.nodes {
		src = append(src, nodeName(j, g.Nodes[j])+" ("+g.Nodes[j].OpType+")")
	}
	c := &nodeCtx{im: im, n: n, name: name}
	l := &Layer{Name: im.layerName(n, "layernorm"), Op: "layernorm", OutShape: x.shape,
		Source: fmt.Sprintf("layer normalisation written out as %s", strings.Join(src, ", "))}
	konst := func(name string) (*constant, error) {
		if name == "" {
			return nil, nil
		}
		if v, ok := im.vals[name]; ok && v.konst != nil {
			return v.konst, nil
		}
		return nil, unsupported("", "%q is not a constant at import time", name)
	}
	scale, err := konst(p.scale)
	if err == nil {
		var bias *constant
		if bias, err = konst(p.bias); err == nil {
			err = c.layerNormLayer(l, x, p.axis, p.eps, scale, bias)
		}
	}
	if err == nil {
		var how string
		if how, err = c.emit(l, x); err == nil {
			im.out.Mapping = append(im.out.Mapping, Mapping{Node: name, Op: n.OpType, Layer: l.Name, How: how + " (written-out layer normalisation)"})
			return
		}
	}
	im.fail(n, name, err)
}

// checkWrittenLayerNorm checks, when the pattern's first node is reached
// and x's shape is known, that both means are over the same trailing
// per-sample axes and keep them, and records the first of those axes.
func (im *importer) checkWrittenLayerNorm(p *writtenLayerNorm) bool {
	x, ok := im.vals[p.x]
	if !ok || x.konst != nil || x.poison || x.pad != [4]int{} {
		return false
	}
	g := im.m.Graph
	var first []int
	for k, mi := range p.means {
		axes, keep, err := im.meanAxes(g.Nodes[mi], len(x.shape))
		if err != nil || !keep {
			return false
		}
		if k == 1 && !slices.Equal(axes, first) {
			return false
		}
		first = axes
	}
	for j, a := range first {
		if a != len(x.shape)-len(first)+j {
			return false // not the trailing axes
		}
	}
	p.axis = first[0]
	return true
}
