package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// The fused attention family's calls (planner.KAttention, KAttentionBwd).
// A CPU program runs rt/cpu's AttentionBlocksFwd and AttentionBlocksBwd,
// whose dropout draws DropoutUniform at a seed and step the forward takes
// from the program's generator (attentionDraws). A GPU program's CPU
// reference runs the plain AttentionFwd and AttentionBwd, whose dropout
// draws the GPU kernels' mask (dropoutUniform at the step's seed xor the
// layer's stream, and its count).

// attentionGeom is the cpu.Attention literal of step st, with dropout in
// training, and bf16 products in a CPU program where the step's precision
// says so (the references take none).
func (g *generator) attentionGeom(st planner.Step, in []operand, training bool) (string, error) {
	qs, ks, _, ok := planner.AttentionHeadShapes(in[0].buf.Shape, in[1].buf.Shape, in[2].buf.Shape, st.Attr.Perm)
	n := len(qs)
	if !ok || n < 2 || len(ks) != n {
		return "", fmt.Errorf("attention of q %v and k %v in the layout %v", in[0].buf.Shape, in[1].buf.Shape, st.Attr.Perm)
	}
	a := st.Attr
	lit := fmt.Sprintf("cpu.Attention{Mats: %d, Tq: %d, Tk: %d, D: %d, Scale: %s, Causal: %v", prod(qs[:n-2]), qs[n-2], ks[n-1], qs[n-1], float(a.Scale), a.Causal)
	if a.Perm != nil {
		lit += fmt.Sprintf(", Heads: %d", in[0].buf.Shape[2]) // [B, T, H, D]
	}
	if a.Padding {
		lit += fmt.Sprintf(", Pad: %s, PadID: %d", in[len(in)-1].slice(), a.PadID)
	}
	if a.Precision == planner.PrecisionBF16 && !g.reference {
		lit += ", BF16: true"
	}
	if training && a.Rate > 0 {
		if g.reference {
			lit += fmt.Sprintf(", Rate: %s, Uniform: func(i uint32) float32 { return dropoutUniform(seed^%#x, uint32(step), i) }", float(a.Rate), gpu.DropoutStream(st.Layer))
		} else {
			i, ok := g.attentionDraws[st.Layer]
			if !ok {
				return "", fmt.Errorf("a fused attention with dropout outside the training plan's forward")
			}
			lit += fmt.Sprintf(", Rate: %s, Seed: uint32(attentionDraws[%d]), Step: uint32(attentionDraws[%d] >> 32)", float(a.Rate), i, i)
		}
	}
	return lit + "}", nil
}

// attentionFuncs are the fused attention's functions: the references in a
// GPU program's CPU check, the blocked kernels in a CPU program.
func (g *generator) attentionFuncs() (fwd, bwd string) {
	if g.reference {
		return "cpu.AttentionFwd", "cpu.AttentionBwd"
	}
	return "cpu.AttentionBlocksFwd", "cpu.AttentionBlocksBwd"
}

// attentionCall calls the fused attention's forward; in a CPU program's
// training, after drawing its dropout's seed and step.
func (g *generator) attentionCall(st planner.Step, in, out []operand, training bool) (string, error) {
	a, err := g.attentionGeom(st, in, training)
	if err != nil {
		return "", err
	}
	fwd, _ := g.attentionFuncs()
	call := fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s)", fwd, in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), out[1].slice(), a)
	if i, ok := g.attentionDraws[st.Layer]; ok && training && !g.reference {
		call = fmt.Sprintf("attentionDraws[%d] = dropoutRand.Uint64()\n%s", i, call)
	}
	return call, nil
}

// attentionBwdCall calls the fused attention's backward.
func (g *generator) attentionBwdCall(st planner.Step, in, out []operand) (string, error) {
	a, err := g.attentionGeom(st, in, true)
	if err != nil {
		return "", err
	}
	_, bwd := g.attentionFuncs()
	return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", bwd, in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(), in[4].slice(), in[5].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), out[3].slice(), a), nil
}
