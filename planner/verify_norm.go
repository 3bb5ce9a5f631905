package planner

import "fmt"

// The shape rules of the normalisations: softmax and log-softmax along an
// axis, batchnorm and layernorm (checkShapes in verify.go dispatches to
// them).

// softmax checks softmax and log-softmax along an axis, and their backward.
func (r shapeRules) softmax(s *Step) error {
	in, out := s.In, s.Out
	if s.Attr.Axis < 1 || s.Attr.Axis >= len(r.sh(in[0])) {
		return fmt.Errorf("axis %d is the batch axis or out of range for %s", s.Attr.Axis, shapeString(r.sh(in[0])))
	}
	if x := r.sh(in[0]); s.Attr.Causal && (s.Kernel != KSoftmax || s.Attr.Axis != len(x)-1 || len(x) < 3 || x[len(x)-1] != x[len(x)-2]) {
		return fmt.Errorf("a causal %s along axis %d of %s: causal is for softmax over the last axis of scores [B, ..., T, T]", s.Kernel, s.Attr.Axis, shapeString(x))
	}
	if s.Attr.Padding {
		x := r.sh(in[0])
		if s.Kernel != KSoftmax || s.Attr.Axis != len(x)-1 || len(x) < 3 {
			return fmt.Errorf("a padding mask on a %s along axis %d of %s: padding is for softmax over the last axis of scores [B, ..., Tk]", s.Kernel, s.Attr.Axis, shapeString(x))
		}
		if err := r.is("token ids", in[1], []int{x[0], x[len(x)-1]}); err != nil {
			return err
		}
	}
	if s.Kernel == KSoftmax || s.Kernel == KLogSoftmax {
		return r.same("y", out[0], in[0])
	}
	return first(r.same("dy", in[1], in[0]), r.same("dx", out[0], in[0]))
}

// batchNorm checks batchnorm's per-channel params, statistics and backward.
func (r shapeRules) batchNorm(s *Step) error {
	in, out := s.In, s.Out
	x := r.sh(in[0])
	if len(x) < 2 {
		return fmt.Errorf("x %s has no channel axis", shapeString(x))
	}
	if s.Attr.Eps <= 0 {
		return fmt.Errorf("eps %g", s.Attr.Eps)
	}
	c := []int{x[1]}
	if s.Attr.Act != "" && s.Attr.Act != "relu" {
		return fmt.Errorf("fused activation %q (a batch norm takes only relu)", s.Attr.Act)
	}
	if s.Kernel == KBatchNorm {
		return first(r.is("gamma", in[1], c), r.is("beta", in[2], c), r.is("running mean", in[3], c),
			r.is("running var", in[4], c), r.kindIs(in[3], KindStat), r.kindIs(in[4], KindStat),
			r.same("y", out[0], in[0]), r.is("saved mean", out[1], c), r.is("saved inverse std", out[2], c))
	}
	var beta error
	if s.Attr.Act != "" {
		beta = r.is("beta", in[5], c)
	}
	return first(r.is("gamma", in[1], c), r.is("saved mean", in[2], c), r.is("saved inverse std", in[3], c),
		r.same("dy", in[4], in[0]), r.same("dx", out[0], in[0]), r.is("dgamma", out[1], c), r.is("dbeta", out[2], c), beta)
}

// foldBatchNorm checks a fold step's weight and bias, the batch norm's
// per-channel params and statistics, and its folded outputs.
func (r shapeRules) foldBatchNorm(s *Step) error {
	in, out := s.In, s.Out
	w := r.sh(in[0])
	if len(w) < 2 {
		return fmt.Errorf("W %s has no output-channel axis", shapeString(w))
	}
	if s.Attr.Eps <= 0 {
		return fmt.Errorf("eps %g", s.Attr.Eps)
	}
	c := []int{w[0]}
	return first(r.kindIs(in[0], KindParam), r.is("b", in[1], c), r.kindIs(in[1], KindParam),
		r.is("gamma", in[2], c), r.is("beta", in[3], c), r.kindIs(in[2], KindParam), r.kindIs(in[3], KindParam),
		r.is("running mean", in[4], c), r.is("running var", in[5], c), r.kindIs(in[4], KindStat), r.kindIs(in[5], KindStat),
		r.same("W'", out[0], in[0]), r.is("b'", out[1], c), r.kindIs(out[0], KindFolded), r.kindIs(out[1], KindFolded))
}

// layerNorm checks layernorm's normalised axes, per-row statistics and
// backward.
func (r shapeRules) layerNorm(s *Step) error {
	in, out := s.In, s.Out
	x := r.sh(in[0])
	ax := s.Attr.Axis
	if ax < 1 || ax >= len(x) {
		return fmt.Errorf("axis %d is the batch axis or out of range for %s", ax, shapeString(x))
	}
	norm, rows := x[ax:], []int{numElements(x[:ax])}
	if s.Kernel == KLayerNorm {
		if s.Attr.Eps <= 0 {
			return fmt.Errorf("eps %g", s.Attr.Eps)
		}
		return first(r.is("gamma", in[1], norm), r.is("beta", in[2], norm), r.kindIs(in[1], KindParam), r.kindIs(in[2], KindParam),
			r.same("y", out[0], in[0]), r.is("saved mean", out[1], rows), r.is("saved inverse std", out[2], rows),
			r.kindIs(out[1], KindScratch), r.kindIs(out[2], KindScratch))
	}
	return first(r.is("gamma", in[1], norm), r.is("saved mean", in[2], rows), r.is("saved inverse std", in[3], rows),
		r.same("dy", in[4], in[0]), r.same("dx", out[0], in[0]), r.is("dgamma", out[1], norm), r.is("dbeta", out[2], norm),
		r.kindIs(out[1], KindParamGrad), r.kindIs(out[2], KindParamGrad))
}
