package planner

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// residualBlock is a ResNet basic block after a stem: conv, batch norm,
// relu (fused on a FusedReLU target), conv, batch norm, the sum with the
// stem's output, and a relu after the sum (fused too); the stem's batch
// norm is followed by a leaky relu, which stays a step of its own.
func residualBlock() *spec.Model {
	b := newModel("block", 4, 8, 8)
	bn := func(name string) { b.add(spec.Node{Name: name, Op: spec.OpBatchNorm, Eps: 1e-5, Momentum: 0.1}, same) }
	b.conv("stem", 8, 3, 1)
	bn("stem_bn")
	stem := b.unary("stem_act", spec.OpLeakyReLU, 0.1)
	b.conv("conv1", 8, 3, 1, stem)
	bn("bn1")
	b.unary("relu1", spec.OpReLU, 0)
	b.conv("conv2", 8, 3, 1)
	bn("bn2")
	sum := b.binary("sum", spec.OpAdd, b.last(), stem)
	b.unary("out", spec.OpReLU, 0, sum)
	b.add(spec.Node{Name: "gap", Op: spec.OpGlobalAvgPool}, func(in [][]int) []int { return in[0][:1] })
	b.dense("fc", 10)
	b.m.Training.Optimizer = spec.Optimizer{Kind: "sgd", LR: 0.1, Momentum: 0.9}
	return b.model()
}

// TestFusedReLUs: on a target with FusedReLU and ShareSumGrads, bn1
// takes relu1 (forward and backward, the backward reading beta), the sum
// takes out, the sum's backward is gone with both operands reading its dy,
// and the leaky relu after stem_bn stays; on the CPU's target only the
// sum takes its relu (SumReLU), and with fusion off nothing changes.
// Inference plans fold the relus alike.
func TestFusedReLUs(t *testing.T) {
	gpu := CPU // the CPU's rules with a GPU's folds: batch norms kept, relus fused
	gpu.FusedReLU, gpu.ShareSumGrads, gpu.FoldBatchNorm, gpu.NoFoldWhy = true, true, false, ""
	for _, training := range []bool{false, true} {
		p := mustBuild(t, residualBlock(), Options{Training: training, Fusion: true, Target: gpu})
		var bnAct, sumAct, relus []string
		for _, s := range p.Forward {
			switch {
			case s.Kernel == KBatchNorm && s.Attr.Act == "relu":
				bnAct = append(bnAct, s.Layer)
				if got := p.Buffers[s.Out[0]].Name; got != "relu1.out" {
					t.Errorf("training %v: %s writes %s, want relu1.out", training, s.Layer, got)
				}
			case s.Kernel == KBinary && s.Attr.Act == "relu":
				sumAct = append(sumAct, s.Layer)
				if got := p.Buffers[s.Out[0]].Name; got != "out.out" {
					t.Errorf("training %v: %s writes %s, want out.out", training, s.Layer, got)
				}
			case s.Kernel == KUnary:
				relus = append(relus, s.Layer)
			}
		}
		if strings.Join(bnAct, " ") != "bn1" || strings.Join(sumAct, " ") != "sum" || strings.Join(relus, " ") != "stem_act" {
			t.Errorf("training %v: batch norms with relu %v, sums with relu %v, unary steps %v; want [bn1], [sum], [stem_act]", training, bnAct, sumAct, relus)
		}
		if !training {
			continue
		}
		var bwdAct []string
		for _, s := range p.Backward {
			switch s.Kernel {
			case KBatchNormBwd:
				if s.Attr.Act == "" {
					continue
				}
				bwdAct = append(bwdAct, s.Layer)
				if len(s.In) != 6 || p.Buffers[s.In[5]].Name != "bn1.bias" {
					t.Errorf("bn1's backward reads %d inputs, the sixth %q; want 6, bn1.bias (beta)", len(s.In), p.Buffers[s.In[len(s.In)-1]].Name)
				}
			case KBinaryBwd:
				t.Errorf("a binary_bwd of %s is left (the sum's operands should read its dy)", s.Layer)
			case KUnaryBwd:
				if s.Layer == "relu1" {
					t.Errorf("relu1 still has a backward step")
				}
			}
		}
		if strings.Join(bwdAct, " ") != "bn1" {
			t.Errorf("batch norm backwards with relu: %v, want [bn1]", bwdAct)
		}
		// bn2's backward reads what the sum's backward would have copied:
		// the relu's dx, which the accumulate into the stem's gradient reads too
		var outGrad BufID = NoBuf
		readers := map[string]bool{}
		for _, s := range p.Backward {
			if s.Kernel == KUnaryBwd && s.Layer == "out" {
				outGrad = s.Out[0]
			}
		}
		for _, s := range p.Backward {
			for _, id := range s.In {
				if id == outGrad && outGrad != NoBuf {
					readers[string(s.Kernel)+" "+s.Layer] = true
				}
			}
		}
		if !readers["batchnorm_bwd bn2"] || len(readers) != 2 {
			t.Errorf("the sum's dy is read by %v, want bn2's backward and one accumulate", readers)
		}
		var lines int
		for _, f := range p.Fusions {
			if strings.Contains(f, "relu") || strings.Contains(f, "take its dy") {
				lines++
			}
		}
		if lines != 3 {
			t.Errorf("fusions %q: want a line for bn1's relu, the sum's relu and the sum's dy", p.Fusions)
		}
	}
	// The CPU's target folds the sum's relu alone (SumReLU): its batch
	// norms keep theirs.
	for name, c := range map[string]struct {
		opts   Options
		sumAct string
	}{
		"the CPU target":       {Options{Training: true, Fusion: true}, "relu"},
		"fusion off on a GPU":  {Options{Training: true, Target: gpu}, ""},
		"inference on the CPU": {Options{Fusion: true}, "relu"},
	} {
		opts := c.opts
		p := mustBuild(t, residualBlock(), opts)
		for _, s := range p.allSteps() {
			if (s.Kernel == KBatchNorm || s.Kernel == KBatchNormBwd) && s.Attr.Act != "" {
				t.Errorf("%s: %s of %s has Act %q", name, s.Kernel, s.Layer, s.Attr.Act)
			}
			if s.Kernel == KBinary && s.Attr.Act != c.sumAct {
				t.Errorf("%s: the sum has Act %q, want %q", name, s.Attr.Act, c.sumAct)
			}
		}
		if opts.Training && !slicesHas(p.Backward, KBinaryBwd) {
			t.Errorf("%s: the sum's backward is gone", name)
		}
	}
}

func slicesHas(ph Phase, k Kernel) bool {
	for _, s := range ph {
		if s.Kernel == k {
			return true
		}
	}
	return false
}
