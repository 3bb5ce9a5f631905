package planner

// chooseLossRows gives every softmax_xent step of a plan for a Target
// with LossRows a scratch of one float32 per row, where the backend's
// kernels write each row's loss in parallel before one threadgroup sums
// them in a fixed order. One threadgroup doing both left a GPT's 16,384
// token rows at 2.8 ms a step on an H200 (docs/runs/gpu-profile-2026-11-29-b.txt);
// a sum of atomics would make the loss differ from run to run.
//
// Before: the loss is added (a training plan); each softmax_xent step has
// two outputs, the loss [1] and dlogits.
// After: with t.LossRows, each softmax_xent step has a third output, a new
// scratch buffer LAYER.loss_rows of the logits' rows (B, or B·T for a
// loss per token), appended to Buffers. Without it, nothing changed.
func chooseLossRows(p *Plan, t Target) {
	if !t.LossRows {
		return
	}
	for i := range p.Backward {
		s := &p.Backward[i]
		if s.Kernel != KSoftmaxXent || len(s.Out) != 2 {
			continue
		}
		z := p.shapeOf(s.In[0])
		rows := 1
		for _, d := range z[:len(z)-1] {
			rows *= d
		}
		s.Out = append(s.Out, p.addBuffer(p.freeName(s.Layer+".loss_rows"), KindScratch, []int{rows}))
	}
}
