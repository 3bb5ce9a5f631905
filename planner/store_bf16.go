package planner

import (
	"fmt"
	"slices"
	"strings"
)

// storeBF16 keeps a bf16 plan's activations and their gradients in
// bfloat16 memory where every step that touches them can read and write
// bfloat16 (Target.BF16Storage), as PyTorch's autocast keeps a
// convolutional network's: the library convolutions then multiply
// bfloat16 tensors on tensor cores, and the batch norms, activations and
// sums around them move half the bytes. Sums of many terms (a batch
// norm's statistics, the gradients' reductions) still add in float32
// inside their kernels; only what a kernel stores is rounded.
//
// Before: all phases are final; a library convolution step
// (Attr.Method = Target.BF16Storage.Library) of a bf16 plan has
// Precision bf16 (the Target's ConvPrecision gives it bf16 when the
// Target has BF16Storage); no buffer but the twins has an Elem.
// After: a buffer that owns its storage, of kind activation or grad, is
// no plan input, output, labels or loss, has no twin and is no twin, is
// stored in bfloat16 (Elem ElemBF16, it and its views; listed in
// Plan.Stored) when every step that names it is of a kernel in
// BF16Storage.Kernels, a library convolution in bf16, or a convolution
// of BF16Storage.Direct without an epilogue pool, except in an inference
// plan a direct convolution followed by a batch norm: that batch norm is
// element-wise there, reads a float32 NCHW tensor as fast, and the direct
// kernel writes NCHW faster (CIFAR ResNet-18's stem 39 µs against 77,
// docs/runs/gpu-thirteenth-c-2026-11-30.txt); where the batch norm was
// folded into it (fold_batchnorm.go) the library convolution after it
// reads its output in bfloat16. A library
// convolution stays in bf16 only where x and y (the forward), or x, dy
// and dx (the backward, where present) are so stored and W is a param
// whose twin stays current (twin_operands.go's rule); it then reads W's
// twin (made here where twinOperands made none, last read by the last
// such step; for a Target that may keep tensors channels last,
// storeChannelsLast makes it for the convolutions that stay NCHW), and a
// backward that writes dW gets a bfloat16 workspace of W's shape (In[4],
// kind scratch, listed in Plan.Stored), where the library writes dW
// before its lowering widens it into dW. Any other
// library step runs in tf32, with a line in Plan.Precisions saying
// which tensor stays float32 and why, and its tensors stay float32. The
// choice is a fixed point: a convolution that falls back to tf32
// returns its tensors to float32, which may make others fall back.
// A plan of another precision, or for a Target without BF16Storage,
// is unchanged.
func storeBF16(p *Plan, t Target) {
	s := t.BF16Storage
	if s == nil || p.Precision != PrecisionBF16 {
		return
	}
	steps := p.allSteps()
	library := s.bf16Library
	// why says why a buffer left the candidates, for the fallback's line.
	cand, why := map[BufID]bool{}, map[BufID]string{}
	twinned := map[BufID]bool{}
	for _, tw := range p.Twins {
		twinned[tw.Of], twinned[tw.Twin] = true, true
	}
	special := map[BufID]string{p.Input: "the model's input", p.Output: "the model's output", p.Labels: "the labels", p.Loss: "the loss"}
	for i, b := range p.Buffers {
		id := BufID(i)
		if b.AliasOf == NoBuf && (b.Kind == KindActivation || b.Kind == KindGrad) && b.Elem == "" && !twinned[id] {
			cand[id] = true
		}
	}
	for id, what := range special {
		if id != NoBuf {
			delete(cand, p.root(id))
			why[p.root(id)] = what
		}
	}
	for id := range twinned {
		why[id] = "a GEMM reads its bfloat16 twin"
	}
	current := func(BufID) bool { return false }
	if t.BF16 != nil {
		current = currentTwins(p, t.BF16)
	}
	for changed := true; changed; {
		changed = false
		for _, st := range steps {
			if library(st) {
				bad := libraryFloat32(p, st, cand, why, current)
				if bad == "" {
					continue
				}
				st.Attr.Precision = PrecisionTF32
				p.Precisions = append(p.Precisions, fmt.Sprintf("%s %s: tf32, not bf16: %s (cuDNN multiplies bf16 only on bfloat16 tensors)", st.Kernel, st.Layer, bad))
				changed = true
			}
			if s.Kernels[st.Kernel] && st.Kernel != KConv2D && st.Kernel != KConv2DBwd || s.direct(st) && (p.Training || !readByNorm(p, st)) {
				continue
			}
			for _, ids := range [][]BufID{st.In, st.Out} {
				for _, id := range ids {
					if r := p.root(id); id != NoBuf && cand[r] {
						delete(cand, r)
						why[r] = fmt.Sprintf("%s %s reads or writes it in float32 only", st.Kernel, st.Layer)
						changed = true
					}
				}
			}
		}
	}
	// dW's workspaces, and W's twins where the Target keeps tensors NCHW
	// (storeChannelsLast makes them, for the convolutions that stay NCHW,
	// where it may not).
	convs := 0
	for _, st := range steps {
		if !library(st) {
			continue
		}
		if st.Kernel == KConv2D {
			convs++
		}
		if st.Kernel == KConv2DBwd && st.Out[1] != NoBuf {
			ws := p.addBuffer(st.Layer+".dW.bf16", KindScratch, p.Buffers[st.Out[1]].Shape)
			p.Buffers[ws].Elem = ElemBF16
			st.In[4] = ws
			p.Stored = append(p.Stored, ws)
		}
	}
	if s.BatchNormScratch == nil {
		filterTwins(p, steps, func(st *Step) bool { return library(st) && !folded(p, st) })
	}
	// A folded weight and bias (fold_batchnorm.go), which their fold step
	// alone writes, are stored as the library reads them: in bfloat16.
	var foldedStored []BufID
	for _, st := range steps {
		if library(st) && st.Kernel == KConv2D && folded(p, st) {
			for _, id := range st.In[1:3] {
				if id != NoBuf && p.Buffers[id].Elem == "" {
					p.Buffers[id].Elem = ElemBF16
					foldedStored = append(foldedStored, id)
				}
			}
		}
	}
	defer func() { p.Stored = append(p.Stored, foldedStored...) }()
	// The stored buffers: those a step names (an untouched one needs no
	// element type), with their views.
	named := map[BufID]bool{}
	for _, st := range steps {
		for _, ids := range [][]BufID{st.In, st.Out} {
			for _, id := range ids {
				if id != NoBuf && cand[p.root(id)] {
					named[p.root(id)] = true
				}
			}
		}
	}
	var owners []BufID
	for i := range p.Buffers {
		id := BufID(i)
		if r := p.root(id); named[r] {
			p.Buffers[i].Elem = ElemBF16
			if r == id {
				owners = append(owners, id)
			}
		}
	}
	p.Stored = append(owners, p.Stored...)
	if len(p.Stored) > 0 {
		p.StoredNote = fmt.Sprintf("%d activations and gradients in bfloat16 memory, which every step that names them reads and writes in bfloat16 (sums add in float32)", len(owners))
		if convs > 0 {
			p.StoredNote += fmt.Sprintf("; %d library convolutions multiply bfloat16 tensors, %d of them writing dW to a bfloat16 workspace", convs, len(p.Stored)-len(owners))
		}
	}
}

// libraryFloat32 says why library convolution st cannot multiply
// bfloat16 tensors: which of its tensors is not a candidate for bfloat16
// storage (cand; why says why not) or that W has no current twin; "" when
// none.
func libraryFloat32(p *Plan, st *Step, cand map[BufID]bool, why map[BufID]string, current func(BufID) bool) string {
	for _, x := range libraryTensors(st) {
		if x.id == NoBuf || cand[p.root(x.id)] {
			continue
		}
		reason := why[p.root(x.id)]
		if reason == "" {
			reason = "not an activation or gradient the plan may store in bfloat16"
		}
		return fmt.Sprintf("%s (%s) stays float32: %s", x.name, p.Buffers[x.id].Name, reason)
	}
	if w := p.root(st.In[1]); p.Buffers[w].Kind != KindFolded && !current(w) {
		return fmt.Sprintf("W (%s) has no bfloat16 twin that its update keeps current", p.Buffers[w].Name)
	}
	return ""
}

// readByNorm reports whether a forward step reads st's output as a batch
// norm's input.
func readByNorm(p *Plan, st *Step) bool {
	for _, r := range p.Forward {
		if r.Kernel == KBatchNorm && len(r.In) > 0 && len(st.Out) > 0 && p.root(r.In[0]) == p.root(st.Out[0]) {
			return true
		}
	}
	return false
}

// folded reports whether convolution st reads a folded weight
// (fold_batchnorm.go), which has no twin: a bf16 plan stores it in
// bfloat16 itself.
func folded(p *Plan, st *Step) bool { return p.Buffers[p.root(st.In[1])].Kind == KindFolded }

// filterTwins gives the weight W of every step that reads(st) a
// bfloat16 twin (the library convolutions that read it), last read by
// the last such step, or extends the LastRead of the twin it has.
func filterTwins(p *Plan, steps []*Step, reads func(*Step) bool) {
	lastRead, readers := map[BufID]int{}, map[BufID][]string{}
	var weights []BufID // in the order of their first reader
	for i, st := range steps {
		if !reads(st) {
			continue
		}
		w := p.root(st.In[1])
		if _, seen := lastRead[w]; !seen {
			weights = append(weights, w)
		}
		lastRead[w] = i
		if !slices.Contains(readers[w], st.Layer) {
			readers[w] = append(readers[w], st.Layer)
		}
	}
	for _, w := range weights {
		i := lastRead[w]
		if p.TwinOf(w) == NoBuf {
			p.addTwin(w, i)
			p.Twins[len(p.Twins)-1].Note = fmt.Sprintf("%s: written by its update step and the program, read by the library convolutions of %s", p.Buffers[p.TwinOf(w)].Name, strings.Join(readers[w], ", "))
			continue
		}
		for j := range p.Twins {
			if p.Twins[j].Of == w {
				p.Twins[j].LastRead = max(p.Twins[j].LastRead, i)
			}
		}
	}
}

// convTensor is one of a library convolution's activation tensors, with
// its name for messages.
type convTensor struct {
	name string
	id   BufID
}

// libraryTensors are the tensors a library convolution step needs in
// one element type and layout: x and y of the forward, x, dy and dx of
// the backward (dx may be NoBuf).
func libraryTensors(st *Step) []convTensor {
	if st.Kernel == KConv2DBwd {
		return []convTensor{{"x", st.In[0]}, {"dy", st.In[3]}, {"dx", st.Out[0]}}
	}
	if len(st.In) > 3 { // the residual of fuse_conv_sum.go
		return []convTensor{{"x", st.In[0]}, {"y", st.Out[0]}, {"z", st.In[3]}}
	}
	return []convTensor{{"x", st.In[0]}, {"y", st.Out[0]}}
}
