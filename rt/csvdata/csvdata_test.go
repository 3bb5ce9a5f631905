package csvdata

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sklearnDir finds the CSV data sets of Debian's python3-sklearn that
// `make data` fetches (scripts/fetch-sklearn-data.sh). The tests read the
// real files; they fail, never skip, without them.
func sklearnDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MLBUILD_SKLEARN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "sklearn")
	}
	if _, err := os.Stat(filepath.Join(dir, "iris.csv")); err != nil {
		t.Fatalf("the scikit-learn data sets are not in %s: run `make data` (or set MLBUILD_SKLEARN_DIR): %v", dir, err)
	}
	return dir
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sklearnDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// irisOptions read scikit-learn's iris.csv: a first line of counts and
// class names, then four measurements and the class index per row.
var irisOptions = Options{SkipRows: 1, Labels: []Column{{Index: -1}}}

func TestIris(t *testing.T) {
	tb, err := Read(filepath.Join(sklearnDir(t), "iris.csv"), irisOptions)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Rows != 150 || tb.Features != 4 || len(tb.X) != 600 {
		t.Fatalf("rows %d, features %d, values %d; want 150, 4, 600", tb.Rows, tb.Features, len(tb.X))
	}
	// The first row of the file (its line 2) is Fisher's first setosa.
	want := []float32{5.1, 3.5, 1.4, 0.2}
	for i, w := range want {
		if tb.X[i] != w {
			t.Errorf("X[0][%d] = %v, want %v", i, tb.X[i], w)
		}
	}
	if tb.Line[0] != 2 || tb.Line[149] != 151 {
		t.Errorf("line numbers %d..%d, want 2..151", tb.Line[0], tb.Line[149])
	}
	cls, names, err := tb.Classes(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if names != nil {
		t.Errorf("integer labels should keep their indices, got names %v", names)
	}
	counts := make([]int, 3)
	for _, c := range cls {
		counts[c]++
	}
	if counts[0] != 50 || counts[1] != 50 || counts[2] != 50 {
		t.Errorf("class counts %v, want 50 each", counts)
	}
	// Two classes are too few for iris's labels 0..2.
	if _, _, err := tb.Classes(2, nil); err == nil || !strings.Contains(err.Error(), "iris.csv:") || !strings.Contains(err.Error(), "outside the 2 classes") {
		t.Errorf("labels outside the classes: got %v", err)
	}
}

// TestStringClasses names iris's classes (as the file's first line does)
// and checks that string labels map to sorted indices, or to the order
// given.
func TestStringClasses(t *testing.T) {
	src := readFile(t, "iris.csv")
	lines := strings.Split(strings.TrimSpace(src), "\n")
	classNames := strings.Split(lines[0], ",")[2:] // setosa, versicolor, virginica
	var b strings.Builder
	b.WriteString("sepal_length,sepal_width,petal_length,petal_width,species\n")
	for _, l := range lines[1:] {
		i := strings.LastIndexByte(l, ',')
		idx := l[i+1:]
		b.WriteString(l[:i+1] + classNames[idx[0]-'0'] + "\n")
	}
	o := Options{Header: true, Labels: []Column{{Name: "species"}}, Drop: []Column{{Name: "sepal_width"}}}
	tb, err := Parse("iris-named.csv", strings.NewReader(b.String()), o)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Features != 3 || strings.Join(tb.FeatureNames, ",") != `"sepal_length","petal_length","petal_width"` {
		t.Errorf("features %d %v", tb.Features, tb.FeatureNames)
	}
	cls, names, err := tb.Classes(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "setosa,versicolor,virginica" || cls[0] != 0 || cls[149] != 2 {
		t.Errorf("names %v, first %d, last %d", names, cls[0], cls[149])
	}
	cls, _, err = tb.Classes(3, []string{"virginica", "versicolor", "setosa"})
	if err != nil || cls[0] != 2 || cls[149] != 0 {
		t.Errorf("given order: first %d, last %d, %v", cls[0], cls[149], err)
	}
	_, _, err = tb.Classes(3, []string{"setosa", "versicolor"})
	if err == nil || !strings.Contains(err.Error(), `iris-named.csv:102: column 5 ("species"): label "virginica" is not one of the classes`) {
		t.Errorf("unknown class: %v", err)
	}
}

// TestDiabetes reads scikit-learn's diabetes data: blank-separated, no
// header, ten features per row and the targets in another file.
func TestDiabetes(t *testing.T) {
	dir := sklearnDir(t)
	x, err := Read(filepath.Join(dir, "diabetes_data_raw.csv"), Options{Delimiter: ' '})
	if err != nil {
		t.Fatal(err)
	}
	if x.Rows != 442 || x.Features != 10 {
		t.Fatalf("rows %d, features %d; want 442, 10", x.Rows, x.Features)
	}
	y, err := Read(filepath.Join(dir, "diabetes_target.csv"), Options{Delimiter: ' ', Labels: []Column{{Index: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	targets, err := y.Targets()
	if err != nil {
		t.Fatal(err)
	}
	if y.Features != 0 || len(targets) != 442 || targets[0] != 151 || targets[441] != 57 {
		t.Fatalf("targets: features %d, %d values, first %v, last %v", y.Features, len(targets), targets[0], targets[len(targets)-1])
	}
	var mean float64
	for _, v := range targets {
		mean += float64(v)
	}
	mean /= float64(len(targets))
	if math.Abs(mean-152.133) > 0.01 { // the documented mean of the diabetes target
		t.Errorf("target mean %.3f, want 152.133", mean)
	}
}

// TestBadCells corrupts real files and checks each error says where and
// what.
func TestBadCells(t *testing.T) {
	iris := readFile(t, "iris.csv")
	lines := strings.Split(iris, "\n")
	with := func(line int, text string) string {
		l := append([]string(nil), lines...)
		l[line-1] = text
		return strings.Join(l, "\n")
	}
	cases := []struct {
		name, src string
		o         Options
		want      string
	}{
		{"not a number", with(5, "4.6,x3.1,1.5,0.2,0"), irisOptions, `iris.csv:5: column 2 (index 1): "x3.1" is not a number`},
		{"missing value", with(7, "4.6,3.4,,0.3,0"), irisOptions, `iris.csv:7: column 3 (index 2): empty cell; expected a number`},
		{"nan", with(7, "4.6,3.4,NaN,0.3,0"), irisOptions, `iris.csv:7: column 3 (index 2): "NaN" is not a finite`},
		{"short row", with(9, "4.4,2.9,1.4,0"), irisOptions, `iris.csv:9: the row has 4 fields but the first row has 5`},
		{"quote", with(3, `4.9,"3.0,1.4,0.2,0`), irisOptions, `iris.csv:3: the row starting here breaks off at line 151`},
		{"label column", iris, Options{SkipRows: 1, Labels: []Column{{Index: 5}}}, `iris.csv: label column 5 does not exist: the rows have 5 columns`},
		{"named without header", iris, Options{SkipRows: 1, Labels: []Column{{Name: "species"}}}, `label column "species" is named, but the file has no header row`},
		{"unknown name", iris, Options{Header: true, Labels: []Column{{Name: "species"}}}, `iris.csv: no label column "species"; the header names 150, 4, setosa, versicolor, virginica`},
		{"both", iris, Options{SkipRows: 1, Labels: []Column{{Index: 4}}, Drop: []Column{{Index: -1}}}, `column -1 is both a label and dropped`},
		{"empty", "", irisOptions, `iris.csv: the file ends within the 1 rows to skip`},
		{"header only", lines[0] + "\n", Options{Header: true}, `iris.csv: no data rows`},
	}
	for _, c := range cases {
		_, err := Parse("iris.csv", strings.NewReader(c.src), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// A target that is not a number is found by Targets.
	tb, err := Parse("iris.csv", strings.NewReader(with(4, "4.7,3.2,1.3,0.2,abc")), irisOptions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Targets(); err == nil || !strings.Contains(err.Error(), `iris.csv:4: column 5 (index 4): "abc" is not a number`) {
		t.Errorf("bad target: %v", err)
	}
}
