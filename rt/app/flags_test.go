package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/imageio"
)

// trainedLin trains the test model in a fresh folder and returns it.
func trainedLin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	if code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "2", "--quiet"); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	// a test image: the top-left quadrant is bright, so class 0
	pix := make([]float32, 16)
	for _, i := range []int{0, 1, 4, 5} {
		pix[i] = 1
	}
	for _, name := range []string{"digit.pgm", "-dash.pgm"} {
		if err := os.WriteFile(filepath.Join(dir, name), imageio.EncodePGM(pix, 4, 4), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestFlagsAnywhere: flags may follow operands, and `--` ends the flags,
// as on mlbuild's command line.
func TestFlagsAnywhere(t *testing.T) {
	dir := trainedLin(t)
	for _, args := range [][]string{
		{"predict", "--weights", "lin.safetensors", "digit.pgm"},
		{"predict", "digit.pgm", "--weights", "lin.safetensors"},
		{"predict", "digit.pgm", "--weights=lin.safetensors", "--top", "2"},
		{"predict", "--weights", "lin.safetensors", "--", "-dash.pgm"},
	} {
		code, out, errOut := runLin(t, dir, args...)
		if code != 0 || !strings.Contains(out, ": class 0 (p=") {
			t.Errorf("%q: exit %d, want class 0:\n%s%s", args, code, out, errOut)
		}
	}
	// Flags after --data work for train and eval too.
	if code, out, errOut := runLin(t, dir, "eval", "--weights", "lin.safetensors", "--data", "data", "--json"); code != 0 || !strings.Contains(out, `"accuracy"`) {
		t.Errorf("eval: exit %d\n%s%s", code, out, errOut)
	}
}

// TestHelpExitsZero: -h, --help and `help COMMAND` print the command's
// help on stdout, list every flag with two dashes, and exit 0.
func TestHelpExitsZero(t *testing.T) {
	dir := t.TempDir()
	every := map[string][]string{
		"train":    {"data", "epochs", "out", "checkpoint", "resume", "metrics", "lr", "seed", "threads", "limit", "validation-split", "patience", "quiet", "force"},
		"eval":     {"data", "weights", "json", "threads", "split", "images", "labels", "validation-split", "seed", "limit", "confusion"},
		"predict":  {"weights", "limit", "resize", "top", "json"},
		"bench":    {"iters", "threads", "json", "infer-only"},
		"sample":   {"data", "index", "train", "force"},
		"info":     {"json"},
		"selftest": {},
		"version":  {},
	}
	for cmd, flags := range every {
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}, {cmd, "--data", "x", "--help"}} {
			if cmd != "train" && len(args) == 4 {
				continue
			}
			code, out, errOut := runLin(t, dir, args...)
			if code != 0 || errOut != "" {
				t.Errorf("%q: exit %d (want 0), stderr %q", args, code, errOut)
				continue
			}
			if !strings.Contains(out, "Usage:\n  lin "+cmd) || !strings.Contains(out, "-h, --help") {
				t.Errorf("%q printed no usage line:\n%s", args, out)
			}
			for _, f := range flags {
				if !regexp.MustCompile(`(?m)^      --` + regexp.QuoteMeta(f) + `\b`).MatchString(out) {
					t.Errorf("%q does not list --%s:\n%s", args, f, out)
				}
			}
			if regexp.MustCompile(`(?m)^\s+-[a-z][a-z]`).MatchString(out) {
				t.Errorf("%q lists a flag with one dash:\n%s", args, out)
			}
		}
	}
	// The program's own help lists every command, and exits 0.
	for _, args := range [][]string{nil, {"--help"}, {"-h"}, {"help"}} {
		code, out, _ := runLin(t, dir, args...)
		if code != 0 {
			t.Errorf("%q: exit %d, want 0", args, code)
		}
		for cmd := range every {
			if !strings.Contains(out, "\n  "+cmd+" ") {
				t.Errorf("%q does not list %s:\n%s", args, cmd, out)
			}
		}
	}
}

// TestVersion: --version and version name the model and mlbuild's version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, errOut := runLin(t, t.TempDir(), args...)
		if code != 0 || !strings.Contains(out, "lin ") || !strings.Contains(out, "mlbuild v0.0.0-test") {
			t.Errorf("%q: exit %d:\n%s%s", args, code, out, errOut)
		}
	}
}

// TestUsageErrors: mistakes exit 2 with a message in mlbuild's words:
// the flag with two dashes and the way to the help.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--colour"}, "unknown flag: --colour\nRun 'lin train --help' for usage."},
		{[]string{"train", "--epochs", "many"}, `invalid argument "many" for --epochs`},
		{[]string{"eval", "--data"}, "flag needs an argument: --data"},
		{[]string{"train", "--data", "d", "extra"}, `train takes no arguments, got ["extra"]`},
		{[]string{"predict", "x.png"}, "predict needs --weights FILE"},
		{[]string{"fly"}, `unknown command "fly"`},
	} {
		code, out, errOut := runLin(t, dir, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d (want 2), stderr lacks %q:\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
}

// panicModel fails the way a bug does.
type panicModel struct{ *linearModel }

func (panicModel) SelfTest() []SelfTestRow { panic("an invariant broke") }

// TestPanicIsABug: a panic exits 70 (a bug, as the README's table says),
// not Go's 2, which is the usage-error code.
func TestPanicIsABug(t *testing.T) {
	code, _, errOut := runModel(t, t.TempDir(), panicModel{newLinearModel()}, "selftest")
	if code != exitBug || !strings.Contains(errOut, "a bug in mlbuild; please report it") || !strings.Contains(errOut, "an invariant broke") {
		t.Errorf("exit %d (want %d):\n%s", code, exitBug, errOut)
	}
}

// TestBadNumbersAreUsageErrors: values that used to pass silently.
func TestBadNumbersAreUsageErrors(t *testing.T) {
	dir := trainedLin(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"predict", "--weights", "lin.safetensors", "--limit", "-1", "data/test-images"}, "--limit must not be negative"},
		{[]string{"train", "--data", "data", "--threads", "-1"}, "--threads must be 0 (all cores) or more, got -1"},
		{[]string{"eval", "--data", "data", "--weights", "lin.safetensors", "--threads", "-1"}, "--threads must be 0"},
		{[]string{"bench", "--threads", "-2"}, "--threads must be 0"},
		{[]string{"train", "--data", "data", "--threads", "1000000"}, "--threads must be at most 1024"},
		{[]string{"eval", "--data", "data", "--weights", "lin.safetensors", "--threads", "1025"}, "--threads must be at most 1024"},
		{[]string{"bench", "--threads", "1000000"}, "--threads must be at most 1024 (this machine has"},
	} {
		code, out, errOut := runLin(t, dir, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d (want 2), stderr lacks %q:\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
}

// TestJSONForScripts: info --json and predict --json print JSON that
// decodes into what the text shows.
func TestJSONForScripts(t *testing.T) {
	dir := trainedLin(t)
	code, out, errOut := runLin(t, dir, "info", "--json")
	var info struct {
		Model   string `json:"model"`
		Input   []int  `json:"input"`
		Classes int    `json:"classes"`
		Params  int    `json:"params"`
		Layers  []struct {
			Name string `json:"name"`
		} `json:"layers"`
		Tensors []struct {
			Name  string `json:"name"`
			Shape []int  `json:"shape"`
		} `json:"tensors"`
		Training struct {
			Epochs int `json:"epochs"`
		} `json:"training"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil {
		t.Fatalf("info --json: exit %d, %q\n%s", code, out, errOut)
	}
	if info.Model != "lin" || info.Classes != 4 || info.Params != 68 || len(info.Layers) != 3 || len(info.Tensors) != 2 ||
		info.Tensors[0].Name != "dense1.weight" || len(info.Tensors[0].Shape) != 2 || info.Training.Epochs != 3 {
		t.Errorf("info --json: %+v", info)
	}

	code, out, errOut = runLin(t, dir, "predict", "--json", "--top", "2", "--weights", "lin.safetensors", "digit.pgm", "--", "-dash.pgm")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("predict --json: exit %d, %q\n%s", code, out, errOut)
	}
	for i, line := range lines {
		var p struct {
			Input string  `json:"input"`
			Class int     `json:"class"`
			P     float64 `json:"p"`
			Top   []struct {
				Class int     `json:"class"`
				P     float64 `json:"p"`
			} `json:"top"`
		}
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if p.Input != []string{"digit.pgm", "-dash.pgm"}[i] || p.Class != 0 || !(p.P > 0.5) || len(p.Top) != 2 || p.Top[0].Class != 0 || p.Top[0].P != p.P || p.Top[1].P > p.P {
			t.Errorf("predict --json line %d: %+v", i, p)
		}
	}
}

// TestNoDatasetSaysWhatIsMissing: a program compiled from a spec without
// a dataset block knows no file names; train, eval and sample say so and
// what to add, instead of failing on the --data folder itself.
func TestNoDatasetSaysWhatIsMissing(t *testing.T) {
	dir := trainedLin(t)
	m := newLinearModel()
	d := &m.meta.Defaults
	d.TrainImages, d.TrainLabels, d.TestImages, d.TestLabels = "", "", "", ""
	for _, args := range [][]string{
		{"train", "--data", "data"},
		{"eval", "--data", "data", "--weights", "lin.safetensors"},
		{"sample", "--data", "data", "x.png"},
	} {
		code, _, errOut := runModel(t, dir, m, args...)
		if code != exitUsage || !strings.Contains(errOut, "lin.cue has none: add a dataset block to the spec") {
			t.Errorf("%q: exit %d (want 2): %s", args, code, errOut)
		}
	}
	// predict needs no data files
	if code, out, errOut := runModel(t, dir, m, "predict", "--weights", "lin.safetensors", "digit.pgm"); code != 0 || !strings.Contains(out, "class 0") {
		t.Errorf("predict: exit %d\n%s%s", code, out, errOut)
	}
	// --images and --labels name the files themselves
	if code, out, errOut := runModel(t, dir, m, "eval", "--weights", "lin.safetensors", "--images", "data/test-images", "--labels", "data/test-labels"); code != 0 {
		t.Errorf("eval --images: exit %d\n%s%s", code, out, errOut)
	}
}

// tokenIDModel's step meets an id outside its embedding's vocabulary.
type tokenIDModel struct{ *linearModel }

func (tokenIDModel) SelfTest() []SelfTestRow {
	panic(&cpu.TokenIDError{Layer: "wte", Position: 3, ID: 70, Vocab: 65})
}

// TestTokenIDOutOfRangeIsAnInputError: an embedding's refusal of a token
// id exits 1 with its message, not 70 as a bug.
func TestTokenIDOutOfRangeIsAnInputError(t *testing.T) {
	code, _, errOut := runModel(t, t.TempDir(), tokenIDModel{newLinearModel()}, "selftest")
	want := "wte: token id 70 at position 3 of the batch is outside the vocabulary of 65 (ids are 0 to 64)"
	if code != exitFailure || !strings.Contains(errOut, want) || strings.Contains(errOut, "a bug in mlbuild") {
		t.Errorf("exit %d (want %d), stderr lacks %q:\n%s", code, exitFailure, want, errOut)
	}
}
