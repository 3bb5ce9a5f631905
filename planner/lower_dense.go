package planner

import "github.com/mlbuild/mlbuild/spec"

// The lowering of dense layers and batched matrix products (lowerNode and
// declareParams in lower.go dispatch to it).

// denseParams declares a dense layer's weight [units, in] and bias.
func (l *lowering) denseParams(n *spec.Node) error {
	in, err := l.inShape(n, 0)
	if err != nil {
		return err
	}
	if len(in) == 0 {
		return fail(n, "dense needs an input with at least one axis")
	}
	k, units := in[len(in)-1], l.units(n)
	if n.Tie != "" {
		w, ok := l.params[n.Tie+".weight"]
		embedding := false
		for i := range l.m.Nodes {
			embedding = embedding || l.m.Nodes[i].Name == n.Tie && l.m.Nodes[i].Op == spec.OpEmbedding
		}
		if !ok || !embedding {
			return fail(n, "tie %q names no embedding before this layer: a dense layer ties only to an embedding's weight", n.Tie)
		}
		if sh := l.p.shapeOf(w); len(sh) != 2 || sh[0] != units || sh[1] != k {
			return fail(n, "tied to %s, whose weight is %s, but this layer's weight is [%d,%d]", n.Tie, shapeString(sh), units, k)
		}
	} else {
		l.addParam(n, "weight", []int{units, k}, true, "uniform", k)
	}
	if n.Bias {
		l.addParam(n, "bias", []int{units}, true, "uniform", k)
	}
	return nil
}

// units is the output width of a dense layer.
func (l *lowering) units(n *spec.Node) int {
	if n.Units > 0 {
		return n.Units
	}
	if len(n.OutShape) > 0 {
		return n.OutShape[len(n.OutShape)-1]
	}
	return 0
}

// lowerDense lowers a dense layer. An input with more than one per-sample
// axis is viewed as a matrix of rows (PyTorch's Linear applies to the last
// axis), so the gemm kernel always sees [rows, in].
func (l *lowering) lowerDense(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	in := n.InShapes[0]
	y := l.output(n)
	w, b := l.param(n, "weight"), l.param(n, "bias")
	if n.Tie != "" {
		w = l.params[n.Tie+".weight"] // the embedding's [vocab, dim]: one tensor, both layers' gradients
	}
	if len(in) > 1 {
		rows := l.batch * numElements(in[:len(in)-1])
		x = l.p.addView(n.Name+".in_rows", x, []int{rows, in[len(in)-1]})
		y = l.p.addView(n.Name+".out_rows", y, []int{rows, l.units(n)})
	}
	l.emit(n, KGemm, []BufID{x, w, b}, []BufID{y}, Attr{})
	return nil
}

// lowerMatMul lowers a batched matrix product of two layers' outputs.
func (l *lowering) lowerMatMul(n *spec.Node) error {
	a, err := l.input(n, 0)
	if err != nil {
		return err
	}
	b, err := l.input(n, 1)
	if err != nil {
		return err
	}
	if len(l.p.shapeOf(a)) < 3 || len(l.p.shapeOf(b)) < 3 {
		return fail(n, "matmul needs operands with at least two per-sample axes, got %s and %s",
			shapeString(l.p.shapeOf(a)[1:]), shapeString(l.p.shapeOf(b)[1:]))
	}
	rank := max(len(l.p.shapeOf(a)), len(l.p.shapeOf(b)))
	a, b = l.padRank(n, a, rank, "a"), l.padRank(n, b, rank, "b")
	l.emit(n, KMatMul, []BufID{a, b}, []BufID{l.output(n)}, Attr{})
	return nil
}
