package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The normalisation family's calls: batch and layer normalisation, forward
// and backward.

// batchNormCall calls batch normalisation (the batch's statistics in
// training, the running ones outside).
func (g *generator) batchNormCall(st planner.Step, in, out []operand, training bool) (string, error) {
	a := st.Attr
	if err := need(in, 5, "input"); err != nil {
		return "", err
	}
	if err := need(out, 3, "output"); err != nil {
		return "", err
	}
	s := in[0].buf.Shape
	if len(in) > 5 { // a residual summed before the activation (planner/fuse_norm_sum.go)
		return fmt.Sprintf("cpu.BatchNormSumFwd(%s, %s, %s, %s, %s, %s, %s, %s, %s, %d, %d, %d, %s, %s, %v, %v)", in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(), in[4].slice(),
			in[5].slice(), out[0].slice(), out[1].slice(), out[2].slice(), s[0], s[1], prod(s[2:]), float(a.Eps), float(a.Momentum), training, a.Act == "relu"), nil
	}
	fn := "cpu.BatchNormFwd"
	if a.Act == "relu" { // a fused ReLU (planner/fuse_norm_act.go)
		fn = "cpu.BatchNormReLUFwd"
	}
	return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s, %s, %d, %d, %d, %s, %s, %v)", fn, in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(), in[4].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), s[0], s[1], prod(s[2:]), float(a.Eps), float(a.Momentum), training), nil
}

// foldBatchNormCall calls the fold of an inference batch norm into the
// convolution before it (planner.KFoldBatchNorm): the folded weight and
// bias from the weight, the bias (nil when the convolution has none) and
// the batch norm's params and running statistics.
func (g *generator) foldBatchNormCall(st planner.Step, in, out []operand) (string, error) {
	if err := need(in, 6, "input"); err != nil {
		return "", err
	}
	if err := need(out, 2, "output"); err != nil {
		return "", err
	}
	return fmt.Sprintf("cpu.FoldBatchNorm(%s, %s, %s, %s, %s, %s, %s, %s, %d, %s)", in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(), in[4].slice(), in[5].slice(),
		out[0].slice(), out[1].slice(), in[0].buf.Shape[0], float(st.Attr.Eps)), nil
}

// batchNormBwdCall calls batch normalisation's backward; with a fused
// ReLU, beta is the sixth input.
func (g *generator) batchNormBwdCall(st planner.Step, in, out []operand) (string, error) {
	s := in[0].buf.Shape
	if st.Attr.Act == "relu" {
		if err := need(in, 6, "input"); err != nil {
			return "", err
		}
		return fmt.Sprintf("cpu.BatchNormReLUBwd(%s, %s, %s, %s, %s, %s, %s, %s, %s, %d, %d, %d)", in[0].slice(), in[1].slice(), in[5].slice(), in[2].slice(), in[3].slice(), in[4].slice(),
			out[0].slice(), out[1].slice(), out[2].slice(), s[0], s[1], prod(s[2:])), nil
	}
	return fmt.Sprintf("cpu.BatchNormBwd(%s, %s, %s, %s, %s, %s, %s, %s, %d, %d, %d)", in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(), in[4].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), s[0], s[1], prod(s[2:])), nil
}

// layerNormCall calls layer normalisation or its backward, over the
// step's [rows, cols] view.
func (g *generator) layerNormCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	s := in[0].buf.Shape
	if a.Axis < 1 || a.Axis >= len(s) {
		return "", fmt.Errorf("layernorm axis %d out of range for shape %v", a.Axis, s)
	}
	rows, cols := prod(s[:a.Axis]), prod(s[a.Axis:])
	if st.Kernel == planner.KLayerNorm {
		return fmt.Sprintf("cpu.LayerNormFwd(%s, %s, %s, %s, %s, %s, %d, %d, %s)", in[0].slice(), in[1].slice(), in[2].slice(),
			out[0].slice(), out[1].slice(), out[2].slice(), rows, cols, float(a.Eps)), nil
	}
	fn := "cpu.LayerNormBwd"
	if a.AccumulateDx { // dx adds into the gradient sum (planner/fuse_accumulate_norm.go)
		fn = "cpu.LayerNormBwdAdd"
	}
	return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s, %s, %d, %d)", fn, in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(), in[4].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), rows, cols), nil
}
