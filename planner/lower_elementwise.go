package planner

import "github.com/mlbuild/mlbuild/spec"

// The lowering of element-wise ops: unary, binary with broadcasting, dropout
// (lowerNode and declareParams in lower.go dispatch to it).

// unaryOps maps element-wise spec ops to their chain op.
var unaryOps = map[spec.Op]string{
	spec.OpReLU: "relu", spec.OpLeakyReLU: "leakyrelu", spec.OpSigmoid: "sigmoid",
	spec.OpTanh: "tanh", spec.OpGELU: "gelu", spec.OpExp: "exp", spec.OpLog: "log",
	spec.OpAddConst: "addconst", spec.OpMulConst: "mulconst",
	spec.OpSqrt: "sqrt", spec.OpPowConst: "powconst", spec.OpErf: "erf",
	spec.OpReLU6: "relu6",
}

// unaryConstants are the element-wise ops with a constant (UnaryOp.Alpha).
var unaryConstants = map[spec.Op]bool{spec.OpLeakyReLU: true, spec.OpAddConst: true, spec.OpMulConst: true, spec.OpPowConst: true}

// binaryOps maps two-operand element-wise spec ops to their BinOp.
var binaryOps = map[spec.Op]string{spec.OpAdd: "add", spec.OpSub: "sub", spec.OpMul: "mul", spec.OpDiv: "div"}

// lowerUnary lowers an element-wise op to a unary step of a one-op chain.
func (l *lowering) lowerUnary(n *spec.Node, op string) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	u := UnaryOp{Op: op}
	if unaryConstants[n.Op] {
		u.Alpha = n.Alpha
	}
	l.emit(n, KUnary, []BufID{x}, []BufID{l.output(n)}, Attr{Chain: []UnaryOp{u}})
	return nil
}

// lowerBinary lowers add, sub and mul.
func (l *lowering) lowerBinary(n *spec.Node, op string) error {
	a, err := l.input(n, 0)
	if err != nil {
		return err
	}
	b, err := l.input(n, 1)
	if err != nil {
		return err
	}
	rank := max(len(l.p.shapeOf(a)), len(l.p.shapeOf(b)))
	a, b = l.padRank(n, a, rank, "a"), l.padRank(n, b, rank, "b")
	l.emit(n, KBinary, []BufID{a, b}, []BufID{l.output(n)}, Attr{BinOp: op})
	return nil
}

// padRank views x as a shape of rank with leading 1s inserted after the
// batch axis, so that per-sample broadcasting (numpy's, aligned right) is
// still right once the batch axis leads both operands.
func (l *lowering) padRank(n *spec.Node, x BufID, rank int, which string) BufID {
	s := l.p.shapeOf(x)
	if len(s) >= rank {
		return x
	}
	padded := []int{s[0]}
	for range rank - len(s) {
		padded = append(padded, 1)
	}
	padded = append(padded, s[1:]...)
	return l.p.addView(n.Name+"."+which+"_view", x, padded)
}

// lowerDropout lowers dropout: a step with its mask in training, a view of
// the input in inference.
func (l *lowering) lowerDropout(n *spec.Node) error {
	x, err := l.input(n, 0)
	if err != nil {
		return err
	}
	if !l.training {
		// Evaluation mode: dropout is the identity, so a view suffices.
		l.value[n.Name] = l.p.addView(n.Name+".out", x, l.p.shapeOf(x))
		return nil
	}
	y := l.output(n)
	mask := l.p.addBuffer(n.Name+".mask", KindScratch, l.p.shapeOf(y))
	l.emit(n, KDropout, []BufID{x}, []BufID{y, mask}, Attr{Rate: n.Rate})
	return nil
}
