package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// resize lowers a resize step to resizeKernel, one thread per output, and
// its backward to resizeBwdKernel, one thread per row of dx.
func (l *lowering) resize(st *planner.Step) error {
	if err := l.operands(st, 1, 1); err != nil {
		return err
	}
	xid, yid := st.In[0], st.Out[0]
	if st.Kernel == planner.KResizeBwd {
		xid, yid = yid, xid
	}
	xs, err := l.shape(xid)
	if err != nil {
		return err
	}
	ys, err := l.shape(yid)
	if err != nil {
		return err
	}
	if len(xs) != 4 || len(ys) != 4 || xs[0] != ys[0] || xs[1] != ys[1] {
		return fmt.Errorf("resize of %v to %v: want [B,C,H,W] images of the same batch and channels", xs, ys)
	}
	g := resizeGeom{planes: xs[0] * xs[1], h: xs[2], w: xs[3], oh: ys[2], ow: ys[3], bilinear: st.Attr.Mode == planner.ResizeBilinear, align: st.Attr.AlignCorners}
	if st.Kernel == planner.KResize {
		return l.launch("resize", resizeKernel(g), nil, whole(st.In[0]), whole(st.Out[0]))
	}
	return l.launch("resize_bwd", resizeBwdKernel(g), nil, whole(st.In[0]), whole(st.Out[0]))
}

// resizeGeom is a resize of planes planes of h×w to oh×ow (rt/cpu.Resize).
type resizeGeom struct {
	planes, h, w, oh, ow int
	bilinear, align      bool
}

func (g resizeGeom) String() string {
	mode := "nearest"
	if g.bilinear {
		mode = "bilinear"
	}
	if g.align {
		mode += ", corners aligned"
	}
	return fmt.Sprintf("%d planes %dx%d -> %dx%d, %s", g.planes, g.h, g.w, g.oh, g.ow, mode)
}

// resizeSource declares <p>0 and <p>1, the input positions output
// position o of an axis from in to out reads, and <p>l, the weight of
// <p>1 (0 for nearest, whose <p>1 is <p>0): rt/cpu.ResizeSource's float32
// arithmetic, its scale folded into a literal.
func resizeSource(p string, o Expr, in, out int, bilinear, align bool) []Stmt {
	clampIn := func(e Expr) Expr { return sel(lt(e, i32(in-1)), e, i32(in-1)) }
	if !bilinear {
		return []Stmt{
			let(p+"0", Int, clampIn(Cast{Int, mul(toFloat(o), flt(float32(in)/float32(out)))})),
			let(p+"1", Int, vr(p+"0")),
			let(p+"l", Float, flt(0)),
		}
	}
	var s Expr
	if align {
		scale := float32(0)
		if out > 1 {
			scale = float32(in-1) / float32(out-1)
		}
		s = mul(flt(scale), toFloat(o))
	} else {
		s = call(FnMax, sub(mul(flt(float32(in)/float32(out)), add(toFloat(o), flt(0.5))), flt(0.5)), flt(0))
	}
	return []Stmt{
		let(p+"s", Float, s),
		let(p+"0", Int, clampIn(Cast{Int, vr(p + "s")})),
		let(p+"1", Int, add(vr(p+"0"), sel(lt(vr(p+"0"), i32(in-1)), i32(1), i32(0)))),
		let(p+"l", Float, sub(vr(p+"s"), toFloat(vr(p+"0")))),
	}
}

// resizeKernel is a resize of [planes, h, w] to [planes, oh, ow], one
// thread per output pixel.
func resizeKernel(g resizeGeom) *Kernel {
	n := g.planes * g.oh * g.ow
	return elementwise("resize "+g.String(), n, []Param{in("x", g.planes*g.h*g.w), out("y", n)}, func(i Expr) []Stmt {
		s := []Stmt{
			let("base", Int, mul(div(i, i32(g.oh*g.ow)), i32(g.h*g.w))),
			let("oh", Int, rem(div(i, i32(g.ow)), i32(g.oh))),
			let("ow", Int, rem(i, i32(g.ow))),
		}
		s = append(s, resizeSource("h", vr("oh"), g.h, g.oh, g.bilinear, g.align)...)
		s = append(s, resizeSource("w", vr("ow"), g.w, g.ow, g.bilinear, g.align)...)
		px := func(h, w string) Expr { return load("x", add(vr("base"), add(mul(vr(h), i32(g.w)), vr(w)))) }
		if !g.bilinear {
			return append(s, store("y", i, px("h0", "w0")))
		}
		lerp := func(h string) Expr {
			return add(mul(sub(flt(1), vr("wl")), px(h, "w0")), mul(vr("wl"), px(h, "w1")))
		}
		return append(s, store("y", i, add(mul(sub(flt(1), vr("hl")), lerp("h0")), mul(vr("hl"), lerp("h1")))))
	})
}

// resizeBwdKernel is a resize's backward, one thread per row ih of dx
// [planes, h, w], which only it writes (no atomics): it clears the row,
// then for every output row that reads ih, with the weight it reads it by,
// adds that row's dy to the pixels each output read.
func resizeBwdKernel(g resizeGeom) *Kernel {
	n := g.planes * g.h
	return elementwise("resize backward "+g.String(), n, []Param{in("dy", g.planes*g.oh*g.ow), out("dx", g.planes*g.h*g.w)}, func(i Expr) []Stmt {
		s := []Stmt{
			let("p", Int, div(i, i32(g.h))),
			let("ih", Int, rem(i, i32(g.h))),
			let("row", Int, mul(i, i32(g.w))),
			loop("iw", 0, g.w, 1, store("dx", add(vr("row"), vr("iw")), flt(0))),
		}
		at := func(w string) Expr { return add(vr("row"), vr(w)) }
		acc := func(w string, v Expr) Stmt { return store("dx", at(w), add(load("dx", at(w)), v)) }
		body := append(resizeSource("h", vr("oh"), g.h, g.oh, g.bilinear, g.align),
			let("wh", Float, sel(eq(vr("h0"), vr("ih")), sub(flt(1), vr("hl")), flt(0))))
		if g.bilinear {
			body = append(body, set("wh", add(vr("wh"), sel(eq(vr("h1"), vr("ih")), vr("hl"), flt(0)))))
		}
		inner := append(resizeSource("w", vr("ow"), g.w, g.ow, g.bilinear, g.align),
			let("g", Float, mul(vr("wh"), load("dy", add(mul(add(mul(vr("p"), i32(g.oh)), vr("oh")), i32(g.ow)), vr("ow"))))))
		if g.bilinear {
			inner = append(inner, acc("w0", mul(sub(flt(1), vr("wl")), vr("g"))), acc("w1", mul(vr("wl"), vr("g"))))
		} else {
			inner = append(inner, acc("w0", vr("g")))
		}
		body = append(body, when(ne(vr("wh"), flt(0)), loop("ow", 0, g.ow, 1, inner...)))
		return append(s, loop("oh", 0, g.oh, 1, body...))
	})
}
