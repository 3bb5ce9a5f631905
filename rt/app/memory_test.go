package app

import (
	"errors"
	"strings"
	"testing"
)

// TestAvailableMemoryFromEnv: MemoryEnv replaces what the machine says, so
// that a refusal can be tested anywhere.
func TestAvailableMemoryFromEnv(t *testing.T) {
	t.Setenv(MemoryEnv, "12345")
	n, src, ok := AvailableMemory()
	if !ok || n != 12345 || !strings.HasPrefix(src, MemoryEnv) {
		t.Errorf("AvailableMemory() = %d, %q, %v; want 12345 from %s", n, src, ok, MemoryEnv)
	}
}

// TestAllocateRefusesAndMakesOnlyWhatIsMissing: a phase over the memory
// available is refused with both figures and the batch to change, and
// nothing is made; one within it makes only the arenas not made yet.
func TestAllocateRefusesAndMakesOnlyWhatIsMissing(t *testing.T) {
	meta := &Meta{Name: "m", SpecFile: "m.cue", Batch: 32}
	defer func(n int64) { allocated = n }(allocated)
	allocated = 0
	var state, work []float32
	t.Setenv(MemoryEnv, "4000")
	func() {
		defer func() {
			r := recover()
			var me *MemoryError
			if err, ok := r.(error); !ok || !errors.As(err, &me) {
				t.Fatalf("Allocate over the memory available: recovered %v, want a *MemoryError", r)
			}
			for _, want := range []string{"not enough memory for training", "needs 4400 bytes", "state 400 B", "training work 3.9 KiB", "4000 bytes", MemoryEnv, "training.batchSize (now 32)", "m.cue"} {
				if !strings.Contains(me.Msg, want) {
					t.Errorf("refusal %q does not say %q", me.Msg, want)
				}
			}
		}()
		Allocate(meta, "training", 32, Arena{"state", 100, &state}, Arena{"training work", 1000, &work})
	}()
	if state != nil || work != nil {
		t.Fatalf("a refused phase made arenas")
	}
	Allocate(meta, "the weights", 0, Arena{"state", 100, &state})
	state[0] = 7
	// The state is made (400 bytes): the 4000 bytes of work no longer fit
	// in 4000, and fit in 4400.
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Errorf("4000 bytes of work in 4000 bytes less a 400-byte state: not refused")
			}
		}()
		Allocate(meta, "training", 32, Arena{"state", 100, &state}, Arena{"training work", 1000, &work})
	}()
	t.Setenv(MemoryEnv, "4400")
	Allocate(meta, "training", 32, Arena{"state", 100, &state}, Arena{"training work", 1000, &work})
	if len(state) != 100 || state[0] != 7 || len(work) != 1000 {
		t.Errorf("after Allocate: state %d values (first %v), work %d values", len(state), state[0], len(work))
	}
}
