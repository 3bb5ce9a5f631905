package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The dense family's lowerings: dense layers (gemm) and batched matrix
// products (matmul), forward and backward, as GEMMs and their epilogues.

// dense lowers a dense layer: one dot-product kernel where the layer's
// outputs are few and its sums short (dense_dot.go), else a GEMM and a
// bias-and-activation pass.
func (l *lowering) dense(st *planner.Step) error {
	a := st.Attr
	alpha := float32(a.Alpha)
	if err := l.operands(st, 3, 1); err != nil {
		return err
	}
	x, w, b, y := st.In[0], st.In[1], st.In[2], st.Out[0]
	ws, err := l.shape(w)
	if err != nil || len(ws) != 2 {
		return fmt.Errorf("weight shape %v: want [out, in] (%v)", ws, err)
	}
	n, k := ws[0], ws[1]
	xb, _ := l.buf(x)
	batch := xb.Size / k
	if denseDotFits(batch, n, k) && l.fastPrecision() == "" {
		kk, err := denseDotKernel(batch, n, k, present(b), a.Act, alpha)
		ops := []operand{whole(x), whole(w), whole(y)}
		if present(b) {
			ops = append(ops, whole(b))
		}
		return l.launch("dense_dot", kk, err, ops...)
	}
	// In a bf16 step whose x and W have bfloat16 twins (twin_operands.go:
	// x's producer and W's update wrote them), the GEMM reads the twins.
	ax, bw := x, w
	if tx, tw := l.twin(x), l.twin(w); l.fastPrecision() == planner.PrecisionBF16 && present(tx) && present(tw) {
		ax, bw = tx, tw
	}
	if err := l.gemm(Gemm{TransB: true, M: batch, N: n, K: k, Alpha: 1,
		A: Matrix{ax, 0, batch, k, k}, B: Matrix{bw, 0, n, k, k}, C: Matrix{y, 0, batch, n, n}}); err != nil {
		return err
	}
	if present(b) || a.Act != "" {
		kk, err := biasActKernel(batch*n, n, 1, present(b), a.Act, alpha)
		ops := []operand{whole(y)}
		if present(b) {
			ops = append(ops, whole(b))
		}
		return l.launch("bias_act", kk, err, ops...)
	}
	return nil
}

// denseBwd lowers a dense layer's backward: the activation's derivative
// into dy, then dW (a GEMM), db (a channel sum) and dx (a GEMM), each when
// wanted; with Attr.AccumulateDx the dx GEMM adds into the gradient sum
// that dx's storage holds (Beta 1: planner/fuse_accumulate_gemm.go).
func (l *lowering) denseBwd(st *planner.Step) error {
	a := st.Attr
	alpha := float32(a.Alpha)
	if err := l.operands(st, 4, 3); err != nil {
		return err
	}
	x, w, y, dy := st.In[0], st.In[1], st.In[2], st.In[3]
	dx, dw, db := st.Out[0], st.Out[1], st.Out[2]
	a0 := a.Act
	ws, err := l.shape(w)
	if err != nil || len(ws) != 2 {
		return fmt.Errorf("weight shape %v: want [out, in] (%v)", ws, err)
	}
	n, k := ws[0], ws[1]
	xb, _ := l.buf(x)
	batch := xb.Size / k
	if a.Act != "" {
		kk, err := actBwdKernel(batch*n, a.Act, alpha)
		if err := l.launch("act_bwd", kk, err, whole(y), whole(dy)); err != nil {
			return err
		}
	}
	// In a bf16 step whose dy has a bfloat16 twin (its producer wrote it;
	// twin_operands.go gives none where the activation's derivative above
	// rewrites dy), each GEMM whose other operand has one reads the twins.
	twins := func(a, b planner.BufID) (planner.BufID, planner.BufID) {
		ta, tb := l.twin(a), l.twin(b)
		if l.fastPrecision() == planner.PrecisionBF16 && a0 == "" && present(ta) && present(tb) {
			return ta, tb
		}
		return a, b
	}
	if present(dw) {
		ady, bx := twins(dy, x)
		if err := l.gemm(Gemm{TransA: true, M: n, N: k, K: batch, Alpha: 1,
			A: Matrix{ady, 0, batch, n, n}, B: Matrix{bx, 0, batch, k, k}, C: Matrix{dw, 0, n, k, k}}); err != nil {
			return err
		}
	}
	if present(db) {
		if err := l.launch("bias_grad", channelSumKernel(batch, n, 1), nil, whole(dy), whole(db)); err != nil {
			return err
		}
	}
	if present(dx) {
		ady, bw := twins(dy, w)
		var beta float32
		if a.AccumulateDx {
			beta = 1
		}
		if err := l.gemm(Gemm{M: batch, N: k, K: n, Alpha: 1, Beta: beta,
			A: Matrix{ady, 0, batch, n, n}, B: Matrix{bw, 0, n, k, k}, C: Matrix{dx, 0, batch, k, k}}); err != nil {
			return err
		}
	}
	return nil
}

// matmul lowers a batched matrix product to one GEMM per output matrix;
// leading axes broadcast, and a broadcast operand's gradient accumulates
// (Beta 1 after its first contribution).
func (l *lowering) matmul(st *planner.Step) error {
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	as, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	bs, err := l.shape(st.In[1])
	if err != nil {
		return err
	}
	if len(as) < 2 || len(bs) < 2 {
		return fmt.Errorf("matmul operands %v and %v need two axes", as, bs)
	}
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	lead := len(as) - 2
	if len(bs)-2 > lead {
		lead = len(bs) - 2
	}
	al, bl := alignShape(as[:len(as)-2], lead), alignShape(bs[:len(bs)-2], lead)
	yl := make([]int, lead)
	for i := range yl {
		yl[i] = max(al[i], bl[i])
	}
	ast, bst := stridesOf(al), stridesOf(bl)
	index := func(t int, shape, st []int) int {
		yst := stridesOf(yl)
		idx := 0
		for i := range yl {
			c := t / yst[i] % yl[i]
			if shape[i] != 1 {
				idx += c * st[i]
			}
		}
		return idx
	}
	written := map[[2]int]bool{}
	beta := func(buf, mat int) float32 {
		key := [2]int{buf, mat}
		if written[key] {
			return 1
		}
		written[key] = true
		return 0
	}
	if batched, err := l.matmulBatched(st, m, k, n, prod(yl), func(t int) (int, int) { return index(t, al, ast), index(t, bl, bst) }); batched || err != nil {
		return err
	}
	for t := 0; t < prod(yl); t++ {
		ai, bi := index(t, al, ast), index(t, bl, bst)
		A := Matrix{st.In[0], ai * m * k, m, k, k}
		B := Matrix{st.In[1], bi * k * n, k, n, n}
		if st.Kernel == planner.KMatMul {
			if err := l.gemm(Gemm{M: m, N: n, K: k, Alpha: 1, A: A, B: B, C: Matrix{st.Out[0], t * m * n, m, n, n}}); err != nil {
				return err
			}
			continue
		}
		if err := l.operands(st, 3, 2); err != nil {
			return err
		}
		dy := Matrix{st.In[2], t * m * n, m, n, n}
		if present(st.Out[0]) {
			if err := l.gemm(Gemm{TransB: true, M: m, N: k, K: n, Alpha: 1, Beta: beta(0, ai),
				A: dy, B: B, C: Matrix{st.Out[0], ai * m * k, m, k, k}}); err != nil {
				return err
			}
		}
		if present(st.Out[1]) {
			if err := l.gemm(Gemm{TransA: true, M: k, N: n, K: m, Alpha: 1, Beta: beta(1, bi),
				A: A, B: dy, C: Matrix{st.Out[1], bi * k * n, k, n, n}}); err != nil {
				return err
			}
		}
	}
	return nil
}

// matmulBatched lowers a batched matrix product whose operands are all
// distinct matrices at regular distances (no broadcast axis: the
// attention products of a transformer, [B, H, T, ·]) to one strided
// batched GEMM per product instead of one GEMM per matrix: a GPT's
// attention has B·H matrices per product, and a CUDA graph node (or an
// MPS encode) per matrix costs more than the arithmetic. It reports false,
// lowering nothing, for a broadcast operand or fewer than two matrices:
// those keep matmul's loop, where a broadcast operand's gradient
// accumulates matrix by matrix. index maps output matrix t to the
// operands' matrix indices.
func (l *lowering) matmulBatched(st *planner.Step, m, k, n, mats int, index func(t int) (int, int)) (bool, error) {
	if mats < 2 {
		return false, nil
	}
	a0, b0 := index(0)
	a1, b1 := index(1)
	da, db := a1-a0, b1-b0
	if da <= 0 || db <= 0 {
		return false, nil
	}
	for t := 2; t < mats; t++ {
		if ai, bi := index(t); ai != a0+t*da || bi != b0+t*db {
			return false, nil
		}
	}
	A := Matrix{st.In[0], a0 * m * k, m, k, k}
	B := Matrix{st.In[1], b0 * k * n, k, n, n}
	sa, sb := da*m*k, db*k*n
	if st.Kernel == planner.KMatMul {
		return true, l.gemm(Gemm{M: m, N: n, K: k, Alpha: 1, A: A, B: B, C: Matrix{st.Out[0], 0, m, n, n},
			Batch: mats, Stride: [3]int{sa, sb, m * n}})
	}
	if err := l.operands(st, 3, 2); err != nil {
		return true, err
	}
	dy := Matrix{st.In[2], 0, m, n, n}
	if present(st.Out[0]) {
		if err := l.gemm(Gemm{TransB: true, M: m, N: k, K: n, Alpha: 1, A: dy, B: B, C: Matrix{st.Out[0], a0 * m * k, m, k, k},
			Batch: mats, Stride: [3]int{m * n, sb, sa}}); err != nil {
			return true, err
		}
	}
	if present(st.Out[1]) {
		if err := l.gemm(Gemm{TransA: true, M: k, N: n, K: m, Alpha: 1, A: A, B: dy, C: Matrix{st.Out[1], b0 * k * n, k, n, n},
			Batch: mats, Stride: [3]int{sa, m * n, sb}}); err != nil {
			return true, err
		}
	}
	return true, nil
}
