package onnx

import (
	"fmt"
	"slices"
)

// Following the batch axis where PyTorch's nn.MultiheadAttention moves it.
// Even with batch_first=True, PyTorch 1.13 writes its attention
// sequence-first:
//
//	x [B, T, D] → Transpose(1, 0, 2) → [T, B, D] → MatMul, Add, Slices (q, k, v)
//	→ Reshape [T, B·H, d] → Transpose → [B·H, T, d] → MatMul, Softmax, MatMul
//	→ Transpose → Reshape [T·B, D] → Gemm → Reshape [T, B, D] → Transpose → [B, T, D]
//
// mlbuild's values have the batch first. A lazyLayout holds such an ONNX
// value as a real value (src: batch first, per-sample shape S) and, for
// each ONNX axis, the axes of src it merges, outer first, with -1 for the
// batch: [T, B·H, d] over src [B, T, H, d] is [[0], [-1, 1], [2]]. A
// Transpose permutes the groups and a Reshape regroups them (splitting an
// axis of src by a reshape layer when it must), both writing nothing; ops
// on the last axis (MatMul by a constant, Gemm, Softmax, a bias, Slices of
// features) and element-wise ops with a scalar run on src; a MatMul of two
// such values first transposes each src so that its axes come in the ONNX
// order, batch first. A value whose groups are [[-1], [0], [1], …] is an
// ordinary value again.

type lazyLayout struct {
	src    *value  // the data: a runtime value with no pending view
	groups [][]int // per ONNX axis, the src axes it merges (-1: the batch)
	// reported is set once a node that cannot read it was reported
	reported bool
	// fixed holds the other groupings the value may have while the place
	// of a batch fixed at 1 is open (batch_fixed.go); nil when known
	fixed *fixedLayout
}

// lazyConsumers are the ops that read a lazyLayout value.
var lazyConsumers = map[string]bool{"Transpose": true, "Reshape": true, "Shape": true, "MatMul": true, "Gemm": true,
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Slice": true, "Split": true, "Softmax": true}

// size is the size of src axis f (not the batch).
func (lz *lazyLayout) size(f int) int { return lz.src.shape[f] }

// dims returns the ONNX dims, the batch's group as its multiplier (the
// product of its other axes), and which group holds the batch.
func (lz *lazyLayout) dims() ([]int, int) {
	out, bat := make([]int, len(lz.groups)), -1
	for i, g := range lz.groups {
		out[i] = 1
		for _, f := range g {
			if f < 0 {
				bat = i
				continue
			}
			out[i] *= lz.size(f)
		}
	}
	return out, bat
}

// setLazy binds the node's output to src seen through groups: src itself
// when the groups are the plain batch-first layout.
func (c *nodeCtx) setLazy(src *value, groups [][]int) error {
	return c.setLazyLayout(&lazyLayout{src: src, groups: groups})
}

// setLazyLayout binds the node's output to lz: src itself when lz can be
// the plain batch-first layout (which decides an open batch place).
func (c *nodeCtx) setLazyLayout(lz *lazyLayout) error {
	src := lz.src
	if lz.settle(func(g [][]int) bool { _, ok := inOrder(src, g); return ok }) {
		// batch first, the other axes in order: a reshape at most
		merge, _ := inOrder(src, lz.groups)
		plain, _ := c.order(&lazyLayout{src: src, groups: lz.groups}, identity(len(src.shape)), merge)
		return c.setOutput(plain)
	}
	if err := c.setOutput(&value{lazy: lz}); err != nil {
		return err
	}
	// reads of the lazy value are reads of src's layer (folds check them)
	c.im.layerValues[src.layer] = append(c.im.layerValues[src.layer], c.n.Outputs[0])
	return nil
}

// inOrder reports whether groups hold the batch alone first, then src's
// axes in order, and how many each group merges.
func inOrder(src *value, groups [][]int) ([]int, bool) {
	if len(groups) == 0 || !slices.Equal(groups[0], []int{-1}) {
		return nil, false
	}
	var merge []int
	next := 0
	for _, g := range groups[1:] {
		if len(g) == 0 {
			return nil, false
		}
		for _, f := range g {
			if f != next {
				return nil, false
			}
			next++
		}
		merge = append(merge, len(g))
	}
	return merge, next == len(src.shape)
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// lazyOf returns input i as a lazyLayout: its own, or the plain layout of
// an ordinary runtime value (materialized: no pending view).
func (c *nodeCtx) lazyOf(i int) *lazyLayout {
	v := c.ins[i]
	if v.lazy != nil {
		v.lazy.refresh()
		return v.lazy
	}
	c.im.materialize(v)
	g := [][]int{{-1}}
	for f := range v.shape {
		g = append(g, []int{f})
	}
	return &lazyLayout{src: &value{layer: v.layer, lshape: v.lshape, shape: v.shape}, groups: g}
}

// order rewrites src so that its axes come in the order given (the src
// axes, batch excluded), merged as merge says (per output axis, how many
// of the ordered axes), writing a transpose and a reshape when needed. It
// returns the new src and the renumbered groups.
func (c *nodeCtx) order(lz *lazyLayout, order []int, merge []int) (*value, [][]int) {
	src, out := c.orderLayout(lz, order, merge)
	return src, out.groups
}

// orderLayout is order, returning the new layout with lz's other
// groupings (batch_fixed.go) renumbered alike.
func (c *nodeCtx) orderLayout(lz *lazyLayout, order []int, merge []int) (*value, *lazyLayout) {
	src := lz.src
	ident := true
	for i, f := range order {
		ident = ident && f == i
	}
	if !ident {
		shape := make([]int, len(order))
		for i, f := range order {
			shape[i] = lz.size(f)
		}
		t := c.newLayer("transpose", shape)
		t.Fields = []Field{{"perm", slices.Clone(order)}}
		src = c.im.addLayer(t, src)
	}
	// renumber: src axis order[i] is now axis i, then merged
	pos := map[int]int{-1: -1}
	merged, k := []int{}, 0
	for j, n := range merge {
		d := 1
		for range n {
			pos[order[k]] = j
			d *= src.shape[k]
			k++
		}
		merged = append(merged, d)
	}
	if !slices.Equal(merged, src.shape) {
		r := c.newLayer("reshape", merged)
		r.Fields = []Field{{"shape", slices.Clone(merged)}}
		src = c.im.addLayer(r, src)
	}
	renumber := func(from [][]int) [][]int {
		var groups [][]int
		seen := map[int]bool{}
		for _, g := range from {
			var ng []int
			for _, f := range g {
				p := pos[f]
				if len(ng) > 0 && ng[len(ng)-1] == p {
					continue
				}
				if p >= 0 && seen[p] {
					// the batch sits inside axes merged here: this
					// grouping cannot be held over the new src
					return nil
				}
				seen[p] = true
				ng = append(ng, p)
			}
			groups = append(groups, ng)
		}
		return groups
	}
	out := &lazyLayout{src: src, groups: renumber(lz.groups)}
	return src, lz.carry(out, renumber)
}

// batchFirst lays src out in the ONNX order, each group one axis, for
// ops that need it (a MatMul of two values): the batch must lead its
// group and its group must be the first.
func (c *nodeCtx) batchFirst(lz *lazyLayout) (*value, *lazyLayout, error) {
	if !lz.settle(func(g [][]int) bool { return len(g[0]) > 0 && g[0][0] == -1 }) {
		return nil, nil, unsupported("", "the batch axis is not the outermost part of the first axis here; mlbuild's batch axis stays first%s", lz.unplaced())
	}
	var order, merge []int
	for _, g := range lz.groups {
		n := 0
		for _, f := range g {
			if f >= 0 {
				order = append(order, f)
				n++
			}
		}
		if n > 0 {
			merge = append(merge, n)
		}
	}
	src, out := c.orderLayout(lz, order, merge)
	return src, out, nil
}

// lastAxis lays src out so that the last ONNX axis is src's last axis
// (its axes merged), for ops on the last axis; the other axes keep their
// order.
func (c *nodeCtx) lastAxis(lz *lazyLayout) (*value, *lazyLayout, error) {
	if !lz.settle(func(g [][]int) bool { return !slices.Contains(g[len(g)-1], -1) }) {
		return nil, nil, unsupported("", "the last axis holds the batch here; mlbuild's batch axis stays first%s", lz.unplaced())
	}
	last := lz.groups[len(lz.groups)-1]
	var order, merge []int
	for f := range lz.src.shape {
		if !slices.Contains(last, f) {
			order = append(order, f)
			merge = append(merge, 1)
		}
	}
	order = append(order, last...)
	merge = append(merge, len(last))
	src, out := c.orderLayout(lz, order, merge)
	return src, out, nil
}

// lazyTranspose permutes the groups.
func (c *nodeCtx) lazyTranspose(lz *lazyLayout, p []int64) (string, error) {
	if len(p) != len(lz.groups) {
		return "", unsupported("", "perm %v for rank %d", p, len(lz.groups))
	}
	permute := func(from [][]int) [][]int {
		groups := make([][]int, len(p))
		for i, a := range p {
			groups[i] = from[a]
		}
		return groups
	}
	out := lz.carry(&lazyLayout{src: lz.src, groups: permute(lz.groups)}, permute)
	return "folded: follows the batch axis (written by the ops that read it)", c.setLazyLayout(out)
}

// lazyShape is the Shape of a lazy value: the batch's axis is the batch
// size times its multiplier.
func (c *nodeCtx) lazyShape(lz *lazyLayout) *constant {
	d, bat := lz.dims()
	k := &constant{dims: []int{len(d)}, ints: true}
	for i, v := range d {
		k.vals = append(k.vals, float64(v))
		k.batch = append(k.batch, i == bat)
	}
	return k
}

// lazyReshape regroups the axes for a target shape whose entries are
// sizes or the batch size times a multiplier (entry bat).
func (c *nodeCtx) lazyReshape(lz *lazyLayout, target []int, bat int) (string, error) {
	groups, split, err := regroupFor(lz, lz.groups, target, bat)
	if err != nil {
		return "", err
	}
	src, renumber := c.splitAxes(lz.src, split)
	if groups, err = renumber(groups); err != nil {
		return "", err
	}
	return "folded: follows the batch axis (written by the ops that read it)", c.setLazy(src, groups)
}

// regroupFor computes, for a Reshape of the value lz holds as groups to
// target (the batch size's multiplier at entry bat), the groups of the
// result and how src's axes split (src axis → the sizes it is cut into,
// before its remainder). It writes nothing.
func regroupFor(lz *lazyLayout, from [][]int, target []int, bat int) ([][]int, map[int][]int, error) {
	// the src axes in ONNX order (the batch among them)
	var seq []int
	for _, g := range from {
		seq = append(seq, g...)
	}
	var groups [][]int
	split := map[int][]int{} // src axis → the sizes it splits into
	k, rem := 0, 0           // rem: what is left of seq[k] (0: all of it)
	for i, want := range target {
		var g []int
		have := 1
		for have < want || (i == bat && !slices.Contains(g, -1)) || (len(g) == 0 && k < len(seq)) {
			if k >= len(seq) {
				return nil, nil, unsupported("", "the target shape %v does not regroup the axes %v", target, from)
			}
			f := seq[k]
			if f < 0 {
				if i != bat {
					return nil, nil, unsupported("", "the target shape %v puts the batch size in axis %d alone", target, bat)
				}
				g = append(g, -1)
				k++
				continue
			}
			n := lz.size(f)
			if rem > 0 {
				n = rem
			}
			if have*n <= want {
				have *= n
				g = append(g, f)
				k, rem = k+1, 0
				continue
			}
			// split src axis f: the part taken here, the rest after
			if want%have != 0 || n%(want/have) != 0 {
				return nil, nil, unsupported("", "the target shape %v splits an axis of %d", target, n)
			}
			part := want / have
			if part == 1 || len(split[f]) >= MaxRank {
				return nil, nil, unsupported("", "the target shape %v does not regroup the axes %v", target, from)
			}
			split[f] = append(split[f], part)
			g = append(g, f)
			have, rem = want, n/part
		}
		if have != want {
			return nil, nil, unsupported("", "the target shape %v does not regroup the axes %v", target, from)
		}
		groups = append(groups, g)
		if rem > 0 && i == len(target)-1 {
			return nil, nil, unsupported("", "the target shape %v does not hold every element", target)
		}
	}
	if k != len(seq) {
		return nil, nil, unsupported("", "the target shape %v does not hold every element", target)
	}
	return groups, split, nil
}

// splitAxes writes the splits regroupFor asked for, if any: src axis f
// becomes the sizes it was cut into, then its remainder. It returns the
// new src and a function that renames the axes of a regroupFor result
// to the new src's.
func (c *nodeCtx) splitAxes(src *value, split map[int][]int) (*value, func([][]int) ([][]int, error)) {
	if len(split) == 0 {
		return src, func(g [][]int) ([][]int, error) { return g, nil }
	}
	var shape []int
	newAxes := map[int][]int{}
	for f, n := range src.shape {
		parts := append(slices.Clone(split[f]), 0)
		rest := n
		for _, p := range split[f] {
			rest /= p
		}
		parts[len(parts)-1] = rest
		if len(split[f]) == 0 {
			parts = []int{n}
		}
		for _, p := range parts {
			newAxes[f] = append(newAxes[f], len(shape))
			shape = append(shape, p)
		}
	}
	r := c.newLayer("reshape", shape)
	r.Fields = []Field{{"shape", slices.Clone(shape)}}
	src = c.im.addLayer(r, src)
	return src, func(groups [][]int) ([][]int, error) {
		used := map[int]int{}
		out := make([][]int, len(groups))
		for gi, g := range groups {
			for _, f := range g {
				if f < 0 {
					out[gi] = append(out[gi], -1)
					continue
				}
				if used[f] >= len(newAxes[f]) {
					return nil, fmt.Errorf("importer bug: axis %d split into %d parts, more used", f, len(newAxes[f]))
				}
				out[gi] = append(out[gi], newAxes[f][used[f]])
				used[f]++
			}
		}
		for f, g := range newAxes {
			if used[f] != len(g) {
				return nil, fmt.Errorf("importer bug: axis %d split into %d parts, %d used", f, len(g), used[f])
			}
		}
		return out, nil
	}
}

// throughLazy imports a node that reads a lazyLayout value (input 0, or
// both inputs of a MatMul): it rewrites the input as a plain value laid
// out for the op, runs the op's import on it, and sees the output through
// the same groups.
func (c *nodeCtx) throughLazy(imp opImport) (string, error) {
	op := c.n.OpType
	binary := op == "Add" || op == "Sub" || op == "Mul" || op == "Div"
	li := 0 // the lazy input
	for i, v := range c.ins {
		if v != nil && v.lazy != nil && i > 0 {
			if op != "MatMul" && !(binary && i == 1 && c.ins[0] != nil && c.ins[0].konst != nil) {
				return "", unsupported("", "input %d follows a moved batch axis; mlbuild reads it only as the first input", i)
			}
			if op != "MatMul" {
				li = 1
			}
		}
	}
	for _, v := range c.ins {
		if v != nil && v.lazy != nil {
			v.lazy.refresh()
		}
	}
	x := c.ins[li]
	switch op {
	case "Transpose":
		p, ok, err := c.attrInts("perm")
		if err != nil {
			return "", err
		}
		if !ok {
			for i := len(x.lazy.groups) - 1; i >= 0; i-- {
				p = append(p, int64(i))
			}
		}
		return c.lazyTranspose(x.lazy, p)
	case "Shape":
		if start, _ := c.attrInt("start", 0); start != 0 {
			return "", unsupported("", "Shape with start of a value whose batch axis moved")
		}
		if end, _ := c.attrInt("end", -1<<40); end != -1<<40 {
			return "", unsupported("", "Shape with end of a value whose batch axis moved")
		}
		if x.lazy.fixed != nil {
			_, bat := x.lazy.dims()
			for _, i := range x.lazy.fixed.live() {
				if _, b := (&lazyLayout{src: x.lazy.src, groups: x.lazy.fixed.alts[i]}).dims(); b != bat {
					return "", unsupported("export with dynamic_axes so that the graph says where the batch is", "Shape of a value whose batch (the 1 that Reshape node %s wrote into its target shape) may be in axis %d or %d", x.lazy.fixed.choice.node, bat, b)
				}
			}
		}
		c.im.uses[c.n.Inputs[0]]-- // reads no data
		return c.fold(c.lazyShape(x.lazy), "shape")
	case "Reshape":
		return c.reshapeLazy(x.lazy)
	case "MatMul":
		if c.has(1) && c.ins[1].konst == nil {
			return c.matmulLazy()
		}
	}
	rank := len(x.lazy.groups)
	switch op {
	case "Softmax":
		def := int64(1)
		if c.im.opset >= 13 {
			def = -1
		}
		a, err := c.attrInt("axis", def)
		if err != nil {
			return "", err
		}
		if ax, err := c.axis(a, rank); err != nil || ax != rank-1 {
			return "", unsupported("", "Softmax over axis %d of a value whose batch axis moved; mlbuild follows it only over the last axis", a)
		}
		// the last axis of src, whose rank differs
		n := *c.n
		n.Attrs = append(slices.DeleteFunc(slices.Clone(n.Attrs), func(a *Attribute) bool { return a.Name == "axis" }), &Attribute{Name: "axis", Type: AttrInt, I: -1})
		c.n = &n
	case "Slice":
		var axes []int64
		if c.im.opset < 10 {
			axes, _, _ = c.attrInts("axes")
		} else if c.has(3) {
			k, err := c.konst(3, "axes")
			if err != nil {
				return "", err
			}
			for _, v := range k.vals {
				axes = append(axes, int64(v))
			}
		}
		if len(axes) == 0 {
			return "", unsupported("", "Slice without axes of a value whose batch axis moved")
		}
		for _, a := range axes {
			if a != -1 && a != int64(rank-1) {
				return "", unsupported("", "Slice along axis %d of a value whose batch axis moved; mlbuild follows it only along the last axis", a)
			}
		}
		// the src's last axis is the ONNX last axis (their ranks differ)
		if c.im.opset >= 10 {
			c.ins[3] = &value{konst: &constant{dims: []int{len(axes)}, vals: slices.Repeat([]float64{-1}, len(axes)), ints: true}}
		} else {
			n := *c.n
			n.Attrs = append(slices.DeleteFunc(slices.Clone(n.Attrs), func(a *Attribute) bool { return a.Name == "axes" }), &Attribute{Name: "axes", Type: AttrInts, Ints: slices.Repeat([]int64{-1}, len(axes))})
			c.n = &n
		}
	case "Split":
		a, err := c.attrInt("axis", 0)
		if err != nil {
			return "", err
		}
		if a != -1 && a != int64(rank-1) {
			return "", unsupported("", "Split along axis %d of a value whose batch axis moved; mlbuild follows it only along the last axis", a)
		}
		n := *c.n
		n.Attrs = append(slices.DeleteFunc(slices.Clone(n.Attrs), func(a *Attribute) bool { return a.Name == "axis" }), &Attribute{Name: "axis", Type: AttrInt, I: -1})
		c.n = &n
	case "Add", "Sub", "Mul", "Div":
		k := c.ins[1-li]
		if k == nil || k.konst == nil {
			return "", unsupported("", "%s of two values whose batch axes moved", op)
		}
		dims := slices.Clone(k.konst.dims)
		for len(dims) > 0 && dims[0] == 1 {
			dims = dims[1:]
		}
		if len(dims) > 1 {
			return "", unsupported("", "%s with a constant of shape %s of a value whose batch axis moved; mlbuild follows it with scalars or one value per feature", op, shapeText(k.konst.dims))
		}
		c.ins[1-li] = &value{konst: &constant{dims: dims, vals: k.konst.vals, ints: k.konst.ints}}
	case "MatMul", "Gemm":
	default:
		return "", unsupported("", "%s of a value whose batch axis moved", op)
	}
	src, layout, err := c.lastAxis(x.lazy)
	if err != nil {
		return "", err
	}
	c.ins[li] = src
	how, err := imp(c)
	if err != nil {
		return "", err
	}
	for _, o := range c.n.Outputs {
		if err := c.regroup(o, layout); err != nil {
			return "", err
		}
	}
	return how, nil
}

// regroup sees output o, bound as a plain value, through groups.
func (c *nodeCtx) regroup(o string, layout *lazyLayout) error {
	v := c.im.vals[o]
	if v == nil || v.konst != nil || v.lazy != nil {
		return nil
	}
	c.im.materialize(v)
	lz := layout.carry(&lazyLayout{src: v, groups: layout.groups}, func(g [][]int) [][]int { return g })
	isPlain := func(groups [][]int) bool {
		plain := len(groups) == len(v.shape)+1 && slices.Equal(groups[0], []int{-1})
		for i, g := range groups[1:] {
			plain = plain && slices.Equal(g, []int{i})
		}
		return plain
	}
	if !lz.settle(isPlain) {
		c.im.vals[o] = &value{lazy: lz}
	}
	return nil
}

// matmulLazy multiplies two values whose batch axes moved, each laid out
// batch first in its ONNX order.
func (c *nodeCtx) matmulLazy() (string, error) {
	if c.ins[0] == nil || c.ins[0].konst != nil {
		return "", unsupported("", "MatMul of a constant by a value whose batch axis moved")
	}
	la, lb := c.lazyOf(0), c.lazyOf(1)
	a, outA, err := c.batchFirst(la)
	if err != nil {
		return "", err
	}
	b, outB, err := c.batchFirst(lb)
	if err != nil {
		return "", err
	}
	ga, gb := outA.groups, outB.groups
	if len(ga) != len(gb) || !slices.EqualFunc(ga[:len(ga)-2], gb[:len(gb)-2], slices.Equal) {
		return "", unsupported("", "MatMul of values whose batch axes moved differently (%v and %v)", ga, gb)
	}
	c.ins[0], c.ins[1] = a, b
	how, err := importMatMul(c)
	if err != nil {
		return "", err
	}
	return how, c.regroup(c.n.Outputs[0], outA)
}

// reshapeLazy reads a Reshape's target for a value whose batch axis moved
// (or that this Reshape moves): sizes, 0 (copy), one -1, and the batch
// size times a multiplier.
func (c *nodeCtx) reshapeLazy(lz *lazyLayout) (string, error) {
	var target *constant
	var err error
	if c.im.opset < 5 {
		return "", unsupported("", "Reshape with a shape attribute of a value whose batch axis moved")
	}
	if target, err = c.konst(1, "shape"); err != nil {
		return "", err
	}
	if az, _ := c.attrInt("allowzero", 0); az != 0 {
		return "", unsupported("", "Reshape with allowzero of a value whose batch axis moved")
	}
	d, bat := lz.dims()
	out := make([]int, len(target.vals))
	outBat, infer := -1, -1
	for i, v := range target.vals {
		switch {
		case target.isBatch(i):
			if outBat >= 0 {
				return "", unsupported("", "the target shape names the batch size twice")
			}
			outBat, out[i] = i, int(v)
		case v == 0:
			if i >= len(d) {
				return "", unsupported("", "target entry %d copies an axis the input does not have", i)
			}
			out[i] = d[i]
			if i == bat {
				outBat = i
			}
		case v == -1 && infer < 0:
			infer = i
		case v < 1 || v > MaxElements:
			return "", unsupported("", "target size %v is not valid", v)
		default:
			out[i] = int(v)
		}
	}
	fixed := outBat < 0 && c.im.batchN == 1 && !target.hasBatch()
	if outBat < 0 && !fixed {
		return "", unsupported("", "the target shape %v does not keep the batch size; mlbuild's batch axis stays first", target.vals)
	}
	if infer >= 0 {
		known := 1
		for i, v := range out {
			if i != infer {
				known *= v
			}
		}
		if known == 0 || product(d)%known != 0 {
			return "", unsupported("", "cannot infer the -1 size")
		}
		out[infer] = product(d) / known
	}
	if fixed {
		// the batch is a 1 among the sizes (batch_fixed.go)
		return c.reshapeFixed(lz, out)
	}
	return c.lazyReshape(lz, out, outBat)
}
