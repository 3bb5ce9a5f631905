package planner

import "github.com/mlbuild/mlbuild/spec"

// Stats summarises a plan's cost per training step (or per forward pass
// for an inference plan): what `mlbuild plan` prints and what fusion and
// the memory plan are judged by.
type Stats struct {
	ForwardSteps, BackwardSteps, UpdateSteps int
	ForwardFLOPs, BackwardFLOPs, UpdateFLOPs int64
	ForwardBytes, BackwardBytes, UpdateBytes int64
	// TotalFLOPs and TotalBytes add up the three phases.
	TotalFLOPs, TotalBytes int64
	// Params counts trainable elements; ParamTensors the trainable tensors.
	Params       int64
	ParamTensors int
	// StateBytes is the state arena; PeakWorkBytes the work arena after
	// liveness-based reuse; NaiveWorkBytes the work arena with every
	// buffer on its own.
	StateBytes, PeakWorkBytes, NaiveWorkBytes int64
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
	st.ForwardSteps, st.ForwardFLOPs, st.ForwardBytes = sum(p.Forward)
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
	st.PeakWorkBytes = 4 * int64(p.WorkSize)
	st.NaiveWorkBytes = 4 * int64(p.NaiveWorkSize)
	return st
}
