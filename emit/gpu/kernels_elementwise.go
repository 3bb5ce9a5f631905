package gpu

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// tgElem is the threadgroup size of element-wise kernels: a multiple of the
// 32-wide SIMD group of Apple GPUs and of CUDA warps.
const tgElem = 256

// elementwise builds a kernel with one thread per element of an n-element
// index space; threads past n return at once (the grid is a whole number of
// threadgroups).
func elementwise(doc string, n int, params []Param, body func(i Expr) []Stmt) *Kernel {
	b := []Stmt{let("i", Int, gidE), when(ge(vr("i"), i32(n)), Return{})}
	b = append(b, body(vr("i"))...)
	return &Kernel{Doc: doc, Params: params, Threadgroup: tgElem, Groups: ceilDiv(n, tgElem), Body: b}
}

// elementwiseVec is elementwise with four elements a thread where n is a
// multiple of 4: body is written for one element e, and each thread runs
// it for its four with the locals renamed apart; body's loads of the
// buffers named in vec at index e become one 16-byte load of the four
// before them, and its stores to those buffers one 16-byte store after
// them, so a buffer may be both read and written (y = a + b with y a).
// The lowering must bind those buffers whole (16-byte aligned). A thread
// an element spent its time on index arithmetic and scalar accesses: a
// GPT's 25 MB add took 39 µs on an H200 for 16 µs of memory traffic.
func elementwiseVec(doc string, n int, params []Param, vec []string, body func(e Expr) []Stmt) *Kernel {
	if n%4 != 0 {
		return elementwise(doc, n, params, body)
	}
	isVec := map[string]bool{}
	for _, b := range vec {
		isVec[b] = true
	}
	one := body(vr("e"))
	locals := map[string]bool{"e": true}
	declaredNames(one, locals)
	var loaded, stored []string
	note := func(list *[]string, b string) {
		for _, x := range *list {
			if x == b {
				return
			}
		}
		*list = append(*list, b)
	}
	var lanes []Stmt
	for k := 0; k < 4; k++ {
		sfx := fmt.Sprint("_", k)
		rn := func(name string) string {
			if locals[name] {
				return name + sfx
			}
			return name
		}
		isE := func(e Expr) bool { v, ok := e.(Var); return ok && v.Name == "e"+sfx }
		lane := renameStmts(one, rn, func(e Expr) Expr {
			if l, ok := e.(Load); ok && isVec[l.Buf] && isE(l.Index) {
				note(&loaded, l.Buf)
				return vr("ld_" + l.Buf + sfx)
			}
			return e
		}, func(st Store) Stmt {
			if isVec[st.Buf] && isE(st.Index) {
				note(&stored, st.Buf)
				return let("st_"+st.Buf+sfx, Float, st.Value)
			}
			return st
		})
		if mentions(lane, "e"+sfx) {
			lanes = append(lanes, let("e"+sfx, Int, add(vr("i4"), i32(k))))
		}
		lanes = append(lanes, lane...)
	}
	out := []Stmt{let("i4", Int, mul(vr("i"), i32(4)))}
	for _, b := range loaded {
		out = append(out, Load4{b, vr("i4"), [4]string{"ld_" + b + "_0", "ld_" + b + "_1", "ld_" + b + "_2", "ld_" + b + "_3"}})
	}
	out = append(out, lanes...)
	for _, b := range stored {
		out = append(out, Store4{b, vr("i4"), [4]Expr{vr("st_" + b + "_0"), vr("st_" + b + "_1"), vr("st_" + b + "_2"), vr("st_" + b + "_3")}})
	}
	return elementwise(doc+", 4 elements a thread", n/4, params, func(Expr) []Stmt { return out })
}

// mentions reports whether an expression of ss reads variable name.
func mentions(ss []Stmt, name string) bool {
	found := false
	rewriteStmts(ss, func(e Expr) Expr {
		if v, ok := e.(Var); ok && v.Name == name {
			found = true
		}
		return e
	})
	return found
}

// declaredNames adds the names that ss declares (Let, For) to names.
func declaredNames(ss []Stmt, names map[string]bool) {
	for _, s := range ss {
		switch s := s.(type) {
		case Let:
			names[s.Name] = true
		case For:
			names[s.Var] = true
			declaredNames(s.Body, names)
		case If:
			declaredNames(s.Then, names)
			declaredNames(s.Else, names)
		case Load4:
			for _, n := range s.Names {
				names[n] = true
			}
		}
	}
}

// renameStmts copies ss with every variable name passed through rn, then
// every expression through f (bottom-up) and every Store through st.
func renameStmts(ss []Stmt, rn func(string) string, f func(Expr) Expr, st func(Store) Stmt) []Stmt {
	ex := func(e Expr) Expr {
		return rewriteExpr(e, func(e Expr) Expr {
			if v, ok := e.(Var); ok {
				e = vr(rn(v.Name))
			}
			return f(e)
		})
	}
	var out []Stmt
	for _, s := range ss {
		switch s := s.(type) {
		case Let:
			out = append(out, Let{rn(s.Name), s.Type, ex(s.Init)})
		case Assign:
			out = append(out, Assign{rn(s.Name), ex(s.Value)})
		case Store:
			out = append(out, st(Store{s.Buf, ex(s.Index), ex(s.Value)}))
		case If:
			out = append(out, If{ex(s.Cond), renameStmts(s.Then, rn, f, st), renameStmts(s.Else, rn, f, st)})
		case For:
			out = append(out, For{rn(s.Var), ex(s.From), ex(s.To), ex(s.Step), renameStmts(s.Body, rn, f, st)})
		default:
			// Return, Barrier, Shared and vector accesses have no place
			// in an element's body.
			out = append(out, s)
		}
	}
	return out
}

// actExpr applies a fused activation (planner.Attr.Act) to x.
func actExpr(act string, alpha float32, x Expr) (Expr, error) {
	switch act {
	case "":
		return x, nil
	case "relu":
		return call(FnMax, x, flt(0)), nil
	case "leakyrelu":
		return sel(gt(x, flt(0)), x, mul(flt(alpha), x)), nil
	case "sigmoid":
		return div(flt(1), add(flt(1), call(FnExp, neg(x)))), nil
	case "tanh":
		return call(FnTanh, x), nil
	}
	return nil, fmt.Errorf("unknown activation %q", act)
}

// actGradFromY is the derivative of a fused activation written in terms of
// its output y, as rt/cpu computes it.
func actGradFromY(act string, alpha float32, y Expr) (Expr, error) {
	switch act {
	case "":
		return flt(1), nil
	case "relu":
		return sel(gt(y, flt(0)), flt(1), flt(0)), nil
	case "leakyrelu":
		return sel(gt(y, flt(0)), flt(1), flt(alpha)), nil
	case "sigmoid":
		return mul(y, sub(flt(1), y)), nil
	case "tanh":
		return sub(flt(1), mul(y, y)), nil
	}
	return nil, fmt.Errorf("unknown activation %q", act)
}

// biasActKernel is the epilogue run in place after a GEMM: y = act(y + b),
// where the bias index of element i is (i / inner) % channels: per column
// for a dense output [B,N] (inner 1), per channel for a convolution output
// [B,OC,OH·OW] (inner OH·OW).
func biasActKernel(n, channels, inner int, hasBias bool, act string, alpha float32) (*Kernel, error) {
	params := []Param{out("y", n)}
	if hasBias {
		params = append(params, in("b", channels))
	}
	v := Expr(load("y", vr("i")))
	if hasBias {
		v = add(v, load("b", rem(div(vr("i"), i32(inner)), i32(channels))))
	}
	e, err := actExpr(act, alpha, vr("v"))
	if err != nil {
		return nil, err
	}
	return elementwise(fmt.Sprintf("bias + %q epilogue, %d elements, %d channels x %d", act, n, channels, inner), n, params,
		func(i Expr) []Stmt { return []Stmt{let("v", Float, v), store("y", i, e)} }), nil
}

// convScatterKernel is the epilogue of a convolution computed a round of
// images at a time: it moves the round's GEMM output rows, [channels,
// images·inner] with each channel's row holding the images side by side,
// into place in y [images, channels, inner], adding the bias and applying
// the activation on the way, one thread per element of y.
func convScatterKernel(images, channels, inner int, hasBias bool, act string, alpha float32) (*Kernel, error) {
	n := images * channels * inner
	params := []Param{in("rows", n), out("y", n)}
	if hasBias {
		params = append(params, in("b", channels))
	}
	shape := []int{images, channels, inner}
	src := add(mul(add(mul(coord(vr("i"), shape, 1), i32(images)), coord(vr("i"), shape, 0)), i32(inner)), coord(vr("i"), shape, 2))
	v := Expr(load("rows", src))
	if hasBias {
		v = add(v, load("b", coord(vr("i"), shape, 1)))
	}
	e, err := actExpr(act, alpha, vr("v"))
	if err != nil {
		return nil, err
	}
	return elementwise(fmt.Sprintf("conv output rows of %d images to [%d,%d,%d] with bias + %q", images, images, channels, inner, act), n, params,
		func(i Expr) []Stmt { return []Stmt{let("v", Float, v), store("y", i, e)} }), nil
}

// actBwdKernel turns dy into the gradient of the pre-activation in place:
// dy *= act'(y).
func actBwdKernel(n int, act string, alpha float32) (*Kernel, error) {
	g, err := actGradFromY(act, alpha, load("y", vr("i")))
	if err != nil {
		return nil, err
	}
	return elementwise(fmt.Sprintf("%q backward from y, %d elements", act, n), n, []Param{in("y", n), out("dy", n)},
		func(i Expr) []Stmt { return []Stmt{store("dy", i, mul(load("dy", i), g))} }), nil
}

// convRowsKernel gathers a convolution's output gradient dy [images, C,
// inner] into the rows [C, images·inner] of its backward GEMMs, applying
// the fused activation's derivative on the way (from y, as actBwdKernel):
// one pass instead of an in-place activation pass and a transpose.
func convRowsKernel(images, channels, inner int, act string, alpha float32) (*Kernel, error) {
	n := images * channels * inner
	shape := []int{channels, images, inner}
	src := add(mul(add(mul(coord(vr("i"), shape, 1), i32(channels)), coord(vr("i"), shape, 0)), i32(inner)), coord(vr("i"), shape, 2))
	params := []Param{in("dy", n), out("rows", n)}
	v := load("dy", vr("s"))
	doc := fmt.Sprintf("convolution rows [%d, %d·%d] from dy [%d,%d,%d]", channels, images, inner, images, channels, inner)
	if act != "" {
		g, err := actGradFromY(act, alpha, load("y", vr("s")))
		if err != nil {
			return nil, err
		}
		params = append(params, in("y", n))
		v = mul(v, g)
		doc += fmt.Sprintf(", times %q's derivative from y", act)
	}
	return elementwise(doc, n, params, func(i Expr) []Stmt {
		return []Stmt{let("s", Int, src), store("rows", i, v)}
	}), nil
}

// unaryFwd applies one chain op to x.
func unaryFwd(op planner.UnaryOp, x Expr) (Expr, error) {
	a := float32(op.Alpha)
	switch op.Op {
	case "relu", "leakyrelu", "sigmoid", "tanh":
		return actExpr(op.Op, a, x)
	case "gelu":
		return mul(mul(flt(0.5), x), add(flt(1), call(FnErf, mul(x, flt(float32(1/math.Sqrt2)))))), nil
	case "exp":
		return call(FnExp, x), nil
	case "log":
		return call(FnLog, x), nil
	case "addconst":
		return add(x, flt(a)), nil
	case "mulconst":
		return mul(x, flt(a)), nil
	case "sqrt":
		return call(FnSqrt, x), nil
	case "powconst":
		return powExpr(x, op.Alpha), nil
	case "erf":
		return call(FnErf, x), nil
	case "relu6":
		return call(FnMin, call(FnMax, x, flt(0)), flt(6)), nil
	}
	return nil, fmt.Errorf("unknown element-wise op %q", op.Op)
}

// maxPowMuls is the largest integer exponent powExpr writes as products.
const maxPowMuls = 8

// powExpr is x^p for a constant p, from functions every dialect has (no
// pow: Metal's is undefined for a negative x). Small integer exponents
// are products, exact for any x, and their reciprocal for a negative p;
// 0.5 is a square root; any other p is exp(p·log|x|), with the sign of x
// for an odd integer p, and NaN for a negative x and a fractional p (as
// C's pow): log of a negative number is NaN.
func powExpr(x Expr, p float64) Expr {
	whole := p == math.Trunc(p)
	switch {
	case whole && math.Abs(p) <= maxPowMuls:
		var r Expr = flt(1)
		for k := 0; k < int(math.Abs(p)); k++ {
			if k == 0 {
				r = x
			} else {
				r = mul(r, x)
			}
		}
		if p < 0 {
			r = div(flt(1), r)
		}
		return r
	case p == 0.5:
		return call(FnSqrt, x)
	case whole:
		r := call(FnExp, mul(flt(float32(p)), call(FnLog, call(FnAbs, x))))
		if math.Mod(p, 2) != 0 {
			return sel(lt(x, flt(0)), neg(r), r)
		}
		return r
	}
	return call(FnExp, mul(flt(float32(p)), call(FnLog, x)))
}

// unaryGrad is the derivative of one chain op at its input x.
func unaryGrad(op planner.UnaryOp, x Expr) (Expr, error) {
	a := float32(op.Alpha)
	switch op.Op {
	case "relu":
		return sel(gt(x, flt(0)), flt(1), flt(0)), nil
	case "leakyrelu":
		return sel(gt(x, flt(0)), flt(1), flt(a)), nil
	case "sigmoid":
		s, _ := actExpr("sigmoid", 0, x)
		return mul(s, sub(flt(1), s)), nil
	case "tanh":
		t := call(FnTanh, x)
		return sub(flt(1), mul(t, t)), nil
	case "gelu":
		cdf := mul(flt(0.5), add(flt(1), call(FnErf, mul(x, flt(float32(1/math.Sqrt2))))))
		pdf := mul(flt(float32(1/math.Sqrt(2*math.Pi))), call(FnExp, mul(flt(-0.5), mul(x, x))))
		return add(cdf, mul(x, pdf)), nil
	case "exp":
		return call(FnExp, x), nil
	case "log":
		return div(flt(1), x), nil
	case "addconst":
		return flt(1), nil
	case "mulconst":
		return flt(a), nil
	case "sqrt":
		return div(flt(0.5), call(FnSqrt, x)), nil
	case "relu6":
		return sel(and(gt(x, flt(0)), lt(x, flt(6))), flt(1), flt(0)), nil
	case "powconst":
		if op.Alpha == 0 {
			return flt(0), nil
		}
		return mul(flt(a), powExpr(x, op.Alpha-1)), nil
	case "erf":
		return mul(flt(float32(2/math.Sqrt(math.Pi))), call(FnExp, neg(mul(x, x)))), nil
	}
	return nil, fmt.Errorf("unknown element-wise op %q", op.Op)
}

func chainName(chain []planner.UnaryOp) string { return strings.Join(planner.ChainOps(chain), "∘") }

// unaryKernel is a (possibly fused) element-wise chain y = f_k(…f_1(x)),
// four elements a thread where n allows (elementwiseVec).
func unaryKernel(n int, chain []planner.UnaryOp) (*Kernel, error) {
	var ops []Expr
	for _, op := range chain {
		e, err := unaryFwd(op, vr("v"))
		if err != nil {
			return nil, err
		}
		ops = append(ops, e)
	}
	return elementwiseVec(fmt.Sprintf("element-wise %s, %d elements", chainName(chain), n), n,
		[]Param{in("x", n), out("y", n)}, []string{"x", "y"}, func(i Expr) []Stmt {
			body := []Stmt{let("v", Float, load("x", i))}
			for _, e := range ops {
				body = append(body, set("v", e))
			}
			return append(body, store("y", i, vr("v")))
		}), nil
}

// unaryBwdKernel is the chain's backward pass: the intermediate values are
// recomputed from x and dx = dy · Π f_k'(v_{k-1}). dx may be dy.
func unaryBwdKernel(n int, chain []planner.UnaryOp) (*Kernel, error) {
	var fwd, grads []Expr
	for k, op := range chain[:len(chain)-1] {
		e, err := unaryFwd(op, vr(fmt.Sprintf("v%d", k)))
		if err != nil {
			return nil, err
		}
		fwd = append(fwd, e)
	}
	for k := len(chain) - 1; k >= 0; k-- {
		d, err := unaryGrad(chain[k], vr(fmt.Sprintf("v%d", k)))
		if err != nil {
			return nil, err
		}
		grads = append(grads, d)
	}
	return elementwiseVec(fmt.Sprintf("element-wise %s backward, %d elements", chainName(chain), n), n,
		[]Param{in("x", n), in("dy", n), out("dx", n)}, []string{"x", "dy", "dx"}, func(i Expr) []Stmt {
			body := []Stmt{let("v0", Float, load("x", i))}
			for k, e := range fwd {
				body = append(body, let(fmt.Sprintf("v%d", k+1), Float, e))
			}
			body = append(body, let("g", Float, load("dy", i)))
			for _, d := range grads {
				body = append(body, set("g", mul(vr("g"), d)))
			}
			return append(body, store("dx", i, vr("g")))
		}), nil
}

// unaryBwdFromOutputKernel is dx = dy·op'(x) of a one-op chain whose
// derivative its output y gives (planner.DerivativeFromOutput), reading y.
// With sum, dy is the sum of two gradients, dy and dy2, the operands of
// an accumulate step the planner folded in (fuse_accumulate_act.go), and
// dx = (dy + dy2)·op'(x). dx may be dy or dy2.
func unaryBwdFromOutputKernel(n int, chain []planner.UnaryOp, sum bool) (*Kernel, error) {
	if len(chain) != 1 || !planner.DerivativeFromOutput(chain[0]) {
		return nil, fmt.Errorf("a backward from the output of %s, whose derivative its output does not give", chainName(chain))
	}
	d, err := unaryGradFromOutput(chain[0], vr("v"))
	if err != nil {
		return nil, err
	}
	doc := fmt.Sprintf("element-wise %s backward from its output, %d elements", chainName(chain), n)
	params, vec := []Param{in("y", n), in("dy", n), out("dx", n)}, []string{"y", "dy", "dx"}
	dy := func(i Expr) Expr { return load("dy", i) }
	if sum {
		doc += ", of the sum of two gradients"
		params, vec = []Param{in("y", n), in("dy", n), in("dy2", n), out("dx", n)}, []string{"y", "dy", "dy2", "dx"}
		dy = func(i Expr) Expr { return add(load("dy", i), load("dy2", i)) }
	}
	return elementwiseVec(doc, n, params, vec, func(i Expr) []Stmt {
		return []Stmt{let("v", Float, load("y", i)), store("dx", i, mul(dy(i), d))}
	}), nil
}

// unaryGradFromOutput is op's derivative written with its output y.
func unaryGradFromOutput(op planner.UnaryOp, y Expr) (Expr, error) {
	switch op.Op {
	case "relu":
		return sel(gt(y, flt(0)), flt(1), flt(0)), nil
	case "leakyrelu":
		return sel(gt(y, flt(0)), flt(1), flt(float32(op.Alpha))), nil
	case "relu6":
		return sel(and(gt(y, flt(0)), lt(y, flt(6))), flt(1), flt(0)), nil
	case "sigmoid":
		return mul(y, sub(flt(1), y)), nil
	case "tanh":
		return sub(flt(1), mul(y, y)), nil
	case "exp":
		return y, nil
	}
	return nil, fmt.Errorf("the derivative of %q is not a function of its output", op.Op)
}

// copyKernel is y = x (dropout in evaluation mode).
func copyKernel(n int) *Kernel {
	return elementwise(fmt.Sprintf("copy, %d elements", n), n, []Param{in("x", n), out("y", n)},
		func(i Expr) []Stmt { return []Stmt{store("y", i, load("x", i))} })
}

// accumulateKernel is y = a + b (y may be a).
func accumulateKernel(n int) *Kernel {
	return elementwiseVec(fmt.Sprintf("accumulate, %d elements", n), n, []Param{in("a", n), in("b", n), out("y", n)}, []string{"a", "b", "y"},
		func(i Expr) []Stmt { return []Stmt{store("y", i, add(load("a", i), load("b", i)))} })
}

// gradMeanKernel is accumulation's mean: g = sum·scale, then sum = 0
// for the next optimizer step's micro-batches (planner/accumulate.go).
func gradMeanKernel(n int, scale float32) *Kernel {
	return elementwise(fmt.Sprintf("gradient mean, scale %g, %d elements", scale, n), n, []Param{out("sum", n), out("g", n)},
		func(i Expr) []Stmt {
			return []Stmt{store("g", i, mul(load("sum", i), flt(scale))), store("sum", i, flt(0))}
		})
}

// dropoutKernel draws a keep mask from DropoutUniform (the seed xor
// stream) and scales kept elements by 1/(1-rate) (inverted dropout): mask
// holds 0 or the scale.
func dropoutKernel(n int, rate float32, stream uint32) *Kernel {
	scale := 1 / (1 - rate)
	return elementwiseVec(fmt.Sprintf("dropout rate %g, stream %#x, %d elements", rate, stream, n), n,
		[]Param{argsParam(), in("x", n), out("y", n), out("mask", n)}, []string{"x", "y", "mask"}, func(i Expr) []Stmt {
			s := hashUniformStmts("u", i, stream)
			return append(s,
				let("m", Float, sel(ge(vr("u"), flt(rate)), flt(scale), flt(0))),
				store("mask", i, vr("m")),
				store("y", i, mul(load("x", i), vr("m"))))
		})
}

// dropoutBwdKernel is dx = dy · mask.
func dropoutBwdKernel(n int) *Kernel {
	return elementwiseVec(fmt.Sprintf("dropout backward, %d elements", n), n,
		[]Param{in("mask", n), in("dy", n), out("dx", n)}, []string{"mask", "dy", "dx"},
		func(i Expr) []Stmt { return []Stmt{store("dx", i, mul(load("dy", i), load("mask", i)))} })
}

// broadcastIndex maps flat index i of the output shape y to the flat index
// of operand x under numpy broadcasting (x right-aligned to y; size-1 axes
// repeat).
func broadcastIndex(i Expr, y, x []int) Expr {
	xs := alignShape(x, len(y))
	xst := stridesOf(xs)
	var idx Expr = i32(0)
	for k := range y {
		if xs[k] == 1 {
			continue
		}
		idx = add(idx, mul(coord(i, y, k), i32(xst[k])))
	}
	return idx
}

// alignShape pads shape with leading 1s to rank n.
func alignShape(shape []int, n int) []int {
	out := make([]int, n)
	for k := range out {
		out[k] = 1
	}
	copy(out[n-len(shape):], shape)
	return out
}

func binExpr(op string, a, b Expr) (Expr, error) {
	switch op {
	case "add":
		return add(a, b), nil
	case "sub":
		return sub(a, b), nil
	case "mul":
		return mul(a, b), nil
	case "div":
		return div(a, b), nil
	}
	return nil, fmt.Errorf("unknown binary op %q", op)
}

// binaryKernel is y = a ∘ b with numpy broadcasting; y has the full shape.
// An operand of y's shape is read at y's index (four elements a thread
// where y's size allows), a broadcast one through broadcastIndex. With
// relu, y = max(a ∘ b, 0) (planner/fuse_sum_act.go).
func binaryKernel(op string, aShape, bShape, yShape []int, relu bool) (*Kernel, error) {
	n := prod(yShape)
	if _, err := binExpr(op, flt(0), flt(0)); err != nil {
		return nil, err
	}
	doc := fmt.Sprintf("%s %v %v -> %v", op, aShape, bShape, yShape)
	if relu {
		doc += ", then relu"
	}
	return elementwiseVec(doc, n,
		[]Param{in("a", prod(aShape)), in("b", prod(bShape)), out("y", n)}, []string{"a", "b", "y"},
		func(i Expr) []Stmt {
			e, _ := binExpr(op, load("a", operandIndex(i, yShape, aShape)), load("b", operandIndex(i, yShape, bShape)))
			if relu {
				e = call(FnMax, e, flt(0))
			}
			return []Stmt{store("y", i, e)}
		}), nil
}

// operandIndex is the flat index of operand x's element for element i of
// y: i itself where x has y's shape, else broadcastIndex's.
func operandIndex(i Expr, y, x []int) Expr {
	if slices.Equal(alignShape(x, len(y)), y) {
		return i
	}
	return broadcastIndex(i, y, x)
}

// binaryBwdKernel computes the gradient of one operand (second false: a,
// true: b) of y = a ∘ b: each element of the operand gathers dy (times the
// other operand for mul, negated for sub's b, divided by b for div's a,
// times −a/b² for div's b) over the axes it was broadcast along, so no
// atomics are needed. The operands are dy, then o (the other operand) for
// mul and div, then s (the operand itself) for div's b, then dx.
func binaryBwdKernel(op string, second bool, aShape, bShape, yShape []int) (*Kernel, error) {
	self, other := aShape, bShape
	if second {
		self, other = bShape, aShape
	}
	// y's index from the operand's index i and the counter r over the
	// axes of y that the operand was broadcast along.
	yIdx, count := reducedIndex(yShape, alignShape(self, len(yShape)))
	term := Expr(load("dy", vr("yi")))
	switch op {
	case "add":
	case "sub":
		if second {
			term = neg(term)
		}
	case "mul":
		term = mul(term, load("o", broadcastIndex(vr("yi"), yShape, other)))
	case "div":
		if second {
			// −dy·a/b², b the thread's own element
			term = div(neg(mul(term, load("o", broadcastIndex(vr("yi"), yShape, other)))), mul(vr("sv"), vr("sv")))
		} else {
			term = div(term, load("o", broadcastIndex(vr("yi"), yShape, other)))
		}
	default:
		return nil, fmt.Errorf("unknown binary op %q", op)
	}
	n := prod(self)
	params := []Param{in("dy", prod(yShape))}
	if op == "mul" || op == "div" {
		params = append(params, in("o", prod(other)))
	}
	var pre []Stmt
	if op == "div" && second {
		params = append(params, in("s", n))
		pre = []Stmt{let("sv", Float, load("s", vr("i")))}
	}
	params = append(params, out("dx", n))
	name := "a"
	if second {
		name = "b"
	}
	doc := fmt.Sprintf("%s backward for %s %v of %v", op, name, self, yShape)
	if count == 1 {
		// Not broadcast: element i of the operand is element i of y.
		return elementwiseVec(doc, n, params, []string{"dy", "o", "s", "dx"}, func(i Expr) []Stmt {
			var s []Stmt
			if op == "div" && second {
				s = append(s, let("sv", Float, load("s", i)))
			}
			return append(s, store("dx", i, rewriteExpr(term, func(e Expr) Expr {
				// dy at yi is element i; o is read at i or broadcast
				if l, ok := e.(Load); ok && l.Buf == "dy" {
					return load(l.Buf, i)
				}
				if l, ok := e.(Load); ok && l.Buf == "o" {
					return load("o", operandIndex(i, yShape, other))
				}
				return e
			})))
		}), nil
	}
	return elementwise(doc, n, params, func(i Expr) []Stmt {
		return append(pre,
			let("acc", Float, flt(0)),
			loop("r", 0, count, 1,
				let("yi", Int, yIdx),
				set("acc", add(vr("acc"), term))),
			store("dx", i, vr("acc")),
		)
	}), nil
}

// transposeKernel is y = x with axes permuted: y.shape[k] = x.shape[perm[k]].
// Axes of size 1 are dropped and axes that stay neighbours are merged
// first (transposeAxes), so the index arithmetic is on the fewest axes.
// When x's last axis stays last, the kernel copies runs of it (one thread
// an element; with vec4, a 16-byte access of four where the run's length
// allows: whole plan buffers are aligned, operands at an offset may not
// be); otherwise it is a tiled transpose through threadgroup memory
// (transposeTiledKernel), which reads x and writes y along their own
// last axes.
func transposeKernel(xShape, perm []int) (*Kernel, error) {
	return transposeKernelVec(xShape, perm, false)
}

func transposeKernelVec(xShape, perm []int, vec4 bool) (*Kernel, error) {
	if len(perm) != len(xShape) {
		return nil, fmt.Errorf("transpose: perm %v does not fit shape %v", perm, xShape)
	}
	seen := make([]bool, len(perm))
	for _, p := range perm {
		if p < 0 || p >= len(xShape) || seen[p] {
			return nil, fmt.Errorf("transpose: perm %v is not a permutation of the axes of shape %v", perm, xShape)
		}
		seen[p] = true
	}
	doc := fmt.Sprintf("transpose %v by %v", xShape, perm)
	n := prod(xShape)
	xs, pm := transposeAxes(xShape, perm)
	if r := len(pm); r >= 2 && pm[r-1] != r-1 {
		return transposeTiledKernel(doc, xs, pm), nil
	}
	ys := make([]int, len(pm))
	for k, p := range pm {
		ys[k] = xs[p]
	}
	xst := stridesOf(xs)
	src := func(i Expr) Expr {
		var idx Expr = i32(0)
		for k, p := range pm {
			idx = add(idx, mul(coord(i, ys, k), i32(xst[p])))
		}
		return idx
	}
	params := []Param{in("x", n), out("y", n)}
	if inner := ys[len(ys)-1]; vec4 && inner%4 == 0 {
		// One thread per four elements of a run: x's strides are all
		// multiples of the run's length, so the source is 16-byte aligned.
		return elementwise(doc+", 4 elements a thread", n/4, params, func(i Expr) []Stmt {
			return []Stmt{
				let("i4", Int, mul(i, i32(4))),
				Load4{"x", src(vr("i4")), [4]string{"v0", "v1", "v2", "v3"}},
				Store4{"y", vr("i4"), [4]Expr{vr("v0"), vr("v1"), vr("v2"), vr("v3")}},
			}
		}), nil
	}
	return elementwise(doc, n, params, func(i Expr) []Stmt { return []Stmt{store("y", i, load("x", src(i)))} }), nil
}

// transposeAxes simplifies a transpose of shape by perm to the same move
// on fewer axes: axes of size 1 are dropped and y's neighbouring axes
// that are neighbours in x, in order, are merged (a [T, H, D] → [H, T, D]
// head split keeps three axes; [B, T, H, D] → [B, H, D, T] becomes
// [B, T, H·D] → [B, H·D, T]). It returns x's shape and the permutation
// on the axes left, at least one.
func transposeAxes(shape, perm []int) ([]int, []int) {
	keep := make([]int, len(shape)) // new index of each kept x axis, or -1
	var xs []int
	for k, d := range shape {
		keep[k] = -1
		if d != 1 {
			keep[k] = len(xs)
			xs = append(xs, d)
		}
	}
	var pm []int
	for _, p := range perm {
		if keep[p] >= 0 {
			pm = append(pm, keep[p])
		}
	}
	if len(xs) == 0 {
		return []int{1}, []int{0}
	}
	// Merge: y axis k+1 follows y axis k in x as well.
	for {
		merged := false
		for k := 0; k+1 < len(pm); k++ {
			if pm[k+1] != pm[k]+1 {
				continue
			}
			a := pm[k]
			xs[a] *= xs[a+1]
			xs = append(xs[:a+1], xs[a+2:]...)
			pm = append(pm[:k+1], pm[k+2:]...)
			for j := range pm {
				if pm[j] > a {
					pm[j]--
				}
			}
			merged = true
			break
		}
		if !merged {
			return xs, pm
		}
	}
}

// transposeTile is the side of a tiled transpose's square tile; a tile
// row in threadgroup memory is one longer, so that a column's elements
// fall in different banks.
const transposeTile = 32

// transposeTiledKernel is a transpose whose last axis moves (transposeAxes'
// shape and perm): every threadgroup moves a 32×32 tile of one matrix
// [A, B], A the x axis that becomes y's last and B x's last. Its 256
// threads read the tile along B (x's contiguous axis: each SIMD group one
// 128-byte row) into threadgroup memory and, after a barrier, write it
// along A (y's contiguous axis). One thread per element reading x a whole
// row apart took 57 µs for a GPT's [64, 256, 6, 64] → [64, 6, 64, 256]
// on an H200, four times its memory traffic's time.
func transposeTiledKernel(doc string, xs, pm []int) *Kernel {
	const t, rowsPer = transposeTile, 8 // threads: t columns × rowsPer rows, each t/rowsPer elements
	r := len(pm)
	xst := stridesOf(xs)
	ys := make([]int, r)
	for k, p := range pm {
		ys[k] = xs[p]
	}
	yst := stridesOf(ys)
	ax := pm[r-1] // x axis of A
	kb := 0       // y axis of B
	for k, p := range pm {
		if p == r-1 {
			kb = k
		}
	}
	nA, nB := xs[ax], xs[r-1]
	tA, tB := ceilDiv(nA, t), ceilDiv(nB, t)
	// The other axes, in y order, number the matrices.
	var oShape, oX, oY []int
	for k, p := range pm {
		if k != r-1 && k != kb {
			oShape, oX, oY = append(oShape, xs[p]), append(oX, xst[p]), append(oY, yst[k])
		}
	}
	mats := prod(oShape)
	body := []Stmt{
		Shared{"tile", t * (t + 1)},
		let("tb", Int, rem(tgidE, i32(tB))),
		let("ta", Int, rem(div(tgidE, i32(tB)), i32(tA))),
		let("lx", Int, rem(lidE, i32(t))),
		let("ly", Int, div(lidE, i32(t))),
	}
	var xb, yb Expr = i32(0), i32(0)
	if mats > 1 {
		body = append(body, let("m", Int, div(tgidE, i32(tA*tB))))
		for k := range oShape {
			c := coord(vr("m"), oShape, k)
			xb, yb = add(xb, mul(c, i32(oX[k]))), add(yb, mul(c, i32(oY[k])))
		}
	}
	body = append(body, let("xb", Int, xb), let("yb", Int, yb))
	// inTile is whether element (a, b) of a tile is in the matrix (nil:
	// every tile is whole).
	inTile := func(a, b Expr) Expr {
		var c []Expr
		if nA%t != 0 {
			c = append(c, lt(a, i32(nA)))
		}
		if nB%t != 0 {
			c = append(c, lt(b, i32(nB)))
		}
		if len(c) == 0 {
			return nil
		}
		return and(c...)
	}
	for s := 0; s < t; s += rowsPer {
		a := add(add(mul(vr("ta"), i32(t)), vr("ly")), i32(s))
		b := add(mul(vr("tb"), i32(t)), vr("lx"))
		body = append(body, whenSome(inTile(a, b),
			store("tile", add(mul(add(vr("ly"), i32(s)), i32(t+1)), vr("lx")), load("x", add(add(vr("xb"), mul(a, i32(xst[ax]))), b))))...)
	}
	body = append(body, Barrier{})
	for s := 0; s < t; s += rowsPer {
		b := add(add(mul(vr("tb"), i32(t)), vr("ly")), i32(s))
		a := add(mul(vr("ta"), i32(t)), vr("lx"))
		body = append(body, whenSome(inTile(a, b),
			store("y", add(add(vr("yb"), mul(b, i32(yst[kb]))), a), load("tile", add(mul(vr("lx"), i32(t+1)), add(vr("ly"), i32(s))))))...)
	}
	n := prod(xs)
	return &Kernel{Doc: doc + fmt.Sprintf(", %d matrices [%d, %d] in %dx%d tiles", mats, nA, nB, t, t),
		Params: []Param{in("x", n), out("y", n)}, Threadgroup: t * rowsPer, Groups: mats * tA * tB, Body: body}
}

// sliceCopyKernel copies between a narrow tensor [outer, l, inner] and the
// slice [offset, offset+l) of axis 1 of a wide tensor [outer, total, inner]:
// concat copies narrow into wide (toWide), its backward (split) the reverse.
func sliceCopyKernel(outer, l, inner, total, offset int, toWide bool) *Kernel {
	n := outer * l * inner
	shape := []int{outer, l, inner}
	wide := add(mul(add(add(mul(coord(vr("i"), shape, 0), i32(total)), i32(offset)), coord(vr("i"), shape, 1)), i32(inner)), coord(vr("i"), shape, 2))
	if toWide {
		return elementwise(fmt.Sprintf("concat slice [%d:%d] of %d", offset, offset+l, total), n,
			[]Param{in("x", n), out("y", outer*total*inner)},
			func(i Expr) []Stmt { return []Stmt{store("y", wide, load("x", i))} })
	}
	return elementwise(fmt.Sprintf("split slice [%d:%d] of %d", offset, offset+l, total), n,
		[]Param{in("dy", outer*total*inner), out("dx", n)},
		func(i Expr) []Stmt { return []Stmt{store("dx", i, load("dy", wide))} })
}

// sgdKernel: d = g + wd·p; v = momentum·v + d (when momentum ≠ 0); p -= lr·v
// (PyTorch's SGD without dampening or Nesterov). lr comes from args.
func sgdKernel(n int, momentum, wd float32) *Kernel {
	params := []Param{argsParam(), in("g", n)}
	if momentum != 0 {
		params = append(params, out("vel", n))
	}
	params = append(params, out("p", n))
	return elementwise(fmt.Sprintf("sgd momentum %g weight decay %g, %d elements", momentum, wd, n), n, params, func(i Expr) []Stmt {
		return append([]Stmt{sgdLR()}, sgdElement("", i, momentum, wd)...)
	})
}

// sgdLR declares the step's learning rate, lr, from args.
func sgdLR() Stmt { return let("lr", Float, call(FnAsFloat, load("args", i32(gpuhost.ArgLR)))) }

// sgdElement updates element i of the param, velocity and gradient named
// p, vel and g followed by suffix, as rt/cpu's SGD does.
func sgdElement(suffix string, i Expr, momentum, wd float32) []Stmt {
	g, vel, p := "g"+suffix, "vel"+suffix, "p"+suffix
	s := []Stmt{let("d", Float, load(g, i))}
	if wd != 0 {
		s = append(s, set("d", add(vr("d"), mul(flt(wd), load(p, i)))))
	}
	if momentum != 0 {
		s = append(s, set("d", add(mul(flt(momentum), load(vel, i)), vr("d"))), store(vel, i, vr("d")))
	}
	return append(s, store(p, i, sub(load(p, i), mul(vr("lr"), vr("d")))))
}

// adamKernel is Adam (decoupled false: L2 weight decay added to the
// gradient) or AdamW (decoupled: p *= 1 − lr·wd first), with bias
// correction 1 − βᵗ computed as 1 − exp(t·ln β) from the step in args.
func adamKernel(n int, beta1, beta2, eps, wd float32, decoupled bool) *Kernel {
	params := []Param{argsParam(), in("g", n), out("m", n), out("v", n), out("p", n)}
	kind := "adam"
	if decoupled {
		kind = "adamw"
	}
	return elementwise(fmt.Sprintf("%s beta1 %g beta2 %g eps %g weight decay %g, %d elements", kind, beta1, beta2, eps, wd, n), n, params, func(i Expr) []Stmt {
		return append(adamScalars(beta1, beta2), adamElement("", i, beta1, beta2, eps, wd, decoupled)...)
	})
}

// adamScalars declares the learning rate and the bias corrections of the
// step (args' step count t): bc = 1 − βᵗ.
func adamScalars(beta1, beta2 float32) []Stmt {
	t := toFloat(load("args", i32(gpuhost.ArgStep)))
	return []Stmt{
		let("lr", Float, call(FnAsFloat, load("args", i32(gpuhost.ArgLR)))),
		let("bc1", Float, sub(flt(1), call(FnExp, mul(t, flt(float32(math.Log(float64(beta1)))))))),
		let("bc2", Float, sub(flt(1), call(FnExp, mul(t, flt(float32(math.Log(float64(beta2)))))))),
	}
}

// adamElement updates element i of the param, moments and gradient named
// p, m, v and g followed by suffix, as rt/cpu's Adam does.
func adamElement(suffix string, i Expr, beta1, beta2, eps, wd float32, decoupled bool) []Stmt {
	g, m, v, p := "g"+suffix, "m"+suffix, "v"+suffix, "p"+suffix
	s := []Stmt{
		let("w", Float, load(p, i)),
		let("d", Float, load(g, i)),
	}
	if wd != 0 {
		if decoupled {
			s = append(s, set("w", sub(vr("w"), mul(mul(vr("lr"), flt(wd)), vr("w")))))
		} else {
			s = append(s, set("d", add(vr("d"), mul(flt(wd), vr("w")))))
		}
	}
	return append(s,
		let("m1", Float, add(mul(flt(beta1), load(m, i)), mul(flt(1-beta1), vr("d")))),
		let("v1", Float, add(mul(flt(beta2), load(v, i)), mul(flt(1-beta2), mul(vr("d"), vr("d"))))),
		store(m, i, vr("m1")),
		store(v, i, vr("v1")),
		store(p, i, sub(vr("w"), div(mul(vr("lr"), div(vr("m1"), vr("bc1"))),
			add(call(FnSqrt, div(vr("v1"), vr("bc2"))), flt(eps))))),
	)
}

// UpdateTensors is the most params one multi-tensor Adam or SGD kernel of
// dialect d updates: four buffers a param (Adam's; SGD's three and a
// bfloat16 twin) and the step arguments within the dialect's buffer
// limit, and at most 64 (CUDA's kernel parameters).
func UpdateTensors(d *Dialect) int {
	if d.MaxBuffers == 0 {
		return 64
	}
	return min(64, (d.MaxBuffers-1)/4)
}

// decaysDoc is the weight decay of a multi-tensor Adam kernel's doc: one
// number when every tensor has it, else each tensor's.
func decaysDoc(decays []float32) string {
	for _, d := range decays {
		if d != decays[0] {
			return fmt.Sprint(decays)
		}
	}
	if len(decays) == 0 {
		return "0"
	}
	return fmt.Sprint(decays[0])
}

// adamMultiKernel is Adam over several params in one launch (the multi-tensor
// update of planner.KAdamMulti): params args, then g, m, v, p of each
// tensor, each tensor running the same arithmetic as adamKernel
// (multiTensor).
func adamMultiKernel(sizes []int, decays []float32, beta1, beta2, eps float32, decoupled bool) *Kernel {
	params := []Param{argsParam()}
	for j, n := range sizes {
		sfx := fmt.Sprint("_", j)
		params = append(params, in("g"+sfx, n), out("m"+sfx, n), out("v"+sfx, n), out("p"+sfx, n))
	}
	chain, groups, total := multiTensor(sizes, func(j int, k Expr) []Stmt {
		return adamElement(fmt.Sprint("_", j), k, beta1, beta2, eps, decays[j], decoupled)
	})
	kind := "adam"
	if decoupled {
		kind = "adamw"
	}
	return &Kernel{
		Doc:    fmt.Sprintf("%s over %d tensors (%d elements), beta1 %g beta2 %g eps %g weight decay %s", kind, len(sizes), total, beta1, beta2, eps, decaysDoc(decays)),
		Params: params, Threadgroup: tgElem, Groups: groups,
		Body: append(adamScalars(beta1, beta2), chain...),
	}
}

// sgdMultiKernel is SGD over several params in one launch (the
// multi-tensor update of planner.KSGDMulti): params args, then g, vel
// (when momentum ≠ 0) and p of each tensor, each tensor running the same
// arithmetic as sgdKernel with its own weight decay (multiTensor).
func sgdMultiKernel(sizes []int, decays []float32, momentum float32) *Kernel {
	params := []Param{argsParam()}
	for j, n := range sizes {
		sfx := fmt.Sprint("_", j)
		params = append(params, in("g"+sfx, n))
		if momentum != 0 {
			params = append(params, out("vel"+sfx, n))
		}
		params = append(params, out("p"+sfx, n))
	}
	chain, groups, total := multiTensor(sizes, func(j int, k Expr) []Stmt {
		return sgdElement(fmt.Sprint("_", j), k, momentum, decays[j])
	})
	return &Kernel{
		Doc:    fmt.Sprintf("sgd over %d tensors (%d elements), momentum %g weight decay %s", len(sizes), total, momentum, decaysDoc(decays)),
		Params: params, Threadgroup: tgElem, Groups: groups,
		Body: append([]Stmt{sgdLR()}, chain...),
	}
}

// multiTensor is the body of a multi-tensor kernel over tensors of sizes,
// element(j, k) updating element k of tensor j, and its grid. Each tensor
// gets whole threadgroups of its own, so no group straddles two tensors;
// a chain of comparisons of the group index finds the tensor.
func multiTensor(sizes []int, element func(j int, k Expr) []Stmt) (chain []Stmt, groups, total int) {
	starts := make([]int, len(sizes)+1) // first group of each tensor
	for j, n := range sizes {
		starts[j] = groups
		groups += ceilDiv(n, tgElem)
		total += n
	}
	starts[len(sizes)] = groups
	// Innermost first: the last tensor's branch, then each earlier one
	// wrapped around it.
	for j := len(sizes) - 1; j >= 0; j-- {
		k := sub(gidE, i32(starts[j]*tgElem))
		body := []Stmt{let("k", Int, k), when(lt(vr("k"), i32(sizes[j])), element(j, vr("k"))...)}
		if chain == nil {
			chain = body
			continue
		}
		chain = []Stmt{If{Cond: lt(tgidE, i32(starts[j+1])), Then: body, Else: chain}}
	}
	return chain, groups, total
}
