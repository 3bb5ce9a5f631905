package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// sliceCall is the CPU call of a slice or slice_bwd step: the wide tensor
// (x, or the backward's dx) viewed as [outer, total, inner] around the
// step's axis, the narrow one (y, dy) as [outer, n, inner].
func sliceCall(st planner.Step, in, out []operand) (string, error) {
	if err := need(in, 1, "input"); err != nil {
		return "", err
	}
	if err := need(out, 1, "output"); err != nil {
		return "", err
	}
	wide, narrow := in[0].buf.Shape, out[0].buf.Shape
	if st.Kernel == planner.KSliceBwd {
		wide, narrow = narrow, wide
	}
	ax := st.Attr.Axis
	if ax < 1 || ax >= len(wide) || len(narrow) != len(wide) {
		return "", fmt.Errorf("slice axis %d does not fit shapes %v and %v", ax, wide, narrow)
	}
	outer, inner := prod(wide[:ax]), prod(wide[ax+1:])
	if st.Kernel == planner.KSlice {
		return fmt.Sprintf("cpu.SliceFwd(%s, %s, %d, %d, %d, %d, %d)", in[0].slice(), out[0].slice(), outer, wide[ax], inner, st.Attr.Start, narrow[ax]), nil
	}
	return fmt.Sprintf("cpu.SliceBwd(%s, %s, %d, %d, %d, %d, %d)", in[0].slice(), out[0].slice(), outer, wide[ax], inner, st.Attr.Start, narrow[ax]), nil
}
