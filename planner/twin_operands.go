package planner

import (
	"fmt"
	"slices"
	"strings"
)

// twinOperands gives the operands of a bf16 plan's dense layers bfloat16
// twins, for a Target whose GEMMs read them (Target.BF16): a GEMM then
// reads half the bytes and feeds the tensor cores without converting. A
// separate conversion would cost as much as it saves, so a twin is made
// only where the step that writes the float32 value writes the twin in
// the same kernel: an activation whose producer's kernel is among
// Target.BF16.Producers, and a weight, whose twin the update step writes
// (Target.BF16.Updates) and the program writes whenever it writes the
// weights (at start, after loading them).
//
// Before: all phases are final and each gemm step has its Precision
// (choosePrecisions). After: for every forward gemm step in bf16 whose
// input x is written by a forward step that can write its twin, and
// whose weight is a param whose twin stays current (in a training plan,
// a trainable param that an update step of Target.BF16.Updates writes),
// x's storage and the weight have twins (Plan.Twins): buffers of the
// same shape with Elem ElemBF16, the weight's of kind KindParamBF16 (in
// the state arena, after everything else), the activation's of x's own
// kind, live from x's producer to the last GEMM that reads it. In the
// backward, a bf16 gemm_bwd without a fused activation whose dy a
// backward step of Target.BF16.Producers writes (and nothing writes
// again before it) reads dy's twin, with x's twin for dW and W's for dx.
// No step names a twin: the emitter of the
// producer writes it and the GEMM reads it, both found by Plan.TwinOf.
// A plan without bf16 gemm steps, or for another Target, is unchanged.
func twinOperands(p *Plan, t Target) {
	if t.BF16 == nil || p.Precision != PrecisionBF16 {
		return
	}
	// The forward step that writes each storage owner, where it can write
	// its twin.
	producer := map[BufID]*Step{}
	for i := range p.Forward {
		st := &p.Forward[i]
		for _, k := range t.BF16.Producers[st.Kernel] {
			if k < len(st.Out) && st.Out[k] != NoBuf {
				producer[p.root(st.Out[k])] = st
			}
		}
	}
	current := currentTwins(p, t.BF16)
	readers := map[BufID][]string{}
	var made []BufID
	for i := range p.Forward {
		st := &p.Forward[i]
		if st.Kernel != KGemm || st.Attr.Precision != PrecisionBF16 || len(st.In) < 2 {
			continue
		}
		x, w := p.root(st.In[0]), p.root(st.In[1])
		if producer[x] == nil || !current(w) {
			continue
		}
		for _, id := range []BufID{x, w} {
			if p.TwinOf(id) == NoBuf {
				p.addTwin(id, 0)
				made = append(made, id)
			}
			readers[id] = append(readers[id], st.Layer)
			for j := range p.Twins {
				if p.Twins[j].Of == id {
					p.Twins[j].LastRead = i
				}
			}
		}
	}
	// The backward: a bf16 gemm_bwd whose dy a backward step writes with
	// its twin reads that twin as A, with x's twin as B for dW (x's, made
	// above for the forward GEMM) and W's for dx. Not when the step has a
	// fused activation, whose derivative it applies to dy in place first,
	// nor when a step between the producer and the reader writes dy again.
	steps := p.allSteps()
	bwdProducer := map[BufID]int{}
	for i := len(p.Forward); i < len(p.Forward)+len(p.Backward); i++ {
		st := steps[i]
		for k, o := range st.Out {
			if o == NoBuf {
				continue
			}
			delete(bwdProducer, p.root(o)) // written again: only its last writer counts
			if slices.Contains(t.BF16.Producers[st.Kernel], k) {
				bwdProducer[p.root(o)] = i
			}
		}
		if st.Kernel != KGemmBwd || st.Attr.Precision != PrecisionBF16 || st.Attr.Act != "" || len(st.In) < 4 || len(st.Out) < 2 {
			continue
		}
		dy, x, w := p.root(st.In[3]), p.root(st.In[0]), p.root(st.In[1])
		if _, ok := bwdProducer[dy]; !ok || dy == NoBuf {
			continue
		}
		dW := st.Out[1] != NoBuf && p.TwinOf(x) != NoBuf
		dX := st.Out[0] != NoBuf && current(w)
		if !dW && !dX {
			continue
		}
		use := []BufID{dy}
		if dW {
			use = append(use, x)
		}
		if dX {
			use = append(use, w)
		}
		for _, id := range use {
			if p.TwinOf(id) == NoBuf {
				p.addTwin(id, 0)
				made = append(made, id)
				if id == dy {
					producer[id] = steps[bwdProducer[dy]]
				}
			}
			for j := range p.Twins {
				if p.Twins[j].Of == id {
					p.Twins[j].LastRead = i
				}
			}
			readers[id] = append(readers[id], st.Layer+" (backward)")
		}
	}
	for i, id := range made {
		by := "its update step and the program"
		if st := producer[id]; st != nil && p.Buffers[id].Kind != KindParam {
			by = fmt.Sprintf("%s %s", st.Kernel, st.Layer)
		}
		p.Twins[i].Note = fmt.Sprintf("%s: written by %s, read by the GEMMs of %s", p.Buffers[p.Twins[i].Twin].Name, by, strings.Join(readers[id], ", "))
	}
}

// updateParamOutputs are the indexes of an optimizer step's outputs that
// are params: the first of SGD and Adam, every third of multi-tensor Adam,
// every second of multi-tensor SGD.
func updateParamOutputs(st Step) []int {
	switch st.Kernel {
	case KSGD, KAdam:
		return []int{0}
	case KAdamMulti:
		var ks []int
		for k := 0; k < len(st.Out); k += 3 {
			ks = append(ks, k)
		}
		return ks
	case KSGDMulti:
		var ks []int
		for k := 0; k < len(st.Out); k += 2 {
			ks = append(ks, k)
		}
		return ks
	}
	return nil
}

// currentTwins reports, for a buffer, whether it is a param whose
// bfloat16 twin stays current: in an inference plan every param, in a
// training plan a frozen one or one that an update step of
// twins.Updates writes (with its twin).
func currentTwins(p *Plan, twins *BF16Twins) func(BufID) bool {
	trainable := map[BufID]bool{}
	for _, pr := range p.Params {
		trainable[pr.Buf] = pr.Trainable
	}
	updated := map[BufID]bool{}
	for _, st := range p.Update {
		if !twins.Updates[st.Kernel] {
			continue
		}
		for _, k := range updateParamOutputs(st) {
			updated[st.Out[k]] = true
		}
	}
	return func(w BufID) bool {
		_, isParam := trainable[w]
		return isParam && p.Buffers[w].Kind == KindParam && (!p.Training || !trainable[w] || updated[w])
	}
}

// addTwin gives id's storage a bfloat16 twin of its shape (KindParamBF16
// for a param, else id's kind), last read by step lastRead, and returns
// the twin.
func (p *Plan) addTwin(id BufID, lastRead int) BufID {
	kind := p.Buffers[id].Kind
	if kind == KindParam {
		kind = KindParamBF16
	}
	tw := p.addBuffer(p.Buffers[id].Name+".bf16", kind, p.Buffers[id].Shape)
	p.Buffers[tw].Elem = ElemBF16
	p.Twins = append(p.Twins, Twin{Of: id, Twin: tw, LastRead: lastRead})
	return tw
}
