package planner

import "github.com/mlbuild/mlbuild/spec"

// The lowering of normalisations: batchnorm, layernorm, softmax and log-
// softmax (lowerNode and declareParams in lower.go dispatch to it).

// batchNormParams declares batchnorm's weight and bias and its running
// statistics, one per channel.
func (l *lowering) batchNormParams(n *spec.Node) error {
	in, err := l.inShape(n, 0)
	if err != nil {
		return err
	}
	if len(in) == 0 {
		return fail(n, "batchnorm needs an input with a channel axis")
	}
	c := []int{in[0]}
	l.addParam(n, "weight", c, true, "ones", 0)
	l.addParam(n, "bias", c, true, "zeros", 0)
	l.addParam(n, "running_mean", c, false, "zeros", 0)
	l.addParam(n, "running_var", c, false, "ones", 0)
	return nil
}

// lowerBatchNorm lowers batchnorm with its saved statistics, and PyTorch's
// eps and momentum where the node has none.
func (l *lowering) lowerBatchNorm(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	y := l.output(n)
	c := []int{n.InShapes[0][0]}
	mean := l.p.addBuffer(n.Name+".save_mean", KindScratch, c)
	invStd := l.p.addBuffer(n.Name+".save_invstd", KindScratch, c)
	eps, momentum := n.Eps, n.Momentum
	if eps == 0 {
		eps = 1e-5
	}
	if momentum == 0 {
		momentum = 0.1
	}
	l.emit(n, KBatchNorm,
		[]BufID{x, l.param(n, "weight"), l.param(n, "bias"), l.param(n, "running_mean"), l.param(n, "running_var")},
		[]BufID{y, mean, invStd}, Attr{Eps: eps, Momentum: momentum})
	return nil
}

// layerNormParams declares layernorm's weight and bias over the normalised
// axes.
func (l *lowering) layerNormParams(n *spec.Node) error {
	in, err := l.inShape(n, 0)
	if err != nil {
		return err
	}
	if n.Axis < 0 || n.Axis >= len(in) {
		return fail(n, "layernorm axis %d is not an axis of %s", n.Axis, shapeString(in))
	}
	norm := append([]int(nil), in[n.Axis:]...)
	l.addParam(n, "weight", norm, true, "ones", 0)
	if n.Bias {
		l.addParam(n, "bias", norm, true, "zeros", 0)
	}
	return nil
}

// lowerLayerNorm lowers layernorm with its per-row saved statistics, and
// PyTorch's eps where the node has none.
func (l *lowering) lowerLayerNorm(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	in := n.InShapes[0]
	if n.Axis < 0 || n.Axis >= len(in) {
		return fail(n, "layernorm axis %d is not an axis of %s", n.Axis, shapeString(in))
	}
	eps := n.Eps
	if eps == 0 {
		eps = 1e-5
	}
	rows := []int{l.batch * numElements(in[:n.Axis])}
	y := l.output(n)
	mean := l.p.addBuffer(n.Name+".save_mean", KindScratch, rows)
	invStd := l.p.addBuffer(n.Name+".save_invstd", KindScratch, rows)
	l.emit(n, KLayerNorm, []BufID{x, l.param(n, "weight"), l.param(n, "bias")}, []BufID{y, mean, invStd},
		Attr{Axis: n.Axis + 1, Eps: eps})
	return nil
}

// lowerSoftmax lowers softmax and log-softmax along an axis.
func (l *lowering) lowerSoftmax(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	k := KSoftmax
	if n.Op == spec.OpLogSoftmax {
		k = KLogSoftmax
	}
	axis, err := fullAxis(n, n.Axis, len(n.OutShape))
	if err != nil {
		return err
	}
	if n.Causal && (k != KSoftmax || axis != len(n.OutShape) || len(n.OutShape) < 2 || n.OutShape[len(n.OutShape)-1] != n.OutShape[len(n.OutShape)-2]) {
		return fail(n, "causal softmax needs scores [..., queries, keys] with as many keys as queries, over the last axis; got %s along axis %d", shapeString(n.OutShape), n.Axis)
	}
	in, attr := []BufID{x}, Attr{Axis: axis, Causal: n.Causal}
	if n.Pad != nil {
		ids, ok := l.value["input"]
		if k != KSoftmax || axis != len(n.OutShape) || len(n.OutShape) < 2 || !ok {
			return fail(n, "a padding mask needs a softmax over the last axis of scores [..., queries, keys]; got %s along axis %d", shapeString(n.OutShape), n.Axis)
		}
		in, attr.Padding, attr.PadID = append(in, ids), true, *n.Pad
	}
	l.emit(n, k, in, []BufID{l.output(n)}, attr)
	return nil
}
