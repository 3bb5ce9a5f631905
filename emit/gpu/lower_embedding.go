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
// embeddingPosBwdKernel (dpos), each gradient value written by one
// thread after sums in a fixed order: no atomics, so the gradients are
// the same bits every run (dpos the CPU's too, which adds in the same
// order; dw is summed in another order than the CPU's).
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
// thread per value of y [rows, dim], or per four values with 16-byte
// accesses where dim is a multiple of 4 (the buffers are bound whole);
// params ids, w, (pos,) y.
func embeddingKernel(g embeddingGeom) *Kernel {
	n := g.rows * g.dim
	params := []Param{in("ids", g.rows), in("w", g.vocab*g.dim)}
	if g.positions {
		params = append(params, in("pos", g.seq*g.dim))
	}
	params = append(params, out("y", n))
	if g.dim%4 == 0 {
		return elementwise("embedding, "+g.String()+", 4 values a thread", n/4, params, func(i Expr) []Stmt {
			s := []Stmt{
				let("i4", Int, mul(i, i32(4))),
				let("r", Int, div(vr("i4"), i32(g.dim))),
				let("j", Int, rem(vr("i4"), i32(g.dim))),
			}
			s = append(s, tokenID("id", load("ids", vr("r")), g.vocab)...)
			s = append(s, Load4{"w", add(mul(vr("id"), i32(g.dim)), vr("j")), [4]string{"w0", "w1", "w2", "w3"}})
			v := [4]Expr{vr("w0"), vr("w1"), vr("w2"), vr("w3")}
			if g.positions {
				s = append(s, Load4{"pos", add(mul(rem(vr("r"), i32(g.seq)), i32(g.dim)), vr("j")), [4]string{"p0", "p1", "p2", "p3"}})
				v = [4]Expr{add(v[0], vr("p0")), add(v[1], vr("p1")), add(v[2], vr("p2")), add(v[3], vr("p3"))}
			}
			return append(s, Store4{"y", vr("i4"), v})
		})
	}
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
// whose id is v, zero for an id no row holds. A threadgroup takes one
// table row v and 32 bytes of its columns (two float4s where rows are
// whole float4s, else eight columns): its threads stride over the rows,
// each reading embedWays ids and the dy of those that are v at once, and
// their partial sums (each in row order) meet in a tree over the row
// slices in threadgroup memory: a fixed order, the same bits every run,
// with no atomics. A row's dy is read by the threadgroups of its id only;
// the ids are read once a threadgroup, vocab·dim/8 times in all, which
// grows with the vocabulary (a sort of the ids would not).
//
// One thread per value of dw walking all the rows, one at a time, took
// 689 µs for models/gpt.cue's 89·384 values over 16,384 ids on an H200.
func embeddingBwdKernel(g embeddingGeom) *Kernel {
	n := g.vocab * g.dim
	v := 1
	if g.dim%4 == 0 {
		v = 4
	}
	units := g.dim / v
	lanes := min(units, 8/v)
	blocks := ceilDiv(units, lanes)
	const ways = embedWays
	sl := pow2AtMost(ceilDiv(g.rows, ways), embedThreads/lanes) // row slices
	tg := sl * lanes
	body := []Stmt{
		Shared{"sh", tg * v},
		let("v", Int, div(tgidE, i32(blocks))),
		let("lane", Int, rem(lidE, i32(lanes))),
		let("sl", Int, div(lidE, i32(lanes))),
		let("unit", Int, add(mul(rem(tgidE, i32(blocks)), i32(lanes)), vr("lane"))),
	}
	var colOK Expr
	c0 := mul(vr("unit"), i32(v))
	if units%lanes != 0 {
		colOK = lt(vr("unit"), i32(units))
		c0 = sel(colOK, c0, i32(0))
	}
	body = append(body, let("c0", Int, c0))
	for c := 0; c < v; c++ {
		body = append(body, let(fmt.Sprint("acc", c), Float, flt(0)))
	}
	var iter, sums []Stmt
	for w := 0; w < ways; w++ {
		r := add(vr("r"), i32(w*sl))
		var ok Expr // the first row of an iteration is always in the tensor
		if w > 0 && g.rows%(sl*ways) != 0 {
			ok = lt(r, i32(g.rows))
			r = sel(ok, r, i32(0))
		}
		rw, id, hit := fmt.Sprint("r", w), fmt.Sprint("id", w), fmt.Sprint("hit", w)
		iter = append(iter, let(rw, Int, r))
		iter = append(iter, tokenID(id, load("ids", vr(rw)), g.vocab)...)
		iter = append(iter, let(hit, Int, sel(and(eq(vr(id), vr("v")), ok), i32(1), i32(0))))
		// A row of another id reads row 0's values instead (one address
		// for every miss, so a cache hit), which the mask then drops.
		at := sel(ne(vr(hit), i32(0)), add(mul(vr(rw), i32(g.dim)), vr("c0")), vr("c0"))
		var raw [4]string
		for c := range raw {
			raw[c] = fmt.Sprintf("l%d_%d", w, c)
		}
		if v == 4 {
			iter = append(iter, Load4{"dy", at, raw})
		} else {
			iter = append(iter, let(raw[0], Float, load("dy", at)))
		}
		for c := 0; c < v; c++ {
			acc := fmt.Sprint("acc", c)
			sums = append(sums, set(acc, add(vr(acc), sel(ne(vr(hit), i32(0)), vr(raw[c]), flt(0)))))
		}
	}
	body = append(body, For{"r", vr("sl"), i32(g.rows), i32(sl * ways), append(iter, sums...)})
	at := func(c int) Expr { return add(mul(lidE, i32(v)), i32(c)) }
	for c := 0; c < v; c++ {
		body = append(body, store("sh", at(c), vr(fmt.Sprint("acc", c))))
	}
	for half := sl / 2; half > 0; half /= 2 {
		var upd []Stmt
		for c := 0; c < v; c++ {
			upd = append(upd, store("sh", at(c), add(load("sh", at(c)), load("sh", add(at(c), i32(half*lanes*v))))))
		}
		body = append(body, Barrier{}, when(lt(vr("sl"), i32(half)), upd...))
	}
	body = append(body, Barrier{})
	var st []Stmt
	for c := 0; c < v; c++ {
		st = append(st, store("dw", add(add(mul(vr("v"), i32(g.dim)), vr("c0")), i32(c)), load("sh", at(c))))
	}
	body = append(body, when(and(eq(vr("sl"), i32(0)), colOK), st...))
	return &Kernel{Doc: fmt.Sprintf("embedding backward (table), %s, %d columns a threadgroup", g, lanes*v),
		Params:      []Param{in("ids", g.rows), in("dy", g.rows*g.dim), out("dw", n)},
		Threadgroup: tg, Groups: g.vocab * blocks, Body: body}
}

// embedThreads caps embeddingBwdKernel's threadgroup (as paramThreads).
const embedThreads = 512

// embedWays is how many rows a thread of embeddingBwdKernel reads before
// it adds them: the dy loads wait on the id loads, so each round trip
// should fetch several.
const embedWays = 8

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
