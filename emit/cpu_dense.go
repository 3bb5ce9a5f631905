package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The dense family's calls: dense layers (gemm) and batched matrix
// products (matmul), forward and backward.

// denseArgs are what a dense layer's forward and backward calls share: the
// batch and the weight's [out, in] sizes, the fused activation and the
// precision's kernel functions.
type denseArgs struct {
	batch, in, out int
	act            string
	k              denseKernels
}

func (g *generator) denseArgs(st planner.Step, in []operand) (denseArgs, error) {
	w := in[1].buf.Shape
	ac, err := act(st.Attr.Act)
	if err != nil {
		return denseArgs{}, err
	}
	k, err := cpuDenseKernel(st.Attr.Precision, g.reference)
	if err != nil {
		return denseArgs{}, err
	}
	return denseArgs{batch: in[0].buf.Size / w[1], in: w[1], out: w[0], act: ac, k: k}, nil
}

// gemmCall calls a dense layer's forward in the step's precision (the
// inference plans' own function outside training).
func (g *generator) gemmCall(st planner.Step, in, out []operand, training bool) (string, error) {
	if err := need(in, 3, "input"); err != nil {
		return "", err
	}
	d, err := g.denseArgs(st, in)
	if err != nil {
		return "", err
	}
	fn := d.k.fwd
	if !training {
		fn = d.k.infer
	}
	if off, ok := g.bf16Weights[in[1].buf.Name]; ok && d.batch == 1 {
		// the decode's (emit/cpu_decode.go): generate --precision bf16's
		// branch, and f32 on rt/cpu's decode team
		return fmt.Sprintf("if dBF16 {\ncpu.GemvBF16(%s, dRow16[:], dW16[%d:%d], %s, %s, %d, %d, %s, %s)\nreturn\n}\n", in[0].slice(), off, off+in[1].buf.Size,
			in[2].slice(), out[0].slice(), d.in, d.out, d.act, float(st.Attr.Alpha)) +
			fmt.Sprintf("cpu.GemvF32(%s, %s, %s, %s, %d, %d, %s, %s)", in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), d.in, d.out, d.act, float(st.Attr.Alpha)), nil
	}
	call := fmt.Sprintf("%s(%s, %s, %s, %s, %d, %d, %d, %s, %s)", fn, in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), d.batch, d.in, d.out, d.act, float(st.Attr.Alpha))
	if g.prefillBF16 && g.view == "o" && !training && d.batch > 2 && fn == "cpu.GemmFwd" {
		// the decode's prefill with --precision bf16 on AMX (dPrefill)
		return fmt.Sprintf("if dPrefillBF16 {\ncpu.BF16Inference.GemmFwd(%s, %s, %s, %s, %d, %d, %d, %s, %s)\nreturn\n}\n", in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), d.batch, d.in, d.out, d.act, float(st.Attr.Alpha)) + call, nil
	}
	return call, nil
}

// gemmBwdCall calls a dense layer's backward in the step's precision.
func (g *generator) gemmBwdCall(st planner.Step, in, out []operand) (string, error) {
	if err := need(in, 4, "input"); err != nil {
		return "", err
	}
	if err := need(out, 3, "output"); err != nil {
		return "", err
	}
	d, err := g.denseArgs(st, in)
	if err != nil {
		return "", err
	}
	if st.Attr.AccumulateDx {
		return g.gemmBwdAddCall(st, d, in, out)
	}
	return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s, %d, %d, %d, %s, %s)", d.k.bwd, in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), d.batch, d.in, d.out, d.act, float(st.Attr.Alpha)), nil
}

// gemmBwdAddCall calls the backward of a dense layer whose dx adds into
// the gradient sum dx's storage holds (Attr.AccumulateDx:
// planner/fuse_accumulate_gemm.go): the precision's GemmBwdAdd.
func (g *generator) gemmBwdAddCall(st planner.Step, d denseArgs, in, out []operand) (string, error) {
	return fmt.Sprintf("%s(%s, %s, %s, %s, %s, %s, %s, %d, %d, %d, %s, %s)", d.k.bwdAdd, in[0].slice(), in[1].slice(), in[2].slice(), in[3].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), d.batch, d.in, d.out, d.act, float(st.Attr.Alpha)), nil
}

// matMulCall calls a batched matrix product.
func (g *generator) matMulCall(st planner.Step, in, out []operand) (string, error) {
	return fmt.Sprintf("cpu.MatMulFwd(%s, %s, %s, %s, %s, %s)", in[0].slice(), in[1].slice(), out[0].slice(),
		g.shape(in[0].buf.Shape), g.shape(in[1].buf.Shape), g.shape(out[0].buf.Shape)), nil
}

// matMulBwdCall calls a batched matrix product's backward.
func (g *generator) matMulBwdCall(st planner.Step, in, out []operand) (string, error) {
	return fmt.Sprintf("cpu.MatMulBwd(%s, %s, %s, %s, %s, %s, %s, %s)", in[0].slice(), in[1].slice(), in[2].slice(), out[0].slice(), out[1].slice(),
		g.shape(in[0].buf.Shape), g.shape(in[1].buf.Shape), g.shape(in[2].buf.Shape)), nil
}
