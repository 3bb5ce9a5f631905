package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// The kernels of device-resident training (rt/gpuhost's resident.go): a
// training step that needs nothing from the host. They share a uint32
// control buffer laid out as rt/gpuhost's Ctl.

// ctlParam is the control buffer; the set, order and seeds buffers are as
// long as the data set, known only at run time, so their parameters
// declare one element and the kernels guard every index with ctl's counts.
func ctlParam(mutable bool) Param {
	return Param{Name: "ctl", Elem: Uint, Mutable: mutable, Size: gpuhost.CtlLen}
}

func ldInt(buf string, i Expr) Expr { return Cast{Int, load(buf, i)} }

// AdvanceKernel writes the step arguments of the next step, batch b =
// ctl[0] of the epoch: its learning rate, its optimizer step and its
// dropout seed, from the step table (gpuhost's StepWords a batch); past
// the epoch's last batch the rate after it and no dropout.
func AdvanceKernel() *Kernel {
	const w = gpuhost.StepWords
	return &Kernel{
		Name: "advance",
		Doc:  "step arguments of batch ctl[0]",
		Params: []Param{
			{Name: "args", Elem: Uint, Mutable: true, Size: gpuhost.StepArgsLen},
			ctlParam(false),
			{Name: "steps", Elem: Uint, Size: 1},
		},
		Threadgroup: 1, Groups: 1,
		Body: []Stmt{when(eq(gidE, i32(0)),
			let("b", Int, ldInt("ctl", i32(gpuhost.CtlBatch))),
			store("args", i32(gpuhost.ArgLR), load("ctl", i32(gpuhost.CtlLR))),
			store("args", i32(gpuhost.ArgStep), Binary{OpAdd, load("ctl", i32(gpuhost.CtlStep)), Cast{Uint, vr("b")}}),
			store("args", i32(gpuhost.ArgSeed), u32(0)),
			when(lt(vr("b"), ldInt("ctl", i32(gpuhost.CtlSteps))),
				store("args", i32(gpuhost.ArgSeed), load("steps", add(mul(vr("b"), i32(w)), i32(gpuhost.StepSeed)))),
				store("args", i32(gpuhost.ArgLR), load("steps", add(mul(vr("b"), i32(w)), i32(gpuhost.StepLR))))),
		)},
	}
}

// GatherKernel copies, for r < batch, the width elements of the set from
// order[b·batch+r]·stride on into row r of a batch buffer, b = ctl[0]:
// rows of a set of rows (stride = width), or windows of a stream of
// tokens (stride 1, order holding window starts). An entry of order at or
// past ctl's rows reads as zeros.
func GatherKernel(batch, width, stride int) *Kernel {
	n := batch * width
	const tg = 256
	what := fmt.Sprintf("gather %d rows of %d elements of batch ctl[0]", batch, width)
	if stride != width {
		what = fmt.Sprintf("gather %d windows of %d tokens of batch ctl[0]", batch, width)
	}
	return &Kernel{
		Name: "gather",
		Doc:  what,
		Params: []Param{
			ctlParam(false),
			{Name: "order", Elem: Uint, Size: 1},
			in("set", 1),
			out("x", n),
		},
		Threadgroup: tg, Groups: ceilDiv(n, tg),
		Body: []Stmt{when(lt(gidE, i32(n)),
			let("r", Int, div(gidE, i32(width))),
			let("j", Int, rem(gidE, i32(width))),
			let("k", Int, add(mul(ldInt("ctl", i32(gpuhost.CtlBatch)), i32(batch)), vr("r"))),
			let("v", Float, flt(0)),
			when(lt(vr("k"), mul(ldInt("ctl", i32(gpuhost.CtlSteps)), i32(batch))),
				let("row", Int, ldInt("order", vr("k"))),
				when(lt(vr("row"), ldInt("ctl", i32(gpuhost.CtlRows))),
					set("v", load("set", add(mul(vr("row"), i32(stride)), vr("j")))))),
			store("x", gidE, vr("v")),
		)},
	}
}

// WindowLabelsKernel writes the labels of a batch of windows of a token
// stream: for r < batch and j < t, row r·t+j of y is one-hot over v ids
// at set[order[b·batch+r]+j+1], the token after the window's j-th (b =
// ctl[0]); a window start at or past ctl's rows gives rows of zeros.
func WindowLabelsKernel(batch, t, v int) *Kernel {
	n := batch * t * v
	const tg = 256
	return &Kernel{
		Name: "gather_labels",
		Doc:  fmt.Sprintf("one-hot next tokens of %d windows of %d tokens, %d ids, of batch ctl[0]", batch, t, v),
		Params: []Param{
			ctlParam(false),
			{Name: "order", Elem: Uint, Size: 1},
			in("set", 1),
			out("y", n),
		},
		Threadgroup: tg, Groups: ceilDiv(n, tg),
		Body: []Stmt{when(lt(gidE, i32(n)),
			let("r", Int, div(gidE, i32(t*v))),
			let("j", Int, rem(div(gidE, i32(v)), i32(t))),
			let("id", Int, rem(gidE, i32(v))),
			let("k", Int, add(mul(ldInt("ctl", i32(gpuhost.CtlBatch)), i32(batch)), vr("r"))),
			let("hot", Float, flt(0)),
			when(lt(vr("k"), mul(ldInt("ctl", i32(gpuhost.CtlSteps)), i32(batch))),
				let("start", Int, ldInt("order", vr("k"))),
				when(lt(vr("start"), ldInt("ctl", i32(gpuhost.CtlRows))),
					when(eq(ldInt("set", add(add(vr("start"), vr("j")), i32(1))), vr("id")),
						set("hot", flt(1))))),
			store("y", gidE, vr("hot")),
		)},
	}
}

// RecordKernel records a step's results and moves to the next batch:
// results[2b] = the loss, results[2b+1] = rows whose prediction's argmax
// is the label's (classes > 0; ties go to the first, as cpu.Argmax), then
// ctl[0] = b+1. One group of threads threads.
func RecordKernel(batch, classes, threads int) *Kernel {
	body := []Stmt{
		Shared{Name: "acc", Size: threads},
		let("b", Int, ldInt("ctl", i32(gpuhost.CtlBatch))),
		let("n", Float, flt(0)),
	}
	if classes > 0 {
		argmax := func(buf, best string) []Stmt {
			bv := best + "_v"
			return []Stmt{
				let(best, Int, i32(0)),
				let(bv, Float, load(buf, mul(vr("r"), i32(classes)))),
				For{"c_" + best, i32(1), i32(classes), i32(1), []Stmt{
					when(gt(load(buf, add(mul(vr("r"), i32(classes)), vr("c_"+best))), vr(bv)),
						set(bv, load(buf, add(mul(vr("r"), i32(classes)), vr("c_"+best)))),
						set(best, vr("c_"+best))),
				}},
			}
		}
		loopBody := append(argmax("logits", "p"), argmax("labels", "l")...)
		loopBody = append(loopBody, when(eq(vr("p"), vr("l")), set("n", add(vr("n"), flt(1)))))
		body = append(body, For{"r", lidE, i32(batch), i32(threads), loopBody})
	}
	body = append(body,
		store("acc", lidE, vr("n")),
		Barrier{},
		when(eq(lidE, i32(0)),
			let("sum", Float, flt(0)),
			loop("t", 0, threads, 1, set("sum", add(vr("sum"), load("acc", vr("t"))))),
			when(lt(vr("b"), ldInt("ctl", i32(gpuhost.CtlSteps))),
				store("results", mul(i32(2), vr("b")), load("loss", i32(0))),
				store("results", add(mul(i32(2), vr("b")), i32(1)), vr("sum"))),
			store("ctl", i32(gpuhost.CtlBatch), Cast{Uint, add(vr("b"), i32(1))}),
		),
	)
	return &Kernel{
		Name: "record",
		Doc:  fmt.Sprintf("loss and correct rows of a batch of %d rows of %d classes", batch, classes),
		Params: []Param{
			ctlParam(true),
			in("loss", 1),
			in("logits", batch*max(classes, 1)),
			in("labels", batch*max(classes, 1)),
			out("results", 1),
		},
		Threadgroup: threads, Groups: 1,
		Body: body,
	}
}

// CopyKernel is y = x over n elements.
func CopyKernel(n int) *Kernel { return copyKernel(n) }
