package planner

import "fmt"

// The shape rules of the loss kernels, the first backward step (checkShapes
// in verify.go dispatches to them).

// loss checks a loss step: labels like the prediction, a [1] loss and its
// gradient.
func (r shapeRules) loss(s *Step) error {
	in, out := s.In, s.Out
	x := r.sh(in[0])
	if s.Kernel == KHuber && !(s.Attr.Delta > 0) {
		return fmt.Errorf("huber delta %v is not positive", s.Attr.Delta)
	}
	if s.Kernel == KSoftmaxXent && len(x) != 2 && len(x) != 3 {
		return fmt.Errorf("logits %s are not [B,C] or [B,T,C]", shapeString(x))
	}
	if len(out) == 3 { // the loss rows
		rows := 1
		for _, d := range x[:max(len(x)-1, 0)] {
			rows *= d
		}
		if err := first(r.is("loss rows", out[2], []int{rows}), r.kindIs(out[2], KindScratch)); err != nil {
			return err
		}
	}
	return first(r.same("labels", in[1], in[0]), r.is("loss", out[0], []int{1}), r.same("dpred", out[1], in[0]),
		r.kindIs(in[1], KindLabels), r.kindIs(out[0], KindLoss), r.kindIs(out[1], KindGrad))
}
