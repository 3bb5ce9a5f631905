package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/csvdata"
	"github.com/mlbuild/mlbuild/rt/npy"
)

// sklearnDir finds the CSV data sets of Debian's python3-sklearn that
// `make data` fetches. The tests of the CSV examples need the real files;
// they fail (never skip) without them.
func sklearnDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MLBUILD_SKLEARN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "sklearn")
	}
	if _, err := os.Stat(filepath.Join(dir, "iris.csv")); err != nil {
		t.Fatalf("the scikit-learn data sets are not in %s: run `make data` (or set MLBUILD_SKLEARN_DIR): %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// compileExample builds models/NAME.cue into dir.
func compileExample(t *testing.T, name, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	code, out, errOut := mlbuild(t, "compile", "../../models/"+name+".cue", "-o", bin, "--cache-dir", filepath.Join(dir, "cache"))
	if code != 0 {
		t.Fatalf("compile %s exited %d:\n%s%s", name, code, out, errOut)
	}
	return bin
}

func runOK(t *testing.T, bin string, args ...string) string {
	t.Helper()
	b, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, b)
	}
	return string(b)
}

// TestIrisFromCSV trains models/iris.cue on scikit-learn's iris.csv and
// checks test accuracy, the class names predict prints, the raw outputs
// --output writes, and the error for a damaged file.
func TestIrisFromCSV(t *testing.T) {
	data := sklearnDir(t)
	tmp := t.TempDir()
	bin := compileExample(t, "iris", tmp)
	checkFeatureRowsBinary(t, bin)
	weights := filepath.Join(tmp, "iris.safetensors")
	runOK(t, bin, "train", "--data", data, "--out", weights, "--quiet")

	var ev struct {
		Accuracy  float64 `json:"accuracy"`
		Samples   int     `json:"samples"`
		Confusion [][]int `json:"confusion"`
	}
	if err := json.Unmarshal([]byte(runOK(t, bin, "eval", "--data", data, "--weights", weights, "--json", "--confusion")), &ev); err != nil {
		t.Fatal(err)
	}
	// 30 held-out flowers; chance is a third.
	if ev.Samples != 30 || ev.Accuracy < 0.9 || len(ev.Confusion) != 3 {
		t.Errorf("eval: accuracy %.3f on %d samples, confusion %v", ev.Accuracy, ev.Samples, ev.Confusion)
	}

	out := runOK(t, bin, "predict", "--weights", weights, "--limit", "2", filepath.Join(data, "iris.csv"))
	if strings.Count(out, "class setosa (p=") != 2 { // the file's first flowers are setosas
		t.Errorf("predict printed:\n%s", out)
	}
	raw := filepath.Join(tmp, "logits.npy")
	runOK(t, bin, "predict", "--weights", weights, "--output", raw, filepath.Join(data, "iris.csv"))
	a, err := npy.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.ShapeText() != "(150, 3)" || a.Dtype.Name != "float32" {
		t.Fatalf("--output wrote %s of %s, want (150, 3) of float32", a.ShapeText(), a.Dtype.Name)
	}
	correct := 0
	for r := 0; r < 150; r++ {
		best := 0
		for c := 1; c < 3; c++ {
			if a.At(r*3+c) > a.At(r*3+best) {
				best = c
			}
		}
		if best == r/50 { // the file lists 50 flowers of each species in order
			correct++
		}
	}
	if correct < 135 {
		t.Errorf("the raw outputs classify %d of 150 flowers correctly", correct)
	}

	// A damaged copy of the file: the error names file, line and column.
	src, err := os.ReadFile(filepath.Join(data, "iris.csv"))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(tmp, "bad")
	os.Mkdir(bad, 0o755)
	damaged := strings.Replace(string(src), "\n4.6,3.1,1.5,0.2,0\n", "\n4.6,,1.5,0.2,0\n", 1)
	if damaged == string(src) {
		t.Fatal("the line to damage is not in iris.csv")
	}
	os.WriteFile(filepath.Join(bad, "iris.csv"), []byte(damaged), 0o644)
	cmd := exec.Command(bin, "train", "--data", bad, "--out", filepath.Join(tmp, "x.safetensors"))
	b, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 || !strings.Contains(string(b), "iris.csv:5: column 2 (index 1): empty cell; expected a number") {
		t.Errorf("damaged file: exit %d, output %s", code, b)
	}
}

// TestDiabetesRegression trains models/diabetes.cue on scikit-learn's
// diabetes files and checks eval's regression measures and predict's
// values, in the target's units.
func TestDiabetesRegression(t *testing.T) {
	data := sklearnDir(t)
	tmp := t.TempDir()
	bin := compileExample(t, "diabetes", tmp)
	if info := strings.Join(strings.Fields(runOK(t, bin, "info")), " "); !strings.Contains(info, "task: regression") || !strings.Contains(info, "targets: 1") ||
		!strings.Contains(info, "preprocessing: per-feature standardisation fitted on the training split; standardised targets") {
		t.Errorf("info:\n%s", info)
	}
	weights := filepath.Join(tmp, "d.safetensors")
	out := runOK(t, bin, "train", "--data", data, "--out", weights)
	if strings.Contains(out, "acc ") {
		t.Errorf("training a regression model printed an accuracy:\n%s", out)
	}
	var ev struct {
		Samples int     `json:"samples"`
		MSE     float64 `json:"mse"`
		MAE     float64 `json:"mae"`
		R2      float64 `json:"r2"`
	}
	if err := json.Unmarshal([]byte(runOK(t, bin, "eval", "--data", data, "--weights", weights, "--json")), &ev); err != nil {
		t.Fatal(err)
	}
	// Predicting the mean scores R² 0; linear models reach about 0.45 on
	// this data. MAE in the target's units (it ranges over 25 to 346).
	if ev.Samples != 88 || ev.R2 < 0.3 || ev.MAE < 20 || ev.MAE > 70 || ev.MSE < ev.MAE*ev.MAE {
		t.Errorf("eval: %d samples, MSE %.1f, MAE %.1f, R² %.3f", ev.Samples, ev.MSE, ev.MAE, ev.R2)
	}
	raw := filepath.Join(tmp, "y.npy")
	runOK(t, bin, "predict", "--weights", weights, "--output", raw, filepath.Join(data, "diabetes_data_raw.csv"))
	a, err := npy.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var mean float64
	for i := 0; i < a.Rows(); i++ {
		mean += a.At(i) / float64(a.Rows())
	}
	if a.ShapeText() != "(442, 1)" || mean < 120 || mean > 185 {
		t.Errorf("--output: %s, mean prediction %.1f (the targets' mean is 152)", a.ShapeText(), mean)
	}
	// The same rows as a .npy array give the same values.
	tb, err := csvdata.Read(filepath.Join(data, "diabetes_data_raw.csv"), csvdata.Options{Delimiter: ' '})
	if err != nil {
		t.Fatal(err)
	}
	x := filepath.Join(tmp, "x.npy")
	if err := npy.Write(x, []int{tb.Rows, tb.Features}, tb.X); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(tmp, "again.npy")
	runOK(t, bin, "predict", "--weights", weights, "--output", again, x)
	b, err := npy.Open(again)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := 0; i < 442; i++ {
		if a.At(i) != b.At(i) {
			t.Fatalf("sample %d: %v from the CSV, %v from the .npy array", i, a.At(i), b.At(i))
		}
	}
	// An array of the wrong width is refused with its shape.
	cmd := exec.Command(bin, "predict", "--weights", weights, raw)
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "y.npy: shape (442, 1) gives 1 values per sample but the model takes 10") {
		t.Errorf("wrong width: %v %s", err, msg)
	}
}
