// The spec file's checks use a FIFO and /dev/zero; the memory test reads
// the child's peak memory from Linux's rusage (in kilobytes).

//go:build linux

package spec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSpecFileReadBounded: a spec file is read up to the size bound and no
// further, and a file that is not a regular file is refused without
// reading it (a FIFO would block, /dev/zero never ends).
func TestSpecFileReadBounded(t *testing.T) {
	dir := t.TempDir()
	// A sparse file of 2 GiB: no disk, but os.ReadFile would take 2 GiB.
	big := filepath.Join(dir, "big.cue")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Load(big)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Errorf("Load(2 GiB file) = %v; want the size bound", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Errorf("Load(2 GiB file) allocated %d bytes; want at most the bound and change", grown)
	}

	fifo := filepath.Join(dir, "pipe.cue")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.cue")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{fifo, "pipe.cue: cannot read the spec: it is a named pipe (FIFO), not a regular file"},
		{zero, "zero.cue: cannot read the spec: it is a character device, not a regular file"},
		{dir, ": cannot read the spec: it is a directory, not a regular file"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(c.file); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.HasSuffix(err.Error(), c.want) {
				t.Errorf("Load(%s) = %v; want %q", filepath.Base(c.file), err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) did not return", filepath.Base(c.file))
		}
	}
}

// TestEvalMemoryBounded loads the doubling spec in a child process (CUE
// evaluation cannot be stopped, so the child exits from OverMemory, as
// the command line does) and checks that OverMemory got the error and the
// child's peak memory, which without the bound passed 8 GB.
func TestEvalMemoryBounded(t *testing.T) {
	if os.Getenv("MLBUILD_TEST_EVALMEM") != "" {
		OverMemory = func(err error) {
			fmt.Fprintln(os.Stderr, "OverMemory:", err)
			os.Exit(0)
		}
		_, err := LoadBytes(filepath.Join(os.TempDir(), "double.cue"), []byte(doublingSpec()))
		fmt.Fprintln(os.Stderr, "Load returned:", err)
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("starts a child that takes 0.3 GB")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEvalMemoryBounded$")
	cmd.Env = append(os.Environ(), "MLBUILD_TEST_EVALMEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OverMemory: ") || !strings.Contains(string(out), "double.cue:1:1: evaluating the spec took more than 256.00 MiB of memory") {
		t.Errorf("the child's OverMemory did not get the memory bound's error:\n%.1000s", out)
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024 // kilobytes on Linux
	t.Logf("peak memory of the child: %d MB", peak>>20)
	if peak > 1<<30 {
		t.Errorf("the child's peak memory was %d MB; want below 1 GB", peak>>20)
	}
}

// TestImportedFIFORefused: an imported package whose file is a FIFO is
// refused at once (CUE's loader skips files that are not regular), not
// waited for. cmd/mlbuild's TestHostileSpecsThroughCLI does the same with
// /dev/zero in a child, where an endless read could not harm the tests.
func TestImportedFIFORefused(t *testing.T) {
	old := EvalTimeout
	EvalTimeout = 10 * time.Second
	t.Cleanup(func() { EvalTimeout = old })
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755)
	os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "cue.mod", "module.cue"), []byte("module: \"x.example/m@v0\"\nlanguage: version: \"v0.16.0\"\n"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "lib", "lib.cue"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(hostileSpec("_y: lib.x"), `import "github.com`, "import \"x.example/m/lib\"\nimport \"github.com", 1)
	os.WriteFile(filepath.Join(dir, "spec.cue"), []byte(src), 0o644)
	done := make(chan error, 1)
	go func() { _, err := Load(filepath.Join(dir, "spec.cue")); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "spec.cue:3:8: import failed") {
			t.Errorf("Load = %v; want the import refused at its line", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Load waited for the FIFO")
	}
}
