package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The embedding family's lowerings. The GPU kernels are not written yet
// (they need the ids' range check to reach the host as an error, not a
// read out of bounds), so a model with an embedding is refused with a
// message that names the fix, rather than built wrong.

// embedding refuses an embedding or its backward.
func (l *lowering) embedding(st *planner.Step) error {
	return fmt.Errorf("layer %s: an embedding (%s) has no GPU kernel yet: build this model for the CPU backend", st.Layer, st.Kernel)
}
