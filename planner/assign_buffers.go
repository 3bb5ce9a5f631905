package planner

import (
	"fmt"
	"sort"
)

// Align is the alignment, in float32 elements, of every buffer's offset in
// its arena: 256 bytes, which satisfies Metal's buffer-offset rules and
// keeps every buffer on its own cache lines.
const Align = 64

// Arena names.
const (
	ArenaState = "state" // params, statistics, param gradients, optimizer state
	ArenaWork  = "work"  // everything placed by liveness
)

// arenaOf returns the arena a buffer of kind k lives in.
func arenaOf(k BufKind) string {
	switch k {
	case KindParam, KindStat, KindParamGrad, KindOptState:
		return ArenaState
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
// weights file), then every param gradient, then the optimizer state; the
// work arena holds every other buffer at an offset chosen greedily,
// largest first, at the lowest place where it overlaps no buffer whose
// live range (first to last step touching its storage, over Forward ++
// Backward ++ Update) overlaps its own, so storage is reused once its last
// reader is done. The input and labels are live from before the first step
// and the input, labels, output and loss until after the last (the program
// reads them between steps). Views take their storage owner's offset.
// StateSize, WorkSize and NaiveWorkSize (every work buffer its own storage)
// are set. With a memory limit, a plan above it fails naming the layer
// whose buffers take the most.
func assignBuffers(p *Plan, memoryLimit int64) error {
	for i := range p.Buffers {
		p.Buffers[i].Arena = arenaOf(p.Buffers[i].Kind)
		p.Buffers[i].Offset = 0
	}
	// State arena, in Params order.
	next := 0
	place := func(id BufID) {
		if id == NoBuf {
			return
		}
		p.Buffers[id].Offset = next
		next += alignUp(p.Buffers[id].Size)
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
	p.StateSize = next

	// Work arena, largest first.
	first, last := liveRanges(p)
	var order []BufID
	p.NaiveWorkSize = 0
	for i, b := range p.Buffers {
		if b.Arena == ArenaWork && b.AliasOf == NoBuf {
			order = append(order, BufID(i))
			p.NaiveWorkSize += alignUp(b.Size)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := p.Buffers[order[i]], p.Buffers[order[j]]
		if a.Size != b.Size {
			return a.Size > b.Size
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
				busy = append(busy, span{off, off + alignUp(p.Buffers[q].Size)})
			}
		}
		sort.Slice(busy, func(i, j int) bool { return busy[i].lo < busy[j].lo })
		size := alignUp(p.Buffers[id].Size)
		off := 0
		for _, s := range busy {
			if off+size <= s.lo {
				break
			}
			off = max(off, s.hi)
		}
		p.Buffers[id].Offset = off
		p.WorkSize = max(p.WorkSize, off+size)
		placed = append(placed, id)
	}
	for i := range p.Buffers {
		if r := p.root(BufID(i)); r != BufID(i) {
			p.Buffers[i].Offset = p.Buffers[r].Offset
			p.Buffers[i].Arena = p.Buffers[r].Arena
		}
	}
	if memoryLimit > 0 {
		if total := 4 * int64(p.StateSize+p.WorkSize); total > memoryLimit {
			layer, bytes := dominantLayer(p)
			return &Error{Layer: layer, Msg: fmt.Sprintf(
				"the plan needs %d bytes (%s: state %s, work %s at batch %d), above the memory limit of %d bytes (%s); this layer's buffers take the most (%s): lower the batch size or shrink this layer",
				total, formatBytes(total), formatBytes(4*int64(p.StateSize)), formatBytes(4*int64(p.WorkSize)), p.Batch,
				memoryLimit, formatBytes(memoryLimit), formatBytes(bytes))}
		}
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
		total[layers[i]] += 4 * int64(b.Size)
	}
	best := ""
	for _, n := range names { // first in plan order wins a tie
		if best == "" || total[n] > total[best] {
			best = n
		}
	}
	return best, total[best]
}

// formatBytes prints a byte count with a binary unit.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
