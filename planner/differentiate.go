package planner

import "fmt"

// differentiate derives the backward pass by reverse-mode differentiation
// of the static forward graph.
//
// Before: Forward is complete (fusion, if any, has run) and Backward holds
// only the loss step, whose second output is the gradient of the output.
// After: every trainable param that the loss depends on has a gradient
// buffer ("<param>.grad") written by exactly one backward step; Backward
// holds, after the loss step, each forward step's backward kernel in
// reverse order, each reading the complete gradient of the step's output.
// A value read by several steps gets the contributions summed with
// KAccumulate as soon as two are known. Gradients nobody needs are not
// computed (NoBuf): the input's, and those of values that no trainable
// param influences. A param that the loss does not depend on is frozen
// (Trainable false), since no gradient ever reaches it. A param read by
// several steps (weight tying) gets a part from each step's backward,
// "<param>.grad.part1", …, summed with KAccumulate into its gradient after
// the last part is written.
//
// Gradients are kept per storage owner: a view (flatten, reshape) adds no
// step; the gradient of a view is a view of its owner's gradient.
func differentiate(p *Plan) {
	d := &differentiation{p: p, grad: map[BufID]BufID{}, got: map[BufID]int{}, expected: map[BufID]int{}, names: map[string]bool{}}
	for _, b := range p.Buffers {
		d.names[b.Name] = true
	}
	d.analyse()
	d.declareParamGrads()
	d.countReaders()
	loss := p.Backward[0]
	d.expected[p.root(p.Output)]++
	for i := range p.Forward {
		s := &p.Forward[i]
		if !d.emits(s) {
			continue
		}
		for _, j := range differentiableInputs(s) {
			if d.needs(s.In[j]) {
				d.expected[p.root(s.In[j])]++
			}
		}
	}
	d.contribute(p.Output, loss.Out[1])
	for i := len(p.Forward) - 1; i >= 0; i-- {
		s := p.Forward[i]
		if d.emits(&s) {
			d.backward(s)
		}
	}
}

// differentiation is the state of one differentiate call.
type differentiation struct {
	p         *Plan
	dependent []bool          // by storage owner: some trainable param influences it
	reaches   []bool          // by storage owner: the loss depends on it
	paramGrad map[BufID]BufID // param buffer -> its gradient
	grad      map[BufID]BufID // storage owner -> its gradient so far
	got       map[BufID]int   // storage owner -> contributions summed so far
	expected  map[BufID]int   // storage owner -> contributions it will get
	names     map[string]bool // buffer names in use
	// A param read by several steps (a dense head tied to an embedding):
	// each backward writes its own part, summed into the param's
	// gradient after the last.
	readers map[BufID]int     // param buffer -> backward steps that write its gradient
	parts   map[BufID][]BufID // param buffer -> the parts written so far
}

// analyse finds which values depend on a trainable param and which ones the
// loss depends on.
func (d *differentiation) analyse() {
	p := d.p
	d.dependent = make([]bool, len(p.Buffers))
	d.reaches = make([]bool, len(p.Buffers))
	for _, pr := range p.Params {
		if pr.Trainable {
			d.dependent[pr.Buf] = true
		}
	}
	for _, s := range p.Forward {
		dep := false
		for _, id := range s.In {
			if id != NoBuf && d.dependent[p.root(id)] {
				dep = true
			}
		}
		if dep {
			d.dependent[p.root(s.Out[0])] = true
		}
	}
	d.reaches[p.root(p.Output)] = true
	for i := len(p.Forward) - 1; i >= 0; i-- {
		s := p.Forward[i]
		if !d.reaches[p.root(s.Out[0])] {
			continue
		}
		for _, id := range s.In {
			if id != NoBuf {
				d.reaches[p.root(id)] = true
			}
		}
	}
}

// needs reports whether the gradient of value id must be computed.
func (d *differentiation) needs(id BufID) bool {
	r := d.p.root(id)
	k := d.p.Buffers[r].Kind
	return d.dependent[r] && d.reaches[r] && (k == KindActivation)
}

// emits reports whether forward step s gets a backward step.
func (d *differentiation) emits(s *Step) bool { return d.needs(s.Out[0]) }

// declareParamGrads adds a gradient buffer for every trainable param the
// loss depends on, in Params order, and freezes the others.
func (d *differentiation) declareParamGrads() {
	p := d.p
	d.paramGrad = map[BufID]BufID{}
	for i := range p.Params {
		pr := &p.Params[i]
		if !pr.Trainable {
			continue
		}
		if !d.reaches[pr.Buf] {
			pr.Trainable = false
			continue
		}
		pr.Grad = p.addBuffer(pr.Name+".grad", KindParamGrad, p.shapeOf(pr.Buf))
		d.names[pr.Name+".grad"] = true
		d.paramGrad[pr.Buf] = pr.Grad
	}
}

// differentiableInputs lists the operand indexes of s whose values (not
// params) a gradient flows into.
func differentiableInputs(s *Step) []int {
	switch s.Kernel {
	case KBinary, KMatMul:
		return []int{0, 1}
	case KAttention:
		return []int{0, 1, 2}
	case KConcat:
		idx := make([]int, len(s.In))
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	return []int{0}
}

// name returns base, or base with a counter when base is taken.
func (d *differentiation) name(base string) string {
	name := base
	for i := 2; d.names[name]; i++ {
		name = fmt.Sprintf("%s.%d", base, i)
	}
	d.names[name] = true
	return name
}

// newGrad adds the buffer a backward step writes its contribution to the
// gradient of operand x into, or returns NoBuf when nobody needs it.
func (d *differentiation) newGrad(x BufID) BufID {
	if !d.needs(x) {
		return NoBuf
	}
	p := d.p
	r := p.root(x)
	base := p.Buffers[x].Name + ".grad"
	if d.expected[r] > 1 {
		base = fmt.Sprintf("%s.%d", base, d.got[r]+1)
	}
	return p.addBuffer(d.name(base), KindGrad, p.shapeOf(x))
}

// contribute adds contribution c (shaped like operand x) to the gradient of
// x's storage owner, summing with what is there already.
func (d *differentiation) contribute(x, c BufID) {
	if c == NoBuf {
		return
	}
	p := d.p
	r := p.root(x)
	d.got[r]++
	final := d.got[r] == d.expected[r]
	owner := p.Buffers[r].Name + ".grad"
	if x != r {
		base := owner
		if !final || d.got[r] > 1 {
			base = fmt.Sprintf("%s.%d", owner, d.got[r])
		}
		c = p.addView(d.name(base), c, p.shapeOf(r))
	}
	prev, ok := d.grad[r]
	if !ok {
		d.grad[r] = c
		return
	}
	base := fmt.Sprintf("%s.sum%d", owner, d.got[r])
	if final {
		base = owner
	}
	sum := p.addBuffer(d.name(base), KindGrad, p.shapeOf(r))
	p.Backward = append(p.Backward, Step{
		Kernel: KAccumulate, Layer: d.layerOf(r), In: []BufID{prev, c}, Out: []BufID{sum},
	})
	d.grad[r] = sum
}

// layerOf names the layer that writes storage owner r.
func (d *differentiation) layerOf(r BufID) string {
	for _, s := range d.p.Forward {
		for _, o := range s.Out {
			if o != NoBuf && d.p.root(o) == r {
				return s.Layer
			}
		}
	}
	return d.p.Buffers[r].Name
}

// gradOf returns the complete gradient of value y, viewed with y's shape.
func (d *differentiation) gradOf(y BufID) BufID {
	p := d.p
	r := p.root(y)
	if y == r {
		return d.grad[r]
	}
	return p.addView(d.name(p.Buffers[y].Name+".grad"), d.grad[r], p.shapeOf(y))
}

// backward appends the backward step of forward step s and records the
// gradient contributions it makes.
func (d *differentiation) backward(s Step) {
	p := d.p
	y := s.Out[0]
	dy := d.gradOf(y)
	pg := func(id BufID) BufID {
		if id == NoBuf {
			return NoBuf
		}
		if r := p.root(id); r != id {
			// a view of a param (a conv1d's weight seen as 2-D): the
			// step writes the param's gradient through the same view
			if g, ok := d.paramGrad[r]; ok {
				return p.addView(d.name(p.Buffers[id].Name+".grad"), g, p.shapeOf(id))
			}
		}
		return d.paramGrad[id]
	}
	pg = d.tiedPart(pg)
	bwd := Step{Layer: s.Layer, Fused: s.Fused}
	var grads []BufID // contribution per differentiable input, in order
	newGrads := func(idx ...int) []BufID {
		for _, i := range idx {
			grads = append(grads, d.newGrad(s.In[i]))
		}
		return grads
	}
	switch s.Kernel {
	case KGemm:
		newGrads(0)
		bwd.Kernel = KGemmBwd
		bwd.In = []BufID{s.In[0], s.In[1], y, dy}
		bwd.Out = []BufID{grads[0], pg(s.In[1]), pg(s.In[2])}
		bwd.Attr = Attr{Act: s.Attr.Act, Alpha: s.Attr.Alpha}
	case KConv2D:
		newGrads(0)
		bwd.Kernel = KConv2DBwd
		bwd.In = []BufID{s.In[0], s.In[1], y, dy, NoBuf} // the workspace, sized by chooseMethods
		bwd.Out = []BufID{grads[0], pg(s.In[1]), pg(s.In[2])}
		bwd.Attr = Attr{Conv: s.Attr.Conv, Act: s.Attr.Act, Alpha: s.Attr.Alpha}
	case KMaxPool2D:
		newGrads(0)
		bwd.Kernel = KMaxPool2DBwd
		bwd.In = []BufID{s.In[0], y, dy}
		bwd.Out = grads
		bwd.Attr = Attr{Conv: s.Attr.Conv}
	case KAvgPool2D:
		newGrads(0)
		bwd.Kernel = KAvgPool2DBwd
		bwd.In = []BufID{dy}
		bwd.Out = grads
		bwd.Attr = Attr{Conv: s.Attr.Conv}
	case KGlobalAvgPool:
		newGrads(0)
		bwd.Kernel = KGlobalAvgPoolBwd
		bwd.In = []BufID{dy}
		bwd.Out = grads
	case KUnary:
		newGrads(0)
		bwd.Kernel = KUnaryBwd
		bwd.In = []BufID{s.In[0], dy}
		bwd.Out = grads
		bwd.Attr = Attr{Chain: s.Attr.Chain}
	case KBinary:
		newGrads(0, 1)
		bwd.Kernel = KBinaryBwd
		bwd.In = []BufID{s.In[0], s.In[1], dy}
		bwd.Out = grads
		bwd.Attr = Attr{BinOp: s.Attr.BinOp}
	case KSoftmax, KLogSoftmax:
		newGrads(0)
		bwd.Kernel = KSoftmaxBwd
		if s.Kernel == KLogSoftmax {
			bwd.Kernel = KLogSoftmaxBwd
		}
		bwd.In = []BufID{y, dy}
		bwd.Out = grads
		bwd.Attr = Attr{Axis: s.Attr.Axis}
	case KDropout:
		newGrads(0)
		bwd.Kernel = KDropoutBwd
		bwd.In = []BufID{s.Out[1], dy}
		bwd.Out = grads
		bwd.Attr = Attr{Rate: s.Attr.Rate}
	case KBatchNorm:
		newGrads(0)
		bwd.Kernel = KBatchNormBwd
		bwd.In = []BufID{s.In[0], s.In[1], s.Out[1], s.Out[2], dy}
		bwd.Out = []BufID{grads[0], pg(s.In[1]), pg(s.In[2])}
		bwd.Attr = Attr{Eps: s.Attr.Eps}
		if s.Attr.Act != "" { // a fused ReLU's mask needs beta (fuse_norm_act.go)
			bwd.In = append(bwd.In, s.In[2])
			bwd.Attr.Act = s.Attr.Act
		}
	case KLayerNorm:
		newGrads(0)
		bwd.Kernel = KLayerNormBwd
		bwd.In = []BufID{s.In[0], s.In[1], s.Out[1], s.Out[2], dy}
		bwd.Out = []BufID{grads[0], pg(s.In[1]), pg(s.In[2])}
		bwd.Attr = Attr{Axis: s.Attr.Axis}
	case KReduceMean:
		newGrads(0)
		bwd.Kernel = KReduceMeanBwd
		bwd.In = []BufID{dy}
		bwd.Out = grads
	case KMatMul:
		newGrads(0, 1)
		bwd.Kernel = KMatMulBwd
		bwd.In = []BufID{s.In[0], s.In[1], dy}
		bwd.Out = grads
	case KTranspose:
		newGrads(0)
		inv := make([]int, len(s.Attr.Perm))
		for i, a := range s.Attr.Perm {
			inv[a] = i
		}
		bwd.Kernel = KTranspose
		bwd.In = []BufID{dy}
		bwd.Out = grads
		bwd.Attr = Attr{Perm: inv}
	case KConcat:
		newGrads(differentiableInputs(&s)...)
		bwd.Kernel = KConcatBwd
		bwd.In = []BufID{dy}
		bwd.Out = grads
		bwd.Attr = Attr{Axis: s.Attr.Axis}
	case KResize:
		// each dy scatter-added to the pixels its output read
		newGrads(0)
		bwd.Kernel = KResizeBwd
		bwd.In = []BufID{dy}
		bwd.Out = grads
		bwd.Attr = Attr{Mode: s.Attr.Mode, AlignCorners: s.Attr.AlignCorners}
	case KSlice:
		// dx is dy in the slice's range and zero elsewhere; two slices of
		// one value (a channel split) sum their dx like any other reads.
		newGrads(0)
		bwd.Kernel = KSliceBwd
		bwd.In = []BufID{dy}
		bwd.Out = grads
		bwd.Attr = Attr{Axis: s.Attr.Axis, Start: s.Attr.Start}
	case KAttention:
		// the probabilities recomputed from q, kᵀ and the forward's
		// log-sum-exp; delta = rowsum(do∘o) is the backward's scratch
		newGrads(0, 1, 2)
		delta := p.addBuffer(d.name(s.Layer+".delta"), KindScratch, p.shapeOf(s.Out[1]))
		bwd.Kernel = KAttentionBwd
		bwd.In = []BufID{s.In[0], s.In[1], s.In[2], y, s.Out[1], dy}
		if s.Attr.Padding {
			bwd.In = append(bwd.In, s.In[3])
		}
		bwd.Out = append(grads, delta)
		bwd.Attr = s.Attr
	case KEmbedding:
		// the ids (the model input) get no gradient; the tables do
		newGrads(0)
		bwd.Kernel = KEmbeddingBwd
		bwd.In = []BufID{s.In[0], dy}
		bwd.Out = []BufID{pg(s.In[1]), pg(s.In[2])}
	default:
		panic(fmt.Sprintf("planner: differentiate: no backward for kernel %s", s.Kernel))
	}
	p.Backward = append(p.Backward, bwd)
	for k, i := range differentiableInputs(&s) {
		d.contribute(s.In[i], grads[k])
	}
	d.sumTiedParts()
}

// countReaders counts, per trainable param, the forward steps with a
// backward that read it.
func (d *differentiation) countReaders() {
	p := d.p
	d.readers, d.parts = map[BufID]int{}, map[BufID][]BufID{}
	for i := range p.Forward {
		s := &p.Forward[i]
		if !d.emits(s) {
			continue
		}
		seen := map[BufID]bool{}
		for _, id := range s.In {
			if id == NoBuf {
				continue
			}
			r := p.root(id)
			if _, ok := d.paramGrad[r]; ok && !seen[r] {
				seen[r] = true
				d.readers[r]++
			}
		}
	}
}

// tiedPart wraps pg, the gradient a backward writes for a param operand:
// for a param several steps read, a new part of its own.
func (d *differentiation) tiedPart(pg func(BufID) BufID) func(BufID) BufID {
	p := d.p
	return func(id BufID) BufID {
		if id == NoBuf || d.readers[p.root(id)] < 2 {
			return pg(id)
		}
		r := p.root(id)
		part := p.addBuffer(d.name(fmt.Sprintf("%s.part%d", p.Buffers[d.paramGrad[r]].Name, len(d.parts[r])+1)), KindGrad, p.shapeOf(r))
		d.parts[r] = append(d.parts[r], part)
		if id != r {
			return p.addView(d.name(p.Buffers[part].Name+".view"), part, p.shapeOf(id))
		}
		return part
	}
}

// sumTiedParts adds the KAccumulate steps that sum a tied param's parts
// into its gradient once every reader's backward has written its part, in
// Params order.
func (d *differentiation) sumTiedParts() {
	p := d.p
	for _, pr := range p.Params {
		r := pr.Buf
		parts := d.parts[r]
		if d.readers[r] < 2 || len(parts) != d.readers[r] {
			continue
		}
		acc := parts[0]
		for i, part := range parts[1:] {
			out := d.paramGrad[r]
			if i+2 < len(parts) {
				out = p.addBuffer(d.name(fmt.Sprintf("%s.sum%d", p.Buffers[d.paramGrad[r]].Name, i+2)), KindGrad, p.shapeOf(r))
			}
			p.Backward = append(p.Backward, Step{Kernel: KAccumulate, Layer: pr.Layer, In: []BufID{acc, part}, Out: []BufID{out}})
			acc = out
		}
		d.parts[r] = nil // summed
	}
}
