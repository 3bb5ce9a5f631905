package planner

import (
	"testing"
)

// TestBuildAllModes builds every model in every mode; Build runs Verify
// after each pass, so this checks every pass's invariants on every model.
func TestBuildAllModes(t *testing.T) {
	for _, tc := range allModels {
		for _, training := range []bool{true, false} {
			for _, fusion := range []bool{true, false} {
				p := mustBuild(t, tc.model(), Options{Batch: 4, Training: training, Fusion: fusion})
				if err := Verify(p); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
				if training && (len(p.Backward) < 2 || len(p.Update) == 0) {
					t.Errorf("%s: a training plan with %d backward and %d update steps", tc.name, len(p.Backward), len(p.Update))
				}
			}
		}
	}
}
