package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzLoad feeds mutated specs through loading and validation. Whatever the
// input, Load must return either a Model that keeps the planner's
// conventions or positioned Errors with messages, and never panic (a panic
// inside CUE comes back as an "internal error", which counts as a failure
// here). Seeds are every valid and invalid spec; crashers found are kept in
// testdata/fuzz/FuzzLoad as regression inputs.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../testdata/specs/valid/*.cue", "../testdata/specs/invalid/*.cue", "../models/*.cue"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	old := EvalTimeout
	EvalTimeout = 5 * time.Second
	f.Cleanup(func() { EvalTimeout = old })
	name := filepath.Join(f.TempDir(), "fuzz.cue")
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := LoadBytes(name, src)
		if err == nil {
			if len(m.Nodes) < 2 || m.Nodes[0].Op != OpInput || m.Node(m.Output) == nil {
				t.Fatalf("accepted a model without input or output: %+v", m)
			}
			for _, n := range m.Nodes {
				for _, d := range n.OutShape {
					if d < 1 {
						t.Fatalf("accepted node %s with output shape %v", n.Name, n.OutShape)
					}
				}
			}
			return
		}
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("error %v is not a non-empty Errors", err)
		}
		for _, e := range es {
			if strings.Contains(e.Message, "internal error") {
				t.Fatalf("CUE panicked: %s", e.Message)
			}
			if strings.TrimSpace(e.Message) == "" || e.Pos.File != name {
				t.Fatalf("error without message or position: %+v", e)
			}
		}
	})
}
