package gpu

import "fmt"

// The dot-product dense layer: y = act(x·Wᵀ + b) for layers whose outputs
// are few and whose sums are short (a classifier's last layer: 250×10
// outputs of 128 products for models/mnist.cue). cuBLAS took three kernels
// and 12.5 µs for it on an H100 (a split sum, its reduction, then the bias
// pass). Here 32 lanes share an output: each sums every 32nd product (so a
// warp's loads of x and of W are contiguous), a tree in threadgroup memory
// adds the lanes, and the first lane adds the bias and applies the
// activation. (One thread an output took 10.3 µs: its sum's rounds of
// loads waited on memory one after another.)

// Dot-product dense bounds: the longest sum and the most outputs.
const (
	denseDotMaxK       = 512
	denseDotMaxOutputs = 1 << 14
	denseDotLanes      = 32
	denseDotTG         = 256
)

// denseDotFits reports whether a dense layer of batch rows, n outputs and
// k inputs runs as the dot-product kernel.
func denseDotFits(batch, n, k int) bool {
	return k <= denseDotMaxK && batch*n <= denseDotMaxOutputs
}

// denseDotKernel computes y [batch, n] = act(x [batch, k] · w [n, k]ᵀ + b),
// denseDotLanes threads an output.
func denseDotKernel(batch, n, k int, hasBias bool, act string, alpha float32) (*Kernel, error) {
	outputs := batch * n
	per := denseDotTG / denseDotLanes // outputs a threadgroup
	params := []Param{in("x", batch*k), in("w", n*k), out("y", outputs)}
	if hasBias {
		params = append(params, in("b", n))
	}
	sum := Expr(load("sh", lidE))
	if hasBias {
		sum = add(sum, load("b", rem(vr("o"), i32(n))))
	}
	e, err := actExpr(act, alpha, sum)
	if err != nil {
		return nil, err
	}
	body := []Stmt{Shared{"sh", denseDotTG},
		let("lane", Int, rem(lidE, i32(denseDotLanes))),
		let("o", Int, add(mul(tgidE, i32(per)), div(lidE, i32(denseDotLanes)))),
		let("xb", Int, mul(div(vr("o"), i32(n)), i32(k))),
		let("wb", Int, mul(rem(vr("o"), i32(n)), i32(k))),
		let("acc", Float, flt(0)),
		when(lt(vr("o"), i32(outputs)),
			For{"j", vr("lane"), i32(k), i32(denseDotLanes), []Stmt{
				set("acc", add(vr("acc"), mul(load("x", add(vr("xb"), vr("j"))), load("w", add(vr("wb"), vr("j")))))),
			}}),
		store("sh", lidE, vr("acc")),
	}
	// Every thread reaches every barrier; lanes below half add the upper
	// half's partial sums of their output.
	for half := denseDotLanes / 2; half > 0; half /= 2 {
		body = append(body, Barrier{},
			when(lt(vr("lane"), i32(half)), store("sh", lidE, add(load("sh", lidE), load("sh", add(lidE, i32(half)))))))
	}
	body = append(body, when(and(eq(vr("lane"), i32(0)), lt(vr("o"), i32(outputs))), store("y", vr("o"), e)))
	return &Kernel{
		Doc:    fmt.Sprintf("dense layer [%d,%d]·[%d,%d]ᵀ, %d lanes an output, bias + %q", batch, k, n, k, denseDotLanes, act),
		Params: params, Threadgroup: denseDotTG, Groups: ceilDiv(outputs, per), Body: body,
	}, nil
}
