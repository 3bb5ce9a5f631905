package planner

import "fmt"

// The shape rules of the kernels that move or reduce axes: transpose, concat,
// slice and reducemean (checkShapes in verify.go dispatches to them).

// reduceMean checks that y is x with some axes reduced to 1 (or the reverse
// for the backward).
func (r shapeRules) reduceMean(s *Step) error {
	in, out := s.In, s.Out
	x, y := r.sh(in[0]), r.sh(out[0])
	if s.Kernel == KReduceMeanBwd {
		x, y = y, x
	}
	if len(x) != len(y) || len(x) < 2 || y[0] != x[0] {
		return fmt.Errorf("x %s and y %s do not fit (want one rank, the batch kept)", shapeString(x), shapeString(y))
	}
	for i := range x {
		if y[i] != x[i] && y[i] != 1 {
			return fmt.Errorf("y %s is not x %s with some axes reduced to 1", shapeString(y), shapeString(x))
		}
	}
	return nil
}

// transpose checks that y is x permuted, the batch axis kept first.
func (r shapeRules) transpose(s *Step) error {
	in, out := s.In, s.Out
	x, perm := r.sh(in[0]), s.Attr.Perm
	if len(perm) != len(x) || len(perm) == 0 || perm[0] != 0 {
		return fmt.Errorf("perm %v does not fit %s (and must keep the batch axis first)", perm, shapeString(x))
	}
	seen := make([]bool, len(perm))
	y := make([]int, len(perm))
	for i, a := range perm {
		if a < 0 || a >= len(perm) || seen[a] {
			return fmt.Errorf("perm %v is not a permutation", perm)
		}
		seen[a] = true
		y[i] = x[a]
	}
	return r.is("y", out[0], y)
}

// concat checks that the parts add up to the whole along the axis.
func (r shapeRules) concat(s *Step) error {
	in, out := s.In, s.Out
	parts, whole := in, out[0]
	if s.Kernel == KConcatBwd {
		parts, whole = out, in[0]
	}
	y := r.sh(whole)
	ax := s.Attr.Axis
	if ax < 1 || ax >= len(y) {
		return fmt.Errorf("axis %d is the batch axis or out of range for %s", ax, shapeString(y))
	}
	sum, all := 0, true
	for _, id := range parts {
		if id == NoBuf {
			all = false
			continue
		}
		x := r.sh(id)
		if len(x) != len(y) {
			return fmt.Errorf("%s %s and %s differ in rank", r.p.Buffers[id].Name, shapeString(x), shapeString(y))
		}
		for k := range x {
			if k != ax && x[k] != y[k] {
				return fmt.Errorf("%s %s and %s differ off the concatenation axis", r.p.Buffers[id].Name, shapeString(x), shapeString(y))
			}
		}
		sum += x[ax]
	}
	if all && sum != y[ax] {
		return fmt.Errorf("parts add up to %d along axis %d, the whole has %d", sum, ax, y[ax])
	}
	return nil
}

// slice checks that y is x but for a range [Start, Start+len) of the axis
// that fits in x; the backward's dx is the forward's x, dy its y.
func (r shapeRules) slice(s *Step) error {
	x, y := r.sh(s.In[0]), r.sh(s.Out[0])
	if s.Kernel == KSliceBwd {
		x, y = y, x
	}
	ax := s.Attr.Axis
	if ax < 1 || ax >= len(x) || len(y) != len(x) {
		return fmt.Errorf("axis %d is the batch axis or out of range, or x %s and y %s differ in rank", ax, shapeString(x), shapeString(y))
	}
	for k := range x {
		if k != ax && x[k] != y[k] {
			return fmt.Errorf("x %s and y %s differ off the slice axis %d", shapeString(x), shapeString(y), ax)
		}
	}
	if s.Attr.Start < 0 || y[ax] < 1 || s.Attr.Start+y[ax] > x[ax] {
		return fmt.Errorf("positions %d to %d of axis %d do not fit x %s", s.Attr.Start, s.Attr.Start+y[ax], ax, shapeString(x))
	}
	return nil
}
