// The sizes these tests use are past what a 32-bit int holds.

//go:build !386 && !arm && !mips && !mipsle

package planner

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// negative matches a negative count in a message.
var negative = regexp.MustCompile(`-[0-9]`)

// TestBuildChecksLimits plans at a batch the spec never asked for (as
// `mlbuild plan --batch` can): the counts are refused at the layer, in
// bytes, before any pass could wrap them around, and never as a bug in
// mlbuild.
func TestBuildChecksLimits(t *testing.T) {
	for _, c := range []struct {
		batch int
		want  string
	}{
		{1 << 40, "layer input: at batch 1099511627776 the output 1×28×28 holds 862017116176384 elements (3448068464705536 bytes, 3.06 PiB as f32)"},
		{1 << 62, "batch size 4611686018427387904 is outside 1..1099511627776"},
	} {
		_, err := Build(flagship(), Options{Batch: c.batch, Training: true, Fusion: true})
		var es spec.Errors
		if !errors.As(err, &es) {
			t.Fatalf("batch %d: %v; want spec.Errors", c.batch, err)
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "mnist.cue:") {
			t.Errorf("batch %d: errors do not mention %q at a position:\n%v", c.batch, c.want, err)
		}
		if strings.Contains(err.Error(), "a bug in mlbuild") || negative.MatchString(err.Error()) {
			t.Errorf("batch %d: %v", c.batch, err)
		}
	}
}

// TestScratchTooLarge gives a backend's scratch size past the bound: the
// plan fails naming the layer, the buffer and its bytes.
func TestScratchTooLarge(t *testing.T) {
	huge := Target{Name: "huge", Conv: func(ConvGeom, ConvPass) ConvChoice { return ConvChoice{Method: "im2col+gemm", Scratch: 1 << 45} }}
	_, err := Build(lenet5(), Options{Batch: 8, Training: true, Target: huge})
	var pe *spec.Error
	if !errors.As(err, &pe) || pe.Layer != "conv1" || pe.Pos.File == "" {
		t.Fatalf("Build = %v; want a positioned error about conv1", err)
	}
	const want = "buffer conv1.cols [35184372088832] holds 35184372088832 elements (140737488355328 bytes (128.00 TiB) as f32), more than the 1099511627776 (2^40)"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error does not mention %q:\n%v", want, err)
	}
}

// TestMeasureCostsChecked breaks a plan's sizes past 2^63 FLOPs: the pass
// fails naming the layer instead of storing a wrapped-around count, and
// the counts it stores are never negative.
func TestMeasureCostsChecked(t *testing.T) {
	p := mustBuild(t, mlp(), Options{Batch: 2, Training: true})
	for _, s := range p.allSteps() {
		if s.FLOPs < 0 || s.Bytes < 0 {
			t.Fatalf("%s: FLOPs %d, bytes %d", s.Kernel, s.FLOPs, s.Bytes)
		}
	}
	w := find(t, p, "fc1.weight")
	w.Shape = []int{1 << 40, 1 << 30}
	p.Forward[0].In[1] = w.ID
	p.Buffers[p.Forward[0].Out[0]].Size = 1 << 40
	err := measureCosts(p)
	var pe *spec.Error
	if !errors.As(err, &pe) || pe.Layer != "fc1" || !strings.Contains(err.Error(), "pass 2^63") {
		t.Fatalf("measureCosts = %v; want an error about fc1", err)
	}
	for _, s := range p.allSteps() {
		if s.FLOPs < 0 || s.Bytes < 0 {
			t.Errorf("%s: FLOPs %d, bytes %d", s.Kernel, s.FLOPs, s.Bytes)
		}
	}
}

// TestMemoryLimitSource checks that the memory-limit message says where
// the limit comes from.
func TestMemoryLimitSource(t *testing.T) {
	const why = "the most mlbuild gives a 32-bit linux/386 program"
	_, err := Build(flagship(), Options{Training: true, Fusion: true, MemoryLimit: 1 << 20, MemoryLimitSource: why})
	var pe *spec.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "above the memory limit of 1048576 bytes (1.00 MiB, "+why+")") {
		t.Fatalf("Build = %v", err)
	}
}
