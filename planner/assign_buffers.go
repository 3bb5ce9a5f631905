package planner

import (
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/mlbuild/mlbuild/spec"
)

// Align is the alignment, in float32 elements, of every buffer's offset in
// its arena: 256 bytes, which satisfies Metal's buffer-offset rules and
// keeps every buffer on its own cache lines.
const Align = 64

// Arena names.
const (
	ArenaState = "state" // params, statistics, param gradients, optimizer state
	ArenaWork  = "work"  // everything placed by liveness
	// ArenaFolded holds an inference plan's folded weights
	// (fold_batchnorm.go), which the program keeps between batches and
	// shares between its inference plans: they fold the same layers.
	ArenaFolded = "folded"
)

// arenaOf returns the arena a buffer of kind k lives in.
func arenaOf(k BufKind) string {
	switch k {
	case KindParam, KindStat, KindParamGrad, KindOptState, KindGradSum, KindParamBF16:
		return ArenaState
	case KindFolded:
		return ArenaFolded
	}
	return ArenaWork
}

// alignUp rounds n up to a multiple of Align.
func alignUp(n int) int { return (n + Align - 1) / Align * Align }

// assignBuffers is the memory plan: it gives every buffer an arena and an
// offset.
//
// Before: all phases are final. After: the state arena holds, in Params
// order, every param and statistic (contiguous, the order of a saved
// weights file), then every param gradient, then the optimizer state,
// then the gradient sums of accumulation in buffer order, then the
// weights' bfloat16 twins in Twins order; the folded arena holds the
// folded weights (KindFolded) in buffer order; the work arena holds every
// other buffer at an offset chosen greedily, largest first, at the
// lowest place where it overlaps no buffer whose live range (first to last step touching its storage, over Forward ++
// Backward ++ Update) overlaps its own, so storage is reused once its last
// reader is done. The input and labels are live from before the first step
// and the input, labels, output and loss until after the last (the program
// reads them between steps), and an activation's twin (Plan.Twins) from its producer to its last reader
// (Twin.LastRead). A bfloat16 buffer takes Slots() places. Views take
// their storage owner's offset.
// StateSize, FoldedSize, WorkSize and NaiveWorkSize (every work buffer
// its own storage) are set. Sizes and offsets are added up with checked arithmetic: a buffer
// of more than spec.MaxCount elements, or arenas whose bytes would not fit
// the integers of mlbuild or of the program, fail naming the layer and the
// bytes. With a memory limit (why says where it comes from, for the
// message), a plan above it fails naming the layer whose buffers take the
// most.
func assignBuffers(p *Plan, memoryLimit int64, why string) error {
	if err := checkBufferSizes(p); err != nil {
		return err
	}
	for i := range p.Buffers {
		p.Buffers[i].Arena = arenaOf(p.Buffers[i].Kind)
		p.Buffers[i].Offset = 0
	}
	// Offsets are counted in int64 and must fit an int (and their bytes an
	// int64); over marks the first buffer placed past that.
	over := NoBuf
	fits := func(id BufID, end int64) int {
		if end > maxArenaElements && over == NoBuf {
			over = id
		}
		return int(min(end, maxArenaElements))
	}
	// State arena, in Params order.
	next := 0
	place := func(id BufID) {
		if id == NoBuf {
			return
		}
		p.Buffers[id].Offset = next
		next = fits(id, int64(next)+int64(alignUp(p.Buffers[id].Slots())))
	}
	for _, pr := range p.Params {
		place(pr.Buf)
	}
	for _, pr := range p.Params {
		place(pr.Grad)
	}
	for _, pr := range p.Params {
		for _, id := range pr.State {
			place(id)
		}
	}
	for i, b := range p.Buffers {
		if b.Kind == KindGradSum {
			place(BufID(i))
		}
	}
	for _, t := range p.Twins {
		if p.Buffers[t.Twin].Kind == KindParamBF16 {
			place(t.Twin)
		}
	}
	p.StateSize = next
	next = 0
	for i, b := range p.Buffers {
		if b.Kind == KindFolded && b.AliasOf == NoBuf {
			place(BufID(i))
		}
	}
	p.FoldedSize = next

	// Work arena, largest first.
	first, last := liveRanges(p)
	var order []BufID
	p.NaiveWorkSize = 0
	for i, b := range p.Buffers {
		if b.Arena == ArenaWork && b.AliasOf == NoBuf {
			order = append(order, BufID(i))
			p.NaiveWorkSize = fits(BufID(i), int64(p.NaiveWorkSize)+int64(alignUp(b.Slots())))
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := p.Buffers[order[i]], p.Buffers[order[j]]
		if a.Slots() != b.Slots() {
			return a.Slots() > b.Slots()
		}
		return first[a.ID] < first[b.ID]
	})
	type span struct{ lo, hi int }
	var placed []BufID
	p.WorkSize = 0
	for _, id := range order {
		var busy []span
		for _, q := range placed {
			if first[q] <= last[id] && first[id] <= last[q] {
				off := p.Buffers[q].Offset
				busy = append(busy, span{off, off + alignUp(p.Buffers[q].Slots())})
			}
		}
		sort.Slice(busy, func(i, j int) bool { return busy[i].lo < busy[j].lo })
		size := alignUp(p.Buffers[id].Slots())
		off := 0
		for _, s := range busy {
			if off+size <= s.lo {
				break
			}
			off = max(off, s.hi)
		}
		p.Buffers[id].Offset = off
		p.WorkSize = max(p.WorkSize, fits(id, int64(off)+int64(size)))
		placed = append(placed, id)
	}
	for i := range p.Buffers {
		if r := p.root(BufID(i)); r != BufID(i) {
			p.Buffers[i].Offset = p.Buffers[r].Offset
			p.Buffers[i].Arena = p.Buffers[r].Arena
		}
	}
	total := int64(p.StateSize) + int64(p.WorkSize) // each below 2^61: no overflow
	if over == NoBuf && total > maxArenaElements {
		over = p.Output
	}
	if over != NoBuf {
		layer := bufferLayers(p)[p.root(over)]
		return &spec.Error{Layer: layer, Message: fmt.Sprintf(
			"the plan's buffers at batch %d need more than %s, more than mlbuild can place (the arenas' offsets must fit this mlbuild's %d-bit integers); lower the batch size or shrink this layer, whose %s takes %s",
			p.Batch, bytesText(maxArenaElements), bits.UintSize, p.Buffers[over].Name, bytesText(int64(p.Buffers[over].Size)))}
	}
	if memoryLimit > 0 {
		if total := spec.BytesPerElement * total; total > memoryLimit {
			layer, bytes := dominantLayer(p)
			limit := formatBytes(memoryLimit)
			if why != "" {
				limit += ", " + why
			}
			return &spec.Error{Layer: layer, Message: fmt.Sprintf(
				"the plan needs %d bytes (%s: state %s, work %s at batch %d), above the memory limit of %d bytes (%s); this layer's buffers take the most (%s): lower the batch size or shrink this layer",
				total, formatBytes(total), formatBytes(4*int64(p.StateSize)), formatBytes(4*int64(p.WorkSize)), p.Batch,
				memoryLimit, limit, formatBytes(bytes))}
		}
	}
	return nil
}

// maxArenaElements bounds an arena's size and every offset in it, in
// elements: an int of this mlbuild holds it, and its bytes (with the two
// arenas together) an int64.
const maxArenaElements = min(math.MaxInt, math.MaxInt64/(2*spec.BytesPerElement))

// checkBufferSizes checks, before any offset is added up, that every
// buffer's shape holds at most spec.MaxCount elements, counted without
// overflow, and fails naming the layer, the buffer and its bytes otherwise
// (a size that is not its shape's count is a bug, reported as one). Activations and params are within the bound whenever
// the spec is (spec.CheckLimitsAt); a step's scratch, which a backend
// sizes, is checked here alone.
func checkBufferSizes(p *Plan) error {
	var layers []string
	for i, b := range p.Buffers {
		n, exact := spec.ShapeCount(b.Shape)
		if exact && n == int64(b.Size) && n <= spec.MaxCount {
			continue
		}
		if layers == nil {
			layers = bufferLayers(p)
		}
		if exact && n != int64(b.Size) {
			return fmt.Errorf("planner: buffer %s has size %d but its shape %s holds %d elements (a bug in mlbuild)", b.Name, b.Size, shapeString(b.Shape), n)
		}
		what := fmt.Sprintf("%d elements (%s as f32)", n, bytesText(n))
		if !exact {
			what = "more than 2^63 elements"
		}
		return &spec.Error{Layer: layers[p.root(BufID(i))], Message: fmt.Sprintf(
			"buffer %s %s holds %s, more than the %d (2^40) mlbuild allows in one buffer; lower the batch size or shrink this layer",
			b.Name, shapeString(b.Shape), what, spec.MaxCount)}
	}
	return nil
}

// liveRanges returns, for every buffer that owns storage, the indexes of
// the first and last steps (over Forward ++ Backward ++ Update) that touch
// its storage; -1 before the first step, len(steps) after the last.
// Buffers no step touches get first > last.
func liveRanges(p *Plan) (first, last []int) {
	steps := p.allSteps()
	first = make([]int, len(p.Buffers))
	last = make([]int, len(p.Buffers))
	for i := range first {
		first[i], last[i] = len(steps)+1, -2
	}
	touch := func(id BufID, at int) {
		if id == NoBuf {
			return
		}
		r := p.root(id)
		first[r] = min(first[r], at)
		last[r] = max(last[r], at)
	}
	for i, s := range steps {
		for _, id := range s.In {
			touch(id, i)
		}
		for _, id := range s.Out {
			touch(id, i)
		}
	}
	for _, id := range []BufID{p.Input, p.Labels} {
		touch(id, -1)
		touch(id, len(steps))
	}
	for _, id := range []BufID{p.Output, p.Loss} {
		touch(id, len(steps))
	}
	// A twin is named by no step: a weight's lives as long as the weight,
	// an activation's from its producer, which writes it with the float32
	// value, to the last GEMM that reads it (Twin.LastRead).
	for _, t := range p.Twins {
		first[t.Twin], last[t.Twin] = first[t.Of], last[t.Of]
		if arenaOf(p.Buffers[t.Twin].Kind) == ArenaWork {
			last[t.Twin] = min(last[t.Of], max(t.LastRead, first[t.Of]))
		}
	}
	return first, last
}

// bufferLayers returns, for every buffer, the layer it belongs to: a
// param's layer for state buffers, else the layer of the first step that
// touches its storage.
func bufferLayers(p *Plan) []string {
	layer := make([]string, len(p.Buffers))
	for _, pr := range p.Params {
		for _, id := range append([]BufID{pr.Buf, pr.Grad}, pr.State...) {
			if id != NoBuf {
				layer[id] = pr.Layer
			}
		}
	}
	for _, s := range p.allSteps() {
		for _, ids := range [][]BufID{s.In, s.Out} {
			for _, id := range ids {
				if id != NoBuf && layer[p.root(id)] == "" {
					layer[p.root(id)] = s.Layer
				}
			}
		}
	}
	return layer
}

// dominantLayer returns the layer whose buffers (state and work, each
// counted once at its full size) take the most bytes, and those bytes.
func dominantLayer(p *Plan) (string, int64) {
	layers := bufferLayers(p)
	var names []string
	total := map[string]int64{}
	for i, b := range p.Buffers {
		if b.AliasOf != NoBuf || layers[i] == "" {
			continue
		}
		if _, ok := total[layers[i]]; !ok {
			names = append(names, layers[i])
		}
		total[layers[i]], _ = spec.AddCount(total[layers[i]], spec.BytesPerElement*int64(b.Slots())) // sizes within spec.MaxCount (checkBufferSizes)
	}
	best := ""
	for _, n := range names { // first in plan order wins a tie
		if best == "" || total[n] > total[best] {
			best = n
		}
	}
	return best, total[best]
}

// bytesText is the bytes of n float32 elements, "N bytes (X GiB)", counted
// without overflow.
func bytesText(n int64) string {
	b, ok := spec.MulCount(n, spec.BytesPerElement)
	if !ok {
		return "more than 2^63 bytes"
	}
	return fmt.Sprintf("%d bytes (%s)", b, formatBytes(b))
}

// formatBytes prints a byte count with a binary unit.
func formatBytes(n int64) string { return spec.FormatBytes(n) }
