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

// AdvanceKernel writes the step arguments of the next step: the epoch's
// learning rate, its optimizer step and its dropout seed.
func AdvanceKernel() *Kernel {
	return &Kernel{
		Name: "advance",
		Doc:  "step arguments of batch ctl[0]",
		Params: []Param{
			{Name: "args", Elem: Uint, Mutable: true, Size: gpuhost.StepArgsLen},
			ctlParam(false),
			{Name: "seeds", Elem: Uint, Size: 1},
		},
		Threadgroup: 1, Groups: 1,
		Body: []Stmt{when(eq(gidE, i32(0)),
			let("b", Int, ldInt("ctl", i32(gpuhost.CtlBatch))),
			store("args", i32(gpuhost.ArgLR), load("ctl", i32(gpuhost.CtlLR))),
			store("args", i32(gpuhost.ArgStep), Binary{OpAdd, load("ctl", i32(gpuhost.CtlStep)), Cast{Uint, vr("b")}}),
			store("args", i32(gpuhost.ArgSeed), u32(0)),
			when(lt(vr("b"), ldInt("ctl", i32(gpuhost.CtlSteps))), store("args", i32(gpuhost.ArgSeed), load("seeds", vr("b")))),
		)},
	}
}

// GatherKernel copies rows order[b·batch+r] (r < batch) of a set of
// width-element rows into a batch buffer, b = ctl[0]; rows outside the set
// read as zeros.
func GatherKernel(batch, width int) *Kernel {
	n := batch * width
	const tg = 256
	return &Kernel{
		Name: "gather",
		Doc:  fmt.Sprintf("gather %d rows of %d elements of batch ctl[0]", batch, width),
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
					set("v", load("set", add(mul(vr("row"), i32(width)), vr("j")))))),
			store("x", gidE, vr("v")),
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
