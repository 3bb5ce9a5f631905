package emit

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// memoryUse renders a plan's memory account (planner.Plan.Memory) as an
// app.MemoryUse literal for the program's `info`.
func memoryUse(phase string, p *planner.Plan) string {
	m := p.Memory()
	folded := ""
	if m.Folded > 0 {
		folded = fmt.Sprintf(", Folded: %d", m.Folded)
	}
	return fmt.Sprintf("{Phase: %q, Weights: %d, Gradients: %d, Optimizer: %d, KeptForBackward: %d, Activations: %d, ActivationGrads: %d, Scratch: %d%s, Work: %d, Total: %d}",
		phase, m.Weights, m.Gradients, m.Optimizer, m.KeptForBackward, m.Activations, m.ActivationGrads, m.Scratch, folded, m.Work, m.Total)
}
