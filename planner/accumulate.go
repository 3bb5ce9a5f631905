package planner

// accumulate makes one optimizer step out of several micro-batches: the
// gradients of accumulate batches are summed, and the update sees their
// mean, the gradient of one batch of accumulate·Batch samples (each
// micro-batch's loss is a mean over its Batch samples).
//
// Before: Backward writes every trainable param's gradient; Update holds
// the optimizer's steps, a KClipGradNorm first when the spec clips. After,
// for accumulate > 1: each trainable param has a "<param>.grad_sum"
// buffer (KindGradSum, in the state arena, zero when the program starts),
// Backward ends with one KAccumulate step per trainable param that adds
// the gradient to its sum, Update begins with one KGradMean step per
// trainable param (grad = sum/accumulate, sum = 0), so that clipping and
// the updates read the mean gradient, and Plan.Accumulate is accumulate.
// The program runs Forward and Backward on every micro-batch and Update
// after the last. For accumulate ≤ 1 the plan is unchanged.
func accumulate(p *Plan, accumulate int) {
	if accumulate <= 1 {
		return
	}
	p.Accumulate = accumulate
	var means []Step
	for _, pr := range p.Params {
		if !pr.Trainable || pr.Grad == NoBuf {
			continue
		}
		sum := p.addBuffer(pr.Name+".grad_sum", KindGradSum, p.shapeOf(pr.Buf))
		p.Backward = append(p.Backward, Step{Kernel: KAccumulate, Layer: pr.Layer, In: []BufID{sum, pr.Grad}, Out: []BufID{sum}})
		means = append(means, Step{Kernel: KGradMean, Layer: pr.Layer, In: []BufID{sum}, Out: []BufID{pr.Grad, sum}, Attr: Attr{Scale: 1 / float64(accumulate)}})
	}
	p.Update = append(means, p.Update...)
}
