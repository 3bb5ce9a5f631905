package emit

import (
	"fmt"
	"strings"

	"github.com/mlbuild/mlbuild/planner"
)

// The layout family's calls: steps that move values without arithmetic.

// transposeCall calls a permutation of the axes.
func (g *generator) transposeCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	return fmt.Sprintf("cpu.Transpose(%s, %s, %s, %s)", in[0].slice(), out[0].slice(), g.shape(in[0].buf.Shape), g.shape(a.Perm)), nil
}

// concatCall calls a concatenation or its backward (the split).
func (g *generator) concatCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	var shapes, bufs []string
	parts := in
	if st.Kernel == planner.KConcatBwd {
		parts = out
	}
	for _, op := range parts {
		shapes = append(shapes, ints(op.buf.Shape))
		bufs = append(bufs, op.slice())
	}
	sh := g.sharedVar("shapes", "[][]int{"+strings.Join(shapes, ", ")+"}")
	if st.Kernel == planner.KConcat {
		return fmt.Sprintf("cpu.ConcatFwd([][]float32{%s}, %s, %s, %d)", strings.Join(bufs, ", "), out[0].slice(), sh, a.Axis), nil
	}
	return fmt.Sprintf("cpu.ConcatBwd(%s, [][]float32{%s}, %s, %d)", in[0].slice(), strings.Join(bufs, ", "), sh, a.Axis), nil
}
