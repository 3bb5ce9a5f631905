package planner

// fuseUpdate gathers the Adam or SGD steps of a target that updates
// several params in one multi-tensor kernel, so that a training step's
// optimizer is one launch (or a few) instead of one per param.
//
// Before: Update holds one KAdam (or KSGD) step per trainable param, in
// Params order, all with the same Attr but for AdamW's decay (optimize.go),
// perhaps after a KClipGradNorm step, which stays first. After: for a Target
// whose UpdateTensors is 2 or more, each run of up to UpdateTensors
// consecutive KAdam steps with the same Attr but for WeightDecay is one
// KAdamMulti step, and each such run of KSGD steps one KSGDMulti step: its
// operands the steps' operands in order (triples for Adam, pairs for SGD),
// its Layer the first step's, Fused every step's layer (once for a layer's
// consecutive params), and Attr.Decays each step's WeightDecay where they
// differ (AdamW decays a weight but not its bias, optimize.go). A run of
// one stays KAdam or KSGD. The arithmetic of each param is the same;
// nothing else changed.
func fuseUpdate(p *Plan, t Target) {
	if t.UpdateTensors < 2 {
		return
	}
	var out []Step
	flush := func(run []Step) {
		if len(run) == 1 {
			out = append(out, run[0])
			return
		}
		m := Step{Kernel: multiUpdate[run[0].Kernel], Layer: run[0].Layer, Attr: run[0].Attr}
		for _, s := range run {
			if s.Attr.WeightDecay != m.Attr.WeightDecay && m.Attr.Decays == nil {
				m.Attr.Decays = make([]float64, len(run))
				for i, r := range run {
					m.Attr.Decays[i] = r.Attr.WeightDecay
				}
				m.Attr.WeightDecay = 0
			}
			m.In = append(m.In, s.In...)
			m.Out = append(m.Out, s.Out...)
			if len(m.Fused) == 0 || m.Fused[len(m.Fused)-1] != s.Layer {
				m.Fused = append(m.Fused, s.Layer) // a layer's weight and bias: once
			}
		}
		out = append(out, m)
	}
	var run []Step
	for _, s := range p.Update {
		if len(run) > 0 && (s.Kernel != run[0].Kernel || !sameUpdate(s.Attr, run[0].Attr) || len(run) == t.UpdateTensors) {
			flush(run)
			run = nil
		}
		if multiUpdate[s.Kernel] == "" {
			out = append(out, s)
			continue
		}
		run = append(run, s)
	}
	if len(run) > 0 {
		flush(run)
	}
	p.Update = out
}

// multiUpdate is the multi-tensor kernel of each optimizer kernel that
// has one.
var multiUpdate = map[Kernel]Kernel{KAdam: KAdamMulti, KSGD: KSGDMulti}

// sameUpdate reports whether two optimizer steps of one kernel have the
// same hyper-parameters but for the weight decay, which a multi-tensor
// step keeps per tensor.
func sameUpdate(a, b Attr) bool {
	return a.Beta1 == b.Beta1 && a.Beta2 == b.Beta2 && a.Eps == b.Eps && a.Decoupled == b.Decoupled && a.Momentum == b.Momentum
}
