package planner

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestKeepLess: in regularised (batch norm → relu, batch norm → leaky relu)
// the activations' backward steps read their outputs, and the batch norms'
// outputs are read by nothing after the forward; in residual the add's
// backward reads neither operand; a gelu (whose derivative its output does
// not give) and a leaky relu with a negative slope keep reading x.
func TestKeepLess(t *testing.T) {
	p := mustBuild(t, regularised(), Options{Training: true, Fusion: true})
	fromY := 0
	for _, s := range p.Backward {
		if s.Kernel != KUnaryBwd {
			continue
		}
		if !s.Attr.FromOutput {
			t.Errorf("%s: unary_bwd of %s reads x", s.Layer, chainText(s.Attr.Chain))
			continue
		}
		fromY++
		f := unaryForward(p, &Step{Layer: s.Layer, In: []BufID{forwardInput(p, s.Layer)}})
		if f == nil || s.In[0] != f.Out[0] {
			t.Errorf("%s: unary_bwd reads %v, want its forward's output", s.Layer, s.In)
			continue
		}
		if last := lastReader(p, f.In[0]); last != "forward" {
			t.Errorf("%s: its input %s is still read in %s", s.Layer, p.Buffers[f.In[0]].Name, last)
		}
	}
	if fromY != 2 {
		t.Errorf("regularised: %d activation backward steps read their output, want 2 (relu1, lrelu)", fromY)
	}

	p = mustBuild(t, residual(), Options{Training: true, Fusion: true})
	for _, s := range p.Backward {
		switch s.Kernel {
		case KBinaryBwd:
			if s.In[0] != NoBuf || s.In[1] != NoBuf || len(s.Attr.OperandShapes) != 2 {
				t.Errorf("add's backward reads %v with shapes %v, want neither operand and both shapes", s.In[:2], s.Attr.OperandShapes)
			}
			a, b, err := p.BinaryShapes(&s)
			want := []int{p.Batch, 64}
			if err != nil || !equalShapes(a, want) || !equalShapes(b, want) {
				t.Errorf("add's operand shapes %v %v (%v), want %v twice", a, b, err, want)
			}
		case KUnaryBwd:
			if s.Attr.FromOutput != (s.Attr.Chain[0].Op == "tanh") {
				t.Errorf("%s: unary_bwd(%s) FromOutput %v, want it for tanh only", s.Layer, chainText(s.Attr.Chain), s.Attr.FromOutput)
			}
		}
	}

	// A negative slope maps x < 0 to y > 0: the output cannot tell.
	b := newModel("negslope", 16)
	b.dense("fc", 8)
	b.unary("act", spec.OpLeakyReLU, -0.5)
	b.dense("head", 4)
	p = mustBuild(t, b.model(), Options{Training: true, Fusion: false})
	for _, s := range p.Backward {
		if s.Kernel == KUnaryBwd && s.Attr.FromOutput {
			t.Errorf("leaky relu with slope -0.5 reads its output in the backward")
		}
	}
}

// TestKeepLessVerify: Verify refuses a from-output backward of an op
// whose output does not give its derivative, and a mul's backward that
// reads neither operand.
func TestKeepLessVerify(t *testing.T) {
	p := mustBuild(t, residual(), Options{Training: true, Fusion: true})
	for i := range p.Backward {
		s := &p.Backward[i]
		if s.Kernel == KUnaryBwd && s.Attr.Chain[0].Op == "gelu" {
			s.Attr.FromOutput = true
			if err := Verify(p); err == nil {
				t.Errorf("Verify accepts gelu's backward from its output")
			}
			s.Attr.FromOutput = false
		}
	}
	for i := range p.Backward {
		s := &p.Backward[i]
		if s.Kernel == KBinaryBwd {
			s.Attr.BinOp = "mul"
			if err := Verify(p); err == nil {
				t.Errorf("Verify accepts a mul's backward that reads neither operand")
			}
		}
	}
}

// forwardInput is the input of layer's forward step.
func forwardInput(p *Plan, layer string) BufID {
	for _, s := range p.Forward {
		if s.Layer == layer && len(s.In) > 0 {
			return s.In[0]
		}
	}
	return NoBuf
}

// lastReader is the phase of the last step that reads id's storage.
func lastReader(p *Plan, id BufID) string {
	last := ""
	for _, ph := range []struct {
		name  string
		steps Phase
	}{{"forward", p.Forward}, {"backward", p.Backward}, {"update", p.Update}} {
		for _, s := range ph.steps {
			for _, in := range s.In {
				if in != NoBuf && p.root(in) == p.root(id) {
					last = ph.name
				}
			}
		}
	}
	return last
}
