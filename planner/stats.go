package planner

import "github.com/mlbuild/mlbuild/spec"

// Stats summarises a plan's cost per training step (or per forward pass
// for an inference plan): what `mlbuild plan` prints and what fusion and
// the memory plan are judged by.
type Stats struct {
	ForwardSteps, BackwardSteps, UpdateSteps int
	ForwardFLOPs, BackwardFLOPs, UpdateFLOPs int64
	ForwardBytes, BackwardBytes, UpdateBytes int64
	// FoldSteps, FoldFLOPs and FoldBytes are an inference plan's fold
	// steps (Plan.FoldSteps), which run when the weights change, not on
	// every batch; the Forward figures leave them out.
	FoldSteps            int
	FoldFLOPs, FoldBytes int64
	// TotalFLOPs and TotalBytes add up the three phases.
	TotalFLOPs, TotalBytes int64
	// Params counts trainable elements; ParamTensors the trainable tensors.
	Params       int64
	ParamTensors int
	// StateBytes is the state arena; PeakWorkBytes the work arena after
	// liveness-based reuse; NaiveWorkBytes the work arena with every
	// buffer on its own.
	StateBytes, PeakWorkBytes, NaiveWorkBytes int64
	// FoldedBytes is the folded arena (Plan.FoldedSize).
	FoldedBytes int64
}

// Stats adds up the plan's steps and memory.
func (p *Plan) Stats() Stats {
	var st Stats
	sum := func(ph Phase) (n int, flops, bytes int64) {
		for _, s := range ph {
			flops, _ = spec.AddCount(flops, s.FLOPs) // saturates, never wraps
			bytes, _ = spec.AddCount(bytes, s.Bytes)
		}
		return len(ph), flops, bytes
	}
	folds := p.FoldSteps()
	st.FoldSteps, st.FoldFLOPs, st.FoldBytes = sum(p.Forward[:folds])
	st.ForwardSteps, st.ForwardFLOPs, st.ForwardBytes = sum(p.Forward[folds:])
	st.BackwardSteps, st.BackwardFLOPs, st.BackwardBytes = sum(p.Backward)
	st.UpdateSteps, st.UpdateFLOPs, st.UpdateBytes = sum(p.Update)
	st.TotalFLOPs, _ = spec.AddCount(st.ForwardFLOPs, st.BackwardFLOPs)
	st.TotalFLOPs, _ = spec.AddCount(st.TotalFLOPs, st.UpdateFLOPs)
	st.TotalBytes, _ = spec.AddCount(st.ForwardBytes, st.BackwardBytes)
	st.TotalBytes, _ = spec.AddCount(st.TotalBytes, st.UpdateBytes)
	for _, pr := range p.Params {
		if p.Buffers[pr.Buf].Kind == KindParam {
			st.Params += int64(p.Buffers[pr.Buf].Size)
			st.ParamTensors++
		}
	}
	// assignBuffers keeps each arena below 2^60 elements: its bytes fit.
	st.StateBytes = 4 * int64(p.StateSize)
	st.FoldedBytes = 4 * int64(p.FoldedSize)
	st.PeakWorkBytes = 4 * int64(p.WorkSize)
	st.NaiveWorkBytes = 4 * int64(p.NaiveWorkSize)
	return st
}

// Memory is where a plan's memory goes, in bytes: the state arena by
// use, and the work arena at its peak, the step where the buffers alive
// at once are largest, by what those buffers are for. The work arena
// itself may be a little larger than the sum alive at its peak: reuse
// leaves gaps.
type Memory struct {
	// The state arena: weights (params and statistics), the params'
	// gradients, the optimizer's state (moments, velocities).
	Weights, Gradients, Optimizer int64
	// PeakPhase ("forward", "backward" or "update") and PeakStep (from 0
	// in its phase, as `mlbuild plan` numbers them) are the step where
	// the most work bytes are alive, PeakLayer its layer.
	PeakStep             int
	PeakLayer, PeakPhase string
	// The work buffers alive at PeakStep: forward values (and the batch)
	// that a backward step still reads, the other forward values, the
	// gradients of forward values, and steps' workspace (im2col columns,
	// dropout masks, saved statistics).
	KeptForBackward, Activations, ActivationGrads, Scratch int64
	// Folded is the folded arena: an inference plan's batch norms folded
	// into the weights of the layers before them (KindFolded).
	Folded int64
	// Work is the work arena; Total the state and work arenas together,
	// the plan's peak.
	Work, Total int64
}

// Memory works out where the plan's memory goes from its buffers and
// their live ranges (the ones assign_buffers placed them by).
func (p *Plan) Memory() Memory {
	var m Memory
	for _, b := range p.Buffers {
		if b.AliasOf != NoBuf {
			continue
		}
		n := 4 * int64(b.Slots())
		switch b.Kind {
		case KindParam, KindStat, KindParamBF16:
			m.Weights += n
		case KindParamGrad, KindGradSum:
			m.Gradients += n
		case KindOptState:
			m.Optimizer += n
		}
	}
	m.Folded = 4 * int64(p.FoldedSize)
	m.Work = 4 * int64(p.WorkSize)
	m.Total = 4*int64(p.StateSize) + m.Folded + m.Work
	first, last := liveRanges(p)
	steps := p.allSteps()
	readBack := make([]bool, len(p.Buffers)) // read by a backward step
	for _, s := range p.Backward {
		for _, id := range s.In {
			if id != NoBuf {
				readBack[p.root(id)] = true
			}
		}
	}
	best := int64(-1)
	for i := range steps {
		var at Memory
		var alive int64
		for id, b := range p.Buffers {
			if b.AliasOf != NoBuf || b.Arena != ArenaWork || first[id] > i || last[id] < i {
				continue
			}
			n := 4 * int64(b.Slots())
			alive += n
			switch {
			case b.Kind == KindScratch:
				at.Scratch += n
			case b.Kind == KindGrad:
				at.ActivationGrads += n
			case p.Training && readBack[id]:
				at.KeptForBackward += n
			default:
				at.Activations += n
			}
		}
		if alive > best {
			best = alive
			m.PeakStep, m.PeakLayer, m.PeakPhase = i, steps[i].Layer, "update"
			switch f, b := len(p.Forward), len(p.Backward); {
			case i < f:
				m.PeakPhase = "forward"
			case i < f+b:
				m.PeakPhase, m.PeakStep = "backward", i-f
			default:
				m.PeakStep = i - f - b
			}
			m.KeptForBackward, m.Activations, m.ActivationGrads, m.Scratch = at.KeptForBackward, at.Activations, at.ActivationGrads, at.Scratch
		}
	}
	return m
}
