package app

import (
	"strings"

	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// MemoryUse is where one plan's memory goes, in bytes, from the planner's
// account of its buffers (planner.Plan.Memory), for `info`.
type MemoryUse struct {
	Phase string // "training" or "inference"
	// The state arena's weights (params and statistics), their gradients
	// and the optimizer's state.
	Weights, Gradients, Optimizer int64
	// The work arena's buffers alive at its fullest step: forward values
	// a backward step still reads, the other forward values, gradients of
	// forward values, and steps' workspace.
	KeptForBackward, Activations, ActivationGrads, Scratch int64
	// Folded is the folded arena: the batch norms folded into the weights
	// of the layers before them, kept between batches and shared by the
	// inference plans.
	Folded int64
	// Work is the work arena, Total the plan's state and work arenas: its
	// peak.
	Work, Total int64
}

// memoryText is info's line for one phase: its peak and where it goes
// (the uses that are not zero).
func (u MemoryUse) memoryText() string {
	activations := "other activations"
	if u.KeptForBackward == 0 && u.ActivationGrads == 0 {
		activations = "activations"
	}
	parts := []string{bytesString(u.Total) + " peak:"}
	for i, n := range []int64{u.Weights, u.Gradients, u.Optimizer, u.KeptForBackward, u.Activations, u.ActivationGrads, u.Scratch, u.Folded} {
		if n > 0 {
			what := [...]string{"weights", "gradients", "optimizer state", "activations kept for backward", activations, "gradients of activations", "workspace", "folded weights"}[i]
			parts = append(parts, what+" "+bytesString(n)+",")
		}
	}
	return strings.TrimSuffix(strings.Join(parts, " "), ",")
}

// writeMemoryJSON adds the phases' memory to info --json, one object per
// phase under "memory".
func writeMemoryJSON(j *jsontext.Writer, uses []MemoryUse) {
	if len(uses) == 0 {
		return
	}
	j.Key("memory")
	j.BeginObject()
	for _, u := range uses {
		j.Key(u.Phase)
		j.BeginObject()
		for _, f := range []struct {
			key string
			v   int64
		}{{"peak_bytes", u.Total}, {"weights_bytes", u.Weights}, {"gradients_bytes", u.Gradients}, {"optimizer_bytes", u.Optimizer},
			{"kept_for_backward_bytes", u.KeptForBackward}, {"activations_bytes", u.Activations},
			{"activation_gradients_bytes", u.ActivationGrads}, {"workspace_bytes", u.Scratch}, {"folded_weights_bytes", u.Folded}, {"work_arena_bytes", u.Work}} {
			j.Key(f.key)
			j.Int(f.v)
		}
		j.EndObject()
	}
	j.EndObject()
}
