package app

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// gradCheckProbes is how many elements of each param the gradient check
// perturbs: those with the largest gradients, where the finite difference
// stands furthest above float32 rounding. The row reports the median
// relative error of the probes: ReLU and max-pool are not smooth, so a
// probe whose step moves some unit across a kink is off by a few percent,
// while a wrong backward pass is off by tens of percent at every probe.
const gradCheckProbes = 5

// gradCheckStep is the finite-difference step, relative to the weight
// (at least 1): small enough that few units cross a kink, large enough
// that the loss difference stands above float32 rounding for most
// gradients. Where it does not (a gradient a thousandth of a loss near
// ln 89, a GPT's first loss, was lost in its rounding: gpt_moby with a
// tied head failed at 0.104 and 0.114 against 0.1), a probe off by more
// than the tolerance is measured again at gradCheckWideStep, about the
// cube root of float32's epsilon, which balances truncation (h²) against
// rounding (ε/h), and keeps the smaller error. A correct backward pass is
// then off only where both steps fail it (rounding at the narrow one, a
// kink crossed by the wide one: lenet5's conv2d2.bias fails the wide step
// alone at 0.124); a wrong one is off at both.
const (
	gradCheckStep     = 1e-3
	gradCheckWideStep = 4e-3
)

// GradCheck compares the gradient of every trainable param, as the plan's
// backward pass computes it, with a central finite difference of the loss
// on one random batch. It checks the whole chain end to end: the planner's
// differentiation (which buffer feeds which backward step, the sums where a
// value is read twice, the views) as well as the kernels. Dropout draws the
// same mask for every evaluation, so the loss is a function of the weights.
func GradCheck(m Model) []SelfTestRow {
	meta := m.Meta()
	initParams(m, 1)
	rng := cpu.NewRand(11)
	randomInputs(meta, rng, m.TrainInput())
	randomLabels(meta, rng, m.TrainLabels())
	const seed = 5
	loss := func() float64 {
		m.SetRand(seed)
		return float64(m.Gradients())
	}
	loss()
	state := m.State()
	type probe struct {
		param *ParamMeta
		index []int
		grad  []float32
	}
	var probes []probe
	for i := range meta.Params {
		p := &meta.Params[i]
		if !p.Trainable || p.Grad < 0 {
			continue
		}
		g := slices.Clone(state[p.Grad : p.Grad+p.Size])
		order := make([]int, len(g))
		for k := range order {
			order[k] = k
		}
		sort.Stable(descending{order, func(k int) float64 { return math.Abs(float64(g[k])) }})
		probes = append(probes, probe{p, order[:min(gradCheckProbes, len(order))], g})
	}
	var rows []SelfTestRow
	for _, pr := range probes {
		row := SelfTestRow{Name: "gradient of " + pr.param.Name + " (finite differences, median of probes)", Tol: 0.1}
		var rels []float64
		for _, k := range pr.index {
			w := &state[pr.param.Offset+k]
			ana := float64(pr.grad[k])
			relAt := func(step float32) float64 {
				orig := *w
				h := step * max(1, float32(math.Abs(float64(orig))))
				*w = orig + h
				up := loss()
				*w = orig - h
				down := loss()
				span := float64((orig + h) - (orig - h))
				*w = orig
				num := (up - down) / span
				rel := math.Abs(num-ana) / math.Max(math.Max(math.Abs(num), math.Abs(ana)), 1e-3)
				if math.IsNaN(rel) {
					row.Err = fmt.Errorf("element %d: analytic %g, numeric %g", k, ana, num)
				}
				return rel
			}
			rel := relAt(gradCheckStep)
			if rel > row.Tol {
				rel = min(rel, relAt(gradCheckWideStep))
			}
			rels = append(rels, rel)
		}
		sort.Sort(sort.Float64Slice(rels))
		row.MaxError = rels[len(rels)/2]
		rows = append(rows, row)
	}
	loss() // leave the gradients of the unperturbed weights in place
	return rows
}

// descending orders indices by a key, largest first, for sort.Stable,
// which keeps equal keys in their order. (sort's one non-generic sort serves
// every program's few sorts: each instantiation of slices.SortFunc is
// kilobytes of machine code in every binary.)
type descending struct {
	index []int
	key   func(int) float64
}

func (d descending) Len() int           { return len(d.index) }
func (d descending) Less(a, b int) bool { return d.key(d.index[a]) > d.key(d.index[b]) }
func (d descending) Swap(a, b int)      { d.index[a], d.index[b] = d.index[b], d.index[a] }
