package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The layout family's lowerings: steps that move values without
// arithmetic (transpose, concat and its backward, the split).

// transpose lowers a permutation of the axes to one kernel
// (transposeKernel) on whole buffers, which are 16-byte aligned, so runs
// of x's last axis move four elements at a time.
func (l *lowering) transpose(st *planner.Step) error {
	a := st.Attr
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xs, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	k, err := transposeKernelVec(xs, a.Perm, true)
	return l.launch("transpose", k, err, whole(st.In[0]), whole(st.Out[0]))
}

// cast lowers a copy between element types and layouts (planner.KCast:
// a bf16 plan's input, float32 NCHW, into the bfloat16 channels-last
// tensor a cuDNN convolution reads) to castKernel; launch rounds the
// stores where y is stored in bfloat16.
func (l *lowering) cast(st *planner.Step) error {
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xs, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	last := l.channelsLast(st.In[0], st.Out[0])
	outer, c, inner := prod(xs), 1, 1
	if len(xs) == 4 {
		outer, c, inner = xs[0], xs[1], xs[2]*xs[3]
	} else if last[0] || last[1] {
		return fmt.Errorf("a cast of a %d-D tensor stored channels last", len(xs))
	}
	return l.launch("cast", castKernel(outer, c, inner, last[0], last[1]), nil, whole(st.In[0]), whole(st.Out[0]))
}

// castKernel copies x [outer, c, inner] to y, each stored NCHW or
// channels last (xLast, yLast: element (n, ch, s) at (n·inner + s)·c +
// ch). One thread an element of y, in y's order.
func castKernel(outer, c, inner int, xLast, yLast bool) *Kernel {
	n := outer * c * inner
	name := func(last bool) string { return map[bool]string{false: "NCHW", true: "NHWC"}[last] }
	return elementwise(fmt.Sprintf("copy of [%d,%d,%d] from %s to %s", outer, c, inner, name(xLast), name(yLast)), n,
		[]Param{in("x", n), out("y", n)}, func(i Expr) []Stmt {
			src := i
			if xLast != yLast {
				var b, ch, s Expr // the element's image, channel and position
				if yLast {
					b, s, ch = div(i, i32(c*inner)), rem(div(i, i32(c)), i32(inner)), rem(i, i32(c))
					src = add(mul(add(mul(b, i32(c)), ch), i32(inner)), s)
				} else {
					b, ch, s = div(i, i32(c*inner)), rem(div(i, i32(inner)), i32(c)), rem(i, i32(inner))
					src = add(mul(add(mul(b, i32(inner)), s), i32(c)), ch)
				}
			}
			return []Stmt{store("y", i, load("x", src))}
		})
}

// concat lowers concatenation and its backward to one slice copy per
// operand.
func (l *lowering) concat(st *planner.Step) error {
	axis := st.Attr.Axis
	parts, wide := st.In, st.Out[0]
	if st.Kernel == planner.KConcatBwd {
		parts, wide = st.Out, st.In[0]
	}
	ws, err := l.shape(wide)
	if err != nil {
		return err
	}
	outer, total, inner, err := splitAxis(ws, axis)
	if err != nil {
		return err
	}
	off := 0
	for _, part := range parts {
		if !present(part) {
			return fmt.Errorf("concat operands must all be present (their lengths place the slices)")
		}
		ps, err := l.shape(part)
		if err != nil {
			return err
		}
		n := ps[axis]
		if st.Kernel == planner.KConcat {
			err = l.launch("concat", sliceCopyKernel(outer, n, inner, total, off, true), nil, whole(part), whole(wide))
		} else {
			err = l.launch("split", sliceCopyKernel(outer, n, inner, total, off, false), nil, whole(wide), whole(part))
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}
