package planner

import (
	"fmt"
	"slices"
	"strings"
)

// storeChannelsLast keeps a bf16 plan's stored 4-D activations and
// gradients channels last ([N, H, W, C] in memory) where the Target's
// library convolutions are faster on them (Target.BF16Storage's
// BatchNormScratch is set: CUDA's cuDNN, whose calls for a CIFAR
// ResNet-18 step take 1.58 ms on channels-last bfloat16 tensors with
// KRSC filters against 2.79 on NCHW ones,
// docs/runs/gpu-conv-layouts-2026-11-30.txt), and every step that names
// them takes that layout.
//
// Before: storeBF16 has run: Plan.Stored lists the tensors stored in
// bfloat16; no buffer has a Layout. After: a stored storage owner of
// kind activation or grad whose shape is [N, C, H, W] with H·W > 1 and
// which no view names has Layout LayoutNHWC, unless a step that needs
// its 4-D operands in one layout names it beside one that cannot be
// channels last: a library convolution (x and y, or x, dy and dx) or a
// step of the element-wise kernels of BF16Storage (every 4-D operand,
// which must then also share one shape: a broadcast keeps NCHW); a
// fixed point then keeps all of them NCHW. Batch norm and the global
// average pool take each operand in its own layout. A training batch
// norm or batch norm backward that names a channels-last tensor gets a
// float32 scratch for its partial sums as Out[3] (BatchNormScratch
// elements, kind scratch). cuDNN takes a channels-last convolution's
// filter in KRSC order, [OC, KH, KW, C/G] (it has no backward algorithm
// for a KCRS filter then): a weight W that only channels-last bf16
// library convolutions read (its forward and backward; a folded weight
// is none) gets a bfloat16 twin in KRSC order (Layout LayoutNHWC on the
// twin of a 4-D filter, last read by its last such reader), which its
// update step and the program write beside W as they write W, and those
// convolutions read it; their workspaces are then the backward's dW
// workspace alone (storeBF16's, In[4]: dW in KRSC order), and the
// forward has none. A channels-last convolution whose W has no such
// twin (a weight also read by a convolution that stays NCHW, or one
// with a twin already) gets a bfloat16 workspace of KRSCOffset(W) + W
// elements instead, the forward's Out[1] and the backward's In[4]
// (Attr.KeptCols): W in KRSC order from KRSCOffset, which the forward
// writes and the backward reads, and dW in KRSC from the start. A
// channels-last convolution of BF16Storage.Sampled gets that workspace
// whether or not W has a twin, grown to hold its sampled pixels from
// SampledOffset(W) (a folded one, of an inference plan, a workspace of
// its own for them). The bf16 convolutions that stay NCHW read W's
// bfloat16 twin, made here. A
// plan without stored tensors, or for a Target that keeps them NCHW, is
// unchanged.
func storeChannelsLast(p *Plan, t Target) {
	s := t.BF16Storage
	if s == nil || s.BatchNormScratch == nil || len(p.Stored) == 0 {
		return
	}
	defer func() { // W's twins for the bf16 convolutions that stay NCHW
		filterTwins(p, p.allSteps(), func(st *Step) bool {
			return s.bf16Library(st) && p.Buffers[p.root(st.In[0])].Layout != LayoutNHWC && !folded(p, st)
		})
	}()
	viewed := map[BufID]bool{}
	for _, b := range p.Buffers {
		if b.AliasOf != NoBuf {
			viewed[p.root(b.ID)] = true
		}
	}
	nhwc := map[BufID]bool{}
	for _, id := range p.Stored {
		b := p.Buffers[id]
		if (b.Kind == KindActivation || b.Kind == KindGrad) && len(b.Shape) == 4 && b.Shape[2]*b.Shape[3] > 1 && !viewed[id] {
			nhwc[id] = true
		}
	}
	steps := p.allSteps()
	for changed := true; changed; {
		changed = false
		for _, st := range steps {
			ops := uniformOperands(p, st, s)
			if len(ops) == 0 {
				continue
			}
			conv := st.Kernel == KConv2D || st.Kernel == KConv2DBwd // whose x and y differ in shape
			mixed := false
			for _, id := range ops {
				if nhwc[p.root(id)] != nhwc[p.root(ops[0])] || !conv && !equalShapes(p.Buffers[id].Shape, p.Buffers[ops[0]].Shape) {
					mixed = true
				}
			}
			if !mixed {
				continue
			}
			for _, id := range ops {
				if nhwc[p.root(id)] {
					delete(nhwc, p.root(id))
					changed = true
				}
			}
		}
	}
	n := 0
	for i := range p.Buffers {
		if nhwc[BufID(i)] {
			p.Buffers[i].Layout = LayoutNHWC
			n++
		}
	}
	if n == 0 {
		return
	}
	for _, st := range steps {
		if !p.Training || (st.Kernel != KBatchNorm && st.Kernel != KBatchNormBwd) || len(st.Out) != 3 {
			continue
		}
		last := false
		for _, ids := range [][]BufID{st.In, st.Out} {
			for _, id := range ids {
				last = last || id != NoBuf && nhwc[p.root(id)]
			}
		}
		if !last {
			continue
		}
		x := p.Buffers[st.In[0]].Shape
		part := p.addBuffer(fmt.Sprintf("%s.%s.partials", st.Layer, map[Kernel]string{KBatchNorm: "fwd", KBatchNormBwd: "bwd"}[st.Kernel]), KindScratch,
			[]int{s.BatchNormScratch(x[0], x[1], x[2]*x[3])})
		st.Out = append(st.Out, part)
	}
	// The channels-last convolutions' filters: cuDNN takes them KRSC
	// with channels-last tensors ([OC, KH, KW, C/G]; it has no backward
	// algorithm for a KCRS filter then). A weight whose readers are all
	// channels last gets a KRSC twin, which they read. Each other layer
	// gets one bfloat16 workspace: the forward writes W in KRSC from
	// KRSCOffset (its Out[1]); the backward, whose In[4] it is too
	// (KeptCols: dW's bfloat16 workspace grows into it), reads that W
	// there and writes dW in KRSC from the start.
	twins := krscTwins(p, steps, func(st *Step) bool { return nhwc[p.root(libraryTensors(st)[0].id)] }, s)
	bwd := map[string]*Step{}
	for _, st := range steps {
		if st.Kernel == KConv2DBwd {
			bwd[st.Layer] = st
		}
	}
	for _, st := range steps {
		if uniform := uniformOperands(p, st, s); len(uniform) == 0 || st.Kernel != KConv2D || !nhwc[p.root(uniform[0])] {
			continue
		}
		w := p.Buffers[st.In[1]].Size
		size := KRSCOffset(w) + w
		sampled := s.Sampled != nil && st.Attr.Conv != nil && s.Sampled(*st.Attr.Conv)
		if sampled {
			g := *st.Attr.Conv
			size = SampledOffset(w) + g.N*g.OH*g.OW*g.C
		}
		if folded(p, st) { // its fold step writes it in KRSC: no workspace, but for the sampled pixels
			p.Buffers[st.In[1]].Layout = LayoutNHWC
			if sampled {
				st.Out[1] = p.addBuffer(st.Layer+".x.sampled", KindScratch, []int{size})
				p.Buffers[st.Out[1]].Elem = ElemBF16
				p.Stored = append(p.Stored, st.Out[1])
			}
			continue
		}
		if tw := p.TwinOf(st.In[1]); tw != NoBuf && p.Buffers[tw].Layout == LayoutNHWC && !sampled { // it reads W's KRSC twin
			continue
		}
		b := bwd[st.Layer]
		ws := NoBuf
		if b != nil && b.In[4] != NoBuf { // dW's bfloat16 workspace (storeBF16) grows into the layer's
			ws = b.In[4]
			p.Buffers[ws].Name, p.Buffers[ws].Shape, p.Buffers[ws].Size = st.Layer+".dW+W.krsc", []int{size}, size
			if sampled {
				p.Buffers[ws].Name = st.Layer + ".dW+W.krsc+x.sampled"
			}
		} else {
			name := st.Layer + ".W.krsc"
			if sampled {
				name += "+x.sampled"
			}
			ws = p.addBuffer(name, KindScratch, []int{size})
			p.Buffers[ws].Elem = ElemBF16
			p.Stored = append(p.Stored, ws)
		}
		st.Out[1] = ws
		if b != nil {
			b.In[4], b.Attr.KeptCols = ws, true
		}
	}
	p.StoredNote += fmt.Sprintf("; %d of them channels last, with KRSC filters", n)
	if twins > 0 {
		p.StoredNote += fmt.Sprintf(" (%d weights' KRSC bfloat16 twins, which their updates write)", twins)
	}
}

// krscTwins gives each weight that only channels-last (last) bf16
// library convolutions of s read, not folded, a bfloat16 twin in KRSC
// order (Layout LayoutNHWC), last read by its last such reader, unless
// it has a twin already, and returns how many it made.
func krscTwins(p *Plan, steps []*Step, last func(*Step) bool, s *BF16Storage) int {
	lastRead, readers := map[BufID]int{}, map[BufID][]string{}
	only := map[BufID]bool{} // read by channels-last convolutions only
	var weights []BufID      // in the order of their first reader
	for i, st := range steps {
		if !s.bf16Library(st) || folded(p, st) {
			continue
		}
		w := p.root(st.In[1])
		if _, seen := lastRead[w]; !seen {
			weights = append(weights, w)
			only[w] = true
		}
		lastRead[w], only[w] = i, only[w] && last(st)
		if !slices.Contains(readers[w], st.Layer) {
			readers[w] = append(readers[w], st.Layer)
		}
	}
	n := 0
	for _, w := range weights {
		if !only[w] || p.TwinOf(w) != NoBuf || len(p.Buffers[w].Shape) != 4 {
			continue
		}
		tw := p.addTwin(w, lastRead[w])
		b := &p.Buffers[tw]
		b.Name, b.Layout = p.Buffers[w].Name+".krsc", LayoutNHWC
		p.Twins[len(p.Twins)-1].Note = fmt.Sprintf("%s: in KRSC order, written by its update step and the program, read by the library convolutions of %s", b.Name, strings.Join(readers[w], ", "))
		n++
	}
	return n
}

// SampledOffset is where a sampled convolution's workspace
// (BF16Storage.Sampled) holds its copy of the pixels the window reads,
// [N, OH, OW, C] channels last: after dW and W in KRSC (KRSCOffset).
func SampledOffset(w int) int { return 2 * KRSCOffset(w) }

// KRSCOffset is where a channels-last convolution's backward workspace
// (store_channels_last.go) holds W in KRSC, after dW: w elements (W's)
// rounded up to 64, so that both start 128-byte aligned.
func KRSCOffset(w int) int { return (w + 63) / 64 * 64 }

// uniformOperands are the 4-D tensors that step st of a plan with
// bfloat16 storage s must find in one layout and one shape: x and y (x,
// dy and dx) of a library convolution in bf16, every 4-D operand of a
// step of s's element-wise kernels; none for another step.
func uniformOperands(p *Plan, st *Step, s *BF16Storage) []BufID {
	var ids []BufID
	switch {
	case s.bf16Library(st):
		for _, t := range libraryTensors(st) {
			ids = append(ids, t.id)
		}
	case s.Kernels[st.Kernel] && st.Kernel != KBatchNorm && st.Kernel != KBatchNormBwd && st.Kernel != KGlobalAvgPool && st.Kernel != KGlobalAvgPoolBwd && st.Kernel != KCast:
		ids = append(append(ids, st.In...), st.Out...)
	}
	var out []BufID
	for _, id := range ids {
		if id != NoBuf && len(p.Buffers[id].Shape) == 4 {
			out = append(out, id)
		}
	}
	return out
}
