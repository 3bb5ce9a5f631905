package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The fused attention family's lowerings (kernels_attention.go writes the
// kernels).

// attnGeomOf reads a fused attention step's geometry from q [..., Tq, D]
// and kᵀ [..., D, Tk] over its heads (planner.AttentionHeadShapes: with
// Attr.Perm its operands are token-major [B, T, H, D]); rate is the
// step's dropout in training, 0 outside.
func (l *lowering) attnGeomOf(st *planner.Step, training bool) (attnGeom, error) {
	var shapes [3][]int
	for i := range shapes {
		s, err := l.shape(st.In[i])
		if err != nil {
			return attnGeom{}, err
		}
		shapes[i] = s
	}
	qs, ks, _, ok := planner.AttentionHeadShapes(shapes[0], shapes[1], shapes[2], st.Attr.Perm)
	n := len(qs)
	if !ok || n < 2 || len(ks) != n || qs[n-1] != ks[n-2] || qs[n-1] > planner.MaxAttentionDim {
		return attnGeom{}, fmt.Errorf("attention of q %v and k %v in the layout %v: not [..., Tq, D] and [..., D, Tk] with D ≤ %d", shapes[0], shapes[1], st.Attr.Perm, planner.MaxAttentionDim)
	}
	g := attnGeom{mats: prod(qs[:n-2]), tq: qs[n-2], tk: ks[n-1], d: qs[n-1], scale: float32(st.Attr.Scale), causal: st.Attr.Causal}
	if st.Attr.Perm != nil {
		g.heads = shapes[0][2] // [B, T, H, D]
	}
	t, err := attnTilingFor(l.d, attnVariant)
	if err != nil {
		return attnGeom{}, err
	}
	g.tiling = t
	if training {
		g.rate, g.stream = float32(st.Attr.Rate), DropoutStream(st.Layer)
	}
	if st.Attr.Padding {
		ids, err := l.shape(st.In[len(st.In)-1])
		if err != nil {
			return attnGeom{}, err
		}
		if len(ids) != 2 || ids[1] != g.tk || ids[0] < 1 || g.mats%ids[0] != 0 {
			return attnGeom{}, fmt.Errorf("attention of %d matrices of %d keys masked by token ids %v: not [B, %d] with B dividing the matrices", g.mats, g.tk, ids, g.tk)
		}
		g.padded, g.batch, g.padID = true, ids[0], float32(st.Attr.PadID)
	}
	return g, nil
}

// attnTiles is whether the step's products may run on the dialect's
// tensor tiles: its precision rounds (bf16 or tf32, whose needs TF32
// operands meet), the tiles take g (AttentionTiles), and the build did
// not turn them off (attnNoTiles).
func (l *lowering) attnTiles(g attnGeom) bool {
	return l.fastPrecision() != "" && tcTiles(l.d, g) && attnNoTiles == ""
}

// attnFrags is whether the step may run on the dialect's register
// fragments (kernels_attention_fa.go): its precision is the fragments'
// (bf16: the plan's attention contract rounds the operands to bfloat16
// and sums in float32), and the build did not turn tensor cores off
// (attnNoTiles).
func (l *lowering) attnFrags() bool {
	f := l.d.Fragments
	return f != nil && l.fastPrecision() == f.Precision && attnNoTiles == "" && attnNoFrags == ""
}

// attnNoFrags, set, keeps the fused attention off the register
// fragments (on the tensor tiles where they take it, else the SIMT
// kernels), a benchmarking hook as attnNoTiles is:
//
//	go build -ldflags "-X github.com/mlbuild/mlbuild/emit/gpu.attnNoFrags=1"
var attnNoFrags string

// attnNoTiles, set, keeps the fused attention on the SIMT kernels in
// every plan (neither tiles nor fragments). It is a benchmarking hook, as attnVariant is, set only by
// building mlbuild with
//
//	go build -ldflags "-X github.com/mlbuild/mlbuild/emit/gpu.attnNoTiles=1"
//
// so that one GPU run can time the tensor-tile kernels against the SIMT
// ones (or run without them, should a GPU's compiler refuse them).
var attnNoTiles string

// withArgs puts the step arguments before ops when g draws dropout, and
// the step's token ids (its last input) after them where g is padded, as
// g.params orders the kernels' parameters.
func (g attnGeom) withArgs(st *planner.Step, ops ...operand) []operand {
	if g.padded {
		ops = append(ops, whole(st.In[len(st.In)-1]))
	}
	if g.rate > 0 {
		return append([]operand{stepArgs}, ops...)
	}
	return ops
}

// attention lowers the fused forward: one kernel writes o and each query
// row's log-sum-exp.
func (l *lowering) attention(st *planner.Step, training bool) error {
	if err := l.operands(st, 3, 2); err != nil {
		return err
	}
	g, err := l.attnGeomOf(st, training)
	if err != nil {
		return err
	}
	k := attentionFwdKernel(g)
	if _, ok := g.fragFwdBlock(l.d.Fragments); ok && l.attnFrags() {
		k = attentionFwdFragKernel(g, l.d.Fragments)
	} else if l.attnTiles(g) {
		if _, ok := g.tcFwdBlock(); ok {
			k = attentionFwdTCKernel(g)
		}
	}
	ops := g.withArgs(st, whole(st.In[0]), whole(st.In[1]), whole(st.In[2]), whole(st.Out[0]), whole(st.Out[1]))
	k, ops, err = l.withOutputTwins(k, ops, twinOut{"o", st.Out[0]}) // a GEMM reads o in bfloat16 (twin_operands.go)
	return l.launch("attention", k, err, ops...)
}

// attentionBwd lowers the fused backward: delta = rowsum(do∘o), then dkᵀ
// and dv in one kernel, dq in another (each only where the plan wants it).
func (l *lowering) attentionBwd(st *planner.Step) error {
	if err := l.operands(st, 6, 4); err != nil {
		return err
	}
	g, err := l.attnGeomOf(st, true)
	if err != nil {
		return err
	}
	q, kt, v, o, lse, do := st.In[0], st.In[1], st.In[2], st.In[3], st.In[4], st.In[5]
	dq, dkt, dv, delta := st.Out[0], st.Out[1], st.Out[2], st.Out[3]
	if err := l.launch("attention_delta", attentionDeltaKernel(g), nil, whole(o), whole(do), whole(delta)); err != nil {
		return err
	}
	if present(dkt) || present(dv) {
		ops := []operand{whole(q), whole(kt), whole(v), whole(do), whole(lse), whole(delta)}
		if present(dkt) {
			ops = append(ops, whole(dkt))
		}
		if present(dv) {
			ops = append(ops, whole(dv))
		}
		k := attentionBwdKeysKernel(g, present(dkt), present(dv))
		if _, ok := g.fragKeysBlock(l.d.Fragments); ok && l.attnFrags() {
			k = attentionBwdKeysFragKernel(g, l.d.Fragments, present(dkt), present(dv))
		} else if _, ok := g.tcKeysBlock(); ok && l.attnTiles(g) {
			k = attentionBwdKeysTCKernel(g, present(dkt), present(dv))
		}
		// q's, k's and v's backward GEMMs read dq, dk and dv in bfloat16
		// (twin_operands.go)
		k, kvOps, err := l.withOutputTwins(k, g.withArgs(st, ops...), twinOut{g.dkName(), dkt}, twinOut{"dv", dv})
		if err := l.launch("attention_bwd_kv", k, err, kvOps...); err != nil {
			return err
		}
	}
	if !present(dq) {
		return nil
	}
	k := attentionBwdQueriesKernel(g)
	if _, ok := g.fragQueriesBlock(l.d.Fragments); ok && l.attnFrags() {
		k = attentionBwdQueriesFragKernel(g, l.d.Fragments)
	} else if _, ok := g.tcQueriesBlock(); ok && l.attnTiles(g) {
		k = attentionBwdQueriesTCKernel(g)
	}
	k, ops, err := l.withOutputTwins(k, g.withArgs(st, whole(q), whole(kt), whole(v), whole(do), whole(lse), whole(delta), whole(dq)), twinOut{"dq", dq})
	return l.launch("attention_bwd_q", k, err, ops...)
}
