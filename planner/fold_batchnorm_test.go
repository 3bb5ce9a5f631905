package planner

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// foldable is a convolution without bias and a depthwise one, each followed
// by a batch norm and a ReLU, and a third batch norm whose convolution's
// output a skip connection also reads, so that it must stay.
func foldable() *spec.Model {
	b := newModel("foldable", 4, 6, 6)
	bn := func(name string) { b.add(spec.Node{Name: name, Op: spec.OpBatchNorm, Eps: 1e-3, Momentum: 0.1}, same) }
	b.conv("conv1", 8, 3, 1)
	b.m.Nodes[len(b.m.Nodes)-1].Bias = false
	bn("bn1")
	b.unary("relu1", spec.OpReLU, 0)
	dw := b.conv("dw", 8, 3, 1)
	b.m.Nodes[len(b.m.Nodes)-1].Groups = 8
	bn("bn2")
	b.unary("relu2", spec.OpReLU, 0)
	c3 := b.conv("conv3", 8, 3, 1)
	bn("bn3")
	b.binary("sum", spec.OpAdd, b.last(), c3)
	_ = dw
	b.flatten("flat")
	b.dense("fc", 3)
	return b.model()
}

// TestFoldBatchNorm checks the fold on the CPU target: each batch norm
// whose convolution's output it alone reads is gone, the convolution
// reads folded weights and a folded bias (one even where it had none) and
// applies the ReLU, the fold steps lead Forward, and the shared one stays.
func TestFoldBatchNorm(t *testing.T) {
	p := mustBuild(t, foldable(), Options{Batch: 2, Fusion: true})
	if n := p.FoldSteps(); n != 2 {
		t.Fatalf("%d fold steps, want 2 (conv1+bn1, dw+bn2)", n)
	}
	var norms []string
	for _, s := range p.Forward[p.FoldSteps():] {
		switch s.Kernel {
		case KFoldBatchNorm:
			t.Errorf("a fold step after the head of Forward: %s", s.Layer)
		case KBatchNorm:
			norms = append(norms, s.Layer)
		case KConv2D:
			w, b := p.Buffers[s.In[1]], s.In[2]
			folded := s.Layer == "conv1" || s.Layer == "dw"
			if got := w.Kind == KindFolded; got != folded {
				t.Errorf("%s reads weight %s of kind %s", s.Layer, w.Name, w.Kind)
			}
			if folded && (b == NoBuf || p.Buffers[b].Kind != KindFolded || s.Attr.Act != "relu") {
				t.Errorf("%s: bias %d, act %q; want a folded bias and relu", s.Layer, b, s.Attr.Act)
			}
		}
	}
	if strings.Join(norms, ",") != "bn3" {
		t.Errorf("batch norms left %v, want [bn3] (its convolution's output is also the skip's)", norms)
	}
	fold := p.Forward[0]
	if fold.In[1] != NoBuf || p.Buffers[fold.In[0]].Name != "conv1.weight" || fold.Attr.Eps != 1e-3 {
		t.Errorf("conv1's fold step reads %v with eps %g; want conv1.weight, no bias, eps 1e-3", fold.In, fold.Attr.Eps)
	}
	// The folded buffers have an arena of their own, which the work
	// arena's reuse never touches.
	for _, id := range fold.Out {
		if b := p.Buffers[id]; b.Arena != ArenaFolded || b.Offset+b.Size > p.FoldedSize {
			t.Errorf("folded %s is in the %s arena at %d (folded arena %d)", b.Name, b.Arena, b.Offset, p.FoldedSize)
		}
	}
}

// TestFoldBatchNormLeavesOthers checks the plans the fold must not
// change: training plans (batch statistics), unfused plans, and a target
// without FoldBatchNorm, which says why in Fusions.
func TestFoldBatchNormLeavesOthers(t *testing.T) {
	gpu := Target{Name: "gpu", Conv: CPU.Conv, NoFoldWhy: "no fold kernel"}
	for _, tc := range []struct {
		name string
		opts Options
		why  bool
	}{
		{"training", Options{Batch: 2, Training: true, Fusion: true}, false},
		{"no fusion", Options{Batch: 2, Fusion: false}, false},
		{"gpu", Options{Batch: 2, Fusion: true, Target: gpu}, true},
	} {
		p := mustBuild(t, foldable(), tc.opts)
		norms := 0
		for _, s := range p.Forward {
			if s.Kernel == KBatchNorm {
				norms++
			}
			if s.Kernel == KFoldBatchNorm {
				t.Errorf("%s: a fold step", tc.name)
			}
		}
		for _, b := range p.Buffers {
			if b.Kind == KindFolded {
				t.Errorf("%s: folded buffer %s", tc.name, b.Name)
			}
		}
		if norms != 3 {
			t.Errorf("%s: %d batch norms, want 3", tc.name, norms)
		}
		said := strings.Contains(strings.Join(p.Fusions, "\n"), "batch norms not folded (2: conv1 + bn1, dw + bn2): no fold kernel")
		if said != tc.why {
			t.Errorf("%s: fusions %q; want the reason %v", tc.name, p.Fusions, tc.why)
		}
	}
	// The training plan is the same with the fold in the table or not: the
	// pass does not run for it.
	a := mustBuild(t, foldable(), Options{Batch: 2, Training: true, Fusion: true})
	b := mustBuild(t, foldable(), Options{Batch: 2, Training: true, Fusion: true, Target: Target{Name: "cpu", Conv: CPU.Conv, Dense: CPU.Dense, ConvPrecision: CPU.ConvPrecision}})
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("the training plan differs with FoldBatchNorm on and off")
	}
}

// TestVerifyFoldSteps checks that Verify refuses a fold step after the
// head of Forward and a folded buffer written by another step.
func TestVerifyFoldSteps(t *testing.T) {
	p := mustBuild(t, foldable(), Options{Batch: 2, Fusion: true})
	p.Forward[0], p.Forward[2] = p.Forward[2], p.Forward[0]
	if err := Verify(p); err == nil || !strings.Contains(err.Error(), "outside the head") {
		t.Errorf("a fold step after a convolution: Verify says %v", err)
	}
	p = mustBuild(t, foldable(), Options{Batch: 2, Fusion: true})
	w := p.Forward[0].Out[0]
	p.Forward = append(p.Forward, Step{Kernel: KUnary, Layer: "relu9", In: []BufID{w}, Out: []BufID{w}, Attr: Attr{Chain: []UnaryOp{{Op: "relu"}}}})
	if err := Verify(p); err == nil || !strings.Contains(err.Error(), "only its fold step writes") {
		t.Errorf("a unary step writing a folded weight: Verify says %v", err)
	}
}
