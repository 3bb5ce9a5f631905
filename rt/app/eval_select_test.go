package app

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEvalChosenImages: eval runs the test files by default, the training
// files, the validation images a run held out (the same ones, and as many,
// as training's split), or a pair of files; --confusion adds the matrix.
func TestEvalChosenImages(t *testing.T) {
	dir := trainedLin(t)
	type result struct {
		Samples   int     `json:"samples"`
		Correct   int     `json:"correct"`
		Split     string  `json:"split"`
		Confusion [][]int `json:"confusion"`
	}
	evalJSON := func(args ...string) result {
		t.Helper()
		code, out, errOut := runLin(t, dir, append([]string{"eval", "--weights", "lin.safetensors", "--json"}, args...)...)
		var r result
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("eval %q: exit %d, %q\n%s", args, code, out, errOut)
		}
		return r
	}
	for _, c := range []struct {
		args    []string
		samples int
		split   string
	}{
		{[]string{"--data", "data"}, 32, "test"},
		{[]string{"--data", "data", "--split", "train"}, 64, "train"},
		{[]string{"--data", "data", "--split", "train", "--limit", "40"}, 40, "train"},
		{[]string{"--data", "data", "--split", "validation", "--validation-split", "0.25"}, 16, "validation"},
		{[]string{"--images", "data/train-images", "--labels", "data/train-labels"}, 64, "data/train-images"},
	} {
		if r := evalJSON(c.args...); r.Samples != c.samples || r.Split != c.split || r.Confusion != nil {
			t.Errorf("eval %q: %+v, want %d samples of %s", c.args, r, c.samples, c.split)
		}
	}

	// The confusion matrix: rows sum to each class's count, the diagonal to
	// the correct ones.
	r := evalJSON("--data", "data", "--confusion")
	if len(r.Confusion) != 4 {
		t.Fatalf("confusion %v", r.Confusion)
	}
	diag, total := 0, 0
	for i, row := range r.Confusion {
		sum := 0
		for _, v := range row {
			sum += v
		}
		if sum != 8 { // 32 test images, classes in turn
			t.Errorf("row %d sums to %d, want 8", i, sum)
		}
		diag += row[i]
		total += sum
	}
	if diag != r.Correct || total != r.Samples {
		t.Errorf("diagonal %d (correct %d), total %d (samples %d)", diag, r.Correct, total, r.Samples)
	}
	code, out, _ := runLin(t, dir, "eval", "--data", "data", "--weights", "lin.safetensors", "--confusion")
	if code != 0 || !strings.Contains(out, "true \\ predicted") || !strings.Contains(out, "accuracy: 1.0000\n") {
		t.Errorf("eval --confusion: exit %d:\n%s", code, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", "data", "--split", "dev"}, `--split must be test, train or validation, got "dev"`},
		{[]string{"--images", "data/test-images"}, "--images and --labels go together"},
		{[]string{"--data", "data", "--split", "validation", "--validation-split", "0"}, "holds no samples"},
	} {
		code, _, errOut := runLin(t, dir, append([]string{"eval", "--weights", "lin.safetensors"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("eval %q: exit %d, stderr lacks %q: %s", c.args, code, c.want, errOut)
		}
	}
}
