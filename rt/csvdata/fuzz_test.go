package csvdata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCSV feeds arbitrary text to the reader under each layout. It must
// never panic, and a table it accepts must be self-consistent: every row
// has its features and label cells, and conversions either succeed with
// the right sizes or fail with an error naming the file. Seeds are the
// first lines of scikit-learn's data sets when they are there; crashers
// found by `go test -fuzz FuzzCSV` are kept in testdata/fuzz/FuzzCSV.
func FuzzCSV(f *testing.F) {
	dir := os.Getenv("MLBUILD_SKLEARN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "sklearn")
	}
	for _, name := range []string{"iris.csv", "wine_data.csv", "diabetes_data_raw.csv", "diabetes_target.csv"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			lines := strings.SplitAfter(string(b), "\n")
			f.Add(strings.Join(lines[:min(len(lines), 6)], ""), uint8(0))
		}
	}
	f.Add("a,b,c\n1,2,x\n3,4,y\n", uint8(1))
	f.Add("1 2 3\n4 5 6\n", uint8(2))
	layouts := []Options{
		{SkipRows: 1, Labels: []Column{{Index: -1}}},
		{Header: true, Labels: []Column{{Name: "c"}}, Drop: []Column{{Index: 0}}},
		{Delimiter: ' ', Labels: []Column{{Index: 0}, {Index: 2}}},
		{Delimiter: ';'},
	}
	f.Fuzz(func(t *testing.T, src string, layout uint8) {
		o := layouts[int(layout)%len(layouts)]
		tb, err := Parse("fuzz.csv", strings.NewReader(src), o)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// Bounded by the table's own width, the reader gives the same
		// table, or refuses a line (or row) with its number.
		width := tb.Features + len(tb.LabelNames) + len(o.Drop)
		bounded := o
		bounded.MaxColumns = width
		tb2, err := Parse("fuzz.csv", strings.NewReader(src), bounded)
		switch {
		case err != nil && !strings.HasPrefix(err.Error(), "fuzz.csv:"):
			t.Fatalf("bounded by %d columns: error without a line: %v", width, err)
		case err == nil && (tb2.Rows != tb.Rows || tb2.Features != tb.Features || len(tb2.X) != len(tb.X)):
			t.Fatalf("bounded by %d columns: %d rows of %d features, unbounded %d of %d", width, tb2.Rows, tb2.Features, tb.Rows, tb.Features)
		}
		k := len(tb.LabelNames)
		if tb.Rows < 1 || len(tb.X) != tb.Rows*tb.Features || len(tb.LabelCells) != tb.Rows*k || len(tb.Line) != tb.Rows || len(tb.FeatureNames) != tb.Features {
			t.Fatalf("inconsistent table: rows %d features %d X %d labels %d×%d lines %d", tb.Rows, tb.Features, len(tb.X), len(tb.LabelCells), k, len(tb.Line))
		}
		if y, err := tb.Targets(); err == nil && len(y) != tb.Rows*k {
			t.Fatalf("targets: %d values for %d rows of %d", len(y), tb.Rows, k)
		}
		if cls, _, err := tb.Classes(3, nil); err == nil {
			for _, c := range cls {
				if c < 0 || c >= 3 {
					t.Fatalf("class %d outside 0..2", c)
				}
			}
		} else if !strings.HasPrefix(err.Error(), "fuzz.csv") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
