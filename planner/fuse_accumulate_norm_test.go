package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// addsDxNorm lists the layers of a phase's layernorm_bwd steps that add
// into dx.
func addsDxNorm(ph Phase) []string {
	var layers []string
	for _, s := range ph {
		if s.Kernel == KLayerNormBwd && s.Attr.AccumulateDx {
			layers = append(layers, s.Layer)
		}
	}
	return layers
}

// TestFuseAccumulateNorm builds the tiny GPT for a Target that keeps its
// accumulate steps and for one with GemmAccumulate and
// LayerNormAccumulate, as the CPU and GPU targets have them: every accumulate of
// the residual stream's gradient (the residual add's gradient plus a
// layer norm's dx: h1_res1's, h0_res2's, h0_res1's and the embedding
// dropout's) is gone, the 4 layer norms after the first (ln_f's, whose
// dx begins the stream's gradient) add into dx, each into the storage of
// the value's gradient that one earlier step wrote and none has read
// yet, and only the tied head's weight gradient (two param gradients)
// keeps its accumulate. `mlbuild plan` shows the steps that add, the
// fusions name them, and Verify passes; without fusion nothing folds.
func TestFuseAccumulateNorm(t *testing.T) {
	m, err := spec.Load("../testdata/specs/valid/gpt_tiny.cue")
	if err != nil {
		t.Fatal(err)
	}
	cpu := mustBuild(t, m, Options{Training: true, Fusion: true, Target: keeping()})
	if got := accumulates(cpu.Backward); len(got) != 9 || len(addsDxNorm(cpu.Backward)) > 0 {
		t.Fatalf("kept plan: accumulate steps of %v, layernorm_bwd adding dx of %v; want 9 (and q's, k's and v's) and none", got, addsDxNorm(cpu.Backward))
	}
	gpu := accumulating()
	gpu.LayerNormAccumulate = true
	gemmOnly := mustBuild(t, m, Options{Training: true, Fusion: true, Target: accumulating()})
	p := mustBuild(t, m, Options{Training: true, Fusion: true, Target: gpu})
	if err := Verify(p); err != nil {
		t.Fatal(err)
	}
	if got, want := accumulates(gemmOnly.Backward), []string{"h1_res1", "h0_res2", "h0_res1", "drop", "wte"}; !slices.Equal(got, want) {
		t.Errorf("with GemmAccumulate alone, accumulate steps of %v, want %v", got, want)
	}
	if got := accumulates(p.Backward); !slices.Equal(got, []string{"wte"}) {
		t.Errorf("accumulate steps of %v left, want wte's alone", got)
	}
	adds := []string{"h1_ln2", "h1_ln1", "h0_ln2", "h0_ln1"}
	if got := addsDxNorm(p.Backward); !slices.Equal(got, adds) {
		t.Errorf("layernorm_bwd adding dx: %v, want %v", got, adds)
	}
	// The CPU Target folds them all.
	own := mustBuild(t, m, Options{Training: true, Fusion: true})
	if got := addsDxNorm(own.Backward); !slices.Equal(got, adds) || !slices.Equal(accumulates(own.Backward), []string{"wte"}) || len(addsDx(own.Backward)) == 0 {
		t.Errorf("the CPU plan: layernorm_bwd adding dx of %v, gemm_bwd of %v, accumulate steps of %v", got, addsDx(own.Backward), accumulates(own.Backward))
	}
	if got := len(gemmOnly.Backward) - len(p.Backward); got != 4 {
		t.Errorf("%d backward steps fewer than with GemmAccumulate alone, want 4", got)
	}
	// Each sum is written by one step before the layer norm adds into it,
	// and read by none before.
	for i, s := range p.Backward {
		if s.Kernel != KLayerNormBwd || !s.Attr.AccumulateDx {
			continue
		}
		sum := p.root(s.Out[0])
		var writers []int
		for j, w := range p.Backward[:i] {
			for _, id := range w.In {
				if id != NoBuf && p.root(id) == sum {
					t.Errorf("%s %s reads %s before %s adds into it", w.Kernel, w.Layer, p.Buffers[sum].Name, s.Layer)
				}
			}
			for _, id := range w.Out {
				if id != NoBuf && p.root(id) == sum {
					writers = append(writers, j)
				}
			}
		}
		if len(writers) != 1 || p.Buffers[sum].Kind != KindGrad {
			t.Errorf("%s adds into %s (%s), written by steps %v before it; want one writer of a gradient", s.Layer, p.Buffers[sum].Name, p.Buffers[sum].Kind, writers)
		}
	}
	var fusions int
	for _, f := range p.Fusions {
		if strings.Contains(f, "accumulate -> layernorm_bwd (dx += into the gradient of") {
			fusions++
		}
	}
	var text strings.Builder
	if err := WriteText(&text, p); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text.String(), "layernorm_bwd(dx +=)"); n != len(adds) || fusions != len(adds) {
		t.Errorf("mlbuild plan shows %d layernorm_bwd(dx +=) steps and %d fusions, want %d each", n, fusions, len(adds))
	}
	unfused := mustBuild(t, m, Options{Training: true, Fusion: false, Target: gpu})
	if n := len(addsDxNorm(unfused.Backward)); n > 0 {
		t.Errorf("without fusion %d layer norms add into dx, want none", n)
	}
}

// TestVerifyAccumulateNorm checks Verify's rules for a layernorm_bwd that
// adds into dx: only with dx, after the sum's first writer, and without
// reading the sum's storage as an input.
func TestVerifyAccumulateNorm(t *testing.T) {
	m, err := spec.Load("../testdata/specs/valid/gpt_tiny.cue")
	if err != nil {
		t.Fatal(err)
	}
	gpu := accumulating()
	gpu.LayerNormAccumulate = true
	index := func(p *Plan, layer string) int {
		for i, s := range p.Backward {
			if s.Layer == layer && s.Kernel == KLayerNormBwd {
				return i
			}
		}
		t.Fatalf("no layernorm_bwd of %s", layer)
		return -1
	}
	for _, tc := range []struct {
		name   string
		break_ func(p *Plan)
		want   string
	}{
		{"the first writer adds", func(p *Plan) {
			p.Backward[index(p, "ln_f")].Attr.AccumulateDx = true
		}, "before any step writes it"},
		{"without dx", func(p *Plan) {
			p.Backward[index(p, "h1_ln2")].Out[0] = NoBuf
		}, "adds into dx"},
		{"dy is the sum", func(p *Plan) {
			s := &p.Backward[index(p, "h1_ln2")]
			s.In[4] = s.Out[0]
		}, "also reads as an input"},
	} {
		p := mustBuild(t, m, Options{Training: true, Fusion: true, Target: gpu})
		tc.break_(p)
		if err := Verify(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify says %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
