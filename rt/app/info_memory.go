package app

import (
	"fmt"
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
	// Work is the work arena, Total the plan's state and work arenas: its
	// peak.
	Work, Total int64
}

// parts lists the uses that are not zero, largest first in the order
// written, for info's line.
func (u MemoryUse) parts() [][2]any {
	all := [][2]any{{"weights", u.Weights}, {"gradients", u.Gradients}, {"optimizer state", u.Optimizer},
		{"activations kept for backward", u.KeptForBackward}, {"other activations", u.Activations},
		{"gradients of activations", u.ActivationGrads}, {"workspace", u.Scratch}}
	if u.KeptForBackward == 0 && u.ActivationGrads == 0 {
		all[4][0] = "activations"
	}
	var out [][2]any
	for _, p := range all {
		if p[1].(int64) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// memoryText is info's line for one phase: its peak and where it goes.
func (u MemoryUse) memoryText() string {
	var parts []string
	for _, p := range u.parts() {
		parts = append(parts, fmt.Sprintf("%s %s", p[0], bytesString(p[1].(int64))))
	}
	return fmt.Sprintf("%s peak: %s", bytesString(u.Total), strings.Join(parts, ", "))
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
			{"activation_gradients_bytes", u.ActivationGrads}, {"workspace_bytes", u.Scratch}, {"work_arena_bytes", u.Work}} {
			j.Key(f.key)
			j.Int(f.v)
		}
		j.EndObject()
	}
	j.EndObject()
}
