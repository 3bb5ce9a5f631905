package planner

import "fmt"

// keepLess shortens how long the forward's activations stay in memory for
// the backward, by rewriting two kinds of backward step that read a value
// they do not need:
//
//   - An activation's backward (unary_bwd of a one-op chain whose
//     derivative is a function of its output: relu, leaky relu with a slope
//     of 0 or more, relu6, sigmoid, tanh, exp) reads the chain's output y
//     instead of its input x (Attr.FromOutput). y is usually kept anyway,
//     as the next layer's input, while x, the batch norm's or the residual
//     sum's output, is then read by nothing after the forward and its
//     memory is reused at once. In CIFAR ResNet-18 at batch 128 this is a
//     third of the activations a training step keeps (PyTorch's in-place
//     ReLU saves its output for the same reason).
//   - The backward of an add or a sub (binary_bwd) needs only dy and the
//     operands' shapes: it reads neither operand (In[0] and In[1] become
//     NoBuf and Attr.OperandShapes keeps their shapes), so a residual
//     block's two branches are not kept alive by the sum.
//
// Before: Backward is differentiated (each unary_bwd reads its forward
// step's input x, each binary_bwd reads a and b). After: every unary_bwd
// of such a chain whose x and y are written by its forward step alone
// reads y and has Attr.FromOutput; every binary_bwd of add or sub has NoBuf
// operands and Attr.OperandShapes. The arithmetic is the same, bit for
// bit on the CPU; buffers, IDs and the order of steps are unchanged.
func keepLess(p *Plan) {
	writers := map[BufID]int{}
	for _, s := range p.allSteps() {
		for _, o := range s.Out {
			writers[p.root(o)]++
		}
	}
	soleWriter := func(id BufID) bool { return writers[p.root(id)] == 1 }
	for i := range p.Backward {
		s := &p.Backward[i]
		switch {
		case s.Kernel == KUnaryBwd && !s.Attr.FromOutput && len(s.Attr.Chain) == 1 && DerivativeFromOutput(s.Attr.Chain[0]):
			fwd := unaryForward(p, s)
			if fwd == nil || !soleWriter(fwd.In[0]) || !soleWriter(fwd.Out[0]) {
				continue
			}
			s.In[0], s.Attr.FromOutput = fwd.Out[0], true
		case s.Kernel == KBinaryBwd && (s.Attr.BinOp == "add" || s.Attr.BinOp == "sub") && s.In[0] != NoBuf && s.In[1] != NoBuf:
			s.Attr.OperandShapes = [][]int{p.shapeOf(s.In[0]), p.shapeOf(s.In[1])}
			s.In[0], s.In[1] = NoBuf, NoBuf
		}
	}
}

// unaryForward returns the forward unary step whose backward s is: the
// step of s's layer that reads s's x.
func unaryForward(p *Plan, s *Step) *Step {
	for i := range p.Forward {
		f := &p.Forward[i]
		if f.Kernel == KUnary && f.Layer == s.Layer && len(f.In) == 1 && f.In[0] == s.In[0] && len(f.Out) == 1 {
			return f
		}
	}
	return nil
}

// DerivativeFromOutput reports whether op's derivative at x is a function
// of op(x) alone, so that its backward may read the output instead of the
// input (Attr.FromOutput). For relu, relu6 and leaky relu with a slope of
// 0 or more, x is inside the linear part exactly when op(x) is.
func DerivativeFromOutput(op UnaryOp) bool {
	switch op.Op {
	case "relu", "relu6", "sigmoid", "tanh", "exp":
		return true
	case "leakyrelu":
		return op.Alpha >= 0
	}
	return false
}

// BinaryShapes returns the shapes of a binary or binary_bwd step's
// operands a and b: their buffers' shapes, or Attr.OperandShapes for a
// backward that reads neither (keep_less.go).
func (p *Plan) BinaryShapes(s *Step) (a, b []int, err error) {
	if len(s.In) < 2 {
		return nil, nil, fmt.Errorf("%s of %q with %d inputs", s.Kernel, s.Layer, len(s.In))
	}
	var as, bs []int
	if s.In[0] != NoBuf {
		as = p.shapeOf(s.In[0])
	}
	if s.In[1] != NoBuf {
		bs = p.shapeOf(s.In[1])
	}
	return BinaryShapes(s, as, bs)
}

// BinaryShapes is Plan.BinaryShapes for an emitter that has the shapes of
// s's In[0] and In[1] buffers at hand (anything where they are NoBuf).
func BinaryShapes(s *Step, a, b []int) ([]int, []int, error) {
	if len(s.In) >= 2 && s.In[0] != NoBuf && s.In[1] != NoBuf {
		return a, b, nil
	}
	if len(s.Attr.OperandShapes) != 2 {
		return nil, nil, fmt.Errorf("%s of %q reads no operands but has %d operand shapes", s.Kernel, s.Layer, len(s.Attr.OperandShapes))
	}
	return s.Attr.OperandShapes[0], s.Attr.OperandShapes[1], nil
}
