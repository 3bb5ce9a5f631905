package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// optimize adds the optimizer's state and its update steps.
//
// Before: every trainable param has its gradient buffer, written in
// Backward. After: Update holds one KSGD or KAdam step per trainable param,
// in Params order, after a KClipGradNorm step over every gradient when the
// spec sets clipNorm, and each such param has its state buffers (sgd:
// "<param>.velocity"; adam and adamw: "<param>.adam_m", "<param>.adam_v").
// The learning rate and step count are run-time inputs of the program, so
// they are not in the plan. adamw is Adam with decoupled weight decay,
// which applies to the params decayed reports (every param with
// opt.DecayAll): the other params' steps have WeightDecay 0. Zero Adam
// hyper-parameters take PyTorch's defaults (0.9, 0.999, 1e-8).
func optimize(p *Plan, opt spec.Optimizer, clipNorm float64) error {
	attr := Attr{WeightDecay: opt.WeightDecay}
	var k Kernel
	var states []string
	switch opt.Kind {
	case "sgd":
		k, states = KSGD, []string{"velocity"}
		attr.Momentum = opt.Momentum
	case "adam", "adamw":
		k, states = KAdam, []string{"adam_m", "adam_v"}
		attr.Beta1, attr.Beta2, attr.Eps = opt.Beta1, opt.Beta2, opt.Eps
		if attr.Beta1 == 0 && attr.Beta2 == 0 {
			attr.Beta1, attr.Beta2 = 0.9, 0.999
		}
		if attr.Eps == 0 {
			attr.Eps = 1e-8
		}
		attr.Decoupled = opt.Kind == "adamw"
	default:
		return &spec.Error{Message: fmt.Sprintf("the planner knows no optimizer %q (sgd, adam or adamw)", opt.Kind)}
	}
	for i := range p.Params {
		pr := &p.Params[i]
		if !pr.Trainable {
			continue
		}
		pr.State = nil
		for _, st := range states {
			pr.State = append(pr.State, p.addBuffer(pr.Name+"."+st, KindOptState, p.shapeOf(pr.Buf)))
		}
		step := Step{Kernel: k, Layer: pr.Layer, Attr: attr}
		if attr.Decoupled && !opt.DecayAll && !decayed(pr, p.shapeOf(pr.Buf)) {
			step.Attr.WeightDecay = 0
		}
		step.In = append([]BufID{pr.Grad}, pr.State...)
		step.Out = append([]BufID{pr.Buf}, pr.State...)
		p.Update = append(p.Update, step)
	}
	if clipNorm > 0 {
		clip(p, clipNorm)
	}
	return nil
}

// clip puts a KClipGradNorm step over every trainable param's gradient
// before the updates, with its norms buffer as scratch.
func clip(p *Plan, clipNorm float64) {
	st := Step{Kernel: KClipGradNorm, Layer: "gradients", Attr: Attr{ClipNorm: clipNorm}}
	for _, pr := range p.Params {
		if pr.Trainable {
			st.In = append(st.In, pr.Grad)
		}
	}
	if len(st.In) == 0 {
		return
	}
	st.Out = append(append([]BufID(nil), st.In...), p.addBuffer("grad_norm.sums", KindScratch, []int{len(st.In) + 1}))
	p.Update = append([]Step{st}, p.Update...)
}

// decayed reports whether AdamW's weight decay applies to a param: one with
// two or more axes that no normalisation owns (dense and convolution
// weights, embedding and position tables), nanoGPT's rule. Biases have one
// axis; a norm's gain and shift start at ones and zeros, whatever their
// rank, while every other weight starts uniform.
func decayed(pr *Param, shape []int) bool {
	return len(shape) >= 2 && pr.Init == "uniform"
}
