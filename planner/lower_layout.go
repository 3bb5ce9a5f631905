package planner

import "github.com/mlbuild/mlbuild/spec"

// The lowering of ops that move or reduce axes: flatten, reshape, transpose,
// concat, slice, reducemean (lowerNode and declareParams in lower.go dispatch to
// it).

// lowerView lowers flatten and reshape to a view of the input: no step, no
// copy.
func (l *lowering) lowerView(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	if numElements(n.OutShape) != numElements(l.p.shapeOf(x)[1:]) {
		return fail(n, "%s changes the number of elements: %s to %s", n.Op, shapeString(l.p.shapeOf(x)[1:]), shapeString(n.OutShape))
	}
	l.value[n.Name] = l.p.addView(n.Name+".out", x, withBatch(l.batch, n.OutShape))
	return nil
}

// lowerTranspose lowers a permutation of the per-sample axes (the batch axis
// stays first).
func (l *lowering) lowerTranspose(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	perm := []int{0}
	for _, a := range n.Perm {
		perm = append(perm, a+1)
	}
	l.emit(n, KTranspose, []BufID{x}, []BufID{l.output(n)}, Attr{Perm: perm})
	return nil
}

// lowerConcat lowers a concatenation of the inputs along an axis.
func (l *lowering) lowerConcat(n *spec.Node) error {
	var in []BufID
	for i := range n.Inputs {
		x, err := l.input(n, i)
		if err != nil {
			return err
		}
		in = append(in, x)
	}
	axis, err := fullAxis(n, n.Axis, len(n.OutShape))
	if err != nil {
		return err
	}
	l.emit(n, KConcat, in, []BufID{l.output(n)}, Attr{Axis: axis})
	return nil
}

// lowerSlice lowers a range of positions along one axis: a copy.
func (l *lowering) lowerSlice(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	axis, err := fullAxis(n, n.Axis, len(n.OutShape))
	if err != nil {
		return err
	}
	l.emit(n, KSlice, []BufID{x}, []BufID{l.output(n)}, Attr{Axis: axis, Start: n.Start})
	return nil
}

// lowerReduceMean lowers a mean over per-sample axes. The kernel writes a
// buffer that keeps the reduced axes with size 1; without keepdims the
// node's value is a view of it with those axes dropped.
func (l *lowering) lowerReduceMean(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	in := n.InShapes[0]
	kept := append([]int(nil), in...)
	for _, a := range n.Axes {
		if a < 0 || a >= len(in) {
			return fail(n, "reducemean axis %d is not an axis of %s", a, shapeString(in))
		}
		kept[a] = 1
	}
	if numElements(kept) != numElements(n.OutShape) {
		return fail(n, "reducemean of %s over axes %v gives %s, not %s", shapeString(in), n.Axes, shapeString(kept), shapeString(n.OutShape))
	}
	if n.KeepDims {
		l.emit(n, KReduceMean, []BufID{x}, []BufID{l.output(n)}, Attr{})
		return nil
	}
	y := l.p.addBuffer(n.Name+".mean", KindActivation, withBatch(l.batch, kept))
	l.emit(n, KReduceMean, []BufID{x}, []BufID{y}, Attr{})
	l.value[n.Name] = l.p.addView(n.Name+".out", y, withBatch(l.batch, n.OutShape))
	return nil
}
