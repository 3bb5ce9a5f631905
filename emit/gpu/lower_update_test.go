package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// sgdSet is one copy of the params of TestSGDMultiMatchesSGD: each
// param's buffer, gradient, velocity and bfloat16 twin (NoBuf: none).
type sgdSet struct {
	param, grad, vel, twin []planner.BufID
}

// TestSGDMultiMatchesSGD lowers, for momentum 0.9 and 0, one copy of four
// params (shorter than a threadgroup, just over two, exactly one, and
// three) updated by one KSGD step each, a second copy updated by one
// KSGDMulti step with the same weight decays, and a third by a KSGDMulti
// step with the first and third param's decays swapped; the first and
// third param have bfloat16 twins. It runs the lowered program on the
// CPU (the kernel server) in the CUDA and Metal dialects: the multi-tensor
// step is one launch, and every param, velocity and twin it leaves is
// bit for bit the per-param steps'; the swapped copy differs in the
// first and third param, so the comparison would catch a decay given to
// the wrong param.
func TestSGDMultiMatchesSGD(t *testing.T) {
	sizes := []int{5, 513, 256, 3}
	decays := []float64{5e-4, 0, 1e-3, 0.1}
	swapped := []float64{1e-3, 0, 5e-4, 0.1}
	twinned := []bool{true, false, true, false}
	p := &planner.Plan{Model: "sgd_multi", Batch: 1, Training: true}
	newSet := func(name string) sgdSet {
		var s sgdSet
		for j, n := range sizes {
			pn := fmt.Sprintf("%s.p%d", name, j)
			w := testBuffer(p, pn, planner.KindParam, n)
			s.param = append(s.param, w)
			s.grad = append(s.grad, testBuffer(p, pn+".grad", planner.KindParamGrad, n))
			s.vel = append(s.vel, testBuffer(p, pn+".velocity", planner.KindOptState, n))
			tw := planner.NoBuf
			if twinned[j] {
				tw = testBuffer(p, pn+".bf16", planner.KindParamBF16, n)
				p.Buffers[tw].Elem = planner.ElemBF16
				p.Twins = append(p.Twins, planner.Twin{Of: w, Twin: tw})
			}
			s.twin = append(s.twin, tw)
		}
		return s
	}
	multi := func(s sgdSet, momentum float64, decays []float64) planner.Step {
		st := planner.Step{Kernel: planner.KSGDMulti, Layer: "multi", Attr: planner.Attr{Momentum: momentum, Decays: decays}}
		for j := range sizes {
			st.In = append(st.In, s.grad[j], s.vel[j])
			st.Out = append(st.Out, s.param[j], s.vel[j])
		}
		return st
	}
	type trial struct {
		momentum           float64
		single, fused, off sgdSet
		multiStep          int // the index of the fused copy's step in Update
	}
	var trials []trial
	for _, momentum := range []float64{0.9, 0} {
		tr := trial{momentum: momentum, single: newSet(fmt.Sprint("single", momentum)), fused: newSet(fmt.Sprint("fused", momentum)), off: newSet(fmt.Sprint("swapped", momentum))}
		for j := range sizes {
			p.Update = append(p.Update, planner.Step{Kernel: planner.KSGD, Layer: fmt.Sprint("p", j),
				In: []planner.BufID{tr.single.grad[j], tr.single.vel[j]}, Out: []planner.BufID{tr.single.param[j], tr.single.vel[j]},
				Attr: planner.Attr{Momentum: momentum, WeightDecay: decays[j]}})
		}
		tr.multiStep = len(p.Update)
		p.Update = append(p.Update, multi(tr.fused, momentum, decays), multi(tr.off, momentum, swapped))
		trials = append(trials, tr)
	}

	// The same starting values in every copy; the twins start at zero.
	r := rand.New(rand.NewPCG(17, 3))
	arena := make([][]float32, len(p.Buffers))
	for _, tr := range trials {
		for j, n := range sizes {
			w, g, v := randVec(r, n, -1, 1), randVec(r, n, -1, 1), randVec(r, n, -0.1, 0.1)
			for _, s := range []sgdSet{tr.single, tr.fused, tr.off} {
				arena[s.param[j]], arena[s.grad[j]], arena[s.vel[j]] = slices.Clone(w), slices.Clone(g), slices.Clone(v)
				if s.twin[j] != planner.NoBuf {
					arena[s.twin[j]] = zeros(n)
				}
			}
		}
	}
	for _, d := range []*Dialect{CUDA, Metal} {
		t.Run(d.Name, func(t *testing.T) {
			prog, err := Lower(p, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trials {
				for _, i := range []int{tr.multiStep, tr.multiStep + 1} {
					if n := len(prog.UpdateSteps[i]); n != 1 {
						t.Errorf("momentum %g: the multi-tensor step is %d ops, want one launch", tr.momentum, n)
					}
				}
			}
			mem := make([][]float32, len(arena))
			for i, a := range arena {
				mem[i] = slices.Clone(a)
			}
			startKernelServer(t, d, prog).run(t, prog.Update, mem, argsVec(0.05, 3, 0))
			same := func(a, b planner.BufID) bool {
				return slices.EqualFunc(mem[a], mem[b], func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
			}
			for _, tr := range trials {
				for j := range sizes {
					what := fmt.Sprintf("momentum %g, param %d (decay %g)", tr.momentum, j, decays[j])
					if slices.Equal(mem[tr.single.param[j]], arena[tr.single.param[j]]) {
						t.Errorf("%s: the per-param step left the param as it was", what)
					}
					if !same(tr.single.param[j], tr.fused.param[j]) {
						t.Errorf("%s: the multi-tensor step's param differs from the per-param step's", what)
					}
					if !same(tr.single.vel[j], tr.fused.vel[j]) {
						t.Errorf("%s: the multi-tensor step's velocity differs from the per-param step's", what)
					}
					if moved := !slices.Equal(mem[tr.single.vel[j]], arena[tr.single.vel[j]]); moved != (tr.momentum != 0) {
						t.Errorf("%s: the velocity changed %v, want %v", what, moved, tr.momentum != 0)
					}
					if tw := tr.single.twin[j]; tw != planner.NoBuf {
						if !same(tw, tr.fused.twin[j]) {
							t.Errorf("%s: the multi-tensor step's bfloat16 twin differs from the per-param step's", what)
						}
						if slices.Equal(mem[tw], zeros(sizes[j])) {
							t.Errorf("%s: the per-param step wrote no twin", what)
						}
					}
					if differs := !same(tr.single.param[j], tr.off.param[j]); differs != (decays[j] != swapped[j]) {
						t.Errorf("%s: with the decays swapped the param differs %v, want %v", what, differs, decays[j] != swapped[j])
					}
				}
			}
		})
	}
}
