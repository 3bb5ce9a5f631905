package onnx

import (
	"fmt"
	"slices"
)

// Following a batch of 1 written into the graph as a number. A model
// exported with its batch fixed at 1 (no dynamic_axes) has its Reshapes'
// target shapes folded to numbers: where nn.MultiheadAttention views
// [T, B, D] as [T, B·H, d], the graph says [5, 2, 8], and the batch's 1
// could belong to the first axis ([T·B, H, d]) or to the second
// ([T, B·H, d]); at batch 1 both are the same tensor, at batch 4 they are
// not. A Reshape keeps the order of the elements, so the batch stays
// between the same neighbours; the places next to them that the target's
// sizes allow are the candidates. reshapeFixed keeps every candidate as
// an alternative grouping of the value (an option of a batchChoice), and
// the ops that read it decide, each by what it needs (settle): a MatMul
// of two values needs the batch to lead the first axis, a Gemm, Softmax
// or Slice needs it outside the last axis, a value becomes ordinary again
// (and the model's output must be one) when the batch is first and alone.
// A decision holds for every value that came from the same Reshape. An op
// that can read none of the candidates is reported, naming the Reshape
// that wrote the 1; so is a Reshape of a value whose batch is not yet
// placed, which would multiply the candidates.

// batchChoice is the open question of one Reshape: which of its
// candidate places holds the batch.
type batchChoice struct {
	node string // the Reshape whose target shape holds the 1
	dead []bool // per option: ruled out by a reader
}

// fixedLayout holds the alternative groupings of a lazyLayout whose batch
// a batchChoice has not placed yet: alts[i] is option opts[i].
type fixedLayout struct {
	choice *batchChoice
	alts   [][][]int
	opts   []int
}

// live returns the indexes into alts of the options still possible.
func (f *fixedLayout) live() []int {
	var out []int
	for i, o := range f.opts {
		if !f.choice.dead[o] {
			out = append(out, i)
		}
	}
	return out
}

// refresh makes groups the first grouping still possible, after a reader
// of another value of the same choice ruled options out.
func (lz *lazyLayout) refresh() {
	if lz.fixed == nil {
		return
	}
	if live := lz.fixed.live(); len(live) > 0 {
		lz.groups = lz.fixed.alts[live[0]]
	}
}

// settle keeps the groupings for which ok holds, ruling the others out
// for every value of the same choice, and makes the first its groups. It
// reports false, changing nothing, when none holds.
func (lz *lazyLayout) settle(ok func([][]int) bool) bool {
	if lz.fixed == nil {
		return ok(lz.groups)
	}
	live := lz.fixed.live()
	keep := slices.DeleteFunc(slices.Clone(live), func(i int) bool { return !ok(lz.fixed.alts[i]) })
	if len(keep) == 0 {
		return false
	}
	for _, i := range live {
		if !slices.Contains(keep, i) {
			lz.fixed.choice.dead[lz.fixed.opts[i]] = true
		}
	}
	lz.groups = lz.fixed.alts[keep[0]]
	return true
}

// unplaced is the note an error gets when lz's batch is a fixed 1 that a
// Reshape wrote and whose place is open.
func (lz *lazyLayout) unplaced() string {
	if lz.fixed == nil {
		return ""
	}
	return fmt.Sprintf(" (the batch here is the 1 that Reshape node %s wrote into its target shape, at none of the places this op reads correctly: export with dynamic_axes so that the graph says where the batch is)", lz.fixed.choice.node)
}

// carry gives out, the layout of a value computed from lz, lz's other
// groupings, each through f (nil where the value cannot have it). When
// none is left (a reader of another value of the choice placed the batch
// where this one cannot have it), out keeps the choice with no grouping,
// so that every reader that needs a place refuses it rather than read a
// stale one.
func (lz *lazyLayout) carry(out *lazyLayout, f func([][]int) [][]int) *lazyLayout {
	if lz.fixed == nil {
		return out
	}
	fx := &fixedLayout{choice: lz.fixed.choice}
	for _, i := range lz.fixed.live() {
		if g := f(lz.fixed.alts[i]); g != nil {
			fx.alts = append(fx.alts, g)
			fx.opts = append(fx.opts, lz.fixed.opts[i])
		}
	}
	if len(fx.alts) != 1 {
		out.fixed = fx
	}
	return out
}

// reshapeFixed imports a Reshape of a value whose batch axis moved when
// the graph's batch is a fixed 1 and the target names it nowhere: target
// holds the sizes, the batch's among them as its multiplier.
func (c *nodeCtx) reshapeFixed(lz *lazyLayout, target []int) (string, error) {
	type cand struct {
		groups [][]int
		split  map[int][]int
	}
	// the candidates from each grouping lz may have: a Reshape keeps the
	// order of the elements, so they differ only where lz's groupings
	// order the axes differently
	froms := [][][]int{lz.groups}
	if lz.fixed != nil {
		froms = nil
		for _, i := range lz.fixed.live() {
			froms = append(froms, lz.fixed.alts[i])
		}
	}
	per := make([][]cand, len(froms))
	for j, groups := range froms {
		for bat := range target {
			if g, split, err := regroupFor(lz, groups, target, bat); err == nil {
				per[j] = append(per[j], cand{g, split})
			}
		}
	}
	same := func(a, b []cand) bool {
		return slices.EqualFunc(a, b, func(x, y cand) bool {
			return slices.EqualFunc(x.groups, y.groups, slices.Equal) && mapsEqual(x.split, y.split)
		})
	}
	var cands []cand
	for _, cs := range per {
		switch {
		case len(cs) == 0:
		case cands == nil:
			cands = cs
		case !same(cands, cs):
			return "", unsupported("export with dynamic_axes so that the graph says where the batch is", "the batch (a fixed 1) that Reshape node %s wrote into its target shape is not placed yet, and this Reshape regroups the axes around it differently for each place; mlbuild cannot tell where it is", lz.fixed.choice.node)
		}
	}
	if len(cands) == 0 {
		return "", unsupported("", "the target shape %v does not keep the batch size (a fixed 1 here) where the axes it regroups can hold it; mlbuild's batch axis stays first%s", target, lz.unplaced())
	}
	for _, cd := range cands {
		if !mapsEqual(cd.split, cands[0].split) {
			return "", unsupported("export with dynamic_axes so that the graph says where the batch is", "the target shape %v splits the axes differently depending on where the batch (a fixed 1) is; mlbuild cannot tell which is meant", target)
		}
	}
	if slices.ContainsFunc(per, func(cs []cand) bool { return len(cs) == 0 }) {
		// only some of lz's groupings can be reshaped so: decide them
		lz.settle(func(g [][]int) bool {
			cs := per[slices.IndexFunc(froms, func(f [][]int) bool { return slices.EqualFunc(f, g, slices.Equal) })]
			return len(cs) > 0
		})
	}
	src, renumber := c.splitAxes(lz.src, cands[0].split)
	out := &lazyLayout{src: src}
	var alts [][][]int
	for _, cd := range cands {
		g, err := renumber(cd.groups)
		if err != nil {
			return "", err
		}
		alts = append(alts, g)
	}
	out.groups = alts[0]
	if len(alts) > 1 {
		ch := &batchChoice{node: c.name, dead: make([]bool, len(alts))}
		out.fixed = &fixedLayout{choice: ch, alts: alts, opts: identity(len(alts))}
	}
	return "folded: follows the batch axis (a fixed 1: placed by the ops that read it)", c.setLazyLayout(out)
}

func mapsEqual(a, b map[int][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
