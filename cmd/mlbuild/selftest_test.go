package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSelftestEveryValidSpec compiles every legal spec of the test suite
// for the CPU and runs the produced binary's selftest, whose gradient check
// compares the backward pass the planner derived with finite differences of
// the loss: the planner's differentiation, end to end, for every op and
// both model forms.
func TestSelftestEveryValidSpec(t *testing.T) {
	specs, _ := filepath.Glob("../../testdata/specs/valid/*.cue")
	if len(specs) < 20 {
		t.Fatalf("found %d valid specs, want at least 20", len(specs))
	}
	dir := t.TempDir()
	cacheDir := filepath.Join(dir, "cache")
	summary := regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)
	gradientRows := 0
	for _, spec := range specs {
		name := strings.TrimSuffix(filepath.Base(spec), ".cue")
		bin := filepath.Join(dir, name)
		if code, out, errOut := mlbuild(t, "compile", spec, "-o", bin, "--cache-dir", cacheDir); code != 0 {
			t.Errorf("%s: compile exited %d:\n%s%s", name, code, out, errOut)
			continue
		}
		out, err := exec.Command(bin, "selftest").CombinedOutput()
		if err != nil {
			t.Errorf("%s: selftest failed: %v\n%s", name, err, out)
			continue
		}
		m := summary.FindSubmatch(out)
		if m == nil || string(m[2]) != "0" {
			t.Errorf("%s: selftest summary missing or failing:\n%s", name, out)
		}
		gradientRows += strings.Count(string(out), "gradient of ")
	}
	if gradientRows < 50 {
		t.Errorf("only %d gradient checks ran over %d specs; the gradient check is not running", gradientRows, len(specs))
	}
}
