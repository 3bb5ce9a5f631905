package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The embedding family's lowerings: the row gather of token ids
// (rt/cpu.EmbeddingFwd) and its backward (rt/cpu.EmbeddingBwd).
//
// The ids arrive in the float32 input as exact integers. The host checks
// every one against the vocabulary before it hands a batch (or, for
// device-resident training, the whole training set) to the device
// (rt/gpuhost's checkTokens, the CPU's cpu.CheckTokenIDs and its
// *cpu.TokenIDError), so a bad id is the input's error, exit 1; the
// kernels clamp each id into [0, V) as well, a second guard, so that no
// id the host let through can read or write outside the tables.

// embeddingGeom is an embedding of rows = batch·seq ids into a table of
// vocab rows of dim values, with or without a position table [seq, dim].
type embeddingGeom struct {
	rows, seq, vocab, dim int
	positions             bool
}

func (g embeddingGeom) String() string {
	s := fmt.Sprintf("%d ids, vocabulary %d, width %d", g.rows, g.vocab, g.dim)
	if g.positions {
		s += fmt.Sprintf(", learned positions %d", g.seq)
	}
	return s
}

// embedding lowers an embedding to embeddingKernel, one thread per output
// value, and its backward to embeddingBwdKernel (dweight) and
// embeddingPosBwdKernel (dpos), each one thread per gradient value that
// it alone writes: no atomics, so the gradients are the same bits every
// run (and the CPU's, which adds in the same order).
func (l *lowering) embedding(st *planner.Step) error {
	if err := l.operands(st, 2, 1); err != nil {
		return err
	}
	ids, err := l.shape(st.In[0])
	if err != nil {
		return err
	}
	if len(ids) != 2 {
		return fmt.Errorf("embedding ids %v are not [B,T]", ids)
	}
	g := embeddingGeom{rows: ids[0] * ids[1], seq: ids[1]}
	if st.Kernel == planner.KEmbedding {
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
		g.vocab, g.dim, g.positions = w[0], w[1], present(st.In[2])
		ops := []operand{whole(st.In[0]), whole(st.In[1])}
		if g.positions {
			ops = append(ops, whole(st.In[2]))
		}
		return l.launch("embedding", embeddingKernel(g), nil, append(ops, whole(st.Out[0]))...)
	}
	if err := l.operands(st, 2, 2); err != nil {
		return err
	}
	dy, err := l.shape(st.In[1])
	if err != nil {
		return err
	}
	if len(dy) != 3 {
		return fmt.Errorf("embedding dy %v is not [B,T,D]", dy)
	}
	g.dim = dy[2]
	if present(st.Out[0]) {
		dw, err := l.shape(st.Out[0])
		if err != nil {
			return err
		}
		g.vocab = dw[0]
		if err := l.launch("embedding_bwd", embeddingBwdKernel(g), nil, whole(st.In[0]), whole(st.In[1]), whole(st.Out[0])); err != nil {
			return err
		}
	}
	if present(st.Out[1]) {
		g.positions = true
		return l.launch("embedding_pos_bwd", embeddingPosBwdKernel(g), nil, whole(st.In[1]), whole(st.Out[1]))
	}
	return nil
}

// tokenID declares <name>, the table row of id value x clamped into
// [0, vocab): the comparisons are on the float, so NaN (which fails
// both) becomes 0 and ±Inf an end, before the conversion to int, which
// C leaves undefined out of range.
func tokenID(name string, x Expr, vocab int) []Stmt {
	f := name + "f"
	return []Stmt{
		let(f, Float, x),
		set(f, sel(ge(vr(f), flt(0)), vr(f), flt(0))),
		set(f, sel(lt(vr(f), flt(float32(vocab-1))), vr(f), flt(float32(vocab-1)))),
		let(name, Int, Cast{Int, vr(f)}),
	}
}

// embeddingKernel is y[r, j] = w[ids[r], j] (+ pos[r mod seq, j]), one
// thread per value of y [rows, dim]; params ids, w, (pos,) y.
func embeddingKernel(g embeddingGeom) *Kernel {
	n := g.rows * g.dim
	params := []Param{in("ids", g.rows), in("w", g.vocab*g.dim)}
	if g.positions {
		params = append(params, in("pos", g.seq*g.dim))
	}
	params = append(params, out("y", n))
	return elementwise("embedding, "+g.String(), n, params, func(i Expr) []Stmt {
		s := []Stmt{
			let("r", Int, div(i, i32(g.dim))),
			let("j", Int, rem(i, i32(g.dim))),
		}
		s = append(s, tokenID("id", load("ids", vr("r")), g.vocab)...)
		v := load("w", add(mul(vr("id"), i32(g.dim)), vr("j")))
		if g.positions {
			v = add(v, load("pos", add(mul(rem(vr("r"), i32(g.seq)), i32(g.dim)), vr("j"))))
		}
		return append(s, store("y", i, v))
	})
}

// embeddingBwdKernel is dw[v, j] = the sum of dy[r, j] over the rows r
// whose id is v, in row order (rt/cpu.EmbeddingBwd's order, so the same
// bits), zero for an id no row holds: one thread per value of dw
// [vocab, dim], each reading all rows' ids, so vocab·dim·rows id reads
// (the threads of a SIMD group share v and read the same id, one
// broadcast load) and rows·dim reads of dy in all. That is cheap for a
// character vocabulary (models/gpt.cue: 89·384 threads over 16,384 ids
// at batch 64) and grows with the vocabulary; a sort of the ids would
// take it to rows·dim for a large one.
func embeddingBwdKernel(g embeddingGeom) *Kernel {
	n := g.vocab * g.dim
	return elementwise("embedding backward (table), "+g.String(), n,
		[]Param{in("ids", g.rows), in("dy", g.rows*g.dim), out("dw", n)}, func(i Expr) []Stmt {
			s := []Stmt{
				let("v", Int, div(i, i32(g.dim))),
				let("j", Int, rem(i, i32(g.dim))),
				let("acc", Float, flt(0)),
			}
			body := append(tokenID("id", load("ids", vr("r")), g.vocab),
				when(eq(vr("id"), vr("v")), set("acc", add(vr("acc"), load("dy", add(mul(vr("r"), i32(g.dim)), vr("j")))))))
			return append(s, loop("r", 0, g.rows, 1, body...), store("dw", i, vr("acc")))
		})
}

// embeddingPosBwdKernel is dpos[t, j] = the sum over the batch of
// dy[b·seq + t, j], in batch order, one thread per value of dpos
// [seq, dim]; params dy, dpos.
func embeddingPosBwdKernel(g embeddingGeom) *Kernel {
	n := g.seq * g.dim
	batch := g.rows / g.seq
	return elementwise("embedding backward (positions), "+g.String(), n,
		[]Param{in("dy", g.rows*g.dim), out("dpos", n)}, func(i Expr) []Stmt {
			return []Stmt{
				let("acc", Float, flt(0)),
				loop("b", 0, batch, 1, set("acc", add(vr("acc"), load("dy", add(mul(vr("b"), i32(n)), i))))),
				store("dpos", i, vr("acc")),
			}
		})
}
