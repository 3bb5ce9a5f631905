package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestAdamWDecaysWeightsOnly: AdamW's decoupled decay reaches dense
// weights and embedding tables, not biases nor a layer norm's gain and
// shift; decayAll reaches every param; a multi-tensor step keeps each
// param's decay.
func TestAdamWDecaysWeightsOnly(t *testing.T) {
	want := map[string]bool{
		"wte.weight": true, "wte.pos": true, "q.weight": true, "q.bias": false, "head.weight": true, "head.bias": false,
		"ln.weight": false, "ln.bias": false, "fc.weight": true, "fc.bias": false,
	}
	for _, decayAll := range []bool{false, true} {
		for _, model := range []func() *spec.Model{tokens, transformerNorm} {
			m := model()
			m.Training.Optimizer = spec.Optimizer{Kind: "adamw", LR: 1e-3, WeightDecay: 0.1, DecayAll: decayAll}
			p := mustBuild(t, m, Options{Batch: 2, Training: true, Fusion: true, Target: CPU})
			seen := 0
			for _, s := range p.Update {
				name := p.Buffers[s.Out[0]].Name
				w, ok := want[name]
				if !ok {
					continue
				}
				seen++
				wd := 0.0
				if w || decayAll {
					wd = 0.1
				}
				if s.Attr.WeightDecay != wd || !s.Attr.Decoupled {
					t.Errorf("%s, decayAll %v: %s decays by %g (decoupled %v), want %g", m.Name, decayAll, name, s.Attr.WeightDecay, s.Attr.Decoupled, wd)
				}
			}
			if seen < 4 {
				t.Errorf("%s: only %d of the expected params have an update", m.Name, seen)
			}

			// One multi-tensor step: the same decays, per param.
			gpu := CPU
			gpu.UpdateTensors = 64
			m2 := model()
			m2.Training.Optimizer = m.Training.Optimizer
			pm := mustBuild(t, m2, Options{Batch: 2, Training: true, Fusion: true, Target: gpu})
			if len(pm.Update) != 1 || pm.Update[0].Kernel != KAdamMulti {
				t.Fatalf("%s: %d update steps, want one adam_multi", m.Name, len(pm.Update))
			}
			u := pm.Update[0]
			for i := 0; i < len(u.Out); i += 3 {
				name := pm.Buffers[u.Out[i]].Name
				wd := u.Attr.WeightDecay
				if u.Attr.Decays != nil {
					wd = u.Attr.Decays[i/3]
				}
				if w, ok := want[name]; ok && wd != map[bool]float64{true: 0.1, false: 0}[w || decayAll] {
					t.Errorf("%s multi-tensor, decayAll %v: %s decays by %g", m.Name, decayAll, name, wd)
				}
			}
			if (u.Attr.Decays != nil) == decayAll {
				t.Errorf("%s multi-tensor, decayAll %v: per-param decays %v", m.Name, decayAll, u.Attr.Decays)
			}
		}
	}
}

// TestClipGradNormStep: with clipNorm, the first update step scales every
// trainable param's gradient in place, with a norms buffer of one sum per
// gradient and the scale; without it there is none.
func TestClipGradNormStep(t *testing.T) {
	for _, target := range []Target{CPU, {Name: "multi", Conv: CPU.Conv, Dense: CPU.Dense, ConvPrecision: CPU.ConvPrecision, UpdateTensors: 64}} {
		m := transformerNorm()
		m.Training.Optimizer = spec.Optimizer{Kind: "adamw", LR: 1e-3, WeightDecay: 0.1}
		m.Training.ClipNorm = 0.5
		p := mustBuild(t, m, Options{Batch: 2, Training: true, Fusion: true, Target: target})
		s := p.Update[0]
		if s.Kernel != KClipGradNorm || s.Attr.ClipNorm != 0.5 {
			t.Fatalf("%s: first update step %s %+v, want clip_grad_norm to 0.5", target.Name, s.Kernel, s.Attr)
		}
		var grads []BufID
		for _, pr := range p.Params {
			if pr.Trainable {
				grads = append(grads, pr.Grad)
			}
		}
		if len(s.In) != len(grads) || len(s.Out) != len(grads)+1 {
			t.Fatalf("%s: clip reads %d and writes %d buffers, want the %d gradients and the norms", target.Name, len(s.In), len(s.Out), len(grads))
		}
		for i, id := range grads {
			if s.In[i] != id || s.Out[i] != id {
				t.Errorf("%s: clip operand %d is %d → %d, want gradient %d in place", target.Name, i, s.In[i], s.Out[i], id)
			}
		}
		if sh := p.shapeOf(s.Out[len(grads)]); len(sh) != 1 || sh[0] != len(grads)+1 {
			t.Errorf("%s: norms %v, want [%d]", target.Name, sh, len(grads)+1)
		}
		for _, u := range p.Update[1:] {
			if u.Kernel == KClipGradNorm {
				t.Errorf("%s: a second clip step", target.Name)
			}
		}
		m.Training.ClipNorm = 0
		for _, u := range mustBuild(t, m, Options{Batch: 2, Training: true, Fusion: true, Target: target}).Update {
			if u.Kernel == KClipGradNorm {
				t.Errorf("%s: a clip step without clipNorm", target.Name)
			}
		}
	}
}

// TestAccumulateSteps: with accumulate N, Backward ends by adding every
// trainable param's gradient into its sum, and Update begins, before the
// clipping, by replacing each gradient with its sum divided by N and
// zeroing the sum; the sums live in the state arena. With N = 1 the plan
// is the plan without accumulation.
func TestAccumulateSteps(t *testing.T) {
	for _, target := range []Target{CPU, gpuLike} {
		m := accumulated()
		p := mustBuild(t, m, Options{Batch: 4, Training: true, Fusion: true, Target: target})
		if p.Accumulate != 3 {
			t.Fatalf("%s: Plan.Accumulate = %d, want 3", target.Name, p.Accumulate)
		}
		var trainable []Param
		for _, pr := range p.Params {
			if pr.Trainable {
				trainable = append(trainable, pr)
			}
		}
		tail := p.Backward[len(p.Backward)-len(trainable):]
		for i, pr := range trainable {
			sum := p.Buffers[tail[i].Out[0]]
			if tail[i].Kernel != KAccumulate || tail[i].In[1] != pr.Grad || tail[i].In[0] != sum.ID || sum.Kind != KindGradSum || sum.Name != pr.Name+".grad_sum" || sum.Arena != ArenaState {
				t.Errorf("%s: backward's end %d is %s %v -> %v (%s, %s), want %s's gradient added into its sum in the state arena", target.Name, i, tail[i].Kernel, tail[i].In, tail[i].Out, sum.Name, sum.Arena, pr.Name)
			}
			mean := p.Update[i]
			if mean.Kernel != KGradMean || mean.In[0] != sum.ID || mean.Out[0] != pr.Grad || mean.Out[1] != sum.ID || mean.Attr.Scale != 1.0/3 {
				t.Errorf("%s: update step %d is %s %v -> %v %+v, want grad_mean of %s by 1/3", target.Name, i, mean.Kernel, mean.In, mean.Out, mean.Attr, pr.Name)
			}
		}
		if k := p.Update[len(trainable)].Kernel; k != KClipGradNorm {
			t.Errorf("%s: the step after the means is %s, want the clipping", target.Name, k)
		}
		m.Training.Accumulate = 1
		one := mustBuild(t, m, Options{Batch: 4, Training: true, Fusion: true, Target: target})
		m.Training.Accumulate = 0
		none := mustBuild(t, m, Options{Batch: 4, Training: true, Fusion: true, Target: target})
		if one.Accumulate != 0 || len(one.Buffers) != len(none.Buffers) || len(one.Backward) != len(none.Backward) || len(one.Update) != len(none.Update) {
			t.Errorf("%s: accumulate 1 gives %d buffers, %d backward and %d update steps; without it %d, %d, %d", target.Name,
				len(one.Buffers), len(one.Backward), len(one.Update), len(none.Buffers), len(none.Backward), len(none.Update))
		}
	}
}
