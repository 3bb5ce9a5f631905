// The child's peak memory comes from Linux's rusage (in kilobytes), and
// the FIFO from mkfifo.

//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/spec"
)

// TestHostileSpecsThroughCLI runs the hostile specs of issue 26 through
// mlbuild validate in a child process: each exits 1 (or 4 for a spec
// that is no regular file) with a positioned message, within a few
// seconds, and the child's peak memory stays below 1 GB. Before, the
// label chain crashed with a stack overflow (exit 2), the doubling spec
// passed 8 GB, and the FIFO blocked for ever. An imported /dev/zero is
// skipped by CUE's loader (the import fails at its line).
func TestHostileSpecsThroughCLI(t *testing.T) {
	dir := t.TempDir()
	var double strings.Builder
	double.WriteString("name: \"tiny\"\n_s0: \"x\"\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&double, "_s%d: _s%d + _s%d\n", i, i-1, i-1)
	}
	doubling := hardWriteSpec(t, dir, "double.cue", `name: "tiny"`, double.String())
	chain := hardWriteSpec(t, dir, "chain.cue", `name: "tiny"`, `name: "tiny"
	_x: `+strings.Repeat("a: ", 100000)+"1")
	lr := hardWriteSpec(t, dir, "lr.cue", "", "")
	src, _ := os.ReadFile(lr)
	if !bytes.Contains(src, []byte("lr: ")) {
		t.Fatalf("test bug: the spec has no lr")
	}
	os.WriteFile(lr, regexpReplaceLR(src), 0o644)
	fifo := filepath.Join(dir, "pipe.cue")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// A package importing a "file" that is /dev/zero.
	imp := filepath.Join(dir, "imp")
	os.MkdirAll(filepath.Join(imp, "cue.mod"), 0o755)
	os.MkdirAll(filepath.Join(imp, "lib"), 0o755)
	os.WriteFile(filepath.Join(imp, "cue.mod", "module.cue"), []byte("module: \"x.example/m@v0\"\nlanguage: version: \"v0.16.0\"\n"), 0o644)
	if err := os.Symlink("/dev/zero", filepath.Join(imp, "lib", "lib.cue")); err != nil {
		t.Fatal(err)
	}
	zeroImport := filepath.Join(imp, "spec.cue")
	os.WriteFile(zeroImport, bytes.Replace([]byte(strings.Replace(hardSpecSource, `name: "tiny"`, "name: \"tiny\"\n_y: lib.x", 1)), []byte(`import "github.com`), []byte("import \"x.example/m/lib\"\nimport \"github.com"), 1), 0o644)
	for _, c := range []struct {
		file, want string
		code       int
	}{
		{zeroImport, "spec.cue:3:8: import failed", ExitInvalid},
		{doubling, "double.cue:1:1: evaluating the spec took more than 256.00 MiB of memory", ExitInvalid},
		{chain, "chain.cue:", ExitInvalid},
		{lr, "is beyond the largest number a float32 holds", ExitInvalid},
		{fifo, "pipe.cue: cannot read the spec: it is a named pipe (FIFO), not a regular file", ExitIO},
	} {
		code, errOut, took, peak := childPeak(t, "validate", c.file)
		t.Logf("validate %s: exit %d in %v, peak memory %d MB", filepath.Base(c.file), code, took.Round(time.Millisecond), peak>>20)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("validate %s: exit %d (want %d), stderr lacks %q:\n%.1000s", filepath.Base(c.file), code, c.code, c.want, errOut)
		}
		if took > 15*time.Second {
			t.Errorf("validate %s took %v", filepath.Base(c.file), took)
		}
		if peak > 1<<30 {
			t.Errorf("validate %s: peak memory %d MB; want below 1 GB", filepath.Base(c.file), peak>>20)
		}
	}
	if spec.MaxEvalMemory != 256<<20 {
		t.Errorf("spec.MaxEvalMemory changed: update the messages above and docs/hardening.md")
	}
}

// regexpReplaceLR sets the spec's learning rate to 1e39.
func regexpReplaceLR(src []byte) []byte {
	i := bytes.Index(src, []byte("lr: "))
	j := i + bytes.IndexAny(src[i:], ",}\n")
	return append(append(append([]byte{}, src[:i]...), "lr: 1e39"...), src[j:]...)
}

// childPeak runs mlbuild with args in a child (see hardArgsEnv) and
// returns its exit code, stderr, time and peak resident memory in bytes.
func childPeak(t *testing.T, args ...string) (code int, stderr string, took time.Duration, peak int64) {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hardArgsEnv+"="+string(a))
	var e bytes.Buffer
	cmd.Stderr = &e
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running mlbuild child: %v", err)
	}
	return code, e.String(), took, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
}
