package planner

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// passOrderError checks a pass table: names unique, and every pass's needs
// earlier in the table.
func passOrderError(table []pass) error {
	at := map[string]int{}
	for i, ps := range table {
		if _, dup := at[ps.name]; dup {
			return fmt.Errorf("pass %s is in the table twice", ps.name)
		}
		at[ps.name] = i
	}
	for i, ps := range table {
		for _, need := range ps.needs {
			j, ok := at[need]
			if !ok {
				return fmt.Errorf("pass %s needs %s, which is not in the table", ps.name, need)
			}
			if j >= i {
				return fmt.Errorf("pass %s needs %s, which comes after it", ps.name, need)
			}
		}
	}
	return nil
}

// TestPassOrder checks the needs of every pass against the table's order,
// and that each entry names a function of that name in its file.
func TestPassOrder(t *testing.T) {
	if err := passOrderError(passes[:]); err != nil {
		t.Error(err)
	}
	for _, ps := range passes {
		src, err := os.ReadFile(ps.file)
		if err != nil {
			t.Errorf("pass %s: %v", ps.name, err)
			continue
		}
		if !strings.Contains(string(src), "\nfunc "+ps.name+"(") {
			t.Errorf("pass %s: %s has no func %s", ps.name, ps.file, ps.name)
		}
	}
	// The check fails on a table out of order, and on a need not in it.
	swapped := slices.Clone(passes[:])
	i := slices.IndexFunc(swapped, func(ps pass) bool { return ps.name == "differentiate" })
	j := slices.IndexFunc(swapped, func(ps pass) bool { return ps.name == "optimize" })
	swapped[i], swapped[j] = swapped[j], swapped[i]
	if err := passOrderError(swapped); err == nil || !strings.Contains(err.Error(), "optimize needs differentiate") {
		t.Errorf("optimize before differentiate: %v", err)
	}
	unknown := slices.Clone(passes[:])
	unknown[1].needs = []string{"lowering"}
	if err := passOrderError(unknown); err == nil {
		t.Errorf("a need not in the table passed")
	}
}

// TestBuildRunsThePassTable checks that Build runs exactly the table's
// passes whose condition holds, in table order, in every mode.
func TestBuildRunsThePassTable(t *testing.T) {
	for _, training := range []bool{true, false} {
		for _, fusion := range []bool{true, false} {
			opts := Options{Batch: 4, Training: training, Fusion: fusion}
			var ran, want []string
			if _, err := buildPlan(lenet5(), opts, func(name string) { ran = append(ran, name) }); err != nil {
				t.Fatal(err)
			}
			for _, ps := range passes {
				if ps.only.holds(opts) {
					want = append(want, ps.name)
				}
			}
			if !slices.Equal(ran, want) {
				t.Errorf("training %v fusion %v: ran %v, want %v", training, fusion, ran, want)
			}
			inferenceOnly := 0
			for _, ps := range passes {
				if ps.only&inInference != 0 {
					inferenceOnly++
				}
			}
			if want[0] != "lower" || want[len(want)-1] != "assignBuffers" || training && fusion && len(want) != len(passes)-inferenceOnly {
				t.Errorf("training %v fusion %v runs %d of %d passes", training, fusion, len(want), len(passes))
			}
		}
	}
}

// passTable renders the pass table as docs/architecture.md quotes it.
func passTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %-22s %-18s %s\n", "pass", "file", "runs for", "needs")
	for _, ps := range passes {
		needs := strings.Join(ps.needs, ", ")
		if slices.Equal(ps.needs, finalPhases) {
			needs = "every pass above (all phases final)"
		}
		line := fmt.Sprintf("%-18s %-22s %-18s %s", ps.name, ps.file, ps.only, needs)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}

// TestArchitectureQuotesPassTable checks that docs/architecture.md shows
// the pass table as it is (MLBUILD_UPDATE=1 rewrites the quote).
func TestArchitectureQuotesPassTable(t *testing.T) {
	const doc = "../docs/architecture.md"
	src, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	const open, end = "<!-- pass table: planner/build.go passes -->\n```\n", "```\n"
	i := strings.Index(string(src), open)
	if i < 0 {
		t.Fatalf("%s has no %q", doc, open)
	}
	body := i + len(open)
	n := strings.Index(string(src[body:]), end)
	if n < 0 {
		t.Fatalf("%s: the pass table's block does not end", doc)
	}
	want := passTable()
	if got := string(src[body : body+n]); got != want {
		if os.Getenv("MLBUILD_UPDATE") == "1" {
			out := string(src[:body]) + want + string(src[body+n:])
			if err := os.WriteFile(doc, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s quotes the pass table as\n%s\nbut it is (MLBUILD_UPDATE=1 rewrites it)\n%s", doc, got, want)
	}
}
