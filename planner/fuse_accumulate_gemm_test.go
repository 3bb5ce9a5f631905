package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// accumulating is the CPU Target with GemmAccumulate alone (the CPU and
// GPU targets have LayerNormAccumulate too).
func accumulating() Target {
	t := keeping()
	t.Name = "cpu with gemm accumulate"
	t.GemmAccumulate = true
	return t
}

// keeping is the CPU Target without GemmAccumulate and
// LayerNormAccumulate: it keeps every accumulate step.
func keeping() Target {
	t := CPU
	t.Name = "cpu keeping its accumulate steps"
	t.GemmAccumulate, t.LayerNormAccumulate = false, false
	return t
}

// qkv is a value read by three dense layers, as a transformer block's
// layer-norm output is by q, k and v.
func qkv() *spec.Model {
	b := newModel("qkv", 6)
	b.dense("h", 8)
	r := b.unary("r", spec.OpReLU, 0)
	q := b.dense("q", 8, r)
	k := b.dense("k", 8, r)
	v := b.dense("v", 8, r)
	b.binary("qk", spec.OpAdd, q, k)
	b.binary("qkv", spec.OpAdd, b.last(), v)
	b.dense("out", 10)
	return b.model()
}

// denseAndTanh is a value read by a dense layer and a tanh, the dense
// layer first in the forward (denseFirst) or second: its backward then
// runs second or first, and its contribution is the accumulate's second
// operand or its first.
func denseAndTanh(denseFirst bool) *spec.Model {
	name := "tanh_dense"
	if denseFirst {
		name = "dense_tanh"
	}
	b := newModel(name, 6)
	b.dense("h", 8)
	r := b.unary("r", spec.OpReLU, 0)
	var d, u string
	if denseFirst {
		d = b.dense("d", 8, r)
		u = b.unary("u", spec.OpTanh, 0, r)
	} else {
		u = b.unary("u", spec.OpTanh, 0, r)
		d = b.dense("d", 8, r)
	}
	b.binary("sum", spec.OpAdd, d, u)
	b.dense("out", 10)
	return b.model()
}

// twoTanh is a value read by two steps, neither a dense layer.
func twoTanh() *spec.Model {
	b := newModel("two_tanh", 6)
	b.dense("h", 8)
	r := b.unary("r", spec.OpReLU, 0)
	u := b.unary("u", spec.OpTanh, 0, r)
	w := b.unary("w", spec.OpSigmoid, 0, r)
	b.binary("sum", spec.OpAdd, u, w)
	b.dense("out", 10)
	return b.model()
}

// accumulates lists the layers of a phase's accumulate steps.
func accumulates(ph Phase) []string {
	var layers []string
	for _, s := range ph {
		if s.Kernel == KAccumulate {
			layers = append(layers, s.Layer)
		}
	}
	return layers
}

// addsDx lists the layers of a phase's gemm_bwd steps that add into dx.
func addsDx(ph Phase) []string {
	var layers []string
	for _, s := range ph {
		if s.Kernel == KGemmBwd && s.Attr.AccumulateDx {
			layers = append(layers, s.Layer)
		}
	}
	return layers
}

// TestFuseAccumulateGemm builds each model for a Target that keeps the
// accumulate steps and for one with GemmAccumulate, and checks which
// accumulate steps are gone, which gemm_bwd steps add into dx, that each
// dx that adds shares the value's gradient storage with every other
// contribution, and that it runs after every other writer of that storage
// and before every reader.
func TestFuseAccumulateGemm(t *testing.T) {
	for _, tc := range []struct {
		model   func() *spec.Model
		cpu     []string // the layers of the kept plan's accumulate steps (r is h's epilogue)
		left    []string // those left with GemmAccumulate
		adds    []string // the gemm_bwd steps that add into dx, in order
		writers []string // the layers of the steps that write r's gradient, in order
	}{
		{qkv, []string{"h", "h"}, nil, []string{"k", "q"}, []string{"v", "k", "q"}},
		// the dense layer's backward runs second: it adds in its place
		{func() *spec.Model { return denseAndTanh(true) }, []string{"h"}, nil, []string{"d"}, []string{"u", "d"}},
		// the dense layer's backward runs first: it moves after the tanh's
		{func() *spec.Model { return denseAndTanh(false) }, []string{"h"}, nil, []string{"d"}, []string{"u", "d"}},
		{twoTanh, []string{"h"}, []string{"h"}, nil, nil},
	} {
		m := tc.model()
		t.Run(m.Name, func(t *testing.T) {
			cpu := mustBuild(t, m, Options{Batch: 4, Training: true, Fusion: true, Target: keeping()})
			if got := accumulates(cpu.Backward); !slices.Equal(got, tc.cpu) || len(addsDx(cpu.Backward)) > 0 {
				t.Fatalf("kept plan: accumulate steps of %v, gemm_bwd adding dx of %v; want %v and none", got, addsDx(cpu.Backward), tc.cpu)
			}
			p := mustBuild(t, tc.model(), Options{Batch: 4, Training: true, Fusion: true, Target: accumulating()})
			if got := accumulates(p.Backward); !slices.Equal(got, tc.left) {
				t.Errorf("accumulate steps of %v left, want %v", got, tc.left)
			}
			if got := addsDx(p.Backward); !slices.Equal(got, tc.adds) {
				t.Errorf("gemm_bwd adding dx: %v, want %v", got, tc.adds)
			}
			if got, want := len(cpu.Backward)-len(p.Backward), len(tc.cpu)-len(tc.left); got != want {
				t.Errorf("%d backward steps fewer, want %d", got, want)
			}
			if tc.writers == nil {
				return
			}
			// r's gradient: the storage that the backward of r's producer
			// (h, whose epilogue is r) reads as dy.
			var sum BufID = NoBuf
			at := -1
			for i, s := range p.Backward {
				if s.Kernel == KGemmBwd && s.Layer == "h" {
					sum, at = p.root(s.In[3]), i
				}
			}
			if sum == NoBuf {
				t.Fatal("no backward of h")
			}
			var writers []string
			for i, s := range p.Backward {
				for k, id := range s.Out {
					if id == NoBuf || p.root(id) != sum {
						continue
					}
					writers = append(writers, s.Layer)
					if i > at {
						t.Errorf("%s writes r's gradient after h's backward read it", s.Layer)
					}
					if adds := s.Kernel == KGemmBwd && k == 0 && s.Attr.AccumulateDx; adds == (len(writers) == 1) {
						t.Errorf("writer %d of r's gradient, %s: adds into it %v; want only the later writers to add", len(writers), s.Layer, adds)
					}
				}
			}
			if !slices.Equal(writers, tc.writers) {
				t.Errorf("r's gradient %s is written by %v, want %v", p.Buffers[sum].Name, writers, tc.writers)
			}
			if p.Buffers[sum].Name != "r.out.grad" && p.Buffers[sum].Name != "h.out.grad" {
				t.Errorf("r's gradient is stored in %s, want the gradient's own name", p.Buffers[sum].Name)
			}
			var fusions []string
			for _, f := range p.Fusions {
				if strings.Contains(f, "dx +=") {
					fusions = append(fusions, f)
				}
			}
			if len(fusions) != len(tc.adds) {
				t.Errorf("fusions %q: want one line for each of %v", fusions, tc.adds)
			}
			// mlbuild plan shows the steps that add
			var text strings.Builder
			if err := WriteText(&text, p); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(text.String(), "gemm_bwd(dx +=)"); n != len(tc.adds) {
				t.Errorf("mlbuild plan shows %d gemm_bwd(dx +=) steps, want %d:\n%s", n, len(tc.adds), text.String())
			}
		})
	}
}

// TestFuseAccumulateGemmNeedsFusion checks that the pass leaves plans built
// without fusion as they are.
func TestFuseAccumulateGemmNeedsFusion(t *testing.T) {
	p := mustBuild(t, qkv(), Options{Batch: 4, Training: true, Fusion: false, Target: accumulating()})
	if got := accumulates(p.Backward); len(got) != 2 || len(addsDx(p.Backward)) > 0 {
		t.Errorf("without fusion: accumulate steps of %v and gemm_bwd adding dx of %v, want two and none", got, addsDx(p.Backward))
	}
}

// TestVerifyAccumulateDx checks Verify's rules for a gemm_bwd that adds
// into dx: an earlier step wrote the sum, no step has read it yet, and
// only a gemm_bwd with dx adds.
func TestVerifyAccumulateDx(t *testing.T) {
	build := func() *Plan {
		p := mustBuild(t, qkv(), Options{Batch: 4, Training: true, Fusion: true, Target: accumulating()})
		if err := Verify(p); err != nil {
			t.Fatalf("the folded plan: %v", err)
		}
		return p
	}
	index := func(p *Plan, layer string, k Kernel) int {
		for i, s := range p.Backward {
			if s.Layer == layer && s.Kernel == k {
				return i
			}
		}
		t.Fatalf("no %s step of %s", k, layer)
		return -1
	}
	move := func(p *Plan, from, to int) {
		s := p.Backward[from]
		p.Backward = slices.Insert(slices.Delete(p.Backward, from, from+1), to, s)
	}
	for _, tc := range []struct {
		name   string
		break_ func(p *Plan)
		want   string
	}{
		{"adds before the first writer", func(p *Plan) {
			move(p, index(p, "k", KGemmBwd), index(p, "v", KGemmBwd))
		}, "before any step writes it"},
		{"adds after a reader", func(p *Plan) {
			move(p, index(p, "q", KGemmBwd), index(p, "h", KGemmBwd))
		}, "after a step read it"},
		{"first writer adds", func(p *Plan) {
			p.Backward[index(p, "v", KGemmBwd)].Attr.AccumulateDx = true
		}, "before any step writes it"},
		{"another kernel adds", func(p *Plan) {
			p.Backward[index(p, "qk", KBinaryBwd)].Attr.AccumulateDx = true
		}, "adds into dx"},
		{"a gemm_bwd without dx adds", func(p *Plan) {
			s := &p.Backward[index(p, "h", KGemmBwd)]
			s.Out[0], s.Attr.AccumulateDx = NoBuf, true
		}, "adds into dx"},
	} {
		p := build()
		tc.break_(p)
		err := Verify(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify says %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
