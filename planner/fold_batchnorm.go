package planner

import (
	"fmt"
	"strings"
)

// foldBatchNorm folds each batch norm of an inference plan into the
// convolution or dense layer before it. At inference a batch norm is an
// affine map per channel, y = (x − mean)·s + beta with
// s = gamma/sqrt(var + eps), so a convolution followed by one is the
// convolution with weights W·s and bias (b − mean)·s + beta: one pass
// over the activations instead of two, and the ReLU after the batch norm
// then follows the convolution directly, for fuseEpilogue to fold into
// it as well. A dense layer's output [B, N] has its N features as the
// batch norm's channels, and folds alike.
//
// Before: Forward is lowered, and the plan is an inference plan (a
// training plan's batch norm normalises by the batch's statistics and
// updates the running ones, which no fold can do). After, for a target
// with FoldBatchNorm: every batchnorm step whose input is the output of a
// conv2d step (2-D, with no activation or pool of its own yet) or of a
// gemm step (with no activation), read by that batchnorm alone and by
// nothing else (not the plan's output, no view), is gone, and so are its
// input and saved statistics; the layer's step writes the batch norm's
// output, reading in place of its weight and bias two KindFolded buffers
// ("<layer>.weight.folded" and "<layer>.bias.folded", a bias even where
// the layer had none), which a KFoldBatchNorm step computes from the
// weight, the bias, the batch norm's gamma, beta and running statistics.
// The fold steps lead Forward, in the order of their layers, so that the
// program can run them only when the weights or statistics changed
// (after loading them, after training steps) and never writes what they
// compute into a weights file: the params and statistics are the spec's,
// untouched. Grouped and depthwise convolutions fold alike (a scale per
// output channel). For a target without FoldBatchNorm the plan is
// unchanged, and one line of Fusions names the batch norms that would
// fold and says why they do not (Target.NoFoldWhy), when the target gives
// a reason.
func foldBatchNorm(p *Plan, t Target) {
	var folds Phase
	var kept []string // the batch norms a target without FoldBatchNorm keeps
	drop := make([]bool, len(p.Forward))
	for j := range p.Forward {
		bn := &p.Forward[j]
		if bn.Kernel != KBatchNorm {
			continue
		}
		x := bn.In[0]
		i := producer(p, x)
		if i < 0 {
			continue
		}
		layer := &p.Forward[i]
		switch {
		case layer.Attr.Act != "":
			continue
		case layer.Kernel == KConv2D && layer.Attr.Pool == nil && layer.Attr.Conv != nil && !layer.Attr.Conv.OneD:
		case layer.Kernel == KGemm:
		default:
			continue
		}
		if r, ok := soleForwardReader(p, x); !ok || r != j {
			continue
		}
		if !t.FoldBatchNorm {
			kept = append(kept, layer.Layer+" + "+bn.Layer)
			continue
		}
		w, b := layer.In[1], layer.In[2]
		wf := p.addBuffer(p.freeName(layer.Layer+".weight.folded"), KindFolded, p.shapeOf(w))
		bf := p.addBuffer(p.freeName(layer.Layer+".bias.folded"), KindFolded, []int{p.shapeOf(w)[0]})
		folds = append(folds, Step{Kernel: KFoldBatchNorm, Layer: layer.Layer,
			In:  []BufID{w, b, bn.In[1], bn.In[2], bn.In[3], bn.In[4]},
			Out: []BufID{wf, bf}, Attr: Attr{Eps: bn.Attr.Eps}, Fused: []string{layer.Layer, bn.Layer}})
		layer.In[1], layer.In[2] = wf, bf
		layer.Out[0] = bn.Out[0]
		layer.Fused = append(fusedNames(layer), bn.Layer)
		drop[j] = true
		bn.In = nil // dead now: later searches must not count its read
		p.Fusions = append(p.Fusions, fmt.Sprintf("%s + %s -> %s (batch norm folded into the weights and bias by fold step %d, run when they change)",
			layer.Layer, bn.Layer, layer.Kernel, len(folds)-1))
	}
	if len(kept) > 0 && t.NoFoldWhy != "" {
		p.Fusions = append(p.Fusions, fmt.Sprintf("batch norms not folded (%d: %s): %s", len(kept), strings.Join(kept, ", "), t.NoFoldWhy))
	}
	if len(folds) == 0 {
		return
	}
	for i, s := range p.Forward {
		if !drop[i] {
			folds = append(folds, s)
		}
	}
	p.Forward = folds
	p.removeUnused()
}

// producer returns the index of the forward step whose first output is
// id, or -1.
func producer(p *Plan, id BufID) int {
	for i, s := range p.Forward {
		if len(s.Out) > 0 && s.Out[0] == id {
			return i
		}
	}
	return -1
}
