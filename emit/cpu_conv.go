package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The convolution family's calls, by the method the plan chose
// (cpuConvKernel).

// conv2DCall calls a convolution's forward by the method its plan chose,
// and the max pool a GPU plan folded into its epilogue.
func (g *generator) conv2DCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	if err := need(in, 3, "input"); err != nil {
		return "", err
	}
	if a.Conv == nil {
		return "", fmt.Errorf("conv2d without geometry")
	}
	ac, err := act(a.Act)
	if err != nil {
		return "", err
	}
	k, err := cpuConvKernel(*a.Conv, planner.ConvForward, a.Method, g.reference)
	if err != nil {
		return "", err
	}
	fn, err := cpuConvFunc(k.fwd, a.Method, a.Precision, g.reference)
	if err != nil {
		return "", err
	}
	if len(in) > 3 && in[3].param != "" {
		// A residual in the epilogue (a GPU plan's, fuse_conv_sum.go): the
		// convolution into a temporary, then the sum and its ReLU.
		if a.Pool != nil || (a.Act != "" && a.Act != "relu") {
			return "", fmt.Errorf("a convolution's residual with an epilogue pool or activation %q", a.Act)
		}
		c, sum := a.Conv, "cpu.BinaryFwd"
		if a.Act == "relu" {
			sum = "cpu.BinaryReLUFwd"
		}
		shape := g.shape([]int{c.N, c.OC, c.OH, c.OW})
		return fmt.Sprintf("conv := make([]float32, %d) // the convolution's output, to which the step adds z\n%s(%s, %s, %s, conv, %s, cpu.ActNone, 0)\n%s(cpu.BAdd, conv, %s, %s, %s, %s, %s)",
			c.N*c.OC*c.OH*c.OW, fn, in[0].slice(), in[1].slice(), in[2].slice(), convLit(a.Conv), sum, in[3].slice(), out[0].slice(), shape, shape, shape), nil
	}
	if a.Pool == nil {
		return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s)", fn, in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), convLit(a.Conv), ac, float(a.Alpha)), nil
	}
	// A max pool in the epilogue (a GPU backend's plan): the
	// convolution into a temporary, then the pool, and in a
	// training plan each window's argmax.
	c := a.Conv
	call := fmt.Sprintf("conv := make([]float32, %d) // the convolution's output, which the step pools\n%s(%s, %s, %s, conv, %s, %s, %s)\ncpu.MaxPool2DFwd(conv, %s, %s)",
		c.N*c.OC*c.OH*c.OW, fn, in[0].slice(), in[1].slice(), in[2].slice(), convLit(a.Conv), ac, float(a.Alpha), out[0].slice(), convLit(a.Pool))
	if len(out) > 2 && out[2].param != "" {
		call += fmt.Sprintf("\ncpu.MaxPool2DArgmax(conv, %s, %s)", out[2].slice(), convLit(a.Pool))
	}
	return call, nil
}

// conv2DBwdCall calls a convolution's backward by the method its plan
// chose, without dx's pass when dx is not wanted.
func (g *generator) conv2DBwdCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	if err := need(in, 5, "input"); err != nil {
		return "", err
	}
	if err := need(out, 3, "output"); err != nil {
		return "", err
	}
	if a.Conv == nil {
		return "", fmt.Errorf("conv2d_bwd without geometry")
	}
	actName := a.Act
	if a.ActApplied {
		actName = "" // dy carries the derivative already
	}
	ac, err := act(actName)
	if err != nil {
		return "", err
	}
	pass := planner.ConvBackward
	if out[0].param == "" {
		pass = planner.ConvBackwardNoDx
	}
	k, err := cpuConvKernel(*a.Conv, pass, a.Method, g.reference)
	if err != nil {
		return "", err
	}
	fn, err := cpuConvFunc(k.bwd, a.Method, a.Precision, g.reference)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", fn, in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), convLit(a.Conv), ac, float(a.Alpha)), nil
}
