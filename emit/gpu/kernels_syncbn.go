package gpu

import "fmt"

// Synchronised batch norm's kernels, for a replica of a data-parallel run
// whose batch statistics are the global batch's: each replica sums its
// share, the replicas' sums are added by a collective point (an Op with
// Sum) between the two kernels of each pass, and the second kernel
// divides by the global count. Forward: syncBatchNormStatsKernel (Σx,
// Σx²), the sum, syncBatchNormApplyKernel. Backward:
// syncBatchNormBwdSumsKernel (Σdy, Σdy·x̂, written as dbeta and dgamma),
// the sum, syncBatchNormBwdDxKernel.

// channelIndex is element j of channel tgid in a [outer, c, inner] tensor.
func channelIndex(outer, c, inner int) Expr {
	return add(mul(add(mul(coord(vr("j"), []int{outer, inner}, 0), i32(c)), tgidE), i32(inner)), coord(vr("j"), []int{outer, inner}, 1))
}

// syncBatchNormStatsKernel: per channel the share's Σx into s1 and Σx²
// into s2, one threadgroup per channel.
func syncBatchNormStatsKernel(outer, c, inner int) *Kernel {
	m := outer * inner
	tg := pow2AtMost(m, tgReduce)
	e := channelIndex(outer, c, inner)
	body := []Stmt{
		Shared{"sh", tg},
		let("a1", Float, flt(0)),
		let("a2", Float, flt(0)),
		strided("j", m, tg, let("v", Float, load("x", e)), set("a1", add(vr("a1"), vr("v"))), set("a2", add(vr("a2"), mul(vr("v"), vr("v"))))),
	}
	body = append(body, reduceInto("t1", "a1", "sh", tg, sumOp)...)
	body = append(body, reduceInto("t2", "a2", "sh", tg, sumOp)...)
	body = append(body, when(eq(lidE, i32(0)), store("s1", tgidE, vr("t1")), store("s2", tgidE, vr("t2"))))
	return &Kernel{Doc: fmt.Sprintf("synchronised batch norm's sums of a share of [%d,%d,%d]", outer, c, inner),
		Params: []Param{in("x", outer*c*inner), out("s1", c), out("s2", c)}, Threadgroup: tg, Groups: c, Body: body}
}

// syncBatchNormApplyKernel normalises x with the statistics of the global
// batch of total values a channel, from the summed s1 = Σx and s2 = Σx²
// (var = s2/total − mean²), updates the running statistics (the unbiased
// variance of the global batch, as one GPU does) and leaves the mean and
// 1/sqrt(var+eps) in s1 and s2 for the backward pass.
func syncBatchNormApplyKernel(outer, c, inner, total int, eps, momentum float32, relu bool) *Kernel {
	m := outer * inner
	tg := pow2AtMost(m, tgReduce)
	e := channelIndex(outer, c, inner)
	unbiased := float32(total) / float32(max(total-1, 1))
	body := []Stmt{
		let("mean", Float, mul(load("s1", tgidE), flt(1/float32(total)))),
		let("var", Float, call(FnMax, sub(mul(load("s2", tgidE), flt(1/float32(total))), mul(vr("mean"), vr("mean"))), flt(0))),
		Barrier{}, // every thread has read s1 and s2 before thread 0 overwrites them
	}
	body = append(body, normaliseChannel(e, m, tg, eps, momentum, mul(vr("var"), flt(unbiased)), "s1", "s2", relu)...)
	n := outer * c * inner
	return &Kernel{Doc: fmt.Sprintf("synchronised batch norm (training)%s of a share [%d,%d,%d] of %d values a channel", reluName(relu), outer, c, inner, total),
		Params: []Param{in("x", n), in("gamma", c), in("beta", c), out("rmean", c), out("rvar", c),
			out("y", n), out("s1", c), out("s2", c)},
		Threadgroup: tg, Groups: c, Body: body}
}

// syncBatchNormBwdSumsKernel: per channel the share's dbeta = Σdy and
// dgamma = Σdy·x̂, which the replicas then sum in place.
func syncBatchNormBwdSumsKernel(outer, c, inner int, relu bool) *Kernel {
	m := outer * inner
	tg := pow2AtMost(m, tgReduce)
	e := channelIndex(outer, c, inner)
	body := append(channelGradSums(e, m, tg, relu), when(eq(lidE, i32(0)), store("dgamma", tgidE, vr("sdyx")), store("dbeta", tgidE, vr("sdy"))))
	n := outer * c * inner
	params := []Param{in("x", n), in("smean", c), in("sinv", c), in("dy", n), out("dgamma", c), out("dbeta", c)}
	if relu { // the fused ReLU's mask (reluKeeps)
		params = append(params, in("gamma", c), in("beta", c))
	}
	return &Kernel{Doc: fmt.Sprintf("synchronised batch norm backward's sums%s of a share of [%d,%d,%d]", reluName(relu), outer, c, inner),
		Params: params, Threadgroup: tg, Groups: c, Body: body}
}

// syncBatchNormBwdDxKernel: dx = gamma·inv·(dy − dbeta/total −
// x̂·dgamma/total) with the global batch's sums; dx may be dy.
func syncBatchNormBwdDxKernel(outer, c, inner, total int, relu bool) *Kernel {
	m := outer * inner
	tg := pow2AtMost(m, tgReduce)
	e := channelIndex(outer, c, inner)
	xhat := mul(sub(load("x", e), vr("mean")), vr("inv"))
	body := []Stmt{
		let("mean", Float, load("smean", tgidE)),
		let("inv", Float, load("sinv", tgidE)),
		let("k", Float, mul(load("gamma", tgidE), vr("inv"))),
		let("mdy", Float, mul(load("dbeta", tgidE), flt(1/float32(total)))),
		let("mdyx", Float, mul(load("dgamma", tgidE), flt(1/float32(total)))),
	}
	n := outer * c * inner
	params := []Param{in("x", n), in("gamma", c), in("smean", c), in("sinv", c), in("dy", n), in("dgamma", c), in("dbeta", c), out("dx", n)}
	if relu { // the fused ReLU's mask (reluKeeps)
		body = append(body, let("b", Float, load("beta", tgidE)))
		params = append(params, in("beta", c))
	}
	body = append(body, strided("j", m, tg, store("dx", e, mul(vr("k"), sub(sub(channelDy(e, relu), vr("mdy")), mul(xhat, vr("mdyx")))))))
	return &Kernel{Doc: fmt.Sprintf("synchronised batch norm backward's dx%s of a share [%d,%d,%d] of %d values a channel", reluName(relu), outer, c, inner, total),
		Params: params, Threadgroup: tg, Groups: c, Body: body}
}
