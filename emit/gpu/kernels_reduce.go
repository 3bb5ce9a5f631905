package gpu

import (
	"fmt"
	"math"

	"github.com/mlbuild/mlbuild/planner"
)

// tgReduce caps the threadgroup size of reduction kernels (a power of two,
// which treeReduce needs).
const tgReduce = 256

// tgWide is the threadgroup of reductions over very long rows (1024, what
// CUDA and Apple GPUs allow for simple kernels).
const tgWide = 1024

// negHuge stands in for −∞ as the start of a max reduction (a literal every
// dialect can spell).
const negHuge = -math.MaxFloat32

// treeReduce combines sh[0..tg) into sh[0] with op, halving the active
// threads each round; every thread must run it (it holds barriers). The
// partial of this thread must already be stored in sh[lid].
func treeReduce(sh string, tg int, op func(a, b Expr) Expr) []Stmt {
	s := []Stmt{Barrier{}}
	for half := tg / 2; half > 0; half /= 2 {
		s = append(s,
			when(lt(lidE, i32(half)), store(sh, lidE, op(load(sh, lidE), load(sh, add(lidE, i32(half)))))),
			Barrier{})
	}
	return s
}

func sumOp(a, b Expr) Expr { return add(a, b) }
func maxOp(a, b Expr) Expr { return call(FnMax, a, b) }

// reduceInto stores the thread's partial, reduces the threadgroup, and
// declares name = the result in every thread (with a barrier after the
// read, so sh can be reused).
func reduceInto(name, partial, sh string, tg int, op func(a, b Expr) Expr) []Stmt {
	s := []Stmt{store(sh, lidE, vr(partial))}
	s = append(s, treeReduce(sh, tg, op)...)
	return append(s, let(name, Float, load(sh, i32(0))), Barrier{})
}

// strided is a loop of each thread over j = lid, lid+tg, … < n.
func strided(j string, n, tg int, body ...Stmt) Stmt {
	return For{j, lidE, i32(n), i32(tg), body}
}

// channelSumKernel is the bias gradient: db[c] = Σ dy[o, c, j] over o <
// outer and j < inner, one threadgroup per channel.
func channelSumKernel(outer, channels, inner int) *Kernel {
	m := outer * inner
	// One threadgroup per channel sums a whole batch: as wide a group as
	// GPUs allow, so the loads of many threads hide each other's latency.
	// Each thread keeps ways loads in flight (independent sums, one per
	// way): a thread waiting on one load at a time left a 64-channel
	// gradient bound by memory latency (30 µs for 12.5 MB on an H100).
	tg := pow2AtMost(m, tgWide)
	ways := min(4, ceilDiv(m, tg))
	shape := []int{outer, inner}
	idx := func(j Expr) Expr {
		return add(mul(add(mul(coord(j, shape, 0), i32(channels)), tgidE), i32(inner)), coord(j, shape, 1))
	}
	body := []Stmt{Shared{"sh", tg}}
	var step []Stmt
	sum := Expr(nil)
	for w := 0; w < ways; w++ {
		acc := fmt.Sprintf("acc%d", w)
		body = append(body, let(acc, Float, flt(0)))
		jw := add(vr("j"), i32(w*tg))
		upd := set(acc, add(vr(acc), load("dy", idx(jw))))
		if w == 0 {
			step = append(step, upd)
		} else {
			step = append(step, when(lt(jw, i32(m)), upd))
		}
		if sum == nil {
			sum = vr(acc)
		} else {
			sum = add(sum, vr(acc))
		}
	}
	body = append(body, For{"j", lidE, i32(m), i32(ways * tg), step}, let("acc", Float, sum))
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("db", tgidE, vr("total"))))
	return &Kernel{
		Doc:    fmt.Sprintf("bias gradient: sums of [%d,%d,%d] over axes 0 and 2", outer, channels, inner),
		Params: []Param{in("dy", outer*channels*inner), out("db", channels)}, Threadgroup: tg, Groups: channels, Body: body,
	}
}

// rowLayout is a softmax axis inside a tensor [outer, l, inner]: a row is
// fixed (outer, inner) coordinates, one threadgroup each.
func rowElem(l, inner int) Expr {
	// base of the row of this threadgroup plus j·inner
	row := tgidE
	base := add(mul(mul(div(row, i32(inner)), i32(l)), i32(inner)), rem(row, i32(inner)))
	return add(base, mul(vr("j"), i32(inner)))
}

// softmaxKernel is softmax (or log-softmax) along the middle axis of
// [outer, l, inner]: per row a max reduction, a sum of exponentials, then
// the element pass; y may be x.
func softmaxKernel(outer, l, inner int, logSoftmax bool) *Kernel {
	tg := pow2AtMost(l, tgReduce)
	e := rowElem(l, inner)
	body := []Stmt{
		Shared{"sh", tg},
		let("mx", Float, flt(negHuge)),
		strided("j", l, tg, set("mx", call(FnMax, vr("mx"), load("x", e)))),
	}
	body = append(body, reduceInto("m", "mx", "sh", tg, maxOp)...)
	body = append(body, let("s", Float, flt(0)),
		strided("j", l, tg, set("s", add(vr("s"), call(FnExp, sub(load("x", e), vr("m")))))))
	body = append(body, reduceInto("total", "s", "sh", tg, sumOp)...)
	var y Expr
	kind := "softmax"
	if logSoftmax {
		kind = "log-softmax"
		body = append(body, let("lse", Float, add(vr("m"), call(FnLog, vr("total")))))
		y = sub(load("x", e), vr("lse"))
	} else {
		body = append(body, let("inv", Float, div(flt(1), vr("total"))))
		y = mul(call(FnExp, sub(load("x", e), vr("m"))), vr("inv"))
	}
	body = append(body, strided("j", l, tg, store("y", e, y)))
	n := outer * l * inner
	return &Kernel{Doc: fmt.Sprintf("%s over axis of %d in [%d,%d,%d]", kind, l, outer, l, inner),
		Params: []Param{in("x", n), out("y", n)}, Threadgroup: tg, Groups: outer * inner, Body: body}
}

// softmaxBwdKernel: softmax dx = y·(dy − Σ dy·y); log-softmax
// dx = dy − exp(y)·Σ dy. dx may be dy.
func softmaxBwdKernel(outer, l, inner int, logSoftmax bool) *Kernel {
	tg := pow2AtMost(l, tgReduce)
	e := rowElem(l, inner)
	term := mul(load("dy", e), load("y", e))
	dx := mul(load("y", e), sub(load("dy", e), vr("total")))
	kind := "softmax"
	if logSoftmax {
		kind = "log-softmax"
		term = load("dy", e)
		dx = sub(load("dy", e), mul(call(FnExp, load("y", e)), vr("total")))
	}
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("j", l, tg, set("acc", add(vr("acc"), term))),
	}
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, strided("j", l, tg, store("dx", e, dx)))
	n := outer * l * inner
	return &Kernel{Doc: fmt.Sprintf("%s backward over axis of %d in [%d,%d,%d]", kind, l, outer, l, inner),
		Params: []Param{in("y", n), in("dy", n), out("dx", n)}, Threadgroup: tg, Groups: outer * inner, Body: body}
}

// softmaxXentKernel is the softmax cross-entropy loss averaged over the
// batch and its gradient (softmax − labels)/batch, in one threadgroup: each
// thread takes whole rows, then the row losses are reduced.
func softmaxXentKernel(batch, classes int) *Kernel {
	return softmaxXentShareKernel(batch, classes, batch)
}

// softmaxXentShareKernel is softmaxXentKernel for a share of a global
// batch of over rows: the loss and the gradient are divided by over, not
// by batch, so that summing every share's gives the global mean.
//
// It is one threadgroup, as wide as GPUs allow (the loss is one sum, in
// a fixed order): a GPT's 16,384 rows of tokens took 2.5 ms on 256 threads.
func softmaxXentShareKernel(batch, classes, over int) *Kernel {
	tg := pow2AtMost(batch, tgWide)
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("r", batch, tg, xentRow(classes, over)...),
	}
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("loss", i32(0), mul(vr("total"), flt(1/float32(over))))))
	n := batch * classes
	return &Kernel{Doc: fmt.Sprintf("softmax cross-entropy, batch %d, %d classes", batch, classes) + shareDoc(batch, over),
		Params:      []Param{in("z", n), in("t", n), out("loss", 1), out("dz", n)},
		Threadgroup: tg, Groups: 1, Body: body}
}

// softmaxXentRowsKernel is softmaxXentShareKernel's rows in parallel,
// one thread a row: dz, and each row's loss −Σ t·log p into rowLoss;
// sumRowsKernel then adds them up. Plans for a backend with
// planner.Target.LossRows give the step the rows' scratch.
func softmaxXentRowsKernel(batch, classes, over int) *Kernel {
	n := batch * classes
	return elementwise(fmt.Sprintf("softmax cross-entropy rows, batch %d, %d classes", batch, classes)+shareDoc(batch, over), batch,
		[]Param{in("z", n), in("t", n), out("rows", batch), out("dz", n)}, func(r Expr) []Stmt {
			s := []Stmt{let("r", Int, r), let("acc", Float, flt(0))}
			s = append(s, xentRow(classes, over)...)
			return append(s, store("rows", vr("r"), vr("acc")))
		})
}

// xentRow is the softmax cross-entropy of row r of logits z and labels t
// (classes a row): acc −= Σ t·log p and dz = (p − t)/over. A row whose
// labels are all 0 (a position the loss ignores: a padding token) adds
// nothing to acc and gets dz = 0; the divisor stays over, the rows of
// the batch, as rt/cpu's SoftmaxXent keeps it.
func xentRow(classes, over int) []Stmt {
	x := func(c Expr) Expr { return load("z", add(mul(vr("r"), i32(classes)), c)) }
	t := func(c Expr) Expr { return load("t", add(mul(vr("r"), i32(classes)), c)) }
	dz := func(v Expr) Stmt { return store("dz", add(mul(vr("r"), i32(classes)), vr("c")), v) }
	inv := flt(1 / float32(over))
	return []Stmt{
		let("live", Int, i32(0)),
		loop("c", 0, classes, 1, set("live", sel(ne(t(vr("c")), flt(0)), i32(1), vr("live")))),
		If{Cond: ne(vr("live"), i32(0)), Then: []Stmt{
			let("m", Float, x(i32(0))),
			loop("c", 1, classes, 1, set("m", call(FnMax, vr("m"), x(vr("c"))))),
			let("s", Float, flt(0)),
			loop("c", 0, classes, 1, set("s", add(vr("s"), call(FnExp, sub(x(vr("c")), vr("m")))))),
			let("lse", Float, add(vr("m"), call(FnLog, vr("s")))),
			loop("c", 0, classes, 1,
				let("lp", Float, sub(x(vr("c")), vr("lse"))),
				set("acc", sub(vr("acc"), mul(t(vr("c")), vr("lp")))),
				dz(mul(sub(call(FnExp, vr("lp")), t(vr("c"))), inv))),
		}, Else: []Stmt{loop("c", 0, classes, 1, dz(flt(0)))}},
	}
}

// sumRowsKernel is loss = Σ rows · scale in one threadgroup, in a fixed
// order (softmaxXentRowsKernel's second step).
func sumRowsKernel(n int, scale float32) *Kernel {
	tg := pow2AtMost(n, tgWide)
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("j", n, tg, set("acc", add(vr("acc"), load("rows", vr("j"))))),
	}
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("loss", i32(0), mul(vr("total"), flt(scale)))))
	return &Kernel{Doc: fmt.Sprintf("sum of %d rows' losses, times %g", n, scale),
		Params: []Param{in("rows", n), out("loss", 1)}, Threadgroup: tg, Groups: 1, Body: body}
}

// mseKernel is the mean over all n elements of (pred − target)² and its
// gradient 2(pred − target)/n, in one threadgroup.
func mseKernel(n int) *Kernel { return mseShareKernel(n, n) }

// mseShareKernel is mseKernel divided by over elements (a share of a
// global batch; see softmaxXentShareKernel).
func mseShareKernel(n, over int) *Kernel {
	tg := pow2AtMost(n, tgReduce)
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("j", n, tg,
			let("d", Float, sub(load("p", vr("j")), load("t", vr("j")))),
			set("acc", add(vr("acc"), mul(vr("d"), vr("d")))),
			store("dp", vr("j"), mul(flt(2/float32(over)), vr("d")))),
	}
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("loss", i32(0), mul(vr("total"), flt(1/float32(over))))))
	return &Kernel{Doc: fmt.Sprintf("mean squared error over %d elements", n) + shareDoc(n, over),
		Params:      []Param{in("p", n), in("t", n), out("loss", 1), out("dp", n)},
		Threadgroup: tg, Groups: 1, Body: body}
}

// maeKernel is the mean absolute error over n elements, one threadgroup,
// and its gradient sign(p − t)/n (0 where they are equal).
func maeKernel(n int) *Kernel { return maeShareKernel(n, n) }

// maeShareKernel is maeKernel divided by over elements.
func maeShareKernel(n, over int) *Kernel {
	tg := pow2AtMost(n, tgReduce)
	inv := flt(1 / float32(over))
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("j", n, tg,
			let("d", Float, sub(load("p", vr("j")), load("t", vr("j")))),
			set("acc", add(vr("acc"), call(FnAbs, vr("d")))),
			store("dp", vr("j"), sel(gt(vr("d"), flt(0)), inv, sel(lt(vr("d"), flt(0)), neg(inv), flt(0))))),
	}
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("loss", i32(0), mul(vr("total"), inv))))
	return &Kernel{Doc: fmt.Sprintf("mean absolute error over %d elements", n) + shareDoc(n, over),
		Params:      []Param{in("p", n), in("t", n), out("loss", 1), out("dp", n)},
		Threadgroup: tg, Groups: 1, Body: body}
}

// huberKernel is the mean Huber loss over n elements (½d² within delta,
// delta·(|d| − ½delta) beyond), one threadgroup, and its gradient
// clamp(d, −delta, delta)/n.
func huberKernel(n int, delta float32) *Kernel { return huberShareKernel(n, delta, n) }

// huberShareKernel is huberKernel divided by over elements.
func huberShareKernel(n int, delta float32, over int) *Kernel {
	tg := pow2AtMost(n, tgReduce)
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("j", n, tg,
			let("d", Float, sub(load("p", vr("j")), load("t", vr("j")))),
			let("a", Float, call(FnAbs, vr("d"))),
			set("acc", add(vr("acc"), sel(le(vr("a"), flt(delta)),
				mul(flt(0.5), mul(vr("d"), vr("d"))),
				mul(flt(delta), sub(vr("a"), flt(delta/2)))))),
			store("dp", vr("j"), mul(flt(1/float32(over)), call(FnMax, flt(-delta), call(FnMin, flt(delta), vr("d")))))),
	}
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("loss", i32(0), mul(vr("total"), flt(1/float32(over))))))
	return &Kernel{Doc: fmt.Sprintf("mean Huber loss (delta %g) over %d elements", delta, n) + shareDoc(n, over),
		Params:      []Param{in("p", n), in("t", n), out("loss", 1), out("dp", n)},
		Threadgroup: tg, Groups: 1, Body: body}
}

// batchNormKernel is training-mode batch normalisation of [outer, c,
// inner], one threadgroup per channel: mean, biased variance (two passes),
// y = gamma·x̂ + beta, saved mean and 1/sqrt(var+eps), and the running
// statistics moved by momentum (the variance unbiased, as PyTorch).
//
// A threadgroup is as wide as GPUs allow (as channelSumKernel's): a
// CIFAR ResNet's 64-channel layers at batch 128 have 131,072 values a
// channel, and 64 groups of 256 threads left the H200 waiting on memory
// (158 µs for 33.5 MB, docs/runs/gpu-profile-2026-11-29-b.txt). Where
// inner is a multiple of 4, each pass reads float4s, several a thread in
// flight (channelSweep): 1,024 threads reading one float at a time still
// took 63 µs (run c).
func batchNormKernel(outer, c, inner int, eps, momentum float32, relu bool) *Kernel {
	m := outer * inner
	n := outer * c * inner
	unbiased := float32(1) / float32(max(m-1, 1))
	params := []Param{in("x", n), in("gamma", c), in("beta", c), out("rmean", c), out("rvar", c),
		out("y", n), out("smean", c), out("sinv", c)}
	if cs, ok := newChannelSweep(outer, c, inner); ok {
		x := func(w, k int) Expr { return vr(cs.name("x", w, k)) }
		body := []Stmt{Shared{"sh", cs.tg}, let("acc", Float, flt(0))}
		body = append(body, cs.pass([]string{"x"}, func(w int, ok Expr) []Stmt {
			return []Stmt{set("acc", add(vr("acc"), cs.masked(ok, add(add(add(x(w, 0), x(w, 1)), x(w, 2)), x(w, 3)))))}
		}, nil))
		body = append(body, reduceInto("sum", "acc", "sh", cs.tg, sumOp)...)
		body = append(body, let("mean", Float, mul(vr("sum"), flt(1/float32(m)))), let("acc2", Float, flt(0)))
		body = append(body, cs.pass([]string{"x"}, func(w int, ok Expr) []Stmt {
			var sq Expr
			for k := 0; k < 4; k++ {
				d := sub(x(w, k), vr("mean"))
				if sq == nil {
					sq = mul(d, d)
				} else {
					sq = add(sq, mul(d, d))
				}
			}
			return []Stmt{set("acc2", add(vr("acc2"), cs.masked(ok, sq)))}
		}, nil))
		body = append(body, reduceInto("ss", "acc2", "sh", cs.tg, sumOp)...)
		body = append(body, let("var", Float, mul(vr("ss"), flt(1/float32(m)))))
		body = append(body,
			let("inv", Float, call(FnRsqrt, add(vr("var"), flt(eps)))),
			let("scale", Float, mul(load("gamma", tgidE), vr("inv"))),
			let("shift", Float, sub(load("beta", tgidE), mul(vr("mean"), vr("scale")))))
		if relu {
			body = append(body, let("b", Float, load("beta", tgidE)))
		}
		body = append(body, cs.pass([]string{"x"}, nil, func(w int) (string, [4]Expr) {
			var v [4]Expr
			for k := range v {
				v[k] = add(mul(x(w, k), vr("scale")), vr("shift"))
				if relu {
					v[k] = sel(reluKeeps(x(w, k), vr("mean"), vr("scale"), vr("b")), v[k], flt(0))
				}
			}
			return "y", v
		}))
		body = append(body, when(eq(lidE, i32(0)),
			store("smean", tgidE, vr("mean")),
			store("sinv", tgidE, vr("inv")),
			store("rmean", tgidE, add(mul(flt(1-momentum), load("rmean", tgidE)), mul(flt(momentum), vr("mean")))),
			store("rvar", tgidE, add(mul(flt(1-momentum), load("rvar", tgidE)), mul(flt(momentum), mul(vr("ss"), flt(unbiased)))))))
		return &Kernel{Doc: fmt.Sprintf("batch norm (training)%s of [%d,%d,%d], float4s", reluName(relu), outer, c, inner),
			Params: params, Threadgroup: cs.tg, Groups: c, Body: body}
	}
	tg := pow2AtMost(m, tgWide)
	shape := []int{outer, inner}
	e := add(mul(add(mul(coord(vr("j"), shape, 0), i32(c)), tgidE), i32(inner)), coord(vr("j"), shape, 1))
	body := meanAndSquares(e, m, tg)
	body = append(body, let("var", Float, mul(vr("ss"), flt(1/float32(m)))))
	body = append(body, normaliseChannel(e, m, tg, eps, momentum, mul(vr("ss"), flt(unbiased)), "smean", "sinv", relu)...)
	return &Kernel{Doc: fmt.Sprintf("batch norm (training)%s of [%d,%d,%d]", reluName(relu), outer, c, inner),
		Params: params, Threadgroup: tg, Groups: c, Body: body}
}

// channelSweep is how the threadgroup of channel tgid of [outer, c,
// inner], inner a multiple of 4, walks the channel's values: unit u is
// the float4 at value 4u of the channel (image 4u / inner, position
// 4u mod inner), each thread takes units lid, lid + tg, … and loads
// sweepWays of them before it uses them, in unit order. The buffers must
// be bound whole (16-byte aligned).
type channelSweep struct {
	c, inner, units, tg int
}

// sweepWays is how many float4s a thread of a channelSweep has in flight.
const sweepWays = 4

// sweepThreads caps a channelSweep's threadgroup: a CUDA block of 1,024
// threads may use only 64 registers a thread, fewer than its loads want.
const sweepThreads = 512

func newChannelSweep(outer, c, inner int) (channelSweep, bool) {
	if inner%4 != 0 {
		return channelSweep{}, false
	}
	units := outer * inner / 4
	return channelSweep{c: c, inner: inner, units: units, tg: pow2AtMost(ceilDiv(units, sweepWays), sweepThreads)}, true
}

func (cs channelSweep) name(buf string, w, k int) string { return fmt.Sprintf("%s%d_%d", buf, w, k) }

// masked is e where ok holds (nil: always), else 0.
func (cs channelSweep) masked(ok, e Expr) Expr {
	if ok == nil {
		return e
	}
	return sel(ok, e, flt(0))
}

// pass is one walk over the channel: each round loads the float4s of
// bufs for its sweepWays units (names cs.name(buf, w, k)), then for each
// unit w in order runs use(w, ok), ok whether the unit is in the channel
// (nil: always), and stores store(w)'s buffer and values where it is.
func (cs channelSweep) pass(bufs []string, use func(w int, ok Expr) []Stmt, store func(w int) (string, [4]Expr)) Stmt {
	var loads, uses []Stmt
	for w := 0; w < sweepWays; w++ {
		u := add(vr("u"), i32(w*cs.tg))
		var ok Expr // the first unit of a round is always in the channel
		if w > 0 && cs.units%(cs.tg*sweepWays) != 0 {
			ok = lt(u, i32(cs.units))
			u = sel(ok, u, i32(0))
		}
		iw := fmt.Sprint("e", w)
		// value 4u: image 4u / inner, position 4u mod inner
		loads = append(loads, let(iw, Int, add(mul(add(mul(div(mul(u, i32(4)), i32(cs.inner)), i32(cs.c)), tgidE), i32(cs.inner)), rem(mul(u, i32(4)), i32(cs.inner)))))
		for _, b := range bufs {
			loads = append(loads, Load4{b, vr(iw), [4]string{cs.name(b, w, 0), cs.name(b, w, 1), cs.name(b, w, 2), cs.name(b, w, 3)}})
		}
		if use != nil {
			uses = append(uses, use(w, ok)...)
		}
		if store != nil {
			buf, v := store(w)
			uses = append(uses, whenSome(ok, Store4{buf, vr(iw), v})...)
		}
	}
	return For{"u", lidE, i32(cs.units), i32(cs.tg * sweepWays), append(loads, uses...)}
}

// normaliseChannel ends a batch norm's training forward once the
// threadgroup of channel tgid knows its "mean" and "var": y = gamma·x̂ +
// beta over the channel's m values (e an index in j), then by thread 0
// the mean and 1/sqrt(var+eps) saved into saveMean and saveInv, and the
// running statistics moved toward the mean and sampleVar. With relu, y is
// the fused ReLU's output (reluKeeps).
func normaliseChannel(e Expr, m, tg int, eps, momentum float32, sampleVar Expr, saveMean, saveInv string, relu bool) []Stmt {
	y := add(mul(load("x", e), vr("scale")), vr("shift"))
	if relu {
		y = sel(reluKeeps(load("x", e), vr("mean"), vr("scale"), load("beta", tgidE)), y, flt(0))
	}
	return []Stmt{
		let("inv", Float, call(FnRsqrt, add(vr("var"), flt(eps)))),
		let("scale", Float, mul(load("gamma", tgidE), vr("inv"))),
		let("shift", Float, sub(load("beta", tgidE), mul(vr("mean"), vr("scale")))),
		strided("j", m, tg, store("y", e, y)),
		when(eq(lidE, i32(0)),
			store(saveMean, tgidE, vr("mean")),
			store(saveInv, tgidE, vr("inv")),
			store("rmean", tgidE, add(mul(flt(1-momentum), load("rmean", tgidE)), mul(flt(momentum), vr("mean")))),
			store("rvar", tgidE, add(mul(flt(1-momentum), load("rvar", tgidE)), mul(flt(momentum), sampleVar)))),
	}
}

// batchNormEvalKernel normalises with the running statistics,
// element-wise; with relu, y = max(y, 0).
func batchNormEvalKernel(outer, c, inner int, eps float32, relu bool) *Kernel {
	n := outer * c * inner
	return elementwise(fmt.Sprintf("batch norm (evaluation)%s of [%d,%d,%d]", reluName(relu), outer, c, inner), n,
		[]Param{in("x", n), in("gamma", c), in("beta", c), in("rmean", c), in("rvar", c), out("y", n)},
		func(i Expr) []Stmt {
			ch := rem(div(i, i32(inner)), i32(c))
			return []Stmt{
				let("ch", Int, ch),
				store("y", i, evalReLU(relu, add(mul(mul(load("gamma", vr("ch")), sub(load("x", i), load("rmean", vr("ch")))),
					call(FnRsqrt, add(load("rvar", vr("ch")), flt(eps)))), load("beta", vr("ch"))))),
			}
		})
}

// foldBatchNormKernel folds an evaluation batch norm into the weight w
// [oc, cg, rs] (cg input channels, rs taps) and bias b [oc] of the layer
// before it (none without bias: 0): wf = w·s and bf = (b − rmean)·s +
// beta with s = gamma·rsqrt(rvar + eps), as batchNormEvalKernel
// normalises. One thread a folded weight, in the written order: KRSC
// ([oc, rs, cg]) with krsc, else w's own; the first thread of each output
// channel writes its bias.
func foldBatchNormKernel(oc, cg, rs int, krsc, bias bool, eps float32) *Kernel {
	n := oc * cg * rs
	params := []Param{in("w", n)}
	if bias {
		params = append(params, in("b", oc))
	}
	params = append(params, in("gamma", oc), in("beta", oc), in("rmean", oc), in("rvar", oc), out("wf", n), out("bf", oc))
	order := ""
	if krsc {
		order = ", into KRSC order"
	}
	return elementwise(fmt.Sprintf("batch norm folded into the weights [%d,%d,%d] and bias before it%s", oc, cg, rs, order), n, params,
		func(i Expr) []Stmt {
			src := i // element i of w's own order
			if krsc {
				src = kcrsOfKRSC(i, cg, rs)
			}
			var b Expr = flt(0)
			if bias {
				b = load("b", vr("ch"))
			}
			return []Stmt{
				let("ch", Int, div(i, i32(cg*rs))),
				let("s", Float, mul(load("gamma", vr("ch")), call(FnRsqrt, add(load("rvar", vr("ch")), flt(eps))))),
				store("wf", i, mul(load("w", src), vr("s"))),
				when(eq(rem(i, i32(cg*rs)), i32(0)),
					store("bf", vr("ch"), add(mul(sub(b, load("rmean", vr("ch"))), vr("s")), load("beta", vr("ch"))))),
			}
		})
}

// channelGradSums is the first pass of a batch norm's backward over
// channel tgid's m values (e an index in j): with its saved "mean" and
// "inv" loaded, "sdy" = Σ dy and "sdyx" = Σ dy·x̂, summed in a tree in the
// threadgroup's shared "sh". With relu, dy is masked as channelDy says
// (and "k" = gamma·inv and "b" = beta are declared).
func channelGradSums(e Expr, m, tg int, relu bool) []Stmt {
	xhat := mul(sub(load("x", e), vr("mean")), vr("inv"))
	body := []Stmt{
		Shared{"sh", tg},
		let("mean", Float, load("smean", tgidE)),
		let("inv", Float, load("sinv", tgidE)),
		let("a1", Float, flt(0)),
		let("a2", Float, flt(0)),
	}
	if relu {
		body = append(body, let("k", Float, mul(load("gamma", tgidE), vr("inv"))), let("b", Float, load("beta", tgidE)))
	}
	dy := channelDy(e, relu)
	body = append(body, strided("j", m, tg, set("a1", add(vr("a1"), dy)), set("a2", add(vr("a2"), mul(dy, xhat)))))
	body = append(body, reduceInto("sdy", "a1", "sh", tg, sumOp)...)
	return append(body, reduceInto("sdyx", "a2", "sh", tg, sumOp)...)
}

// batchNormBwdKernel: per channel dbeta = Σ dy, dgamma = Σ dy·x̂, and
// dx = gamma·inv·(dy − dbeta/m − x̂·dgamma/m); dx may be dy.
// Its threadgroups are as wide as batchNormKernel's, and read float4s as
// its do where inner allows.
func batchNormBwdKernel(outer, c, inner int, relu bool) *Kernel {
	m := outer * inner
	n := outer * c * inner
	params := []Param{in("x", n), in("gamma", c), in("smean", c), in("sinv", c), in("dy", n),
		out("dx", n), out("dgamma", c), out("dbeta", c)}
	if relu {
		params = append(params, in("beta", c))
	}
	if cs, ok := newChannelSweep(outer, c, inner); ok {
		x := func(w, k int) Expr { return vr(cs.name("x", w, k)) }
		dy := func(w, k int) Expr {
			if relu {
				return sel(reluKeeps(x(w, k), vr("mean"), vr("k"), vr("b")), vr(cs.name("dy", w, k)), flt(0))
			}
			return vr(cs.name("dy", w, k))
		}
		xhat := func(w, k int) Expr { return mul(sub(x(w, k), vr("mean")), vr("inv")) }
		body := []Stmt{
			Shared{"sh", cs.tg},
			let("mean", Float, load("smean", tgidE)),
			let("inv", Float, load("sinv", tgidE)),
			let("a1", Float, flt(0)),
			let("a2", Float, flt(0)),
		}
		if relu {
			body = append(body, let("k", Float, mul(load("gamma", tgidE), vr("inv"))), let("b", Float, load("beta", tgidE)))
		}
		body = append(body,
			cs.pass([]string{"x", "dy"}, func(w int, ok Expr) []Stmt {
				s1 := add(add(add(dy(w, 0), dy(w, 1)), dy(w, 2)), dy(w, 3))
				s2 := add(add(add(mul(dy(w, 0), xhat(w, 0)), mul(dy(w, 1), xhat(w, 1))), mul(dy(w, 2), xhat(w, 2))), mul(dy(w, 3), xhat(w, 3)))
				return []Stmt{set("a1", add(vr("a1"), cs.masked(ok, s1))), set("a2", add(vr("a2"), cs.masked(ok, s2)))}
			}, nil))
		body = append(body, reduceInto("sdy", "a1", "sh", cs.tg, sumOp)...)
		body = append(body, reduceInto("sdyx", "a2", "sh", cs.tg, sumOp)...)
		if !relu {
			body = append(body, let("k", Float, mul(load("gamma", tgidE), vr("inv"))))
		}
		body = append(body,
			let("m1", Float, mul(vr("sdy"), flt(1/float32(m)))),
			let("m2", Float, mul(vr("sdyx"), flt(1/float32(m)))),
			cs.pass([]string{"x", "dy"}, nil, func(w int) (string, [4]Expr) {
				var v [4]Expr
				for k := range v {
					v[k] = mul(vr("k"), sub(sub(dy(w, k), vr("m1")), mul(xhat(w, k), vr("m2"))))
				}
				return "dx", v
			}),
			when(eq(lidE, i32(0)), store("dgamma", tgidE, vr("sdyx")), store("dbeta", tgidE, vr("sdy"))))
		return &Kernel{Doc: fmt.Sprintf("batch norm backward%s of [%d,%d,%d], float4s", reluName(relu), outer, c, inner),
			Params: params, Threadgroup: cs.tg, Groups: c, Body: body}
	}
	tg := pow2AtMost(m, tgWide)
	shape := []int{outer, inner}
	e := add(mul(add(mul(coord(vr("j"), shape, 0), i32(c)), tgidE), i32(inner)), coord(vr("j"), shape, 1))
	xhat := mul(sub(load("x", e), vr("mean")), vr("inv"))
	body := channelGradSums(e, m, tg, relu)
	if !relu {
		body = append(body, let("k", Float, mul(load("gamma", tgidE), vr("inv"))))
	}
	body = append(body,
		strided("j", m, tg, store("dx", e, mul(vr("k"),
			sub(sub(channelDy(e, relu), mul(vr("sdy"), flt(1/float32(m)))), mul(xhat, mul(vr("sdyx"), flt(1/float32(m)))))))),
		when(eq(lidE, i32(0)), store("dgamma", tgidE, vr("sdyx")), store("dbeta", tgidE, vr("sdy"))),
	)
	return &Kernel{Doc: fmt.Sprintf("batch norm backward%s of [%d,%d,%d]", reluName(relu), outer, c, inner),
		Params: params, Threadgroup: tg, Groups: c, Body: body}
}

// meanAndSquares is the two passes a normalisation makes over the n values
// x[e] (e an index expression in j) of its threadgroup of tg threads: it
// declares the threadgroup array sh, mean, and ss, the sum of squared
// deviations from the mean.
func meanAndSquares(e Expr, n, tg int) []Stmt {
	body := []Stmt{
		Shared{"sh", tg},
		let("acc", Float, flt(0)),
		strided("j", n, tg, set("acc", add(vr("acc"), load("x", e)))),
	}
	body = append(body, reduceInto("sum", "acc", "sh", tg, sumOp)...)
	body = append(body, let("mean", Float, mul(vr("sum"), flt(1/float32(n)))),
		let("acc2", Float, flt(0)),
		strided("j", n, tg, let("d", Float, sub(load("x", e), vr("mean"))), set("acc2", add(vr("acc2"), mul(vr("d"), vr("d"))))))
	return append(body, reduceInto("ss", "acc2", "sh", tg, sumOp)...)
}

// rowSplit lays the rows of a layer norm, cols values each, out on
// threads: w threads a row (a power of two, a SIMD group for rows of up
// to 1,024 values), each holding k units of v values (v is 4, one 16-byte
// access, when a row is whole float4s: the buffers must be bound whole,
// 16-byte aligned) in registers, and perGroup rows a
// threadgroup. A row is read once; its sums are trees over its w threads
// in threadgroup memory (a fixed order: the same bits every run).
//
// One threadgroup of 256 threads a row of 384, which read the row three
// times and waited on eight barriers a sum, took 62 µs for a GPT's 16,384
// rows on an H200 (25 MB each way: 10 µs of memory traffic).
type rowSplit struct {
	rows, cols, v, units, w, k, perGroup int
}

// maxRowUnits is the most units of a row one thread holds in registers.
const maxRowUnits = 8

// splitRows returns the layout of rows of cols values, false when a row
// is too long for the threads of one threadgroup to hold (more than
// 1,024·maxRowUnits units).
func splitRows(rows, cols int) (rowSplit, bool) {
	v := 1
	if cols%4 == 0 {
		v = 4
	}
	u := cols / v
	w := 1
	for w < u && w < 32 {
		w *= 2
	}
	for ceilDiv(u, w) > maxRowUnits && w < tgWide {
		w *= 2
	}
	k := ceilDiv(u, w)
	if k > maxRowUnits {
		return rowSplit{}, false
	}
	return rowSplit{rows: rows, cols: cols, v: v, units: u, w: w, k: k, perGroup: max(1, tgReduce/w)}, true
}

func (s rowSplit) threadgroup() int { return s.perGroup * s.w }
func (s rowSplit) groups() int      { return ceilDiv(s.rows, s.perGroup) }

// prologue declares the thread's lane in its row and the row.
func (s rowSplit) prologue() []Stmt {
	return []Stmt{
		let("lane", Int, rem(lidE, i32(s.w))),
		let("row", Int, add(mul(tgidE, i32(s.perGroup)), div(lidE, i32(s.w)))),
	}
}

// col is the first column of the thread's unit j.
func (s rowSplit) col(j int) Expr { return mul(add(vr("lane"), i32(j*s.w)), i32(s.v)) }

// inRow is whether unit j of the thread lies in the row (nil: always).
func (s rowSplit) inRow(j int) Expr {
	if (j+1)*s.w <= s.units {
		return nil
	}
	return lt(add(vr("lane"), i32(j*s.w)), i32(s.units))
}

// rowOK is whether the thread's row is in the tensor (nil: always).
func (s rowSplit) rowOK() Expr {
	if s.rows%s.perGroup == 0 {
		return nil
	}
	return lt(vr("row"), i32(s.rows))
}

// live is whether unit j is in the row and the row in the tensor (nil:
// always).
func (s rowSplit) live(j int) Expr {
	ok, in := s.rowOK(), s.inRow(j)
	switch {
	case ok == nil:
		return in
	case in == nil:
		return ok
	}
	return and(ok, in)
}

// whenSome runs then where cond holds (nil: always).
func whenSome(cond Expr, then ...Stmt) []Stmt {
	if cond == nil {
		return then
	}
	return []Stmt{when(cond, then...)}
}

// name is the local holding value c of unit j of buffer buf.
func (s rowSplit) name(buf string, j, c int) string { return fmt.Sprintf("%s%d_%d", buf, j, c) }

// loadUnits declares buf's values of every unit of the thread, 0 where a
// unit is not live; rowMajor: buf is [rows, cols], else [cols] (gamma).
func (s rowSplit) loadUnits(buf string, rowMajor bool) []Stmt {
	var out []Stmt
	for j := 0; j < s.k; j++ {
		idx, ok := s.col(j), s.inRow(j)
		if rowMajor {
			idx, ok = add(mul(vr("row"), i32(s.cols)), idx), s.live(j)
		}
		if ok != nil {
			idx = sel(ok, idx, i32(0))
		}
		var raw [4]string
		for c := 0; c < s.v; c++ {
			raw[c] = s.name(buf, j, c)
			if ok != nil {
				raw[c] = "l" + raw[c]
			}
		}
		if s.v == 4 {
			out = append(out, Load4{buf, idx, raw})
		} else {
			out = append(out, let(raw[0], Float, load(buf, idx)))
		}
		if ok != nil {
			for c := 0; c < s.v; c++ {
				out = append(out, let(s.name(buf, j, c), Float, sel(ok, vr(raw[c]), flt(0))))
			}
		}
	}
	return out
}

// storeUnits writes value(j, c) to every live unit of buf [rows, cols].
func (s rowSplit) storeUnits(buf string, value func(j, c int) Expr) []Stmt {
	var out []Stmt
	for j := 0; j < s.k; j++ {
		idx := add(mul(vr("row"), i32(s.cols)), s.col(j))
		var st Stmt
		if s.v == 4 {
			st = Store4{buf, idx, [4]Expr{value(j, 0), value(j, 1), value(j, 2), value(j, 3)}}
		} else {
			st = store(buf, idx, value(j, 0))
		}
		out = append(out, whenSome(s.live(j), st)...)
	}
	return out
}

// storeUnitsTwin is storeUnits that also writes each value, rounded to
// bfloat16, to the same index of twin (a BF16 buffer): each value is
// computed once, into a local.
func (s rowSplit) storeUnitsTwin(buf, twin string, value func(j, c int) Expr) []Stmt {
	var out []Stmt
	for j := 0; j < s.k; j++ {
		idx := add(mul(vr("row"), i32(s.cols)), s.col(j))
		var vals [4]Expr
		var st []Stmt
		for c := 0; c < s.v; c++ {
			name := fmt.Sprintf("yv%d_%d", j, c)
			st = append(st, let(name, Float, value(j, c)))
			vals[c] = vr(name)
		}
		if s.v == 4 {
			st = append(st, Store4{buf, idx, vals})
		} else {
			st = append(st, store(buf, idx, vals[0]))
		}
		for c := 0; c < s.v; c++ {
			st = append(st, storeBF16(twin, add(idx, i32(c)), vals[c]))
		}
		out = append(out, whenSome(s.live(j), st...)...)
	}
	return out
}

// sumUnits is Σ term(j, c) over the thread's units in order, counting
// only the units in the row.
func (s rowSplit) sumUnits(term func(j, c int) Expr) Expr {
	var e Expr
	for j := 0; j < s.k; j++ {
		var u Expr
		for c := 0; c < s.v; c++ {
			if u == nil {
				u = term(j, c)
			} else {
				u = add(u, term(j, c))
			}
		}
		if ok := s.inRow(j); ok != nil {
			u = sel(ok, u, flt(0))
		}
		if e == nil {
			e = u
		} else {
			e = add(e, u)
		}
	}
	return e
}

// rowSums reduces each partial (a thread's local) over the w threads of
// its row, each in a threadgroup array of its own, and declares the
// results: a tree in a fixed order whose rounds share their barriers.
func (s rowSplit) rowSums(partials, shared, results []string) []Stmt {
	var out []Stmt
	for i, p := range partials {
		out = append(out, store(shared[i], lidE, vr(p)))
	}
	for half := s.w / 2; half > 0; half /= 2 {
		out = append(out, Barrier{})
		var upd []Stmt
		for _, sh := range shared {
			upd = append(upd, store(sh, lidE, add(load(sh, lidE), load(sh, add(lidE, i32(half))))))
		}
		out = append(out, when(lt(vr("lane"), i32(half)), upd...))
	}
	out = append(out, Barrier{})
	for i, sh := range shared {
		out = append(out, let(results[i], Float, load(sh, sub(lidE, vr("lane")))))
	}
	return append(out, Barrier{})
}

// layerNormKernel normalises each row of x [rows, cols] by its own mean
// and biased variance: y = gamma·x̂ + beta, and the row's mean and
// 1/sqrt(var+eps) saved for the backward pass. The row stays in
// registers (rowSplit) for the mean, the squares about it and y.
func layerNormKernel(rows, cols int, eps float32, hasBias bool) *Kernel {
	return layerNormOf(rows, cols, eps, hasBias, false)
}

// layerNormTwinKernel is layerNormKernel that also writes y's bfloat16
// twin, its last parameter yb (planner's twin_operands.go: the GEMMs that
// read y read yb).
func layerNormTwinKernel(rows, cols int, eps float32, hasBias bool) *Kernel {
	k := layerNormOf(rows, cols, eps, hasBias, true)
	k.Doc += ", and y in bfloat16"
	return k
}

// layerNormOf is layer norm's kernel, with y's bfloat16 twin when twin is
// set.
func layerNormOf(rows, cols int, eps float32, hasBias, twin bool) *Kernel {
	params := []Param{in("x", rows*cols), in("gamma", cols)}
	if hasBias {
		params = append(params, in("beta", cols))
	}
	params = append(params, out("y", rows*cols), out("smean", rows), out("sinv", rows))
	if twin {
		params = append(params, outBF16("yb", rows*cols))
	}
	s, ok := splitRows(rows, cols)
	if !ok {
		return layerNormWideKernel(rows, cols, eps, hasBias, twin, params)
	}
	xv := func(j, c int) Expr { return vr(s.name("x", j, c)) }
	body := []Stmt{Shared{"sh", s.threadgroup()}}
	body = append(body, s.prologue()...)
	body = append(body, s.loadUnits("x", true)...)
	body = append(body, let("acc", Float, s.sumUnits(xv)))
	body = append(body, s.rowSums([]string{"acc"}, []string{"sh"}, []string{"sum"})...)
	body = append(body, let("mean", Float, mul(vr("sum"), flt(1/float32(cols)))))
	body = append(body, let("acc2", Float, s.sumUnits(func(j, c int) Expr {
		d := sub(xv(j, c), vr("mean"))
		return mul(d, d)
	})))
	body = append(body, s.rowSums([]string{"acc2"}, []string{"sh"}, []string{"ss"})...)
	body = append(body, let("inv", Float, call(FnRsqrt, add(mul(vr("ss"), flt(1/float32(cols))), flt(eps)))))
	body = append(body, s.loadUnits("gamma", false)...)
	if hasBias {
		body = append(body, s.loadUnits("beta", false)...)
	}
	y := func(j, c int) Expr {
		y := mul(mul(sub(xv(j, c), vr("mean")), vr("inv")), vr(s.name("gamma", j, c)))
		if hasBias {
			y = add(y, vr(s.name("beta", j, c)))
		}
		return y
	}
	if twin {
		body = append(body, s.storeUnitsTwin("y", "yb", y)...)
	} else {
		body = append(body, s.storeUnits("y", y)...)
	}
	body = append(body, when(and(eq(vr("lane"), i32(0)), s.rowOK()),
		store("smean", vr("row"), vr("mean")), store("sinv", vr("row"), vr("inv"))))
	return &Kernel{Doc: fmt.Sprintf("layer norm of %d rows of %d, %d threads a row", rows, cols, s.w),
		Params: params, Threadgroup: s.threadgroup(), Groups: s.groups(), Body: body}
}

// layerNormWideKernel is layerNormKernel for rows too long for registers:
// one threadgroup a row, reading it three times.
func layerNormWideKernel(rows, cols int, eps float32, hasBias, twin bool, params []Param) *Kernel {
	tg := pow2AtMost(cols, tgReduce)
	e := add(mul(tgidE, i32(cols)), vr("j"))
	body := meanAndSquares(e, cols, tg)
	y := mul(mul(sub(load("x", e), vr("mean")), vr("inv")), load("gamma", vr("j")))
	if hasBias {
		y = add(y, load("beta", vr("j")))
	}
	write := []Stmt{store("y", e, y)}
	if twin {
		write = []Stmt{let("yv", Float, y), store("y", e, vr("yv")), storeBF16("yb", e, vr("yv"))}
	}
	body = append(body,
		let("inv", Float, call(FnRsqrt, add(mul(vr("ss"), flt(1/float32(cols))), flt(eps)))),
		strided("j", cols, tg, write...),
		when(eq(lidE, i32(0)), store("smean", tgidE, vr("mean")), store("sinv", tgidE, vr("inv"))),
	)
	return &Kernel{Doc: fmt.Sprintf("layer norm of %d rows of %d", rows, cols),
		Params: params, Threadgroup: tg, Groups: rows, Body: body}
}

// layerNormParamGradKernel sums the parameter gradients over the rows,
// dgamma = Σ dy·x̂ and dbeta = Σ dy. A threadgroup takes 32 bytes of
// columns (two float4s where rows are whole float4s, else eight columns),
// the sector a load fetches, and its threads stride over the rows, each
// reading paramWays rows at once; the threads' partial sums of a column
// are added in a tree (a fixed order: the same bits every run).
//
// One threadgroup per column, its threads a row apart, made every load
// fetch a sector for one float: 92 µs for a GPT's 16,384 rows of 384 on
// an H200, whose 50 MB take 10 µs.
func layerNormParamGradKernel(rows, cols int, gamma, beta bool) *Kernel {
	n := rows * cols
	params := []Param{in("x", n), in("smean", rows), in("sinv", rows), in("dy", n)}
	if gamma {
		params = append(params, out("dgamma", cols))
	}
	if beta {
		params = append(params, out("dbeta", cols))
	}
	v := 1
	if cols%4 == 0 {
		v = 4
	}
	units := cols / v
	cu := min(units, 8/v)                   // units a threadgroup
	sl := pow2AtMost(rows, paramThreads/cu) // row slices
	tg := sl * cu
	body := []Stmt{
		Shared{"sh", tg * v},
		let("cu", Int, rem(lidE, i32(cu))),
		let("sl", Int, div(lidE, i32(cu))),
		let("unit", Int, add(mul(tgidE, i32(cu)), vr("cu"))),
	}
	var colOK Expr
	c0 := mul(vr("unit"), i32(v))
	if units%cu != 0 {
		colOK = lt(vr("unit"), i32(units))
		c0 = sel(colOK, c0, i32(0))
	}
	body = append(body, let("c0", Int, c0))
	for c := 0; c < v; c++ {
		body = append(body, let(fmt.Sprint("sg", c), Float, flt(0)), let(fmt.Sprint("sb", c), Float, flt(0)))
	}
	const ways = paramWays
	var iter, sums []Stmt
	for w := 0; w < ways; w++ {
		r := add(vr("r"), i32(w*sl))
		var ok Expr // the first row of an iteration is always in the tensor
		if w > 0 && rows%(sl*ways) != 0 {
			ok = lt(r, i32(rows))
			r = sel(ok, r, i32(0))
		}
		rw := fmt.Sprint("r", w)
		iter = append(iter, let(rw, Int, r))
		names := func(b string) [4]string {
			var nm [4]string
			for c := range nm {
				nm[c] = fmt.Sprintf("%s%d_%d", b, w, c)
			}
			return nm
		}
		dy, x := names("dy"), names("x")
		at := add(mul(vr(rw), i32(cols)), vr("c0"))
		if v == 4 {
			iter = append(iter, Load4{"dy", at, dy}, Load4{"x", at, x})
		} else {
			iter = append(iter, let(dy[0], Float, load("dy", at)), let(x[0], Float, load("x", at)))
		}
		m, iv := fmt.Sprint("m", w), fmt.Sprint("i", w)
		iter = append(iter, let(m, Float, load("smean", vr(rw))), let(iv, Float, load("sinv", vr(rw))))
		for c := 0; c < v; c++ {
			termG, termB := mul(vr(dy[c]), mul(sub(vr(x[c]), vr(m)), vr(iv))), vr(dy[c])
			if ok != nil {
				termG, termB = sel(ok, termG, flt(0)), sel(ok, termB, flt(0))
			}
			sg, sb := fmt.Sprint("sg", c), fmt.Sprint("sb", c)
			sums = append(sums, set(sg, add(vr(sg), termG)), set(sb, add(vr(sb), termB)))
		}
	}
	body = append(body, For{"r", vr("sl"), i32(rows), i32(sl * ways), append(iter, sums...)})
	reduce := func(acc, dst string) {
		at := func(c int) Expr { return add(mul(lidE, i32(v)), i32(c)) }
		for c := 0; c < v; c++ {
			body = append(body, store("sh", at(c), vr(fmt.Sprint(acc, c))))
		}
		for half := sl / 2; half > 0; half /= 2 {
			var upd []Stmt
			for c := 0; c < v; c++ {
				upd = append(upd, store("sh", at(c), add(load("sh", at(c)), load("sh", add(at(c), i32(half*cu*v))))))
			}
			body = append(body, Barrier{}, when(lt(vr("sl"), i32(half)), upd...))
		}
		body = append(body, Barrier{})
		var st []Stmt
		for c := 0; c < v; c++ {
			st = append(st, store(dst, add(vr("c0"), i32(c)), load("sh", at(c))))
		}
		body = append(body, when(and(eq(vr("sl"), i32(0)), colOK), st...), Barrier{})
	}
	if gamma {
		reduce("sg", "dgamma")
	}
	if beta {
		reduce("sb", "dbeta")
	}
	return &Kernel{Doc: fmt.Sprintf("layer norm parameter gradients, %d rows of %d, %d columns a threadgroup", rows, cols, cu*v),
		Params: params, Threadgroup: tg, Groups: ceilDiv(units, cu), Body: body}
}

// paramThreads caps layerNormParamGradKernel's threadgroup: at 1,024
// threads a CUDA block may use 64 registers a thread, fewer than its
// paramWays rows in flight may want.
const paramThreads = 512

// paramWays is how many rows a thread of layerNormParamGradKernel reads
// before it adds them (in row order): loads in flight to cover memory's
// latency with a threadgroup on each of fewer than half an H200's SMs.
const paramWays = 4

// layerNormBwdKernel is dx = inv·(g − mean(g) − x̂·mean(g·x̂)) per row, with
// g = dy·gamma, the rows laid out as layerNormKernel's; dx may be dy
// (but not in addingInto's kernel, which reads dx).
func layerNormBwdKernel(rows, cols int) *Kernel {
	n := rows * cols
	params := []Param{in("x", n), in("gamma", cols), in("smean", rows), in("sinv", rows), in("dy", n), out("dx", n)}
	s, ok := splitRows(rows, cols)
	if !ok {
		return layerNormBwdWideKernel(rows, cols, params)
	}
	body := []Stmt{Shared{"sh1", s.threadgroup()}, Shared{"sh2", s.threadgroup()}}
	body = append(body, s.prologue()...)
	row := vr("row")
	if ok := s.rowOK(); ok != nil {
		row = sel(ok, row, i32(0))
	}
	body = append(body, let("mean", Float, load("smean", row)), let("inv", Float, load("sinv", row)))
	body = append(body, s.loadUnits("x", true)...)
	body = append(body, s.loadUnits("dy", true)...)
	body = append(body, s.loadUnits("gamma", false)...)
	for j := 0; j < s.k; j++ {
		for c := 0; c < s.v; c++ {
			body = append(body,
				let(s.name("g", j, c), Float, mul(vr(s.name("dy", j, c)), vr(s.name("gamma", j, c)))),
				let(s.name("xh", j, c), Float, mul(sub(vr(s.name("x", j, c)), vr("mean")), vr("inv"))))
		}
	}
	g := func(j, c int) Expr { return vr(s.name("g", j, c)) }
	xh := func(j, c int) Expr { return vr(s.name("xh", j, c)) }
	body = append(body,
		let("a1", Float, s.sumUnits(g)),
		let("a2", Float, s.sumUnits(func(j, c int) Expr { return mul(g(j, c), xh(j, c)) })))
	body = append(body, s.rowSums([]string{"a1", "a2"}, []string{"sh1", "sh2"}, []string{"s1", "s2"})...)
	body = append(body,
		let("m1", Float, mul(vr("s1"), flt(1/float32(cols)))),
		let("m2", Float, mul(vr("s2"), flt(1/float32(cols)))))
	body = append(body, s.storeUnits("dx", func(j, c int) Expr {
		return mul(vr("inv"), sub(sub(g(j, c), vr("m1")), mul(xh(j, c), vr("m2"))))
	})...)
	return &Kernel{Doc: fmt.Sprintf("layer norm backward of %d rows of %d, %d threads a row", rows, cols, s.w),
		Params: params, Threadgroup: s.threadgroup(), Groups: s.groups(), Body: body}
}

// layerNormBwdWideKernel is layerNormBwdKernel for rows too long for
// registers: one threadgroup a row.
func layerNormBwdWideKernel(rows, cols int, params []Param) *Kernel {
	tg := pow2AtMost(cols, tgReduce)
	e := add(mul(tgidE, i32(cols)), vr("j"))
	g := mul(load("dy", e), load("gamma", vr("j")))
	xhat := mul(sub(load("x", e), vr("mean")), vr("inv"))
	body := []Stmt{
		Shared{"sh", tg},
		let("mean", Float, load("smean", tgidE)),
		let("inv", Float, load("sinv", tgidE)),
		let("a1", Float, flt(0)),
		let("a2", Float, flt(0)),
		strided("j", cols, tg, set("a1", add(vr("a1"), g)), set("a2", add(vr("a2"), mul(g, xhat)))),
	}
	body = append(body, reduceInto("s1", "a1", "sh", tg, sumOp)...)
	body = append(body, reduceInto("s2", "a2", "sh", tg, sumOp)...)
	body = append(body, strided("j", cols, tg, store("dx", e, mul(vr("inv"),
		sub(sub(g, mul(vr("s1"), flt(1/float32(cols)))), mul(xhat, mul(vr("s2"), flt(1/float32(cols)))))))))
	return &Kernel{Doc: fmt.Sprintf("layer norm backward of %d rows of %d", rows, cols),
		Params: params, Threadgroup: tg, Groups: rows, Body: body}
}

// addingInto returns k with every store to its parameter buf adding the
// value to what buf holds there (buf[i] += v; four loads for a Store4,
// as one 16-byte access where the dialect has one): a kernel that adds
// its output into a sum that earlier steps wrote (Attr.AccumulateDx).
// Each element must be stored once, by one thread, and buf must be
// bound to no other parameter.
func addingInto(k *Kernel, buf string) *Kernel {
	out := *k
	var n int
	var adds func(ss []Stmt) []Stmt
	adds = func(ss []Stmt) []Stmt {
		var r []Stmt
		for _, s := range ss {
			switch s := s.(type) {
			case Store:
				if s.Buf == buf {
					s.Value = add(load(buf, s.Index), s.Value)
				}
				r = append(r, s)
			case Store4:
				if s.Buf != buf {
					r = append(r, s)
					continue
				}
				var old [4]string
				for c := range old {
					old[c] = fmt.Sprintf("mlb_a%d_%d", n, c)
				}
				n++
				r = append(r, Load4{buf, s.Index, old})
				for c := range s.Values {
					s.Values[c] = add(vr(old[c]), s.Values[c])
				}
				r = append(r, s)
			case If:
				s.Then, s.Else = adds(s.Then), adds(s.Else)
				r = append(r, s)
			case For:
				s.Body = adds(s.Body)
				r = append(r, s)
			default:
				r = append(r, s)
			}
		}
		return r
	}
	out.Body = adds(k.Body)
	out.Doc += ", adding into " + buf
	return &out
}

// reducedIndex is the index into a tensor of shape full of the element
// that a thread reducing along some axes visits: vr("i") indexes the kept
// tensor (full's shape with the reduced axes 1, same rank) and vr("r")
// counts over the reduced axes. It also returns how many elements each
// thread reduces.
func reducedIndex(full, kept []int) (Expr, int) {
	st := stridesOf(full)
	var reduced []int
	for k := range full {
		if kept[k] == 1 && full[k] != 1 {
			reduced = append(reduced, k)
		}
	}
	rShape := make([]int, len(reduced))
	for j, k := range reduced {
		rShape[j] = full[k]
	}
	var idx Expr = i32(0)
	for k := range full {
		if kept[k] == 1 {
			continue
		}
		idx = add(idx, mul(coord(vr("i"), kept, k), i32(st[k])))
	}
	for j, k := range reduced {
		idx = add(idx, mul(coord(vr("r"), rShape, j), i32(st[k])))
	}
	return idx, prod(rShape)
}

// reduceMeanKernel averages x over the axes where yShape is 1 (y keeps
// x's rank), one thread per element of y summing its elements of x.
func reduceMeanKernel(xShape, yShape []int) (*Kernel, error) {
	if len(xShape) != len(yShape) {
		return nil, fmt.Errorf("reduce mean of %v to %v: ranks differ", xShape, yShape)
	}
	xIdx, count := reducedIndex(xShape, yShape)
	n := prod(yShape)
	return elementwise(fmt.Sprintf("mean of %v to %v", xShape, yShape), n,
		[]Param{in("x", prod(xShape)), out("y", n)}, func(i Expr) []Stmt {
			return []Stmt{
				let("acc", Float, flt(0)),
				loop("r", 0, count, 1, set("acc", add(vr("acc"), load("x", xIdx)))),
				store("y", i, mul(vr("acc"), flt(1/float32(count)))),
			}
		}), nil
}

// reduceMeanBwdKernel spreads the gradient of each mean over the elements
// it averaged: dx = dy (broadcast back to x) / count.
func reduceMeanBwdKernel(xShape, yShape []int) (*Kernel, error) {
	if len(xShape) != len(yShape) {
		return nil, fmt.Errorf("reduce mean backward of %v to %v: ranks differ", xShape, yShape)
	}
	n := prod(xShape)
	scale := float32(prod(yShape)) / float32(n)
	return elementwise(fmt.Sprintf("mean backward of %v to %v", yShape, xShape), n,
		[]Param{in("dy", prod(yShape)), out("dx", n)}, func(i Expr) []Stmt {
			return []Stmt{store("dx", i, mul(load("dy", broadcastIndex(i, xShape, yShape)), flt(scale)))}
		}), nil
}

// windowOrigin gives the input coordinate of tap k of output position o.
func windowOrigin(o Expr, stride, pad, k, dil int) Expr {
	return add(sub(mul(o, i32(stride)), i32(pad)), mul(k2e(k), i32(dil)))
}

func k2e(k int) Expr { return i32(k) }

// im2colKernel writes the columns of a round of images consecutive images
// for a convolution, side by side: cols[(c·KH + kh)·KW + kw, i·OH·OW +
// oh·OW + ow] = x[i, c, oh·SH − PH + kh·DH, …], zero in the padding, so
// rows are images·OH·OW long. Rows of one group are contiguous, so group
// g's GEMM reads rows [g·C/G·KH·KW, (g+1)·C/G·KH·KW) and covers the whole
// round at once. One thread per (channel, column) writes that column's
// KH·KW rows of its channel: the index arithmetic is done once per window
// rather than once per element, and the threads of a warp write each row
// side by side.
func im2colKernel(g planner.ConvGeom, images int) *Kernel {
	ohw, chw := g.OH*g.OW, g.C*g.H*g.W
	ld := images * ohw
	n := g.C * g.KH * g.KW * ld
	doc := fmt.Sprintf("im2col of [%d,%d,%d] with %dx%d window", g.C, g.H, g.W, g.KH, g.KW)
	if images > 1 {
		doc = fmt.Sprintf("im2col of %d images [%d,%d,%d] side by side, %dx%d window", images, g.C, g.H, g.W, g.KH, g.KW)
	}
	k := elementwise(doc, g.C*ld,
		[]Param{in("x", images*chw), out("cols", n)}, func(i Expr) []Stmt {
			s := []Stmt{
				let("c", Int, div(i, i32(ld))),
				let("col", Int, rem(i, i32(ld))),
			}
			var img Expr = i32(0)
			pix := vr("col") // the column's pixel oh·OW + ow in its image
			if images > 1 {
				s = append(s, let("pix", Int, rem(vr("col"), i32(ohw))))
				img, pix = mul(div(vr("col"), i32(ohw)), i32(chw)), vr("pix")
			}
			return append(s,
				let("h0", Int, sub(mul(div(pix, i32(g.OW)), i32(g.SH)), i32(g.PH))),
				let("w0", Int, sub(mul(rem(pix, i32(g.OW)), i32(g.SW)), i32(g.PW))),
				let("base", Int, add(img, mul(vr("c"), i32(g.H*g.W)))),
				loop("kh", 0, g.KH, 1,
					let("h", Int, add(vr("h0"), mul(vr("kh"), i32(g.DH)))),
					loop("kw", 0, g.KW, 1,
						let("w", Int, add(vr("w0"), mul(vr("kw"), i32(g.DW)))),
						let("v", Float, flt(0)),
						when(and(ge(vr("h"), i32(0)), lt(vr("h"), i32(g.H)), ge(vr("w"), i32(0)), lt(vr("w"), i32(g.W))),
							set("v", load("x", add(vr("base"), add(mul(vr("h"), i32(g.W)), vr("w")))))),
						store("cols", add(mul(add(mul(add(mul(vr("c"), i32(g.KH)), vr("kh")), i32(g.KW)), vr("kw")), i32(ld)), vr("col")), vr("v")),
					),
				),
			)
		})
	return k
}

// tapsCovering emits body for every window (oh, ow) of output that covers
// input pixel (h, w): oh·S − P + k·D = h for some tap k.
func tapsCovering(g planner.ConvGeom, body ...Stmt) []Stmt {
	condAxis := func(t string, stride, outN int) Expr {
		c := []Expr{ge(vr(t), i32(0))}
		if stride != 1 {
			c = append(c, eq(rem(vr(t), i32(stride)), i32(0)))
		}
		return and(append(c, lt(div(vr(t), i32(stride)), i32(outN)))...)
	}
	inner := append([]Stmt{
		let("oh", Int, div(vr("th"), i32(g.SH))),
		let("ow", Int, div(vr("tw"), i32(g.SW))),
	}, body...)
	return []Stmt{loop("kh", 0, g.KH, 1,
		let("th", Int, sub(add(vr("h"), i32(g.PH)), mul(vr("kh"), i32(g.DH)))),
		when(condAxis("th", g.SH, g.OH),
			loop("kw", 0, g.KW, 1,
				let("tw", Int, sub(add(vr("w"), i32(g.PW)), mul(vr("kw"), i32(g.DW)))),
				when(condAxis("tw", g.SW, g.OW), inner...))))}
}

// planeCoords declares h, w and the plane p (n·C + c) of input index i.
func planeCoords(g planner.ConvGeom, i Expr) []Stmt {
	return []Stmt{
		let("w", Int, rem(i, i32(g.W))),
		let("h", Int, rem(div(i, i32(g.W)), i32(g.H))),
		let("p", Int, div(i, i32(g.H*g.W))),
	}
}

// col2imKernel is the adjoint of im2colKernel as a gather: each input
// pixel of the round's images sums the column entries of the taps that read
// it, so no two threads write the same element and no atomics are needed.
func col2imKernel(g planner.ConvGeom, images int) *Kernel {
	ohw := g.OH * g.OW
	ld := images * ohw
	n := images * g.C * g.H * g.W
	doc := fmt.Sprintf("col2im to [%d,%d,%d] with %dx%d window", g.C, g.H, g.W, g.KH, g.KW)
	if images > 1 {
		doc = fmt.Sprintf("col2im to %d images [%d,%d,%d] side by side, %dx%d window", images, g.C, g.H, g.W, g.KH, g.KW)
	}
	return elementwise(doc, n,
		[]Param{in("cols", g.C*g.KH*g.KW*ld), out("dx", n)}, func(i Expr) []Stmt {
			s := planeCoords(g, i)
			// p is img·C + c; the channel picks the row, the image the
			// column block.
			channel, column := vr("p"), i32(0)
			if images > 1 {
				s = append(s, let("img", Int, div(vr("p"), i32(g.C))), set("p", rem(vr("p"), i32(g.C))))
				column = mul(vr("img"), i32(ohw))
			}
			s = append(s, let("acc", Float, flt(0)))
			s = append(s, tapsCovering(g, set("acc", add(vr("acc"),
				load("cols", add(mul(add(mul(add(mul(channel, i32(g.KH)), vr("kh")), i32(g.KW)), vr("kw")), i32(ld)),
					add(column, add(mul(vr("oh"), i32(g.OW)), vr("ow"))))))))...)
			return append(s, store("dx", i, vr("acc")))
		})
}

// poolWindow emits body for every in-bounds tap (ih, iw) of window (oh, ow)
// of plane p; x index in "xi".
func poolWindow(g planner.ConvGeom, oh, ow Expr, body ...Stmt) Stmt {
	return loop("qh", 0, g.KH, 1,
		let("ih", Int, add(sub(mul(oh, i32(g.SH)), i32(g.PH)), mul(vr("qh"), i32(g.DH)))),
		loop("qw", 0, g.KW, 1,
			let("iw", Int, add(sub(mul(ow, i32(g.SW)), i32(g.PW)), mul(vr("qw"), i32(g.DW)))),
			when(and(ge(vr("ih"), i32(0)), lt(vr("ih"), i32(g.H)), ge(vr("iw"), i32(0)), lt(vr("iw"), i32(g.W))),
				append([]Stmt{let("xi", Int, add(mul(vr("ih"), i32(g.W)), vr("iw")))}, body...)...)))
}

// avgPoolScale declares "scale", 1 over the divisor of average pool
// window (oh, ow) by PyTorch's rule (rt/cpu's avgPoolScale): the window's
// taps inside the padded input, or with ExcludePad inside the input. Only
// a pool rounded up or with ExcludePad counts them; any other window has
// KH·KW taps, a constant.
func avgPoolScale(g planner.ConvGeom, oh, ow Expr) []Stmt {
	if !g.Ceil && !g.ExcludePad {
		return []Stmt{let("scale", Float, flt(1/float32(g.KH*g.KW)))}
	}
	g = normConv(g)
	loH, loW, hiH, hiW := -g.PH, -g.PW, g.H+g.PH, g.W+g.PW
	if g.ExcludePad {
		loH, loW, hiH, hiW = 0, 0, g.H, g.W
	}
	count := func(name, q string, o Expr, k, s, p, d, lo, hi int) Stmt {
		i := add(sub(mul(o, i32(s)), i32(p)), mul(vr(q), i32(d)))
		return loop(q, 0, k, 1, when(and(ge(i, i32(lo)), lt(i, i32(hi))), set(name, add(vr(name), i32(1)))))
	}
	return []Stmt{
		let("nh", Int, i32(0)), count("nh", "ch", oh, g.KH, g.SH, g.PH, g.DH, loH, hiH),
		let("nw", Int, i32(0)), count("nw", "cw", ow, g.KW, g.SW, g.PW, g.DW, loW, hiW),
		let("scale", Float, sel(gt(mul(vr("nh"), vr("nw")), i32(0)), div(flt(1), toFloat(mul(vr("nh"), vr("nw")))), flt(0))),
	}
}

// poolKernel is max or average pooling of [N,C,H,W], one thread per output;
// padding never wins a max and counts as zero in an average (avgPoolScale
// gives the divisor).
func poolKernel(g planner.ConvGeom, maxPool bool) *Kernel {
	ohw := g.OH * g.OW
	n := g.N * g.C * ohw
	kind := "average"
	if maxPool {
		kind = "max"
	}
	return elementwise(fmt.Sprintf("%s pool [%d,%d,%d,%d] -> %dx%d", kind, g.N, g.C, g.H, g.W, g.OH, g.OW), n,
		[]Param{in("x", g.N*g.C*g.H*g.W), out("y", n)}, func(i Expr) []Stmt {
			base := mul(div(i, i32(ohw)), i32(g.H*g.W))
			s := []Stmt{
				let("oh", Int, rem(div(i, i32(g.OW)), i32(g.OH))),
				let("ow", Int, rem(i, i32(g.OW))),
				let("base", Int, base),
			}
			if maxPool {
				return append(s, let("m", Float, flt(negHuge)),
					poolWindow(g, vr("oh"), vr("ow"), set("m", call(FnMax, vr("m"), load("x", add(vr("base"), vr("xi")))))),
					store("y", i, vr("m")))
			}
			if !g.Ceil && !g.ExcludePad {
				return append(s, let("acc", Float, flt(0)),
					poolWindow(g, vr("oh"), vr("ow"), set("acc", add(vr("acc"), load("x", add(vr("base"), vr("xi")))))),
					store("y", i, mul(vr("acc"), flt(1/float32(g.KH*g.KW)))))
			}
			s = append(s, avgPoolScale(g, vr("oh"), vr("ow"))...)
			return append(s, let("acc", Float, flt(0)),
				poolWindow(g, vr("oh"), vr("ow"), set("acc", add(vr("acc"), load("x", add(vr("base"), vr("xi")))))),
				store("y", i, mul(vr("acc"), vr("scale"))))
		})
}

// poolBwdKernel is the gradient of pooling as a gather over input pixels:
// max pooling re-finds each covering window's first maximum from x and
// takes its dy when that is this pixel; average pooling takes dy/(KH·KW)
// from every covering window.
// maxPoolBwdKernel is a max pool's backward: maxPoolBwdTiledKernel where
// the windows tile the input, else poolBwdKernel; with act, dx is also
// multiplied by act's derivative taken from x (Attr.Act of the step:
// planner's fuse_act_bwd.go).
func maxPoolBwdKernel(g planner.ConvGeom, act string, alpha float32) (*Kernel, error) {
	var d func(x Expr) Expr
	if act != "" {
		if _, err := actGradFromY(act, alpha, flt(1)); err != nil {
			return nil, err
		}
		d = func(x Expr) Expr { e, _ := actGradFromY(act, alpha, x); return e }
	}
	if poolTiles(g) {
		return maxPoolBwdTiledKernel(g, d), nil
	}
	return poolBwdKernel(g, true, d), nil
}

// poolBwdKernel is a max (maxPool) or average pool's backward, one thread
// per input pixel summing the windows that cover it; a max pool's dx is
// multiplied by d(x) when d is not nil.
func poolBwdKernel(g planner.ConvGeom, maxPool bool, d func(x Expr) Expr) *Kernel {
	ohw := g.OH * g.OW
	n := g.N * g.C * g.H * g.W
	params := []Param{in("dy", g.N*g.C*ohw), out("dx", n)}
	kind := "average"
	if maxPool {
		kind = "max"
		params = append([]Param{in("x", n)}, params...)
	}
	return elementwise(fmt.Sprintf("%s pool backward [%d,%d,%d,%d] <- %dx%d", kind, g.N, g.C, g.H, g.W, g.OH, g.OW), n, params,
		func(i Expr) []Stmt {
			s := append(planeCoords(g, i), let("acc", Float, flt(0)), let("base", Int, mul(vr("p"), i32(g.H*g.W))))
			dy := load("dy", add(mul(vr("p"), i32(ohw)), add(mul(vr("oh"), i32(g.OW)), vr("ow"))))
			if maxPool {
				s = append(s, tapsCovering(g,
					let("best", Float, flt(0)),
					let("arg", Int, i32(-1)),
					poolWindow(g, vr("oh"), vr("ow"),
						let("xv", Float, load("x", add(vr("base"), vr("xi")))),
						when(Binary{OpOr, lt(vr("arg"), i32(0)), gt(vr("xv"), vr("best"))},
							set("best", vr("xv")), set("arg", vr("xi")))),
					when(eq(vr("arg"), add(mul(vr("h"), i32(g.W)), vr("w"))), set("acc", add(vr("acc"), dy))))...)
			} else if !g.Ceil && !g.ExcludePad {
				s = append(s, tapsCovering(g, set("acc", add(vr("acc"), mul(dy, flt(1/float32(g.KH*g.KW))))))...)
			} else {
				s = append(s, tapsCovering(g, append(avgPoolScale(g, vr("oh"), vr("ow")), set("acc", add(vr("acc"), mul(dy, vr("scale")))))...)...)
			}
			if maxPool && d != nil {
				return append(s, store("dx", i, mul(vr("acc"), d(load("x", i)))))
			}
			return append(s, store("dx", i, vr("acc")))
		})
}

// poolTiles reports whether g's windows tile its input exactly: stride
// equal to the window, no padding or dilation, and every pixel in one
// window (H = OH·KH, W = OW·KW), as in the common 2×2 max pool.
func poolTiles(g planner.ConvGeom) bool {
	g = normConv(g)
	return g.SH == g.KH && g.SW == g.KW && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1 &&
		g.H == g.OH*g.KH && g.W == g.OW*g.KW
}

// maxPoolBwdTiledKernel is the gradient of a max pool whose windows tile
// the input (poolTiles), one thread per window: it finds the window's
// first maximum in x, as poolBwdKernel does, and writes the window's dy
// there and zero at every other pixel of the window. Each pixel belongs to
// one window, so every dx element is written once, and x is read once
// instead of once per covering window and pixel. With d, the window's
// dy is multiplied by d(its maximum).
func maxPoolBwdTiledKernel(g planner.ConvGeom, d func(x Expr) Expr) *Kernel {
	ohw := g.OH * g.OW
	n := g.N * g.C * ohw
	hw := g.H * g.W
	tap := func(body ...Stmt) Stmt {
		return loop("qh", 0, g.KH, 1, loop("qw", 0, g.KW, 1,
			append([]Stmt{let("xi", Int, add(vr("base"), add(mul(vr("qh"), i32(g.W)), vr("qw"))))}, body...)...))
	}
	gd := func(dy Expr) Expr { return dy }
	if d != nil {
		gd = func(dy Expr) Expr { return mul(dy, d(vr("best"))) }
	}
	return elementwise(fmt.Sprintf("max pool backward [%d,%d,%d,%d] <- %dx%d, one thread per %dx%d window", g.N, g.C, g.H, g.W, g.OH, g.OW, g.KH, g.KW), n,
		[]Param{in("x", g.N*g.C*hw), in("dy", n), out("dx", g.N*g.C*hw)}, func(i Expr) []Stmt {
			return []Stmt{
				let("oh", Int, rem(div(i, i32(g.OW)), i32(g.OH))),
				let("ow", Int, rem(i, i32(g.OW))),
				let("base", Int, add(mul(div(i, i32(ohw)), i32(hw)), add(mul(vr("oh"), i32(g.KH*g.W)), mul(vr("ow"), i32(g.KW))))),
				let("best", Float, flt(0)),
				let("arg", Int, i32(-1)),
				tap(let("xv", Float, load("x", vr("xi"))),
					when(Binary{OpOr, lt(vr("arg"), i32(0)), gt(vr("xv"), vr("best"))},
						set("best", vr("xv")), set("arg", vr("xi")))),
				let("g", Float, gd(load("dy", i))),
				tap(store("dx", vr("xi"), sel(eq(vr("xi"), vr("arg")), vr("g"), flt(0)))),
			}
		})
}

// globalAvgPoolKernel is y[p] = mean of x over the spatial positions of
// plane p.
func globalAvgPoolKernel(planes, spatial int) *Kernel {
	return elementwise(fmt.Sprintf("global average pool of %d planes of %d", planes, spatial), planes,
		[]Param{in("x", planes*spatial), out("y", planes)}, func(i Expr) []Stmt {
			return []Stmt{
				let("acc", Float, flt(0)),
				loop("j", 0, spatial, 1, set("acc", add(vr("acc"), load("x", add(mul(i, i32(spatial)), vr("j")))))),
				store("y", i, mul(vr("acc"), flt(1/float32(spatial)))),
			}
		})
}

// globalAvgPoolBwdKernel is dx = dy/spatial at every position of a plane.
func globalAvgPoolBwdKernel(planes, spatial int) *Kernel {
	n := planes * spatial
	return elementwise(fmt.Sprintf("global average pool backward of %d planes of %d", planes, spatial), n,
		[]Param{in("dy", planes), out("dx", n)}, func(i Expr) []Stmt {
			return []Stmt{store("dx", i, mul(load("dy", div(i, i32(spatial))), flt(1/float32(spatial))))}
		})
}

// softmaxCausalKernel is the causal softmax of scores [mats, t, t]: one
// threadgroup per row, row q of each matrix the softmax of its entries
// 0..q and 0 past them (rt/cpu's SoftmaxCausalFwd). softmaxBwdKernel
// along the last axis is its backward, as y is 0 where the mask is.
func softmaxCausalKernel(mats, t int) *Kernel {
	tg := pow2AtMost(t, tgReduce)
	e := add(mul(tgidE, i32(t)), vr("j"))
	seen := le(vr("j"), vr("q")) // key j at or before query q
	body := append([]Stmt{Shared{"sh", tg}, let("q", Int, rem(tgidE, i32(t)))}, seenSoftmax(t, tg, e, seen)...)
	n := mats * t * t
	return &Kernel{Doc: fmt.Sprintf("causal softmax of %d score matrices of %d×%d", mats, t, t),
		Params: []Param{in("x", n), out("y", n)}, Threadgroup: tg, Groups: mats * t, Body: body}
}

// seenSoftmax is the statements of a threadgroup's softmax of one row of
// t scores over the keys j that seen holds for (e the index of key j's
// score in x and y, both in the loop variable j), y 0 at the others: the
// row's maximum and sum of exponentials over the keys seen, reduced in
// the shared array sh of tg. The total is 0 only where no key is seen,
// and then no y reads its inverse: the row is all 0.
func seenSoftmax(t, tg int, e, seen Expr) []Stmt {
	body := []Stmt{
		let("mx", Float, flt(negHuge)),
		strided("j", t, tg, set("mx", call(FnMax, vr("mx"), sel(seen, load("x", e), flt(negHuge))))),
	}
	body = append(body, reduceInto("m", "mx", "sh", tg, maxOp)...)
	body = append(body, let("s", Float, flt(0)),
		strided("j", t, tg, set("s", add(vr("s"), sel(seen, call(FnExp, sub(load("x", e), vr("m"))), flt(0))))))
	body = append(body, reduceInto("total", "s", "sh", tg, sumOp)...)
	return append(body, let("inv", Float, div(flt(1), vr("total"))),
		strided("j", t, tg, store("y", e, sel(seen, mul(call(FnExp, sub(load("x", e), vr("m"))), vr("inv")), flt(0)))))
}

// softmaxPaddedKernel is the softmax over the last axis of scores
// [batch, rows, t] (rows a sample's query rows, heads·queries) whose keys
// are masked by the token ids [batch, t]: key j of sample b gets 0 where
// ids[b·t + j] = pad; with causal (scores [batch, heads, t, t]), query q
// sees keys 0..q only, as softmaxCausalKernel. A row without a key left
// is all 0 (rt/cpu's SoftmaxPaddedFwd). One threadgroup per row;
// softmaxBwdKernel along the last axis is its backward, as y is 0 at
// every masked key.
func softmaxPaddedKernel(batch, rows, t int, causal bool, pad float32) *Kernel {
	tg := pow2AtMost(t, tgReduce)
	e := add(mul(tgidE, i32(t)), vr("j"))
	seen := ne(load("ids", add(mul(div(tgidE, i32(rows)), i32(t)), vr("j"))), flt(pad))
	if causal {
		seen = and(le(vr("j"), rem(tgidE, i32(t))), seen) // key j at or before query q
	}
	body := append([]Stmt{Shared{"sh", tg}}, seenSoftmax(t, tg, e, seen)...)
	n := batch * rows * t
	kind := "softmax"
	if causal {
		kind = "causal softmax"
	}
	return &Kernel{Doc: fmt.Sprintf("%s of %d samples' %d rows of %d scores, keys masked where their id is %g", kind, batch, rows, t, pad),
		Params: []Param{in("x", n), in("ids", batch*t), out("y", n)}, Threadgroup: tg, Groups: batch * rows, Body: body}
}

// gradSumSqKernel writes the sum of squares of each of several gradients,
// sums[j] = Σ g_j[i]², one threadgroup a gradient (the first step of
// clipping by the global norm).
func gradSumSqKernel(sizes []int) *Kernel {
	tg := tgWide
	var params []Param
	body := []Stmt{Shared{"sh", tg}, let("acc", Float, flt(0))}
	var chain []Stmt
	for j := len(sizes) - 1; j >= 0; j-- {
		g := fmt.Sprint("g_", j)
		params = append([]Param{in(g, sizes[j])}, params...)
		loop := []Stmt{strided("i", sizes[j], tg, let("x", Float, load(g, vr("i"))), set("acc", add(vr("acc"), mul(vr("x"), vr("x")))))}
		if chain == nil {
			chain = loop
			continue
		}
		chain = []Stmt{If{Cond: eq(tgidE, i32(j)), Then: loop, Else: chain}}
	}
	body = append(body, chain...)
	body = append(body, reduceInto("total", "acc", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("sums", tgidE, vr("total"))))
	return &Kernel{
		Doc:    fmt.Sprintf("sums of squares of %d gradients", len(sizes)),
		Params: append(params, out("sums", len(sizes))), Threadgroup: tg, Groups: len(sizes), Body: body,
	}
}

// clipScaleKernel turns the k sums of squares of clipping into its scale,
// sums[k] = min(1, clip/(√Σ sums + 1e-6)), as torch's clip_grad_norm_.
func clipScaleKernel(k int, clip float32) *Kernel {
	return &Kernel{
		Doc:    fmt.Sprintf("scale of %d gradients to norm %g", k, clip),
		Params: []Param{out("sums", k+1)}, Threadgroup: 1, Groups: 1,
		Body: []Stmt{when(eq(gidE, i32(0)),
			let("total", Float, flt(0)),
			loop("j", 0, k, 1, set("total", add(vr("total"), load("sums", vr("j"))))),
			store("sums", i32(k), call(FnMin, flt(1), div(flt(clip), add(call(FnSqrt, vr("total")), flt(1e-6))))),
		)},
	}
}

// gradScaleKernel multiplies several gradients by scale[0] in place, each
// gradient whole threadgroups of its own (as adamMultiKernel).
func gradScaleKernel(sizes []int) *Kernel {
	params := []Param{in("scale", 1)}
	groups := 0
	starts := make([]int, len(sizes)+1)
	for j, n := range sizes {
		params = append(params, out(fmt.Sprint("g_", j), n))
		starts[j] = groups
		groups += ceilDiv(n, tgElem)
	}
	starts[len(sizes)] = groups
	var chain []Stmt
	for j := len(sizes) - 1; j >= 0; j-- {
		g := fmt.Sprint("g_", j)
		body := []Stmt{let("k", Int, sub(gidE, i32(starts[j]*tgElem))), when(lt(vr("k"), i32(sizes[j])), store(g, vr("k"), mul(load(g, vr("k")), vr("s"))))}
		if chain == nil {
			chain = body
			continue
		}
		chain = []Stmt{If{Cond: lt(tgidE, i32(starts[j+1])), Then: body, Else: chain}}
	}
	return &Kernel{
		Doc:    fmt.Sprintf("%d gradients scaled by scale[0]", len(sizes)),
		Params: params, Threadgroup: tgElem, Groups: groups,
		Body: append([]Stmt{let("s", Float, load("scale", i32(0)))}, chain...),
	}
}

// shareDoc notes, in a loss kernel's doc, that it divides by the global
// batch's count over rather than its own n.
func shareDoc(n, over int) string {
	if n == over {
		return ""
	}
	return fmt.Sprintf(" (a share: divided by the global %d)", over)
}

// reluKeeps is the mask of a ReLU fused into a batch norm
// (planner/fuse_norm_act.go): whether (x − mean)·scale > −beta, scale
// being gamma·inv. The forward and the backward kernels compute it from
// the same float32 values, and it has no sum that a compiler could fuse
// into an FMA, so that both agree on every element.
func reluKeeps(x, mean, scale, beta Expr) Expr {
	return gt(mul(sub(x, mean), scale), neg(beta))
}

// bnDy is a batch norm backward's dy, the local named dy, masked where
// relu by the fused ReLU's rule on the local named x (with the kernel's
// "mean", "k" = gamma·inv and "b" = beta).
func bnDy(relu bool, x, dy string) Expr {
	if !relu {
		return vr(dy)
	}
	return sel(reluKeeps(vr(x), vr("mean"), vr("k"), vr("b")), vr(dy), flt(0))
}

// channelDy is dy at index e of a channel-per-threadgroup batch norm
// backward, masked as bnDy's where relu.
func channelDy(e Expr, relu bool) Expr {
	if !relu {
		return load("dy", e)
	}
	return sel(reluKeeps(load("x", e), vr("mean"), vr("k"), vr("b")), load("dy", e), flt(0))
}

// evalReLU is an evaluation batch norm's output y, and max(y, 0) with a
// fused ReLU: no backward follows, so no mask needs to agree with one.
func evalReLU(relu bool, y Expr) Expr {
	if relu {
		return call(FnMax, y, flt(0))
	}
	return y
}

// reluName is what a batch norm kernel's doc line adds for a fused ReLU.
func reluName(relu bool) string {
	if relu {
		return " with ReLU"
	}
	return ""
}
