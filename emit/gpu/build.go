package gpu

import "github.com/mlbuild/mlbuild/rt/gpuhost"

// Constructors for the generators: short names and a little constant folding
// (x+0, x*1, x/1) so that generated code reads like hand-written code.

func i32(v int) Expr     { return IntLit{int64(v)} }
func u32(v uint32) Expr  { return UintLit{v} }
func flt(v float32) Expr { return FloatLit{v} }
func vr(name string) Expr {
	return Var{name}
}

var (
	gidE    Expr = Builtin{GlobalID}
	lidE    Expr = Builtin{LocalID}
	tgidE   Expr = Builtin{GroupID}
	tgsizeE Expr = Builtin{GroupSize}
)

func isInt(e Expr, v int64) bool {
	l, ok := e.(IntLit)
	return ok && l.V == v
}

func add(a, b Expr) Expr {
	if isInt(a, 0) {
		return b
	}
	if isInt(b, 0) {
		return a
	}
	return Binary{OpAdd, a, b}
}
func sub(a, b Expr) Expr {
	if isInt(b, 0) {
		return a
	}
	return Binary{OpSub, a, b}
}
func mul(a, b Expr) Expr {
	if isInt(a, 1) {
		return b
	}
	if isInt(b, 1) {
		return a
	}
	if isInt(a, 0) || isInt(b, 0) {
		return i32(0)
	}
	return Binary{OpMul, a, b}
}
func div(a, b Expr) Expr {
	if isInt(b, 1) {
		return a
	}
	return Binary{OpDiv, a, b}
}
func rem(a, b Expr) Expr {
	if isInt(b, 1) {
		return i32(0)
	}
	return Binary{OpRem, a, b}
}
func lt(a, b Expr) Expr { return Binary{OpLt, a, b} }
func le(a, b Expr) Expr { return Binary{OpLe, a, b} }
func gt(a, b Expr) Expr { return Binary{OpGt, a, b} }
func ge(a, b Expr) Expr { return Binary{OpGe, a, b} }
func eq(a, b Expr) Expr { return Binary{OpEq, a, b} }
func ne(a, b Expr) Expr { return Binary{OpNe, a, b} }
func neg(a Expr) Expr   { return Unary{OpNeg, a} }
func sel(c, t, f Expr) Expr {
	return Select{c, t, f}
}
func call(fn Func, args ...Expr) Expr { return Call{fn, args} }
func load(buf string, idx Expr) Expr  { return Load{buf, idx} }
func toFloat(e Expr) Expr             { return Cast{Float, e} }

// and joins conditions with &&, dropping nils.
func and(cs ...Expr) Expr {
	var r Expr
	for _, c := range cs {
		if c == nil {
			continue
		}
		if r == nil {
			r = c
		} else {
			r = Binary{OpAnd, r, c}
		}
	}
	if r == nil {
		return Binary{OpEq, i32(0), i32(0)}
	}
	return r
}

func let(name string, t Type, init Expr) Stmt { return Let{name, t, init} }
func set(name string, v Expr) Stmt            { return Assign{name, v} }
func store(buf string, idx, v Expr) Stmt      { return Store{buf, idx, v} }
func storeBF16(buf string, idx, v Expr) Stmt  { return StoreBF16{buf, idx, v} }
func when(c Expr, then ...Stmt) Stmt          { return If{Cond: c, Then: then} }
func loop(v string, from, to, step int, body ...Stmt) Stmt {
	return For{v, i32(from), i32(to), i32(step), body}
}

// in and out declare const and mutable float buffers of n elements.
func in(name string, n int) Param  { return Param{Name: name, Elem: Float, Size: n} }
func out(name string, n int) Param { return Param{Name: name, Elem: Float, Mutable: true, Size: n} }

// outBF16 is a mutable parameter of n bfloat16 elements (a GEMM operand's
// twin, written with StoreBF16).
func outBF16(name string, n int) Param { return Param{Name: name, Elem: BF16, Mutable: true, Size: n} }

// argsParam is the per-step argument buffer (see StepArgs).
func argsParam() Param { return Param{Name: "args", Elem: Uint, Size: gpuhost.StepArgsLen} }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// pow2AtMost returns the largest power of two ≤ min(n, limit), at least 1.
func pow2AtMost(n, limit int) int {
	p := 1
	for p*2 <= n && p*2 <= limit {
		p *= 2
	}
	return p
}

func prod(s []int) int {
	p := 1
	for _, d := range s {
		p *= d
	}
	return p
}

// stridesOf returns the row-major strides of shape.
func stridesOf(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for k := len(shape) - 1; k >= 0; k-- {
		st[k] = s
		s *= shape[k]
	}
	return st
}

// coord is the k-th coordinate of flat row-major index i in shape.
func coord(i Expr, shape []int, k int) Expr {
	st := stridesOf(shape)
	c := div(i, i32(st[k]))
	if k > 0 {
		c = rem(c, i32(shape[k]))
	}
	return c
}
