package main

import (
	"bytes"
	"debug/macho"
	"path/filepath"
	"strings"
	"testing"
)

// metalCLI runs the CLI in-process and returns its exit code and output.
func metalCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCompileMetal builds models/mnist.cue through the real command for an
// Apple M-series Mac, fused and unfused, with an empty module cache, and
// checks that each result is a Mach-O arm64 executable.
func TestCompileMetal(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles a Metal program")
	}
	// An empty module cache: the program builds from what mlbuild carries.
	t.Setenv("GOMODCACHE", t.TempDir())
	dir := t.TempDir()
	for _, fusion := range []string{"true", "false"} {
		out := filepath.Join(dir, "mnist-metal-"+fusion)
		code, stdout, stderr := metalCLI("compile", "../../models/mnist.cue", "--backend", "metal", "--target", "darwin/arm64",
			"--fusion="+fusion, "-o", out, "--cache-dir", filepath.Join(dir, "cache"))
		if code != 0 {
			t.Fatalf("fusion=%s: exit %d\n%s%s", fusion, code, stdout, stderr)
		}
		if !strings.Contains(stdout, "metal, darwin/arm64") {
			t.Errorf("fusion=%s: summary %q does not name the backend and target", fusion, stdout)
		}
		f, err := macho.Open(out)
		if err != nil {
			t.Fatalf("fusion=%s: %v", fusion, err)
		}
		if f.Cpu != macho.CpuArm64 || f.Type != macho.TypeExec {
			t.Errorf("fusion=%s: Mach-O cpu %v type %v, want an arm64 executable", fusion, f.Cpu, f.Type)
		}
		f.Close()
	}
}

// TestCompileMetalNeedsDarwin: Metal for another OS is a usage error that
// says why and what to use instead.
func TestCompileMetalNeedsDarwin(t *testing.T) {
	code, _, stderr := metalCLI("compile", "../../models/mnist.cue", "--backend", "metal", "--target", "linux/amd64",
		"--cache-dir", t.TempDir())
	if code != ExitUsage {
		t.Errorf("exit %d, want %d (usage)", code, ExitUsage)
	}
	for _, want := range []string{"darwin/arm64", "--backend cpu", "macOS"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("message %q does not mention %q", stderr, want)
		}
	}
}
