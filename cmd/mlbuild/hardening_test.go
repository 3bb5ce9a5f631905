package main

// Issue 5's hardening tests of mlbuild and of the programs it produces:
// exit codes of every class, output paths that refuse to overwrite what
// mlbuild did not make, the memory limit, bounded CUE evaluation, and the
// training faults (divergence, SIGINT and --resume, SIGKILL during a
// checkpoint write). One tiny model (an MLP on 8×8 images of 4 classes) is
// compiled once per test binary into a shared folder, and trained on a
// synthetic IDX data set written next to it, so the whole file runs in
// seconds.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/rt/idx"
	"github.com/mlbuild/mlbuild/rt/safetensors"
	"github.com/mlbuild/mlbuild/spec"
)

// hardArgsEnv turns the test binary into mlbuild (see the init function below), running
// the JSON list of arguments it holds; hardTimeoutEnv sets
// spec.EvalTimeout in that child, so a test can check the time bound
// without waiting the default 20 s or leaving an evaluation running in the
// test process.
const (
	hardArgsEnv    = "MLBUILD_TEST_HARDENING_ARGS"
	hardTimeoutEnv = "MLBUILD_TEST_HARDENING_EVAL_TIMEOUT"
)

func init() {
	a := os.Getenv(hardArgsEnv)
	if a == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(a), &args); err != nil {
		fmt.Fprintf(os.Stderr, "test helper: %s: %v\n", hardArgsEnv, err)
		os.Exit(ExitInternal)
	}
	if d, err := time.ParseDuration(os.Getenv(hardTimeoutEnv)); err == nil {
		spec.EvalTimeout = d
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// hardSpecSource is the tiny model every produced-binary test uses. It is
// large enough (about 17 000 weights, 210 KB per Adam checkpoint) that
// writing a checkpoint takes a while, and small enough that an epoch of 8
// steps takes well under a millisecond.
const hardSpecSource = `package tiny

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "tiny"
	model: {
		input: [1, 8, 8]
		layers: [
			{op: "flatten"},
			{op: "dense", units: 256},
			{op: "relu"},
			{op: "dense", units: 4},
		]
	}
	training: {
		optimizer: {kind: "adam", lr: 1e-2}
		epochs:    3
		batchSize: 8
		seed:      7
	}
	dataset: {
		trainImages: "train-images"
		trainLabels: "train-labels"
		testImages:  "test-images"
		testLabels:  "test-labels"
		classes:     4
		imageShape: [1, 8, 8]
	}
}
`

// hardEnv is the folder, built once by TestHardening, holding the spec,
// the build cache, the compiled binary and the data set.
type hardEnv struct {
	dir, spec, cache, bin, data string
}

// hardSetup compiles hardSpecSource into a temporary folder of t and
// writes the data set: 64 training and 32 test images whose class is the
// bright quadrant.
func hardSetup(t *testing.T) *hardEnv {
	t.Helper()
	dir := t.TempDir()
	e := &hardEnv{dir: dir, spec: filepath.Join(dir, "tiny.cue"), cache: filepath.Join(dir, "cache"),
		bin: filepath.Join(dir, "tiny"), data: filepath.Join(dir, "data")}
	if err := os.WriteFile(e.spec, []byte(hardSpecSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hardWriteData(e.data, 64, 32); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"compile", e.spec, "-o", e.bin, "--cache-dir", e.cache}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("compiling the test model exited %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	return e
}

// TestHardening compiles the tiny model once and runs the tests that use
// it, each as a subtest (go test -run 'TestHardening/Interrupt').
func TestHardening(t *testing.T) {
	e := hardSetup(t)
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *hardEnv)
	}{
		{"MlbuildExitCodes", testMlbuildExitCodes},
		{"MemoryLimit", testMemoryLimit},
		{"MemoryRefusal", testMemoryRefusal},
		{"HostileCUEIsBounded", testHostileCUEIsBounded},
		{"OutputPaths", testOutputPaths},
		{"OverwriteOnlyPrograms", testOverwriteOnlyPrograms},
		{"BinaryExitCodesAndOutputs", testBinaryExitCodesAndOutputs},
		{"TrainingDiverges", testTrainingDiverges},
		{"InterruptAndResume", testInterruptAndResume},
		{"CheckpointSurvivesSIGKILL", testCheckpointSurvivesSIGKILL},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, e) })
	}
}

// hardWriteData writes the synthetic IDX files of hardSpecSource.
func hardWriteData(dir string, nTrain, nTest int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(1))
	set := func(n int) (pix, labels []byte) {
		for i := 0; i < n; i++ {
			c := i % 4
			labels = append(labels, byte(c))
			for y := 0; y < 8; y++ {
				for x := 0; x < 8; x++ {
					v := rng.Intn(60)
					if (y/4)*2+x/4 == c {
						v += 180
					}
					pix = append(pix, byte(v))
				}
			}
		}
		return pix, labels
	}
	files := map[string][]byte{}
	pix, lab := set(nTrain)
	files["train-images"], files["train-labels"] = idx.EncodeImages(8, 8, pix), idx.EncodeLabels(lab)
	pix, lab = set(nTest)
	files["test-images"], files["test-labels"] = idx.EncodeImages(8, 8, pix), idx.EncodeLabels(lab)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hardCLI runs mlbuild in-process.
func hardCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// hardChild runs mlbuild in a child process (the test binary, see
// its init function) with spec.EvalTimeout set to timeout.
func hardChild(t *testing.T, timeout time.Duration, args ...string) (code int, stderr string, took time.Duration) {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hardArgsEnv+"="+string(a), hardTimeoutEnv+"="+timeout.String())
	var e bytes.Buffer
	cmd.Stderr = &e
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), e.String(), took
	} else if err != nil {
		t.Fatalf("running mlbuild child: %v", err)
	}
	return 0, e.String(), took
}

// hardRun runs the produced binary in dir and returns its exit code and
// output.
func hardRun(t *testing.T, dir, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	} else if err != nil {
		t.Fatalf("running %s: %v", bin, err)
	}
	return 0, o.String(), e.String()
}

// hardWriteSpec writes a variant of hardSpecSource with old replaced by
// new into dir and returns its path.
func hardWriteSpec(t *testing.T, dir, name, old, new string) string {
	t.Helper()
	src := hardSpecSource
	if old != "" {
		if !strings.Contains(src, old) {
			t.Fatalf("test bug: %q is not in the spec", old)
		}
		src = strings.Replace(src, old, new, 1)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// hardListTree lists every path under dir, relative to it.
func hardListTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	return out
}

// testMlbuildExitCodes triggers every exit code of mlbuild.
func testMlbuildExitCodes(t *testing.T, e *hardEnv) {
	bin := e.bin
	dir := t.TempDir()
	notMine := filepath.Join(dir, "notes.txt")
	os.WriteFile(notMine, []byte("precious"), 0o644)
	cases := []struct {
		name string
		args []string
		code int
		want string // in stdout+stderr
	}{
		{"ok: compile (cache hit)", []string{"compile", e.spec, "-o", filepath.Join(dir, "ok"), "--cache-dir", e.cache}, ExitOK, "cache hit"},
		{"invalid: hostile model name", []string{"compile", hardWriteSpec(t, dir, "bad.cue", `name: "tiny"`, `name: "x\"; os.Exit(1) //"`), "--cache-dir", e.cache}, ExitInvalid, "[A-Za-z_][A-Za-z0-9_]{0,63}"},
		{"invalid: dataset path", []string{"compile", hardWriteSpec(t, dir, "path.cue", `"train-images"`, `"../../etc/passwd"`), "--cache-dir", e.cache}, ExitInvalid, "path.cue:23:"},
		{"usage: unknown flag", []string{"compile", e.spec, "--no-such-flag"}, ExitUsage, "unknown flag"},
		{"usage: bad --memory-limit", []string{"plan", e.spec, "--memory-limit", "lots"}, ExitUsage, "is not a size"},
		{"usage: bad --target", []string{"compile", e.spec, "--target", "plan9"}, ExitUsage, "GOOS/GOARCH"},
		{"io: -o over a file mlbuild did not make", []string{"compile", e.spec, "-o", notMine, "--cache-dir", e.cache}, ExitIO, "not made by mlbuild"},
	}
	for _, c := range cases {
		code, out, errOut := hardCLI(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%s: exit %d (want %d), output lacks %q:\n%s%s", c.name, code, c.code, c.want, out, errOut)
		}
	}
	if b, _ := os.ReadFile(notMine); string(b) != "precious" {
		t.Errorf("refused -o changed the file: %q", b)
	}
	_ = bin

	// build: no Go toolchain on PATH.
	t.Run("build", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		code, out, errOut := hardCLI("compile", e.spec, "-o", filepath.Join(dir, "nogo"), "--cache-dir", e.cache)
		if code != ExitBuild || !strings.Contains(errOut, "needs the Go toolchain") {
			t.Errorf("compile without go: exit %d (want %d):\n%s%s", code, ExitBuild, out, errOut)
		}
	})

	// internal: no input reaches it (that is the point), so check the
	// plumbing with a command that fails the way a broken invariant does.
	t.Run("internal", func(t *testing.T) {
		saved := subcommands
		defer func() { subcommands = saved }()
		subcommands = append(subcommands, func(*globalOptions) *cobra.Command {
			return &cobra.Command{Use: "hardening-bug", RunE: func(*cobra.Command, []string) error {
				return withCode(ExitInternal, fmt.Errorf("an invariant broke"))
			}}
		})
		code, _, errOut := hardCLI("hardening-bug")
		if code != ExitInternal || !strings.Contains(errOut, "an invariant broke") {
			t.Errorf("internal error: exit %d (want %d): %s", code, ExitInternal, errOut)
		}
	})
}

// testMemoryLimit: a plan above --memory-limit, or above this machine's
// memory by default, fails at plan time naming the figure and the layer,
// before any code is built.
func testMemoryLimit(t *testing.T, e *hardEnv) {
	dir := t.TempDir()
	for _, cmd := range []string{"plan", "compile"} {
		code, out, errOut := hardCLI(cmd, e.spec, "--memory-limit", "16KiB", "--cache-dir", e.cache, "-o", filepath.Join(dir, "x"))
		if cmd == "plan" {
			code, out, errOut = hardCLI(cmd, e.spec, "--memory-limit", "16KiB")
		}
		if code != ExitInvalid || !strings.Contains(errOut, "layer dense1") || !strings.Contains(errOut, "memory limit of 16384 bytes") || !strings.Contains(errOut, "tiny.cue:11:") {
			t.Errorf("%s --memory-limit 16KiB: exit %d (want %d), stderr should name tiny.cue:11, layer dense1 and the limit:\n%s%s", cmd, code, ExitInvalid, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Errorf("compile over the memory limit wrote a binary")
	}
	// The same spec fits under a larger limit and with no limit.
	for _, lim := range []string{"1MiB", "0"} {
		if code, _, errOut := hardCLI("plan", e.spec, "--memory-limit", lim); code != ExitOK {
			t.Errorf("plan --memory-limit %s: exit %d: %s", lim, code, errOut)
		}
	}
	// Default: the machine's memory. Two billion hidden units need 2 TB.
	if machineMemory() <= 0 {
		t.Fatalf("machineMemory() found no memory size on %s", "this machine")
	}
	huge := hardWriteSpec(t, dir, "huge.cue", "units: 256", "units: 2000000000")
	code, _, errOut := hardCLI("compile", huge, "--cache-dir", e.cache, "-o", filepath.Join(dir, "huge"))
	if code != ExitInvalid || !strings.Contains(errOut, "layer dense1") || !strings.Contains(errOut, fmt.Sprintf("memory limit of %d bytes", machineMemory())) {
		t.Errorf("compile of a 2 TB model: exit %d, want %d naming dense1 and the machine's %d bytes:\n%s", code, ExitInvalid, machineMemory(), errOut)
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "16KiB": 16384, "1.5k": 1536, "2MB": 2e6, "3GiB": 3 << 30, "1 TB": 1e12} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1XB", "GiB", "NaN", "1e400", "9999999TiB"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
}

// testHostileCUEIsBounded: a spec too large, too deeply nested or too slow
// to evaluate is refused with exit 1 and a message saying which bound.
func testHostileCUEIsBounded(t *testing.T, e *hardEnv) {
	dir := t.TempDir()
	big := hardWriteSpec(t, dir, "big.cue", "package tiny", "package tiny\n\n// "+strings.Repeat("x", spec.MaxSpecBytes))
	deep := hardWriteSpec(t, dir, "deep.cue", `name: "tiny"`, `name: "tiny"
	_deep: `+strings.Repeat("[", 100000)+strings.Repeat("]", 100000))
	slow := hardWriteSpec(t, dir, "slow.cue", `name: "tiny"`, `name: "tiny"
	_big: [for i in list.Range(0, 300, 1) for j in list.Range(0, 300, 1) {i * j}]
	dtype: *"f32" | [for x in _big if x < 0 {x}][0]`)
	os.WriteFile(slow, bytes.Replace(must(os.ReadFile(slow)), []byte(`import "github.com`), []byte("import \"list\"\nimport \"github.com"), 1), 0o644)
	for _, c := range []struct {
		file, want string
		limit      time.Duration
	}{
		{big, "larger than 1048576 bytes", 10 * time.Second},
		{deep, "nest more than 200 levels", 10 * time.Second},
		{slow, "took longer than 1s", time.Second},
	} {
		code, errOut, took := hardChild(t, c.limit, "validate", c.file)
		if code != ExitInvalid || !strings.Contains(errOut, c.want) {
			t.Errorf("validate %s: exit %d (want %d), stderr lacks %q:\n%s", filepath.Base(c.file), code, ExitInvalid, c.want, errOut)
		}
		if took > c.limit+5*time.Second {
			t.Errorf("validate %s took %v, beyond its bound %v", filepath.Base(c.file), took, c.limit)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// testOutputPaths: -o and --emit write only what was asked for, and
// refuse to replace what mlbuild did not make unless --force.
func testOutputPaths(t *testing.T, e *hardEnv) {
	dir := t.TempDir()
	compile := func(extra ...string) (int, string) {
		code, out, errOut := hardCLI(append([]string{"compile", e.spec, "--cache-dir", e.cache}, extra...)...)
		return code, out + errOut
	}

	// -o over a file mlbuild did not make: refused, then --force.
	other := filepath.Join(dir, "other")
	os.WriteFile(other, []byte("#!/bin/sh\necho mine\n"), 0o755)
	if code, out := compile("-o", other); code != ExitIO || !strings.Contains(out, "--force") {
		t.Errorf("-o over a foreign file: exit %d, want %d suggesting --force:\n%s", code, ExitIO, out)
	}
	if b, _ := os.ReadFile(other); string(b) != "#!/bin/sh\necho mine\n" {
		t.Errorf("refused -o changed the file")
	}
	if code, out := compile("-o", other, "--force"); code != ExitOK {
		t.Errorf("-o --force: exit %d:\n%s", code, out)
	}
	// Now the file is mlbuild's: replacing it needs no --force.
	if code, out := compile("-o", other); code != ExitOK {
		t.Errorf("-o over mlbuild's own binary: exit %d:\n%s", code, out)
	}
	// -o naming a folder is refused.
	if code, out := compile("-o", dir); code != ExitIO || !strings.Contains(out, "is a directory") {
		t.Errorf("-o DIR: exit %d:\n%s", code, out)
	}

	// --emit into a folder holding someone's files: refused, untouched.
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package mine\n"), 0o644)
	if code, out := compile("-o", filepath.Join(dir, "b1"), "--emit", src); code != ExitIO || !strings.Contains(out, "not written by mlbuild") {
		t.Errorf("--emit into a foreign folder: exit %d:\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "main.go")); string(b) != "package mine\n" {
		t.Errorf("refused --emit changed main.go")
	}
	// An empty (new) folder is fine, and so is writing it again.
	gen := filepath.Join(dir, "gen", "tiny")
	for i := 0; i < 2; i++ {
		if code, out := compile("-o", filepath.Join(dir, "b2"), "--emit", gen); code != ExitOK {
			t.Fatalf("--emit %s (round %d): exit %d:\n%s", gen, i, code, out)
		}
	}
	// Everything written lies under the paths asked for, and no temporary
	// file is left behind.
	for _, p := range hardListTree(t, dir) {
		ok := p == "." || p == "other" || p == "b2" || p == "gen" || p == "src" || p == filepath.Join("src", "main.go") ||
			strings.HasPrefix(p, filepath.Join("gen", "tiny"))
		if !ok || strings.Contains(p, ".tmp-") {
			t.Errorf("unexpected file after compiles: %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(gen, "main.go")); err != nil {
		t.Errorf("--emit wrote no main.go: %v", err)
	}
	for _, p := range hardListTree(t, filepath.Dir(e.spec)) {
		if strings.Contains(p, ".tmp-") {
			t.Errorf("temporary file left next to the spec: %s", p)
		}
	}
}

// testBinaryExitCodesAndOutputs triggers the produced program's exit codes
// 0, 1 and 2 and checks that train refuses to replace a file it did not
// write.
func testBinaryExitCodesAndOutputs(t *testing.T, e *hardEnv) {
	bin, data := e.bin, e.data
	dir := t.TempDir()
	// 0: train and eval.
	if code, out, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", "2", "--out", "w.safetensors", "--quiet"); code != 0 {
		t.Fatalf("train: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut := hardRun(t, dir, bin, "eval", "--data", data, "--weights", "w.safetensors")
	if code != 0 || !strings.Contains(out, "accuracy: ") {
		t.Errorf("eval: exit %d:\n%s%s", code, out, errOut)
	}
	// 2: usage.
	if code, _, errOut := hardRun(t, dir, bin, "fly"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d (want 2): %s", code, errOut)
	}
	if code, _, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", "0"); code != 2 {
		t.Errorf("--epochs 0: exit %d (want 2): %s", code, errOut)
	}
	// 1: bad input, naming the file.
	cut := filepath.Join(dir, "cut")
	os.MkdirAll(cut, 0o755)
	for _, f := range []string{"train-images", "train-labels", "test-images", "test-labels"} {
		b, _ := os.ReadFile(filepath.Join(data, f))
		if f == "test-images" {
			b = b[:len(b)-10]
		}
		os.WriteFile(filepath.Join(cut, f), b, 0o644)
	}
	if code, _, errOut := hardRun(t, dir, bin, "eval", "--data", cut, "--weights", "w.safetensors"); code != 1 || !strings.Contains(errOut, "test-images") {
		t.Errorf("truncated IDX: exit %d (want 1), stderr should name test-images: %s", code, errOut)
	}
	os.WriteFile(filepath.Join(dir, "half.safetensors"), must(os.ReadFile(filepath.Join(dir, "w.safetensors")))[:100], 0o644)
	if code, _, errOut := hardRun(t, dir, bin, "eval", "--data", data, "--weights", "half.safetensors"); code != 1 || !strings.Contains(errOut, "half.safetensors") {
		t.Errorf("cut weights: exit %d (want 1): %s", code, errOut)
	}

	// train --out and --checkpoint refuse files an mlbuild program did not
	// write, before training; --force replaces them.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("precious"), 0o644)
	start := time.Now()
	for _, flag := range []string{"--out", "--checkpoint"} {
		code, _, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", "1", flag, "notes.txt", "--quiet")
		if code != 1 || !strings.Contains(errOut, "--force") {
			t.Errorf("train %s over a foreign file: exit %d (want 1) suggesting --force: %s", flag, code, errOut)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "precious" {
			t.Fatalf("train %s replaced a foreign file", flag)
		}
	}
	_ = start
	if code, _, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", "1", "--out", "notes.txt", "--force", "--quiet"); code != 0 {
		t.Errorf("train --out --force: exit %d: %s", code, errOut)
	}
	if code, _, errOut := hardRun(t, dir, bin, "eval", "--data", data, "--weights", "notes.txt"); code != 0 {
		t.Errorf("eval of the forced weights: exit %d: %s", code, errOut)
	}
	// Its own files it replaces without --force.
	if code, _, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", "1", "--out", "w.safetensors", "--quiet"); code != 0 {
		t.Errorf("train over its own weights: exit %d: %s", code, errOut)
	}
	for _, p := range hardListTree(t, dir) {
		if strings.Contains(p, ".tmp-") {
			t.Errorf("temporary file left by train: %s", p)
		}
	}
}

// testTrainingDiverges: a learning rate of 1e30 makes the loss overflow;
// training stops with exit 3 and a message naming the step, the layer or
// weight where the first non-finite value is, and the last good
// checkpoint, which still loads.
func testTrainingDiverges(t *testing.T, e *hardEnv) {
	bin, data := e.bin, e.data
	dir := t.TempDir()
	if code, out, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", "2", "--out", "a.safetensors", "--quiet"); code != 0 {
		t.Fatalf("train: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut := hardRun(t, dir, bin, "train", "--data", data, "--resume", "a.ckpt.safetensors", "--epochs", "5", "--lr", "1e30", "--out", "b.safetensors", "--quiet")
	if code != 3 {
		t.Fatalf("train --lr 1e30: exit %d, want 3:\n%s%s", code, out, errOut)
	}
	t.Logf("divergence message: %s", errOut)
	for _, want := range []string{"diverged at epoch 3, step 1", "layer dense", "the last good checkpoint is a.ckpt.safetensors", "--resume a.ckpt.safetensors", "Try a lower --lr"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("divergence message lacks %q:\n%s", want, errOut)
		}
	}
	if code, _, errOut := hardRun(t, dir, bin, "eval", "--data", data, "--weights", "a.ckpt.safetensors"); code != 0 {
		t.Errorf("the last good checkpoint does not load: exit %d: %s", code, errOut)
	}
	// From scratch there is no good checkpoint yet, and the message says so.
	code, _, errOut = hardRun(t, dir, bin, "train", "--data", data, "--epochs", "5", "--lr", "1e30", "--out", "c.safetensors", "--quiet")
	if code != 3 || !strings.Contains(errOut, "no good checkpoint was written in this run") || !strings.Contains(errOut, "epoch 1, step ") {
		t.Errorf("diverging from scratch: exit %d (want 3):\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.ckpt.safetensors")); err == nil {
		if code, _, errOut := hardRun(t, dir, bin, "eval", "--data", data, "--weights", "c.ckpt.safetensors"); code != 0 {
			t.Errorf("a checkpoint written before divergence does not load: %s", errOut)
		}
	}
}

// hardWaitFor polls until path exists or the process ends.
func hardWaitFor(path string, done <-chan struct{}) bool {
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		select {
		case <-done:
			return false
		default:
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// testInterruptAndResume: SIGINT writes a checkpoint and exits 130 with a
// message; --resume from it reaches the bit-identical weights of an
// uninterrupted run with the same seed. Interrupts land at different
// points of the run (mid-epoch and at epoch ends).
func testInterruptAndResume(t *testing.T, e *hardEnv) {
	bin, data := e.bin, e.data
	dir := t.TempDir()
	// 400 epochs: a run of 40 (about 30 ms on an idle machine) could end
	// between its first checkpoint and the interrupt, which then tested
	// nothing (a fresh clone's make test once saw 3 of 4 such rounds).
	const epochs = "400"
	if code, out, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", epochs, "--out", "ref.safetensors", "--quiet"); code != 0 {
		t.Fatalf("uninterrupted train: exit %d:\n%s%s", code, out, errOut)
	}
	ref := must(os.ReadFile(filepath.Join(dir, "ref.safetensors")))
	interrupted := 0
	for round := 0; round < 4; round++ {
		out := fmt.Sprintf("r%d.safetensors", round)
		ckpt := fmt.Sprintf("r%d.ckpt.safetensors", round)
		cmd := exec.Command(bin, "train", "--data", data, "--epochs", epochs, "--out", out, "--quiet")
		cmd.Dir = dir
		var e bytes.Buffer
		cmd.Stderr = &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var werr error
		go func() { werr = cmd.Wait(); close(done) }()
		if hardWaitFor(filepath.Join(dir, ckpt), done) {
			time.Sleep(time.Duration(round) * 3 * time.Millisecond)
			cmd.Process.Signal(os.Interrupt)
		}
		<-done
		code := cmd.ProcessState.ExitCode()
		if werr == nil {
			t.Logf("round %d: training finished before the interrupt", round)
			continue
		}
		if code != 130 || !strings.Contains(e.String(), "interrupted; checkpoint written to "+ckpt) || !strings.Contains(e.String(), "--resume") {
			t.Fatalf("round %d: SIGINT: exit %d (want 130), stderr: %s", round, code, e.String())
		}
		interrupted++
		code, o, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", epochs, "--out", out, "--resume", ckpt, "--quiet")
		if code != 0 {
			t.Fatalf("round %d: resume: exit %d:\n%s%s", round, code, o, errOut)
		}
		if got := must(os.ReadFile(filepath.Join(dir, out))); !bytes.Equal(got, ref) {
			t.Errorf("round %d: resumed weights differ from the uninterrupted run's (%d vs %d bytes)", round, len(got), len(ref))
		}
	}
	if interrupted < 2 {
		t.Errorf("only %d of 4 runs were interrupted mid-training; the test did not test much", interrupted)
	}
}

// testCheckpointSurvivesSIGKILL kills a training run with SIGKILL while it
// writes its checkpoint (as soon as the checkpoint's temporary file
// appears) and at random times; every time the checkpoint left behind
// loads, for eval and for --resume.
func testCheckpointSurvivesSIGKILL(t *testing.T, e *hardEnv) {
	bin, data := e.bin, e.data
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(5))
	duringWrite, loaded := 0, 0
	const rounds = 12
	for round := 0; round < rounds; round++ {
		// The first run of each pair makes a checkpoint; the second is
		// killed while it replaces it.
		ckpt := fmt.Sprintf("k%d.ckpt.safetensors", round)
		out := fmt.Sprintf("k%d.safetensors", round)
		if code, o, errOut := hardRun(t, dir, bin, "train", "--data", data, "--epochs", "1", "--out", out, "--quiet"); code != 0 {
			t.Fatalf("train: exit %d:\n%s%s", code, o, errOut)
		}
		cmd := exec.Command(bin, "train", "--data", data, "--epochs", "1000", "--out", out, "--resume", ckpt, "--quiet")
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		if round%3 == 2 {
			time.Sleep(time.Duration(rng.Intn(40000)) * time.Microsecond)
		} else {
			// Wait for the temporary file of a checkpoint write.
			prefix := "." + ckpt + ".tmp-"
		poll:
			for {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), prefix) {
						duringWrite++
						break poll
					}
				}
				select {
				case <-done:
					break poll
				default:
				}
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		code, o, errOut := hardRun(t, dir, bin, "eval", "--data", data, "--weights", ckpt)
		if code != 0 || !strings.Contains(o, "accuracy: ") {
			t.Fatalf("round %d: checkpoint after SIGKILL does not load: exit %d:\n%s%s", round, code, o, errOut)
		}
		f, err := safetensors.Read(filepath.Join(dir, ckpt))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var epoch int
		fmt.Sscan(f.Metadata["mlbuild.epoch"], &epoch)
		code, o, errOut = hardRun(t, dir, bin, "train", "--data", data, "--epochs", fmt.Sprint(epoch+1), "--resume", ckpt, "--out", fmt.Sprintf("k%d-resumed.safetensors", round), "--checkpoint", fmt.Sprintf("k%d-resumed.ckpt.safetensors", round), "--quiet")
		if code != 0 || !strings.Contains(o, fmt.Sprintf("trained epoch %d of %d", epoch+1, epoch+1)) {
			t.Fatalf("round %d: --resume after SIGKILL from epoch %d: exit %d:\n%s%s", round, epoch, code, o, errOut)
		}
		loaded++
	}
	if duringWrite < rounds/2 {
		t.Errorf("only %d kills landed during a checkpoint write", duringWrite)
	}
	t.Logf("%d SIGKILLs (%d during a checkpoint write); every checkpoint loaded", loaded, duringWrite)
}
