package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// planCLI runs `mlbuild plan args...` in-process.
func planCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"plan"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPlanText(t *testing.T) {
	code, out, stderr := planCLI("../../models/mnist.cue")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"plan mnist: batch 250, training, fusion on",
		"dense1 + relu3 -> gemm (relu epilogue)",
		"softmax_xent",
		"conv2d_bwd(relu",
		"memory: state",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, again, _ := planCLI("../../models/mnist.cue")
	if again != out {
		t.Errorf("two runs print different plans")
	}
	code, unfused, _ := planCLI("../../models/mnist.cue", "--fusion", "off")
	if code != ExitOK || strings.Contains(unfused, "fusions (") || !strings.Contains(unfused, "forward (9 steps)") {
		t.Errorf("--fusion off: exit %d\n%s", code, unfused)
	}
}

func TestPlanJSON(t *testing.T) {
	code, out, stderr := planCLI("../../models/mnist.cue", "--format", "json", "--mode", "infer", "--batch", "3")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p planner.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if err := planner.Verify(&p); err != nil {
		t.Errorf("the printed plan does not verify: %v", err)
	}
	if p.Batch != 3 || p.Training || len(p.Backward) != 0 {
		t.Errorf("plan batch %d training %v backward %d", p.Batch, p.Training, len(p.Backward))
	}
}

func TestPlanUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"../../models/mnist.cue", "--format", "yaml"},
		{"../../models/mnist.cue", "--fusion", "maybe"},
		{"../../models/mnist.cue", "--mode", "eval"},
		{"../../models/mnist.cue", "--batch", "-2"},
		{},
	} {
		if code, _, stderr := planCLI(args...); code != ExitUsage || stderr == "" {
			t.Errorf("plan %v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, _, stderr := planCLI("no-such-spec.cue"); code == ExitOK || stderr == "" {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr)
	}
}
