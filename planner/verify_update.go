package planner

import "fmt"

// The shape rules of the optimizer updates (checkShapes in verify.go
// dispatches to them).

// adamMulti checks each (grad, m, v) → (param, m, v) triple of a multi-
// tensor Adam step as one KAdam step.
func (r shapeRules) adamMulti(s *Step) error {
	in, out := s.In, s.Out
	if len(in)%3 != 0 || len(out) != len(in) || len(in) < 6 {
		return fmt.Errorf("%d inputs and %d outputs: want two or more (grad, m, v) and (param, m, v) triples", len(in), len(out))
	}
	if s.Attr.Decays != nil && len(s.Attr.Decays) != len(in)/3 {
		return fmt.Errorf("%d weight decays for %d params", len(s.Attr.Decays), len(in)/3)
	}
	for i := 0; i < len(in); i += 3 {
		t := *s
		t.Kernel, t.In, t.Out = KAdam, in[i:i+3:i+3], out[i:i+3:i+3] // capped: the rule appends to them
		if err := checkShapes(r.p, &t); err != nil {
			return fmt.Errorf("param %d: %w", i/3+1, err)
		}
	}
	return nil
}

// sgdMulti checks each (grad, velocity) → (param, velocity) pair of a
// multi-tensor SGD step as one KSGD step.
func (r shapeRules) sgdMulti(s *Step) error {
	in, out := s.In, s.Out
	if len(in)%2 != 0 || len(out) != len(in) || len(in) < 4 {
		return fmt.Errorf("%d inputs and %d outputs: want two or more (grad, velocity) and (param, velocity) pairs", len(in), len(out))
	}
	if s.Attr.Decays != nil && len(s.Attr.Decays) != len(in)/2 {
		return fmt.Errorf("%d weight decays for %d params", len(s.Attr.Decays), len(in)/2)
	}
	for i := 0; i < len(in); i += 2 {
		t := *s
		t.Kernel, t.In, t.Out = KSGD, in[i:i+2:i+2], out[i:i+2:i+2] // capped: the rule appends to them
		if err := checkShapes(r.p, &t); err != nil {
			return fmt.Errorf("param %d: %w", i/2+1, err)
		}
	}
	return nil
}

// clipGradNorm checks a clipping step: gradients scaled in place, then
// the norms buffer [k+1].
func (r shapeRules) clipGradNorm(s *Step) error {
	in, out := s.In, s.Out
	if len(out) != len(in)+1 {
		return fmt.Errorf("%d gradients and %d outputs: want the gradients and the norms", len(in), len(out))
	}
	for i, id := range in {
		if out[i] != id {
			return fmt.Errorf("gradient %d is read from %d and written to %d", i, id, out[i])
		}
		if err := r.kindIs(id, KindParamGrad); err != nil {
			return err
		}
	}
	if !equalShapes(r.sh(out[len(in)]), []int{len(in) + 1}) {
		return fmt.Errorf("norms %s, want [%d]", shapeString(r.sh(out[len(in)])), len(in)+1)
	}
	if !(s.Attr.ClipNorm > 0) {
		return fmt.Errorf("clip norm %g, want > 0", s.Attr.ClipNorm)
	}
	return nil
}

// gradMean checks a KGradMean step: the sum read and zeroed in place,
// the gradient written, both shaped alike, and a scale in (0, 1).
func (r shapeRules) gradMean(s *Step) error {
	if s.In[0] != s.Out[1] {
		return fmt.Errorf("the gradient sum is read from %d and zeroed in %d", s.In[0], s.Out[1])
	}
	if !(s.Attr.Scale > 0 && s.Attr.Scale < 1) {
		return fmt.Errorf("scale %g, want 1/accumulate in (0, 1)", s.Attr.Scale)
	}
	return first(r.same("grad", s.Out[0], s.In[0]), r.kindIs(s.In[0], KindGradSum), r.kindIs(s.Out[0], KindParamGrad))
}

// optimizer checks an SGD or Adam step: state read and written in place,
// every operand shaped like the param.
func (r shapeRules) optimizer(s *Step) error {
	in, out := s.In, s.Out
	for i := 1; i < len(in); i++ {
		if in[i] != out[i] {
			return fmt.Errorf("optimizer state %d is read from %d and written to %d", i, in[i], out[i])
		}
	}
	for _, id := range append(in, out...) {
		if err := r.same("operand", id, out[0]); err != nil {
			return err
		}
	}
	return first(r.kindIs(in[0], KindParamGrad), r.kindIs(out[0], KindParam))
}
