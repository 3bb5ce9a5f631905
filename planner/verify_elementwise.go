package planner

import (
	"fmt"
	"strings"
)

// The shape rules of the element-wise kernels: unary chains, broadcasting
// binary ops, dropout and the sum of gradients (checkShapes in verify.go
// dispatches to them).

// unary checks an element-wise chain and its backward.
func (r shapeRules) unary(s *Step) error {
	in, out := s.In, s.Out
	if len(s.Attr.Chain) == 0 {
		return fmt.Errorf("empty chain")
	}
	for _, u := range s.Attr.Chain {
		if !unaryChainOps[u.Op] {
			return fmt.Errorf("unknown element-wise op %q", u.Op)
		}
	}
	if s.Kernel == KUnary {
		return r.same("y", out[0], in[0])
	}
	if s.Attr.FromOutput && (len(s.Attr.Chain) != 1 || !DerivativeFromOutput(s.Attr.Chain[0])) {
		return fmt.Errorf("a backward from the output of %s, whose derivative its output does not give", chainText(s.Attr.Chain))
	}
	var dy2 error
	if len(in) > 2 {
		dy2 = r.same("second dy", in[2], in[0])
	}
	return first(r.same("dy", in[1], in[0]), dy2, r.same("dx", out[0], in[0]))
}

// binary checks a broadcasting binary op and its backward.
func (r shapeRules) binary(s *Step) error {
	in, out := s.In, s.Out
	if s.Attr.BinOp != "add" && s.Attr.BinOp != "sub" && s.Attr.BinOp != "mul" && s.Attr.BinOp != "div" {
		return fmt.Errorf("unknown binary op %q", s.Attr.BinOp)
	}
	if s.Attr.Act != "" && (s.Kernel != KBinary || s.Attr.Act != "relu") {
		return fmt.Errorf("fused activation %q (only a forward binary step takes one, relu: fuse_sum_act.go)", s.Attr.Act)
	}
	as, bs, err := r.p.BinaryShapes(s)
	if err != nil {
		return err
	}
	y, err := broadcast(as, bs)
	if err != nil {
		return err
	}
	if s.Kernel == KBinary {
		return r.is("y", out[0], y)
	}
	if (in[0] == NoBuf || in[1] == NoBuf) && s.Attr.BinOp != "add" && s.Attr.BinOp != "sub" {
		return fmt.Errorf("the backward of %s reads no operands, but its gradients need them", s.Attr.BinOp)
	}
	return first(r.is("dy", in[2], y), r.is("da", out[0], as), r.is("db", out[1], bs))
}

// dropout checks dropout's rate, mask and backward.
func (r shapeRules) dropout(s *Step) error {
	in, out := s.In, s.Out
	if s.Attr.Rate < 0 || s.Attr.Rate >= 1 {
		return fmt.Errorf("dropout rate %g is not in [0, 1)", s.Attr.Rate)
	}
	if s.Kernel == KDropout {
		return first(r.same("y", out[0], in[0]), r.same("mask", out[1], in[0]), r.kindIs(out[1], KindScratch))
	}
	return first(r.same("dy", in[1], in[0]), r.same("dx", out[0], in[0]), r.kindIs(in[0], KindScratch))
}

// accumulate checks the sum of two gradient contributions.
func (r shapeRules) accumulate(s *Step) error {
	in, out := s.In, s.Out
	// a param's gradient: the sum of a tied param's parts (differentiate.go);
	// a gradient sum over micro-batches (accumulate.go)
	return first(r.same("b", in[1], in[0]), r.same("y", out[0], in[0]), r.kindIs(out[0], KindGrad, KindParamGrad, KindGradSum))
}

// unaryChainOps are the ops a KUnary chain may hold.
var unaryChainOps = map[string]bool{
	"relu": true, "leakyrelu": true, "sigmoid": true, "tanh": true, "gelu": true,
	"exp": true, "log": true, "addconst": true, "mulconst": true, "sqrt": true, "powconst": true, "erf": true, "relu6": true,
	"silu": true,
}

// broadcast applies numpy's broadcasting rule to two shapes of one rank.
func broadcast(a, b []int) ([]int, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("shapes %s and %s differ in rank", shapeString(a), shapeString(b))
	}
	y := make([]int, len(a))
	for i := range a {
		switch {
		case a[i] == b[i], b[i] == 1:
			y[i] = a[i]
		case a[i] == 1:
			y[i] = b[i]
		default:
			return nil, fmt.Errorf("shapes %s and %s do not broadcast", shapeString(a), shapeString(b))
		}
	}
	return y, nil
}

// chainText names a chain's ops, "relu" or "addconst → relu".
func chainText(ch []UnaryOp) string { return strings.Join(ChainOps(ch), " → ") }

// ChainOps lists the names of a chain's ops, in order.
func ChainOps(ch []UnaryOp) []string {
	ops := make([]string, len(ch))
	for i, u := range ch {
		ops[i] = u.Op
	}
	return ops
}
