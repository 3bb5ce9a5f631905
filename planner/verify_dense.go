package planner

import "fmt"

// The shape rules of the dense layers: gemm and matmul, forward and backward
// (checkShapes in verify.go dispatches to them).

// gemm checks a dense layer's gemm or gemm_bwd: x [B,K] and W [N,K] give y
// [B,N].
func (r shapeRules) gemm(s *Step) error {
	in, out := s.In, s.Out
	x, w := r.sh(in[0]), r.sh(in[1])
	if len(x) != 2 || len(w) != 2 || x[1] != w[1] {
		return fmt.Errorf("x %s and W %s do not fit (want [B,K] and [N,K])", shapeString(x), shapeString(w))
	}
	y := []int{x[0], w[0]}
	if err := checkAct(s.Attr); err != nil {
		return err
	}
	wKinds := []BufKind{KindParam}
	if s.Kernel == KGemm && !r.p.Training {
		wKinds = append(wKinds, KindFolded) // a batch norm folded in (fold_batchnorm.go)
	}
	if err := r.kindIs(in[1], wKinds...); err != nil {
		return err
	}
	if s.Kernel == KGemm {
		return first(r.is("b", in[2], []int{w[0]}), r.is("y", out[0], y), r.kindIs(out[0], KindActivation))
	}
	// dW is a grad buffer when the weight is tied: one part of its gradient
	return first(r.is("y", in[2], y), r.is("dy", in[3], y), r.same("dx", out[0], in[0]), r.is("dW", out[1], w),
		r.is("db", out[2], []int{w[0]}), r.kindIs(out[1], KindParamGrad, KindGrad), r.kindIs(out[2], KindParamGrad))
}

// matMul checks a batched matmul or matmul_bwd: [...,M,K] times [...,K,N],
// the leading axes broadcast.
func (r shapeRules) matMul(s *Step) error {
	in, out := s.In, s.Out
	a, b := r.sh(in[0]), r.sh(in[1])
	if len(a) != len(b) || len(a) < 3 || a[len(a)-1] != b[len(b)-2] {
		return fmt.Errorf("a %s and b %s do not fit (want [...,M,K] and [...,K,N] of one rank)", shapeString(a), shapeString(b))
	}
	lead, err := broadcast(a[:len(a)-2], b[:len(b)-2])
	if err != nil {
		return err
	}
	y := append(lead, a[len(a)-2], b[len(b)-1])
	if s.Kernel == KMatMul {
		return r.is("y", out[0], y)
	}
	return first(r.is("dy", in[2], y), r.same("da", out[0], in[0]), r.same("db", out[1], in[1]))
}
