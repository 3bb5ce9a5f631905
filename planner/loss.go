package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// addLoss adds the labels, the loss and the loss step.
//
// Before: a lowered forward plan with Output set; Backward is empty.
// After: Labels and Loss are set, and Backward holds one loss step that
// reads the output and the labels and writes the loss and the gradient of
// the mean loss with respect to the output ("<output>.grad"), which seeds
// differentiate. softmax_cross_entropy takes the output as logits and
// one-hot labels [batch, classes] (or, after an embedding, [batch, tokens,
// classes], the mean over every token); mse, mae and huber take a target of the
// output's shape.
func addLoss(p *Plan, m *spec.Model) error {
	out := p.Output
	outShape := p.shapeOf(out)
	n := m.Node(m.Output)
	layer := p.Buffers[out].Name
	if n != nil {
		layer = n.Name
	}
	failf := func(format string, args ...any) error {
		e := &spec.Error{Layer: layer, Message: fmt.Sprintf(format, args...)}
		if n != nil {
			e.Pos = n.Pos
		}
		return e
	}
	var k Kernel
	var attr Attr
	switch m.Training.Loss {
	case "softmax_cross_entropy":
		// [classes], or [tokens, classes] for a model that reads token
		// ids: the loss is then the mean over every token
		perToken := len(outShape) == 3 && p.readsTokens()
		if len(outShape) != 2 && !perToken {
			return failf("softmax_cross_entropy needs an output of shape [classes] (or [tokens, classes] after an embedding), got %s", shapeString(outShape[1:]))
		}
		if c := m.Dataset.Classes; c > 0 && c != outShape[len(outShape)-1] {
			return failf("the output has %d classes but the dataset has %d", outShape[len(outShape)-1], c)
		}
		k = KSoftmaxXent
	case "mse":
		k = KMSE
	case "mae":
		k = KMAE
	case "huber":
		k = KHuber
		attr.Delta = m.Training.HuberDelta
		if !(attr.Delta > 0) {
			attr.Delta = 1 // the schema's default
		}
	default:
		return failf("the planner knows no loss %q (softmax_cross_entropy, mse, mae or huber)", m.Training.Loss)
	}
	p.Labels = p.addBuffer("labels", KindLabels, outShape)
	p.Loss = p.addBuffer("loss", KindLoss, []int{1})
	grad := p.addBuffer(p.Buffers[out].Name+".grad", KindGrad, outShape)
	p.Backward = append(p.Backward, Step{
		Kernel: k, Layer: layer, In: []BufID{out, p.Labels}, Out: []BufID{p.Loss, grad}, Attr: attr,
	})
	return nil
}
