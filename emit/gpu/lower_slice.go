package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// slice lowers a slice step to sliceCopyKernel's copy out of the wide
// tensor, and its backward to slicePadKernel, which writes every element
// of dx (no separate clearing launch).
func (l *lowering) slice(st *planner.Step) error {
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	wide, narrow := st.In[0], st.Out[0]
	if st.Kernel == planner.KSliceBwd {
		wide, narrow = narrow, wide
	}
	ws, err := l.shape(wide)
	if err != nil {
		return err
	}
	ns, err := l.shape(narrow)
	if err != nil {
		return err
	}
	outer, total, inner, err := splitAxis(ws, st.Attr.Axis)
	if err != nil {
		return err
	}
	if len(ns) != len(ws) || st.Attr.Start < 0 || st.Attr.Start+ns[st.Attr.Axis] > total {
		return fmt.Errorf("slice from %d of axis %d: %v does not fit in %v", st.Attr.Start, st.Attr.Axis, ns, ws)
	}
	n := ns[st.Attr.Axis]
	if st.Kernel == planner.KSlice {
		return l.launch("slice", sliceCopyKernel(outer, n, inner, total, st.Attr.Start, false), nil, whole(wide), whole(narrow))
	}
	return l.launch("slice_bwd", slicePadKernel(outer, n, inner, total, st.Attr.Start), nil, whole(narrow), whole(wide))
}

// slicePadKernel writes dx [outer, total, inner], one thread per element:
// dy [outer, n, inner] at positions offset to offset+n−1 of the middle
// axis, zero elsewhere: a slice's backward.
func slicePadKernel(outer, n, inner, total, offset int) *Kernel {
	size := outer * total * inner
	shape := []int{outer, total, inner}
	return elementwise(fmt.Sprintf("slice backward: [%d:%d] of %d, zero elsewhere", offset, offset+n, total), size,
		[]Param{in("dy", outer*n*inner), out("dx", size)}, func(i Expr) []Stmt {
			return []Stmt{
				let("t", Int, sub(coord(i, shape, 1), i32(offset))),
				let("v", Float, flt(0)),
				when(and(ge(vr("t"), i32(0)), lt(vr("t"), i32(n))),
					set("v", load("dy", add(mul(add(mul(coord(i, shape, 0), i32(n)), vr("t")), i32(inner)), coord(i, shape, 2))))),
				store("dx", i, vr("v")),
			}
		})
}
