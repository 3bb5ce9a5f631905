package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// memoryUse renders a plan's memory account (planner.Plan.Memory) as an
// app.MemoryUse literal for the program's `info`.
func memoryUse(phase string, p *planner.Plan) string {
	m := p.Memory()
	return fmt.Sprintf("{Phase: %q, Weights: %d, Gradients: %d, Optimizer: %d, KeptForBackward: %d, Activations: %d, ActivationGrads: %d, Scratch: %d, Work: %d, Total: %d}",
		phase, m.Weights, m.Gradients, m.Optimizer, m.KeptForBackward, m.Activations, m.ActivationGrads, m.Scratch, m.Work, m.Total)
}
