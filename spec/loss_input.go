package spec

import "fmt"

// viewOps pass their input's values through unchanged in number and
// order, so a softmax before them still reaches the loss as probabilities.
var viewOps = map[Op]bool{OpFlatten: true, OpReshape: true, OpDropout: true}

// CheckLossInput rejects a softmax layer that feeds the loss
// softmax_cross_entropy, a habit from Keras (softmax output with
// categorical cross-entropy): the loss takes logits and applies softmax
// itself, so the model would apply it twice; the gradients shrink and
// accuracy suffers, silently. The error is at the softmax layer and says
// how to fix it. Layers that only reshape (flatten, reshape, dropout) may
// sit between the softmax and the output.
func CheckLossInput(m *Model) error {
	if m.Training.Loss != "softmax_cross_entropy" {
		return nil
	}
	n := m.Node(m.Output)
	for n != nil && viewOps[n.Op] && len(n.Inputs) == 1 {
		n = m.Node(n.Inputs[0])
	}
	if n == nil || n.Op != OpSoftmax {
		return nil
	}
	return Errors{{Pos: n.Pos, Layer: n.Name, Message: fmt.Sprintf(
		"the model's output passes through softmax, but the loss softmax_cross_entropy takes logits and applies softmax itself, so training would apply it twice (this costs accuracy); remove layer %s (predict turns logits into probabilities itself), or set training.loss: \"mse\" to train on probabilities", n.Name)}}
}
