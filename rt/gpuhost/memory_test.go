package gpuhost

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/app"
)

// smallGPU is a Device with little free memory that counts its
// allocations; New must refuse before any.
type smallGPU struct {
	Device // nil: a call New should not make panics
	free   int64
	allocs int
}

func (g *smallGPU) Name() string                           { return "Small GPU" }
func (g *smallGPU) FreeMemory() (int64, error)             { return g.free, nil }
func (g *smallGPU) LoadKernels(string, []KernelInfo) error { return nil }
func (g *smallGPU) Alloc(label string, n int) (Buffer, error) {
	g.allocs++
	return nil, errors.New("no")
}

// TestNewRefusesWhatTheGPUCannotHold: arenas over the GPU's free memory
// are refused before the first allocation, with the bytes needed, arena
// by arena, the bytes free and the batch to change.
func TestNewRefusesWhatTheGPUCannotHold(t *testing.T) {
	p := &Program{Meta: &app.Meta{Name: "m", SpecFile: "m.cue", Batch: 64},
		StateSize: 1000, TrainWorkSize: 100000, EvalWorkSize: 50000, OneWorkSize: 1000,
		TrainInputSize: 640, TrainLabelsSize: 640, OutputSize: 640}
	d := &smallGPU{free: 200000}
	_, err := New(d, p)
	var me *app.MemoryError
	if !errors.As(err, &me) {
		t.Fatalf("New on a GPU with 200000 bytes free: %v, want a *app.MemoryError", err)
	}
	need := 4 * (1000 + 100000 + 50000 + 1000 + 640 + 640 + StepArgsLen + 640)
	for _, want := range []string{"Small GPU", "training work 390.6 KiB", "200000 bytes", "training.batchSize (now 64)", "needs " + strconv.Itoa(need) + " bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if d.allocs != 0 {
		t.Errorf("New allocated %d buffers before refusing", d.allocs)
	}
	// With enough free memory New goes on to allocate.
	d = &smallGPU{free: 1 << 30}
	if _, err := New(d, p); err == nil || d.allocs != 1 {
		t.Errorf("New with 1 GiB free: %v after %d allocations, want the stub's failure after 1", err, d.allocs)
	}
}
