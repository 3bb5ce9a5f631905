package emit

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

// inputFor loads a spec and plans it as `mlbuild compile` does.
func inputFor(t *testing.T, file string, fusion bool) *Input {
	t.Helper()
	m, err := spec.Load(file)
	if err != nil {
		t.Fatalf("loading %s: %v", file, err)
	}
	var plans []*planner.Plan
	for _, o := range []planner.Options{{Training: true, Fusion: fusion}, {Fusion: fusion}, {Fusion: fusion, Batch: 1}} {
		p, err := planner.Build(m, o)
		if err != nil {
			t.Fatalf("planning %s: %v", file, err)
		}
		plans = append(plans, p)
	}
	return &Input{Model: m, Train: plans[0], Infer: plans[1], Infer1: plans[2], Backend: "cpu", Version: "golden", BuildKey: "golden"}
}

// TestMNISTGolden keeps the generated program for the flagship spec as a
// golden file, reviewed like code. MLBUILD_UPDATE=1 rewrites it.
func TestMNISTGolden(t *testing.T) {
	src, err := ModelSource(inputFor(t, "../models/mnist.cue", true))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "mnist.go.golden")
	if os.Getenv("MLBUILD_UPDATE") != "" {
		if err := os.WriteFile(golden, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
	}
	if !bytes.Equal(src, want) {
		t.Errorf("generated source for models/mnist.cue differs from %s; review the diff and rerun with MLBUILD_UPDATE=1", golden)
	}
}

// TestDeterministic renders twice and compares: generated names must not
// depend on map order.
func TestDeterministic(t *testing.T) {
	a, err := ModelSource(inputFor(t, "../models/mnist.cue", false))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b, err := ModelSource(inputFor(t, "../models/mnist.cue", false))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatal("two renders of the same plan differ")
		}
	}
}

// TestEveryValidSpecRenders renders every legal spec of the test suite, with
// and without fusion, and checks each buffer is declared with its size.
func TestEveryValidSpecRenders(t *testing.T) {
	files, _ := filepath.Glob("../testdata/specs/valid/*.cue")
	if len(files) == 0 {
		t.Fatal("no valid specs found in ../testdata/specs/valid")
	}
	for _, f := range files {
		for _, fusion := range []bool{true, false} {
			in := inputFor(t, f, fusion)
			src, err := ModelSource(in)
			if err != nil {
				t.Errorf("%s (fusion %v): %v", f, fusion, err)
				continue
			}
			for _, b := range in.Train.Buffers {
				if !bytes.Contains(src, []byte("(*["+strconv.Itoa(b.Size)+"]float32)")) {
					t.Errorf("%s: buffer %s of %d elements is not declared with its size", f, b.Name, b.Size)
				}
			}
		}
	}
}

// TestCommentsCannotInject feeds hostile text to the comment filter.
func TestCommentsCannotInject(t *testing.T) {
	for _, s := range []string{"a\n}\nfunc evil() {", "x */ y", "//go:generate rm -rf /", "\u2028", "`"} {
		c := comment(s)
		if strings.ContainsAny(c, "\n\r`{}*\u2028") {
			t.Errorf("comment(%q) = %q still holds dangerous characters", s, c)
		}
	}
}
