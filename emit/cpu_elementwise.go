package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// The element-wise family's calls: unary chains, broadcasting binary ops,
// dropout and the sum of gradient contributions.

// unaryCall calls an element-wise chain or its backward.
func (g *generator) unaryCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	ch, err := g.chain(a.Chain)
	if err != nil {
		return "", err
	}
	if st.Kernel == planner.KUnary {
		fn := "cpu.UnaryFwd"
		if g.view == "d" || g.view == "dl" {
			fn = "cpu.UnaryDecode" // the decode's (emit/cpu_decode.go), on rt/cpu's decode team
		}
		return fmt.Sprintf("%s(%s, %s, %s)", fn, in[0].slice(), out[0].slice(), ch), nil
	}
	if a.FromOutput && len(in) > 2 { // a second dy (planner/fuse_accumulate_act.go)
		return fmt.Sprintf("cpu.UnaryBwdFromOutputSum(%s, %s, %s, %s, %s[0])", in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), ch), nil
	}
	if a.FromOutput {
		return fmt.Sprintf("cpu.UnaryBwdFromOutput(%s, %s, %s, %s[0])", in[0].slice(), in[1].slice(), out[0].slice(), ch), nil
	}
	return fmt.Sprintf("cpu.UnaryBwd(%s, %s, %s, %s)", in[0].slice(), in[1].slice(), out[0].slice(), ch), nil
}

// binaryCall calls a broadcasting binary op or its backward, with the
// operands' shapes padded to one rank.
func (g *generator) binaryCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	op, ok := binOps[a.BinOp]
	if !ok {
		return "", fmt.Errorf("unknown binary op %q", a.BinOp)
	}
	as, bs, err := planner.BinaryShapes(&st, in[0].buf.Shape, in[1].buf.Shape)
	if err != nil {
		return "", err
	}
	var ys []int
	if st.Kernel == planner.KBinary {
		ys = out[0].buf.Shape
	} else {
		ys = in[2].buf.Shape
	}
	r := max(len(as), len(bs), len(ys))
	sa, sb, sy := g.shape(full(as, r)), g.shape(full(bs, r)), g.shape(full(ys, r))
	if st.Kernel == planner.KBinary {
		fn := "cpu.BinaryFwd"
		if a.Act == "relu" { // a fused ReLU (planner/fuse_sum_act.go)
			fn = "cpu.BinaryReLUFwd"
		}
		return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s)", fn, op, in[0].slice(), in[1].slice(), out[0].slice(), sa, sb, sy), nil
	}
	return fmt.Sprintf("cpu.BinaryBwd(%s, %s, %s, %s, %s, %s, %s, %s, %s)", op, in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), out[1].slice(), sa, sb, sy), nil
}

// dropoutCall calls dropout, which copies outside training.
func (g *generator) dropoutCall(st planner.Step, in, out []operand, training bool) (string, error) {
	a := st.Attr
	mask := "nil"
	if len(out) > 1 {
		mask = out[1].slice()
	}
	return fmt.Sprintf("cpu.DropoutFwd(%s, %s, %s, %s, dropoutRand, %v)", in[0].slice(), out[0].slice(), mask, float(a.Rate), training), nil
}

// gpuDropoutRefCall is a GPU program's CPU reference of training dropout:
// it draws the GPU kernel's mask (dropoutUniform, from the step's seed xor
// the layer's stream, and the step's count) rather than the CPU program's
// generator, so that the two agree.
func gpuDropoutRefCall(st planner.Step, ins, outs []operand) (string, error) {
	if len(outs) < 2 || outs[1].param == "" {
		return "", fmt.Errorf("training dropout without a mask")
	}
	rate := float32(st.Attr.Rate)
	scale := 1 / (1 - rate)
	return fmt.Sprintf("x, y, mask := %s, %s, %s\nfor i := range y {\nm := float32(0)\nif dropoutUniform(seed^%#x, uint32(step), uint32(i)) >= %s {\nm = %s\n}\nmask[i] = m\ny[i] = x[i] * m\n}",
		ins[0].slice(), outs[0].slice(), outs[1].slice(), gpu.DropoutStream(st.Layer), float(float64(rate)), float(float64(scale))), nil
}

// dropoutBwdCall calls dropout's backward: dy through the mask.
func (g *generator) dropoutBwdCall(st planner.Step, in, out []operand) (string, error) {
	return fmt.Sprintf("cpu.DropoutBwd(%s, %s, %s)", in[0].slice(), in[1].slice(), out[0].slice()), nil
}

// accumulateCall calls the sum of two gradient contributions.
func (g *generator) accumulateCall(st planner.Step, in, out []operand) (string, error) {
	return fmt.Sprintf("cpu.Add(%s, %s, %s)", in[0].slice(), in[1].slice(), out[0].slice()), nil
}
