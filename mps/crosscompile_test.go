package mps_test

import (
	"debug/macho"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goBuild builds ./internal/example with the given environment additions
// into dir and returns the binary's path. It uses the normal build cache,
// so only the first run pays for compiling purego for darwin.
func goBuild(t *testing.T, dir string, env ...string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	out := filepath.Join(dir, "example")
	cmd := exec.Command(goCmd, "build", "-trimpath", "-o", out, "./internal/example")
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(env, " "), err, b)
	}
	return out
}

// TestCrossCompileDarwinArm64 builds a program that uses the Engine for
// macOS on Apple silicon with cgo off, as mlbuild does from any OS, and
// checks that the result is a Mach-O arm64 executable.
func TestCrossCompileDarwinArm64(t *testing.T) {
	bin := goBuild(t, t.TempDir(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	f, err := macho.Open(bin)
	if err != nil {
		t.Fatalf("%s is not Mach-O: %v", bin, err)
	}
	defer f.Close()
	if f.Magic != macho.Magic64 || f.Cpu != macho.CpuArm64 || f.Type != macho.TypeExec {
		t.Fatalf("Mach-O header: magic %#x cpu %v type %v, want %#x %v %v", f.Magic, f.Cpu, f.Type, macho.Magic64, macho.CpuArm64, macho.TypeExec)
	}
	// purego reaches the system through dynamic libraries, not cgo.
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(libs, " "), "libSystem") {
		t.Errorf("imported libraries %v lack libSystem", libs)
	}
}

// TestExampleOnThisMachine runs the same program here: with -fake the host
// code passes the fake's protocol checks; without it, the error tells the
// user to use the CPU backend, with exit code 3.
func TestExampleOnThisMachine(t *testing.T) {
	bin := goBuild(t, t.TempDir(), "CGO_ENABLED=0")
	out, err := exec.Command(bin, "-fake").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fake: protocol ok") {
		t.Fatalf("example -fake: %v\n%s", err, out)
	}
	out, err = exec.Command(bin).CombinedOutput()
	if runtime.GOOS == "darwin" && err == nil {
		return // a Mac with a GPU: the real run worked
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(string(out), "--backend cpu") {
		t.Fatalf("example without Metal: %v, want exit 3 and the --backend cpu hint\n%s", err, out)
	}
}
