package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// The KV-cache decode's lowerings (planner.DeriveDecode): the embedding of
// the one new position and the attention of its query over the cached
// keys and values. The other steps of a decode plan are the inference
// plan's kernels on one row. The new position p changes every token, so
// the kernels read it from the StepArgs word gpuhost.ArgPos, which the
// host sets before each launch of the recorded sequence; it is clamped
// into [0, T) like an id into its table, so that no value the host lets
// through reads or writes outside the caches.

// decodeShared is the most threadgroup memory, in bytes, that
// attendCachedKernel may use: a context's scores plus the reduction's
// row (Metal guarantees 32 KiB a threadgroup, CUDA 48 KiB without opting
// in).
const decodeShared = 32 << 10

// decodeEmbedding lowers the new position's embedding to
// decodeEmbeddingKernel, one thread per value of the row.
func (l *lowering) decodeEmbedding(st *planner.Step) error {
	if err := l.operands(st, 3, 1); err != nil {
		return err
	}
	w, err := l.shape(st.In[1])
	if err != nil {
		return err
	}
	if len(w) != 2 {
		return fmt.Errorf("embedding table %v is not [V,D]", w)
	}
	g := embeddingGeom{rows: 1, vocab: w[0], dim: w[1], positions: present(st.In[2])}
	ops := []operand{stepArgs, whole(st.In[0]), whole(st.In[1])}
	if g.positions {
		pos, err := l.shape(st.In[2])
		if err != nil {
			return err
		}
		g.seq = pos[0]
		ops = append(ops, whole(st.In[2]))
	}
	return l.launch("decode_embedding", decodeEmbeddingKernel(g), nil, append(ops, whole(st.Out[0]))...)
}

// attendCached lowers a cached attention to attendCachedKernel, one
// threadgroup per head.
func (l *lowering) attendCached(st *planner.Step) error {
	if err := l.operands(st, 3, 3); err != nil {
		return err
	}
	q, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	kc, err := l.shape(st.Out[1])
	if err != nil {
		return err
	}
	if len(q) != 4 || len(kc) != 3 || kc[1] != q[2] || kc[2] != q[3] {
		return fmt.Errorf("cached attention of q %v over a cache %v: want [1,1,H,hd] and [T,H,hd]", q, kc)
	}
	k, err := attendCachedKernel(kc[0], q[2], q[3], float32(st.Attr.Alpha))
	return l.launch("attend_cached", k, err, stepArgs, whole(st.In[0]), whole(st.In[1]), whole(st.In[2]),
		whole(st.Out[0]), whole(st.Out[1]), whole(st.Out[2]))
}

// decodePos declares p, the position of StepArgs' ArgPos word clamped into
// [0, context).
func decodePos(context int) Stmt {
	last := uint32(context - 1)
	pos := load("args", i32(gpuhost.ArgPos))
	return let("p", Int, Cast{Int, sel(lt(pos, u32(last)), pos, u32(last))})
}

// decodeEmbeddingKernel is y[j] = w[id, j] (+ pos[p, j]) for the one id
// and the position p of StepArgs; params args, ids, w, (pos,) y.
func decodeEmbeddingKernel(g embeddingGeom) *Kernel {
	params := []Param{argsParam(), in("ids", 1), in("w", g.vocab*g.dim)}
	if g.positions {
		params = append(params, in("pos", g.seq*g.dim))
	}
	params = append(params, out("y", g.dim))
	return elementwise("decode embedding of one position, "+g.String(), g.dim, params, func(i Expr) []Stmt {
		s := tokenID("id", load("ids", i32(0)), g.vocab)
		v := load("w", add(mul(vr("id"), i32(g.dim)), i))
		if g.positions {
			s = append(s, decodePos(g.seq))
			v = add(v, load("pos", add(mul(vr("p"), i32(g.dim)), i)))
		}
		return append(s, store("y", i, v))
	})
}

// attendCachedKernel is rt/cpu.AttendCached on the GPU, one threadgroup
// per head h: it writes the new position p's key and value (rows of q, k,
// v [H,hd]) at row p of the caches [T,H,hd], then computes the scores
// alpha·q_h·k_h[j] for j ≤ p (thread j, strided, its dot product in d
// order, scoreDot), their softmax (a max and a sum reduced over the
// threadgroup) and y_h[d] = Σ_j softmax_j·v_h[j][d] (thread d, strided,
// summing in j order as the CPU does, or, where the threadgroup holds
// several groups of hd threads, each group a share of the positions and
// thread d the groups' sums). Position p's key and value are
// read from k and v themselves, not from the cache rows just written:
// a threadgroup barrier orders threadgroup memory, not device memory,
// on every GPU. Params args, q, k, v, y, kc, vc.
func attendCachedKernel(context, heads, hd int, alpha float32) (*Kernel, error) {
	tg := pow2AtMost(context, tgReduce)
	if 4*(context+tg) > decodeShared {
		return nil, fmt.Errorf("a cached attention over %d positions needs %d bytes of threadgroup memory for its scores; the GPU kernels allow %d",
			context, 4*(context+tg), decodeShared)
	}
	w := heads * hd
	row := add(mul(vr("j"), i32(w)), vr("hb"))
	score := append([]Stmt{let("s", Float, flt(0))}, scoreDot(row, hd)...)
	score = append(score,
		set("s", mul(vr("s"), flt(alpha))),
		store("sc", vr("j"), vr("s")),
		set("mx", call(FnMax, vr("mx"), vr("s"))))
	body := []Stmt{
		Shared{"sc", context},
		Shared{"sh", tg},
		decodePos(context),
		let("hb", Int, mul(tgidE, i32(hd))), // this head's first value in a row
		strided("d", hd, tg,
			store("kc", add(mul(vr("p"), i32(w)), add(vr("hb"), vr("d"))), load("k", add(vr("hb"), vr("d")))),
			store("vc", add(mul(vr("p"), i32(w)), add(vr("hb"), vr("d"))), load("v", add(vr("hb"), vr("d"))))),
		let("mx", Float, flt(negHuge)),
		strided("j", context, tg, when(le(vr("j"), vr("p")), score...)),
	}
	body = append(body, reduceInto("m", "mx", "sh", tg, maxOp)...)
	body = append(body, let("se", Float, flt(0)),
		strided("j", context, tg, when(le(vr("j"), vr("p")),
			let("e", Float, call(FnExp, sub(load("sc", vr("j")), vr("m")))),
			store("sc", vr("j"), vr("e")),
			set("se", add(vr("se"), vr("e"))))))
	body = append(body, reduceInto("total", "se", "sh", tg, sumOp)...) // its barriers also publish sc
	body = append(body, let("inv", Float, div(flt(1), vr("total"))))
	// term is thread d's product of position j: its weight times v_h[j][d].
	term := mul(mul(load("sc", vr("j")), vr("inv")), sel(eq(vr("j"), vr("p")), load("v", add(vr("hb"), vr("d"))), load("vc", add(row, vr("d")))))
	accumulate := set("acc", add(vr("acc"), term))
	if parts := tg / hd; parts >= 2 {
		// parts groups of hd threads each sum every parts-th position
		// (a thread alone over all of them left y waiting on p+1 loads in
		// a row), then thread d adds the groups' sums in group order.
		body = append(body,
			let("d", Int, rem(lidE, i32(hd))),
			let("part", Int, div(lidE, i32(hd))),
			let("acc", Float, flt(0)),
			when(lt(vr("part"), i32(parts)), For{"j", vr("part"), add(vr("p"), i32(1)), i32(parts), []Stmt{accumulate}}),
			store("sh", lidE, vr("acc")),
			Barrier{},
			when(lt(lidE, i32(hd)),
				let("sum", Float, flt(0)),
				loop("g", 0, parts, 1, set("sum", add(vr("sum"), load("sh", add(mul(vr("g"), i32(hd)), lidE))))),
				store("y", add(vr("hb"), lidE), vr("sum"))))
	} else {
		body = append(body, strided("d", hd, tg,
			let("acc", Float, flt(0)),
			For{"j", i32(0), add(vr("p"), i32(1)), i32(1), []Stmt{accumulate}},
			store("y", add(vr("hb"), vr("d")), vr("acc"))))
	}
	return &Kernel{
		Doc: fmt.Sprintf("cached attention of one position over %d, %d heads of %d, scale %g", context, heads, hd, alpha),
		Params: []Param{argsParam(), in("q", w), in("k", w), in("v", w), out("y", w),
			out("kc", context*w), out("vc", context*w)},
		Threadgroup: tg, Groups: heads, Body: body,
	}, nil
}

// scoreDot adds q_h·k_h[j] to s, the products in d order: from k for
// the new position (j = p), else from the cache row at row. Where a head's
// width is a multiple of 4 the cache row is read 16 bytes at a time
// (thread j's row is its own: a warp's scalar loads touch 32 rows each),
// q with it; every offset is then a multiple of 4 (the buffers' offsets
// are the plan's, aligned).
func scoreDot(row Expr, hd int) []Stmt {
	qd := func(d Expr) Expr { return load("q", add(vr("hb"), d)) }
	scalar := func(buf string, base Expr) Stmt {
		return loop("d", 0, hd, 1, set("s", add(vr("s"), mul(qd(vr("d")), load(buf, add(base, vr("d")))))))
	}
	fresh := scalar("k", vr("hb"))
	if hd%4 != 0 {
		return []Stmt{If{Cond: eq(vr("j"), vr("p")), Then: []Stmt{fresh}, Else: []Stmt{scalar("kc", row)}}}
	}
	body := []Stmt{
		Load4{"q", add(vr("hb"), vr("d")), [4]string{"q0", "q1", "q2", "q3"}},
		Load4{"kc", add(row, vr("d")), [4]string{"k0", "k1", "k2", "k3"}},
	}
	for i := range 4 {
		body = append(body, set("s", add(vr("s"), mul(vr(fmt.Sprintf("q%d", i)), vr(fmt.Sprintf("k%d", i))))))
	}
	return []Stmt{If{Cond: eq(vr("j"), vr("p")), Then: []Stmt{fresh}, Else: []Stmt{For{"d", i32(0), i32(hd), i32(4), body}}}}
}
