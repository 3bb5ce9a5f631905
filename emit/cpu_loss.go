package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The loss family's calls: each writes the loss and the gradient of the
// mean loss with respect to the prediction, and returns the loss (the
// step function's result).

// softmaxXentCall calls softmax cross-entropy, which returns the loss.
func (g *generator) softmaxXentCall(st planner.Step, in, out []operand, c *stepCall) (string, error) {
	s := in[0].buf.Shape
	c.loss = true
	// rows are the samples, or every token of them for logits [B,T,C]:
	// the loss is the mean over the rows
	rows, classes := prod(s[:len(s)-1]), s[len(s)-1]
	return fmt.Sprintf("l := cpu.SoftmaxXent(%s, %s, %s, %d, %d)\n%s[0] = l\nreturn l", in[0].slice(), in[1].slice(), out[1].slice(), rows, classes, out[0].param), nil
}

// mseCall calls the mean squared error, which returns the loss.
func (g *generator) mseCall(st planner.Step, in, out []operand, c *stepCall) (string, error) {
	c.loss = true
	return fmt.Sprintf("l := cpu.MSE(%s, %s, %s, %d)\n%s[0] = l\nreturn l", in[0].slice(), in[1].slice(), out[1].slice(), in[0].buf.Size, out[0].param), nil
}

// maeCall calls the mean absolute error, which returns the loss.
func (g *generator) maeCall(st planner.Step, in, out []operand, c *stepCall) (string, error) {
	c.loss = true
	return fmt.Sprintf("l := cpu.MAE(%s, %s, %s, %d)\n%s[0] = l\nreturn l", in[0].slice(), in[1].slice(), out[1].slice(), in[0].buf.Size, out[0].param), nil
}

// huberCall calls the Huber loss, which returns the loss.
func (g *generator) huberCall(st planner.Step, in, out []operand, c *stepCall) (string, error) {
	a := st.Attr
	c.loss = true
	return fmt.Sprintf("l := cpu.Huber(%s, %s, %s, %d, %s)\n%s[0] = l\nreturn l", in[0].slice(), in[1].slice(), out[1].slice(), in[0].buf.Size, float(a.Delta), out[0].param), nil
}
