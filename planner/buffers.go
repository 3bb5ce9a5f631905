package planner

import "fmt"

// This file holds the small editing operations the passes share: adding
// buffers and views, following aliases to the storage they view, and
// dropping buffers a pass made unused.

// addBuffer appends a buffer that owns its storage and returns its ID.
func (p *Plan) addBuffer(name string, kind BufKind, shape []int) BufID {
	id := BufID(len(p.Buffers))
	p.Buffers = append(p.Buffers, Buffer{
		ID: id, Name: name, Kind: kind, Shape: append([]int(nil), shape...),
		Size: numElements(shape), AliasOf: NoBuf,
	})
	return id
}

// addView appends a buffer that views the storage of target with another
// shape of the same size. Views of views point at the storage's owner.
func (p *Plan) addView(name string, target BufID, shape []int) BufID {
	root := p.root(target)
	id := p.addBuffer(name, p.Buffers[root].Kind, shape)
	p.Buffers[id].AliasOf = root
	return id
}

// root returns the buffer that owns id's storage (id itself when it is not
// a view).
func (p *Plan) root(id BufID) BufID {
	for id != NoBuf && p.Buffers[id].AliasOf != NoBuf {
		id = p.Buffers[id].AliasOf
	}
	return id
}

// shapeOf returns the shape of buffer id.
func (p *Plan) shapeOf(id BufID) []int { return p.Buffers[id].Shape }

// allSteps returns the steps of every phase in execution order: the order
// liveness is computed over.
func (p *Plan) allSteps() []*Step {
	var steps []*Step
	for _, ph := range []*Phase{&p.Forward, &p.Backward, &p.Update} {
		for i := range *ph {
			steps = append(steps, &(*ph)[i])
		}
	}
	return steps
}

// dropForward removes the forward steps a fusion pass marked (drop[i] for
// step i), keeping the others in order, and then the buffers no step
// uses any more.
func (p *Plan) dropForward(drop []bool) {
	var kept Phase
	for i, s := range p.Forward {
		if !drop[i] {
			kept = append(kept, s)
		}
	}
	p.Forward = kept
	p.removeUnused()
}

// removeUnused drops the buffers that no step, param or plan field refers
// to (directly or as the storage of a view that is referred to) and
// renumbers the rest, keeping their order. Fusion passes call it after
// folding a step's output away.
func (p *Plan) removeUnused() {
	used := make([]bool, len(p.Buffers))
	mark := func(id BufID) {
		if id != NoBuf {
			used[id] = true
		}
	}
	for _, s := range p.allSteps() {
		for _, id := range s.In {
			mark(id)
		}
		for _, id := range s.Out {
			mark(id)
		}
	}
	for _, pr := range p.Params {
		mark(pr.Buf)
		mark(pr.Grad)
		for _, id := range pr.State {
			mark(id)
		}
	}
	mark(p.Input)
	mark(p.Labels)
	mark(p.Output)
	mark(p.Loss)
	for i := range p.Buffers {
		if used[i] && p.Buffers[i].AliasOf != NoBuf {
			used[p.root(BufID(i))] = true
		}
	}
	renum := make([]BufID, len(p.Buffers))
	kept := p.Buffers[:0]
	for i, b := range p.Buffers {
		if !used[i] {
			renum[i] = NoBuf
			continue
		}
		renum[i] = BufID(len(kept))
		kept = append(kept, b)
	}
	p.Buffers = kept
	re := func(id *BufID) {
		if *id != NoBuf {
			*id = renum[*id]
		}
	}
	for i := range p.Buffers {
		re(&p.Buffers[i].ID)
		re(&p.Buffers[i].AliasOf)
	}
	for _, s := range p.allSteps() {
		for i := range s.In {
			re(&s.In[i])
		}
		for i := range s.Out {
			re(&s.Out[i])
		}
	}
	for i := range p.Params {
		re(&p.Params[i].Buf)
		re(&p.Params[i].Grad)
		for j := range p.Params[i].State {
			re(&p.Params[i].State[j])
		}
	}
	re(&p.Input)
	re(&p.Labels)
	re(&p.Output)
	re(&p.Loss)
}

// numElements is the product of shape's dimensions (1 for a scalar).
func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// withBatch returns the full shape of a per-sample shape: batch first.
func withBatch(batch int, perSample []int) []int {
	return append([]int{batch}, perSample...)
}

// equalShapes reports whether a and b are the same shape.
func equalShapes(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// shapeString prints a shape as [2,3,4].
func shapeString(s []int) string {
	out := "["
	for i, d := range s {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprint(d)
	}
	return out + "]"
}
