package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

const validSpecs = "../../testdata/specs/valid/"
const invalidSpecs = "../../testdata/specs/invalid/"

// TestValidateExitCodes checks the documented exit codes: 0 when every
// spec is legal, 1 when any is not, 2 on usage errors, 4 when a file
// cannot be read.
func TestValidateExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"one legal", []string{"validate", validSpecs + "lenet5.cue"}, ExitOK},
		{"all legal", []string{"validate", validSpecs + "lenet5.cue", validSpecs + "residual_graph.cue", "../../models/mnist.cue"}, ExitOK},
		{"one illegal", []string{"validate", invalidSpecs + "conv_remainder.cue"}, ExitInvalid},
		{"legal then illegal", []string{"validate", validSpecs + "lenet5.cue", invalidSpecs + "graph_cycle.cue"}, ExitInvalid},
		{"missing file", []string{"validate", "nosuch.cue"}, ExitIO},
		{"json illegal", []string{"validate", "--format", "json", invalidSpecs + "negative_lr.cue"}, ExitInvalid},
		{"no file", []string{"validate"}, ExitUsage},
		{"bad format", []string{"validate", "--format", "yaml", validSpecs + "lenet5.cue"}, ExitUsage},
		{"bad flag", []string{"validate", "--nope", validSpecs + "lenet5.cue"}, ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := specCLI(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d; want %d; stderr:\n%s", code, tc.code, stderr)
			}
		})
	}
}

// TestValidateReportsEveryInvalidSpec runs validate over the whole invalid
// corpus at once: exit 1, and every file named on stderr with a position.
func TestValidateReportsEveryInvalidSpec(t *testing.T) {
	files, _ := filepath.Glob(invalidSpecs + "*.cue")
	code, stdout, stderr := specCLI(append([]string{"validate"}, files...)...)
	if code != ExitInvalid || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	for _, f := range files {
		if !strings.Contains(stderr, f+":") {
			t.Errorf("no message for %s", f)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(line, invalidSpecs) || strings.Contains(line, "conflicting values") && !strings.Contains(line, "has the wrong type") {
			t.Errorf("unexpected line: %s", line)
		}
	}
}

// TestValidateJSON decodes --format json output: one object per file, in
// argument order, with every problem of the file positioned.
func TestValidateJSON(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "two.cue")
	src, err := os.ReadFile(invalidSpecs + "dense_infeatures.cue")
	if err != nil {
		t.Fatal(err)
	}
	// add a second, independent problem: batch size 0
	two := strings.Replace(string(src), "batchSize: 32", "batchSize: 0", 1)
	if two == string(src) {
		t.Fatal("dense_infeatures.cue has no batchSize: 32 to break")
	}
	if err := os.WriteFile(bad, []byte(two), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := specCLI("validate", "--format", "json", validSpecs+"lenet5.cue", bad)
	if code != ExitInvalid || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var results []validateResult
	for dec.More() {
		var r validateResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("decoding %q: %v", stdout, err)
		}
		results = append(results, r)
	}
	if len(results) != 2 || !results[0].Valid || len(results[0].Errors) != 0 || results[1].Valid || results[1].File != bad {
		t.Fatalf("results = %+v", results)
	}
	want := []spec.Error{
		{Pos: spec.Pos{File: bad, Line: 12, Col: 42}, Layer: "fc1", Message: "input features 800 do not match the output of flatten1 (64×3×3 = 576)"},
		{Pos: spec.Pos{File: bad, Line: 15, Col: 103}, Message: "training.batchSize is 0 but must be >=1"},
	}
	got := results[1].Errors
	if len(got) != len(want) {
		t.Fatalf("errors = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("error %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	if !strings.Contains(stdout, `"message":"training.batchSize is 0 but must be >=1"`) {
		t.Errorf("json escapes the message: %s", stdout)
	}
}
