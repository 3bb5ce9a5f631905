package planner

import "fmt"

// The shape rules of the pools: max and average over windows, and global
// average (checkShapes in verify.go dispatches to them).

// pool checks a max or average pool step, forward or backward, against its
// window.
func (r shapeRules) pool(s *Step) error {
	in, out := s.In, s.Out
	g := s.Attr.Conv
	if g == nil {
		return fmt.Errorf("no window geometry")
	}
	if err := checkWindow(g, false); err != nil {
		return err
	}
	if g.ExcludePad && s.Kernel != KAvgPool2D && s.Kernel != KAvgPool2DBwd {
		return fmt.Errorf("ExcludePad on a %s step: only an average pool has a divisor", s.Kernel)
	}
	x := []int{g.N, g.C, g.H, g.W}
	y := []int{g.N, g.C, g.OH, g.OW}
	if s.Kernel == KMaxPool2DBwd || s.Kernel == KMaxPool2DArgmaxBwd {
		if err := checkAct(s.Attr); err != nil {
			return err
		}
	} else if s.Attr.Act != "" {
		return fmt.Errorf("activation %q on a %s step: only the max pool backward steps apply one", s.Attr.Act, s.Kernel)
	}
	switch s.Kernel {
	case KMaxPool2DBwd:
		return first(r.is("x", in[0], x), r.is("y", in[1], y), r.is("dy", in[2], y), r.is("dx", out[0], x))
	case KMaxPool2DArgmaxBwd:
		return first(r.is("argmax", in[0], y), r.kindIs(in[0], KindScratch), r.is("y", in[1], y), r.is("dy", in[2], y), r.is("dx", out[0], x))
	case KAvgPool2DBwd:
		return first(r.is("dy", in[0], y), r.is("dx", out[0], x))
	}
	return first(r.is("x", in[0], x), r.is("y", out[0], y))
}

// resize checks that y [B,C,OH,OW] keeps the batch and channels of x
// [B,C,H,W] (dy and dx for the backward), and the step's mode.
func (r shapeRules) resize(s *Step) error {
	x, y := r.sh(s.In[0]), r.sh(s.Out[0])
	if s.Kernel == KResizeBwd {
		x, y = y, x
	}
	if s.Attr.Mode != ResizeNearest && s.Attr.Mode != ResizeBilinear {
		return fmt.Errorf("mode %q is neither %q nor %q", s.Attr.Mode, ResizeNearest, ResizeBilinear)
	}
	if s.Attr.AlignCorners && s.Attr.Mode != ResizeBilinear {
		return fmt.Errorf("AlignCorners on a %s resize: only bilinear aligns corners", s.Attr.Mode)
	}
	if len(x) != 4 || len(y) != 4 || x[0] != y[0] || x[1] != y[1] {
		return fmt.Errorf("x %s and y %s are not [B,C,H,W] images of the same batch and channels", shapeString(x), shapeString(y))
	}
	return nil
}

// globalAvgPool checks that a global average pool keeps [B,C] of x.
func (r shapeRules) globalAvgPool(s *Step) error {
	in, out := s.In, s.Out
	x := r.sh(in[0])
	if len(x) < 3 {
		return fmt.Errorf("x %s has no spatial axes", shapeString(x))
	}
	return r.is("y", out[0], x[:2])
}

// globalAvgPoolBwd checks that dx [B,C,...] spreads dy [B,C].
func (r shapeRules) globalAvgPoolBwd(s *Step) error {
	in, out := s.In, s.Out
	dy, dx := r.sh(in[0]), r.sh(out[0])
	if len(dy) != 2 || len(dx) < 3 || !equalShapes(dx[:2], dy) {
		return fmt.Errorf("dy %s and dx %s do not fit", shapeString(dy), shapeString(dx))
	}
	return nil
}
