package app

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

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

// GradCheckEnv names the environment variable that bounds the gradient
// check's time in seconds (gradCheckSeconds by default; 0 lifts the
// bound). A check of every param costs 2·gradCheckProbes evaluations of
// the loss and its gradients a param: seconds for the MNIST models, hours
// for an imported EfficientNet at batch 32 (213 params, 3 s an
// evaluation on two threads). Where the whole check would take longer
// than the bound, GradCheck probes one element (the largest gradient) of
// as many params as fit, spread evenly from the first layer to the last,
// and says so in a note that selftest prints apart from the checks.
const GradCheckEnv = "MLBUILD_GRADCHECK_SECONDS"

const gradCheckSeconds = 60

// gradCheckBudget is GradCheckEnv's bound, or 0 for none.
func gradCheckBudget() time.Duration {
	s := strings.TrimSpace(os.Getenv(GradCheckEnv))
	if s == "" {
		return gradCheckSeconds * time.Second
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return gradCheckSeconds * time.Second
	}
	return time.Duration(v * float64(time.Second))
}

// spread returns n of the len indices, evenly from the first to the last.
func spread(n, length int) []int {
	if n >= length {
		n = length
	}
	idx := make([]int, n)
	for i := range idx {
		if n > 1 {
			idx[i] = int(math.Round(float64(i) * float64(length-1) / float64(n-1)))
		}
	}
	return idx
}

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
	start := time.Now()
	loss()
	each := time.Since(start)
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
	var note *SelfTestRow
	if budget := gradCheckBudget(); budget > 0 && time.Duration(2*gradCheckProbes*len(probes))*each > budget {
		all := len(probes)
		var kept []probe
		for _, i := range spread(max(1, int(budget/(2*each))), all) {
			pr := probes[i]
			pr.index = pr.index[:1]
			kept = append(kept, pr)
		}
		probes = kept
		note = &SelfTestRow{Note: fmt.Sprintf("gradient check: %d of %d params, one element each, spread from the first layer to the last, to stay within %v (%.2gs a loss and its gradients); %s=0 checks every param with %d elements",
			len(probes), all, budget, each.Seconds(), GradCheckEnv, gradCheckProbes)}
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
	if note != nil {
		rows = append(rows, *note)
	}
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
