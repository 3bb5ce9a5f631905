package emit

import (
	"fmt"
	"strings"

	"github.com/mlbuild/mlbuild/planner"
)

// The optimizer family's calls: one update per param, with the run-time
// learning rate (and step count) as the step function's parameters.

// sgdCall calls one SGD update per (param, velocity) of the step, which
// takes the learning rate.
func (g *generator) sgdCall(st planner.Step, in, out []operand, c *stepCall) (string, error) {
	a := st.Attr
	c.lr = true
	var calls []string
	for i := 0; i+1 < len(in) && i < len(out); i += 2 {
		wd := a.WeightDecay
		if a.Decays != nil && i/2 < len(a.Decays) {
			wd = a.Decays[i/2]
		}
		calls = append(calls, fmt.Sprintf("cpu.SGD(%s, %s, %s, lr, %s, %s)", out[i].slice(), in[i].slice(), in[i+1].slice(), float(a.Momentum), float(wd)))
	}
	return strings.Join(calls, "\n"), nil
}

// adamCall calls one Adam (or AdamW) update per (param, m, v) of the
// step, which take the learning rate and the step count.
func (g *generator) adamCall(st planner.Step, in, out []operand, c *stepCall) (string, error) {
	a := st.Attr
	c.lr = true
	var calls []string
	for i := 0; i+2 < len(in) && i < len(out); i += 3 {
		wd := a.WeightDecay
		if a.Decays != nil && i/3 < len(a.Decays) {
			wd = a.Decays[i/3]
		}
		calls = append(calls, fmt.Sprintf("cpu.Adam(%s, %s, %s, %s, lr, %s, %s, %s, %s, step, %v)", out[i].slice(), in[i].slice(), in[i+1].slice(), in[i+2].slice(),
			float(a.Beta1), float(a.Beta2), float(a.Eps), float(wd), a.Decoupled))
	}
	return strings.Join(calls, "\n"), nil
}

// gradMeanCall writes a param's gradient as the mean of its sum over an
// update's micro-batches and zeroes the sum for the next update
// (planner/accumulate.go).
func (g *generator) gradMeanCall(st planner.Step, in, out []operand) (string, error) {
	if len(in) != 1 || len(out) != 2 {
		return "", fmt.Errorf("grad_mean with %d inputs and %d outputs", len(in), len(out))
	}
	return fmt.Sprintf("for i, s := range %s {\n%s[i], %s[i] = s*%s, 0\n}", in[0].param, out[0].param, out[1].param, float(st.Attr.Scale)), nil
}

// clipCall scales every gradient to the step's global norm, in place,
// writing the sums of squares and the scale to the norms buffer.
func (g *generator) clipCall(st planner.Step, in, out []operand) (string, error) {
	if len(out) != len(in)+1 {
		return "", fmt.Errorf("clip_grad_norm with %d gradients and %d outputs", len(in), len(out))
	}
	grads := make([]string, len(in))
	for i, o := range in {
		grads[i] = o.slice()
	}
	return fmt.Sprintf("cpu.ClipGradNorm([][]float32{%s}, %s, %s)", strings.Join(grads, ", "), float(st.Attr.ClipNorm), out[len(in)].slice()), nil
}
