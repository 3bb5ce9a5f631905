package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The reduction family's calls: softmax and log-softmax along an axis, and
// the mean over axes, forward and backward.

// softmaxCall calls softmax or log-softmax along the step's axis.
func (g *generator) softmaxCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	outer, n, inner, err := axisSplit(in[0].buf.Shape, a.Axis)
	if err != nil {
		return "", err
	}
	if a.Padding {
		// scores [B, ..., Tk] over the last axis, ids [B, Tk]: outer
		// counts the rows, outer/B of them a sample
		batch := in[0].buf.Shape[0]
		if inner != 1 || outer%batch != 0 || a.Causal && outer%n != 0 {
			return "", fmt.Errorf("padded softmax over axis %d of %v: not the last axis of scores", a.Axis, in[0].buf.Shape)
		}
		return fmt.Sprintf("cpu.SoftmaxPaddedFwd(%s, %s, %s, %d, %d, %d, %v, %d)", in[0].slice(), out[0].slice(), in[1].slice(), batch, outer/batch, n, a.Causal, a.PadID), nil
	}
	if a.Causal {
		// scores [..., T, T] over the last axis: outer counts the
		// matrices' rows, T of them each
		if inner != 1 || outer%n != 0 {
			return "", fmt.Errorf("causal softmax over axis %d of %v: not the last axis of square scores", a.Axis, in[0].buf.Shape)
		}
		return fmt.Sprintf("cpu.SoftmaxCausalFwd(%s, %s, %d, %d)", in[0].slice(), out[0].slice(), outer/n, n), nil
	}
	fn := map[planner.Kernel]string{planner.KSoftmax: "SoftmaxFwd", planner.KLogSoftmax: "LogSoftmaxFwd"}[st.Kernel]
	return fmt.Sprintf("cpu.%s(%s, %s, %d, %d, %d)", fn, in[0].slice(), out[0].slice(), outer, n, inner), nil
}

// softmaxBwdCall calls the backward of softmax or log-softmax.
func (g *generator) softmaxBwdCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	outer, n, inner, err := axisSplit(in[0].buf.Shape, a.Axis)
	if err != nil {
		return "", err
	}
	fn := map[planner.Kernel]string{planner.KSoftmaxBwd: "SoftmaxBwd", planner.KLogSoftmaxBwd: "LogSoftmaxBwd"}[st.Kernel]
	return fmt.Sprintf("cpu.%s(%s, %s, %s, %d, %d, %d)", fn, in[0].slice(), in[1].slice(), out[0].slice(), outer, n, inner), nil
}

// reduceMeanCall calls the mean over the axes the output keeps at size 1.
func (g *generator) reduceMeanCall(st planner.Step, in, out []operand) (string, error) {
	return fmt.Sprintf("cpu.ReduceMeanFwd(%s, %s, %s, %s)", in[0].slice(), out[0].slice(), g.shape(in[0].buf.Shape), g.shape(out[0].buf.Shape)), nil
}

// reduceMeanBwdCall calls the mean's backward.
func (g *generator) reduceMeanBwdCall(st planner.Step, in, out []operand) (string, error) {
	return fmt.Sprintf("cpu.ReduceMeanBwd(%s, %s, %s, %s)", in[0].slice(), out[0].slice(), g.shape(out[0].buf.Shape), g.shape(in[0].buf.Shape)), nil
}
