package onnx

import (
	"fmt"
	"math"
	"strings"
)

// Exporters write GELU before opset 20 (which has a Gelu op) as the
// formula 0.5·x·(1 + erf(x/√2)). findErfGELU finds those sub-graphs, so the
// importer can write them as one gelu layer, whose definition is the same
// formula.
//
// Before: x → Div(√2) (or Mul(1/√2)) → Erf → Add(1) → Mul with x and with
// 0.5 (in either order, or with x·0.5 computed first), each intermediate
// value read only inside the pattern.
// After: the last Mul's index maps to the pattern; every other node of it
// is marked as folded into that one.

// erfGELU is one recognised pattern.
type erfGELU struct {
	x     string // the value GELU is applied to
	last  int    // the node whose output is GELU(x)
	nodes []int  // every node of the pattern, in graph order
}

// findErfGELU returns the patterns by the index of each of their nodes.
func findErfGELU(g *Graph, scalarOf func(name string) (float64, bool), uses map[string]int) map[int]*erfGELU {
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
		return ok && math.Abs(v-want) <= 1e-6*math.Max(1, math.Abs(want))
	}
	// other returns the operand of a two-input node that is not name.
	other := func(n *Node, name string) (string, bool) {
		if len(n.Inputs) != 2 || len(n.Outputs) < 1 {
			return "", false
		}
		switch name {
		case n.Inputs[0]:
			return n.Inputs[1], true
		case n.Inputs[1]:
			return n.Inputs[0], true
		}
		return "", false
	}
	// only returns the single consumer of a value read once.
	only := func(name, op string) (int, bool) {
		cs := consumers[name]
		if uses[name] != 1 || len(cs) != 1 || g.Nodes[cs[0]].OpType != op {
			return 0, false
		}
		return cs[0], true
	}
	out := map[int]*erfGELU{}
	for ie, e := range g.Nodes {
		if e.OpType != "Erf" || len(e.Inputs) != 1 || len(e.Outputs) != 1 {
			continue
		}
		t := e.Inputs[0]
		id, ok := producer[t]
		if !ok || uses[t] != 1 {
			continue
		}
		d := g.Nodes[id]
		var x string
		switch {
		case d.OpType == "Div" && len(d.Inputs) == 2 && near(d.Inputs[1], math.Sqrt2):
			x = d.Inputs[0]
		case d.OpType == "Mul" && len(d.Inputs) == 2 && near(d.Inputs[1], 1/math.Sqrt2):
			x = d.Inputs[0]
		case d.OpType == "Mul" && len(d.Inputs) == 2 && near(d.Inputs[0], 1/math.Sqrt2):
			x = d.Inputs[1]
		default:
			continue
		}
		ia, ok := only(e.Outputs[0], "Add")
		if !ok {
			continue
		}
		if o, ok := other(g.Nodes[ia], e.Outputs[0]); !ok || !near(o, 1) {
			continue
		}
		sum := g.Nodes[ia].Outputs[0]
		im1, ok := only(sum, "Mul")
		if !ok {
			continue
		}
		m1 := g.Nodes[im1]
		o, ok := other(m1, sum)
		if !ok {
			continue
		}
		p := &erfGELU{x: x, nodes: []int{id, ie, ia, im1}}
		switch {
		case o == x: // (x·(1+erf))·0.5
			im2, ok := only(m1.Outputs[0], "Mul")
			if !ok {
				continue
			}
			if h, ok := other(g.Nodes[im2], m1.Outputs[0]); !ok || !near(h, 0.5) {
				continue
			}
			p.last = im2
			p.nodes = append(p.nodes, im2)
		case near(o, 0.5): // x·((1+erf)·0.5)
			im2, ok := only(m1.Outputs[0], "Mul")
			if !ok {
				continue
			}
			if h, ok := other(g.Nodes[im2], m1.Outputs[0]); !ok || h != x {
				continue
			}
			p.last = im2
			p.nodes = append(p.nodes, im2)
		default: // (x·0.5)·(1+erf)
			ih, ok := producer[o]
			if !ok || uses[o] != 1 {
				continue
			}
			h, ok := other(g.Nodes[ih], x)
			if !ok || g.Nodes[ih].OpType != "Mul" || !near(h, 0.5) {
				continue
			}
			p.last = im1
			p.nodes = append([]int{ih}, p.nodes...)
		}
		for _, i := range p.nodes {
			out[i] = p
		}
	}
	return out
}

// importGELUPattern imports node i, which belongs to pattern p: the last
// node becomes a gelu layer reading x, the others fold into it.
func (im *importer) importGELUPattern(i int, n *Node, p *erfGELU) {
	name := nodeName(i, n)
	g := im.m.Graph
	if i != p.last {
		im.out.Mapping = append(im.out.Mapping, Mapping{Node: name, Op: n.OpType, How: "folded: part of the Erf form of GELU, written as one gelu layer at node " + nodeName(p.last, g.Nodes[p.last])})
		return
	}
	x, ok := im.vals[p.x]
	switch {
	case !ok:
		im.fail(n, name, unsupported("", "the GELU's input %q is produced by no earlier node", p.x))
		return
	case x.poison:
		im.unchecked++
		im.poison(n)
		return
	case x.konst != nil || x.pad != [4]int{}:
		im.fail(n, name, unsupported("", "the GELU's input %q is a constant or a pending Pad", p.x))
		return
	}
	var src []string
	for _, j := range p.nodes {
		src = append(src, nodeName(j, g.Nodes[j])+" ("+g.Nodes[j].OpType+")")
	}
	c := &nodeCtx{im: im, n: n, name: name}
	lz := x.lazy
	if lz != nil {
		// element-wise: it runs on the data of a value whose batch axis
		// moved, seen through the same layout (batch_layout.go)
		lz.refresh()
		x = lz.src
	}
	l := &Layer{Name: im.layerName(n, "gelu"), Op: "gelu", OutShape: x.shape,
		Source: fmt.Sprintf("GELU written out as %s", strings.Join(src, ", "))}
	how, err := c.emit(l, x)
	if err == nil && lz != nil {
		err = c.regroup(n.Outputs[0], lz)
	}
	if err != nil {
		im.fail(n, name, err)
		return
	}
	im.out.Mapping = append(im.out.Mapping, Mapping{Node: name, Op: n.OpType, Layer: l.Name, How: how + " (the Erf form of GELU)"})
}
