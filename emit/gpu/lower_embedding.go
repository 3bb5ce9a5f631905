package gpu

import (
	"fmt"

	"github.com/mlbuild/mlbuild/planner"
)

// The embedding family's lowerings. The GPU kernels are not written yet
// (they need the ids' range check to reach the host as an error, not a
// read out of bounds), so a model with an embedding is refused with a
// message that names the fix, rather than built wrong.

// UnsupportedError is a layer the GPU backends have no kernel for yet: a
// limit of mlbuild that the spec meets, not a bug, so `mlbuild compile`
// exits 1 with it (errors.As finds it through the lowering's wrapping).
type UnsupportedError struct {
	Layer  string
	Kernel planner.Kernel
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("layer %s: an %s step has no GPU kernel yet: build this model for the CPU backend", e.Layer, e.Kernel)
}

// embedding refuses an embedding or its backward.
func (l *lowering) embedding(st *planner.Step) error {
	return &UnsupportedError{Layer: st.Layer, Kernel: st.Kernel}
}
