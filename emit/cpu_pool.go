package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The pooling family's calls: max, average and global average pools,
// resize, and their backward steps.

// poolCall calls a max or average pool.
func (g *generator) poolCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	fn := map[planner.Kernel]string{planner.KMaxPool2D: "MaxPool2DFwd", planner.KAvgPool2D: "AvgPool2DFwd"}[st.Kernel]
	return fmt.Sprintf("cpu.%s(%s, %s, %s)", fn, in[0].slice(), out[0].slice(), convLit(a.Conv)), nil
}

// maxPoolBwdCall calls a max pool's backward, then the activation's
// derivative the planner folded into it (fuse_act_bwd.go).
func (g *generator) maxPoolBwdCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	call := fmt.Sprintf("cpu.MaxPool2DBwd(%s, %s, %s, %s, %s)", in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), convLit(a.Conv))
	if a.Act == "" {
		return call, nil
	}
	ac, err := act(a.Act)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s\n\tcpu.ActBwd(%s, %s, %s, %s)", call, in[0].slice(), out[0].slice(), ac, float(a.Alpha)), nil
}

// maxPoolArgmaxBwdCall calls the backward of a max pool folded into a
// convolution's epilogue: dy routed by the recorded argmax.
func (g *generator) maxPoolArgmaxBwdCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	if err := need(in, 3, "input"); err != nil {
		return "", err
	}
	if a.Act == "" {
		return fmt.Sprintf("cpu.MaxPool2DArgmaxBwd(%s, %s, %s, %s)", in[0].slice(), in[2].slice(), out[0].slice(), convLit(a.Conv)), nil
	}
	ac, err := act(a.Act)
	if err != nil {
		return "", err
	}
	// The derivative at each window's maximum, taken from the pooled
	// output (the activation's output there), then routed.
	return fmt.Sprintf("dz := append([]float32(nil), %s...)\ncpu.ActBwd(%s, dz, %s, %s)\ncpu.MaxPool2DArgmaxBwd(%s, dz, %s, %s)",
		in[2].slice(), in[1].slice(), ac, float(a.Alpha), in[0].slice(), out[0].slice(), convLit(a.Conv)), nil
}

// avgPoolBwdCall calls an average pool's backward.
func (g *generator) avgPoolBwdCall(st planner.Step, in, out []operand) (string, error) {
	a := st.Attr
	return fmt.Sprintf("cpu.AvgPool2DBwd(%s, %s, %s)", in[0].slice(), out[0].slice(), convLit(a.Conv)), nil
}

// globalAvgPoolCall calls a global average pool.
func (g *generator) globalAvgPoolCall(st planner.Step, in, out []operand) (string, error) {
	s := in[0].buf.Shape
	return fmt.Sprintf("cpu.GlobalAvgPoolFwd(%s, %s, %d, %d, %d)", in[0].slice(), out[0].slice(), s[0], s[1], prod(s[2:])), nil
}

// globalAvgPoolBwdCall calls a global average pool's backward.
func (g *generator) globalAvgPoolBwdCall(st planner.Step, in, out []operand) (string, error) {
	s := out[0].buf.Shape
	return fmt.Sprintf("cpu.GlobalAvgPoolBwd(%s, %s, %d, %d, %d)", in[0].slice(), out[0].slice(), s[0], s[1], prod(s[2:])), nil
}

// resizeCall calls a resize or its backward over the [B·C] planes of the
// image x (the backward's dx) and the resized y (dy).
func resizeCall(st planner.Step, in, out []operand) (string, error) {
	if err := need(in, 1, "input"); err != nil {
		return "", err
	}
	if err := need(out, 1, "output"); err != nil {
		return "", err
	}
	x, y := in[0].buf.Shape, out[0].buf.Shape
	fn := "ResizeFwd"
	if st.Kernel == planner.KResizeBwd {
		x, y, fn = y, x, "ResizeBwd"
	}
	if len(x) != 4 || len(y) != 4 {
		return "", fmt.Errorf("resize of %v to %v: want [B,C,H,W] images", x, y)
	}
	lit := fmt.Sprintf("cpu.Resize{Planes: %d, H: %d, W: %d, OH: %d, OW: %d", x[0]*x[1], x[2], x[3], y[2], y[3])
	if st.Attr.Mode == planner.ResizeBilinear {
		lit += ", Bilinear: true"
	}
	if st.Attr.AlignCorners {
		lit += ", AlignCorners: true"
	}
	return fmt.Sprintf("cpu.%s(%s, %s, %s})", fn, in[0].slice(), out[0].slice(), lit), nil
}
