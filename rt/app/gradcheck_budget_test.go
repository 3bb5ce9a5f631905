package app

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// slowModel is a model whose Gradients takes 20 ms more.
type slowModel struct{ Model }

func (m slowModel) Gradients() float32 {
	time.Sleep(20 * time.Millisecond)
	return m.Model.Gradients()
}

// TestGradCheckBudget: where the whole gradient check would take longer
// than MLBUILD_GRADCHECK_SECONDS, it probes one element of as many params
// as fit and adds a note that says so; the rows it keeps still pass a
// right backward pass and fail a wrong one; 0 lifts the bound.
func TestGradCheckBudget(t *testing.T) {
	t.Setenv(GradCheckEnv, "0.1") // 2·5 evaluations of 20 ms or more: past it
	rows := GradCheck(slowModel{newBigramLM(4, 40, 2, "x.txt")})
	var checks, notes []SelfTestRow
	for _, r := range rows {
		if r.Note != "" {
			notes = append(notes, r)
		} else {
			checks = append(checks, r)
		}
	}
	if len(checks) != 1 || len(notes) != 1 || !strings.Contains(notes[0].Note, "1 of 1 params, one element each") || !strings.Contains(notes[0].Note, GradCheckEnv+"=0") {
		t.Fatalf("bounded: %d checks, notes %+v", len(checks), notes)
	}
	if r := checks[0]; r.Err != nil || !(r.MaxError <= r.Tol) {
		t.Errorf("bounded, right backward: %s: error %g (tolerance %g) %v", r.Name, r.MaxError, r.Tol, r.Err)
	}
	for _, r := range GradCheck(slowModel{skewedLM{newBigramLM(4, 40, 2, "x.txt")}}) {
		if r.Note == "" && r.MaxError <= r.Tol {
			t.Errorf("bounded, gradients a third too large: %s: error %g within tolerance %g", r.Name, r.MaxError, r.Tol)
		}
	}
	t.Setenv(GradCheckEnv, "0")
	for _, r := range GradCheck(slowModel{newBigramLM(4, 40, 2, "x.txt")}) {
		if r.Note != "" {
			t.Errorf("unbounded: a note %q", r.Note)
		}
	}
}

// TestSpread: the params a bounded check keeps run evenly from the first
// to the last, never past the list.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		n, length int
		want      []int
	}{{3, 10, []int{0, 5, 9}}, {1, 10, []int{0}}, {5, 3, []int{0, 1, 2}}, {2, 2, []int{0, 1}}, {4, 213, []int{0, 71, 141, 212}}} {
		if got := spread(c.n, c.length); !slices.Equal(got, c.want) {
			t.Errorf("spread(%d, %d) = %v, want %v", c.n, c.length, got, c.want)
		}
	}
}

// noteModel's selftest is one passing check, one failing one and a note.
type noteModel struct{ *linearModel }

func (noteModel) SelfTest() []SelfTestRow {
	return []SelfTestRow{{Name: "fine", MaxError: 0, Tol: 1}, {Name: "broken", MaxError: 2, Tol: 1}, {Note: "half the params were left out"}}
}

// TestSelftestNotes: selftest prints a note after the checks and counts it
// as neither passed nor failed.
func TestSelftestNotes(t *testing.T) {
	var b bytes.Buffer
	code := Run(noteModel{newLinearModel()}, []string{"selftest"}, &b, &b)
	out := b.String()
	if code == 0 || !strings.Contains(out, "note: half the params were left out\n1 passed, 1 failed\n") || !strings.Contains(out, "1 of 2 checks failed") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
