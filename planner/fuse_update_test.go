package planner

import (
	"fmt"
	"slices"
	"testing"
)

// TestFuseUpdateRuns: fuseUpdate cuts the optimizer steps into
// multi-tensor steps where the kernel or a hyper-parameter other than the
// weight decay changes, or a run reaches UpdateTensors; a run of one
// stays as it was, the clipping step stays first, and each multi-tensor
// step keeps every param's operands in order, every layer once and the
// weight decays per param where they differ.
func TestFuseUpdateRuns(t *testing.T) {
	// sgd is an SGD step of param id (grad 100+id, velocity 200+id) of
	// layer l; adam's moments are 200+id and 300+id.
	sgd := func(id BufID, l string, momentum, wd float64) Step {
		return Step{Kernel: KSGD, Layer: l, In: []BufID{100 + id, 200 + id}, Out: []BufID{id, 200 + id}, Attr: Attr{Momentum: momentum, WeightDecay: wd}}
	}
	adam := func(id BufID, l string, wd float64) Step {
		return Step{Kernel: KAdam, Layer: l, In: []BufID{100 + id, 200 + id, 300 + id}, Out: []BufID{id, 200 + id, 300 + id},
			Attr: Attr{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: wd, Decoupled: true}}
	}
	clip := Step{Kernel: KClipGradNorm, Layer: "gradients", In: []BufID{101}, Out: []BufID{101, 400}, Attr: Attr{ClipNorm: 1}}
	// show prints a step as its kernel, layers, params and decays.
	show := func(s Step) string {
		width := map[Kernel]int{KSGD: 2, KSGDMulti: 2, KAdam: 3, KAdamMulti: 3}[s.Kernel]
		if width == 0 {
			return string(s.Kernel)
		}
		var params []BufID
		for i := 0; i < len(s.Out); i += width {
			params = append(params, s.Out[i])
			if s.In[i] != 100+s.Out[i] {
				return fmt.Sprintf("%s with param %d's gradient %d", s.Kernel, s.Out[i], s.In[i])
			}
			for j := 1; j < width; j++ { // state j of param id is 100·(j+1) + id
				if want := BufID(100*(j+1)) + s.Out[i]; s.In[i+j] != want || s.Out[i+j] != want {
					return fmt.Sprintf("%s with param %d's state %d in %d out %d", s.Kernel, s.Out[i], j, s.In[i+j], s.Out[i+j])
				}
			}
		}
		return fmt.Sprintf("%s %v %v m%g wd%g %v", s.Kernel, s.Fused, params, s.Attr.Momentum, s.Attr.WeightDecay, s.Attr.Decays)
	}
	for _, tc := range []struct {
		name    string
		tensors int
		update  []Step
		want    []string
	}{
		{"sgd, one decay", 64, []Step{sgd(1, "a", 0.9, 5e-4), sgd(2, "a", 0.9, 5e-4), sgd(3, "b", 0.9, 5e-4)},
			[]string{"sgd_multi [a b] [1 2 3] m0.9 wd0.0005 []"}},
		{"sgd, per-param decays", 64, []Step{sgd(1, "a", 0.9, 5e-4), sgd(2, "a", 0.9, 0), sgd(3, "b", 0.9, 1e-3)},
			[]string{"sgd_multi [a b] [1 2 3] m0.9 wd0 [0.0005 0 0.001]"}},
		{"sgd without momentum", 64, []Step{sgd(1, "a", 0, 0), sgd(2, "b", 0, 0)},
			[]string{"sgd_multi [a b] [1 2] m0 wd0 []"}},
		{"a change of momentum cuts the run", 64, []Step{clip, sgd(1, "a", 0.9, 0), sgd(2, "b", 0.9, 0), sgd(3, "c", 0.5, 0), sgd(4, "d", 0.9, 0), sgd(5, "e", 0.9, 0)},
			[]string{"clip_grad_norm", "sgd_multi [a b] [1 2] m0.9 wd0 []", "sgd [c] [3] m0.5 wd0 []", "sgd_multi [d e] [4 5] m0.9 wd0 []"}},
		{"at most UpdateTensors a step", 2, []Step{sgd(1, "a", 0.9, 0), sgd(2, "a", 0.9, 1), sgd(3, "b", 0.9, 1), sgd(4, "b", 0.9, 1), sgd(5, "c", 0.9, 1)},
			[]string{"sgd_multi [a] [1 2] m0.9 wd0 [0 1]", "sgd_multi [b] [3 4] m0.9 wd1 []", "sgd [c] [5] m0.9 wd1 []"}},
		{"adam, as before", 64, []Step{clip, adam(1, "a", 0.1), adam(2, "a", 0), adam(3, "b", 0.1)},
			[]string{"clip_grad_norm", "adam_multi [a b] [1 2 3] m0 wd0 [0.1 0 0.1]"}},
		{"a target without multi-tensor updates", 1, []Step{sgd(1, "a", 0.9, 0), sgd(2, "b", 0.9, 0)},
			[]string{"sgd [a] [1] m0.9 wd0 []", "sgd [b] [2] m0.9 wd0 []"}},
	} {
		p := &Plan{Update: slices.Clone(tc.update)}
		fuseUpdate(p, Target{UpdateTensors: tc.tensors})
		var got []string
		for _, s := range p.Update {
			if s.Kernel == KSGD || s.Kernel == KAdam {
				s.Fused = []string{s.Layer}
			}
			got = append(got, show(s))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
