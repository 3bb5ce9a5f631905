package atomicfile

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leftovers lists the files in dir other than the ones named.
func leftovers(t *testing.T, dir string, keep ...string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
outer:
	for _, e := range entries {
		for _, k := range keep {
			if e.Name() == k {
				continue outer
			}
		}
		extra = append(extra, e.Name())
	}
	return extra
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.bin")
	if err := WriteBytes(path, 0o644, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, path); got != "first" {
		t.Fatalf("got %q, want %q", got, "first")
	}
	if err := WriteBytes(path, 0o644, []byte("second, longer")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, path); got != "second, longer" {
		t.Fatalf("got %q, want %q", got, "second, longer")
	}
	if extra := leftovers(t, dir, "w.bin"); len(extra) != 0 {
		t.Fatalf("temporary files left behind: %v", extra)
	}
}

func TestWriteFilePermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions on Windows")
	}
	path := filepath.Join(t.TempDir(), "p")
	if err := WriteBytes(path, 0o640, []byte("x")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0o640 &^ umask(); fi.Mode().Perm() != want {
		t.Fatalf("mode %v, want %v", fi.Mode().Perm(), want)
	}
}

func TestWriteFileFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt")
	if err := WriteBytes(path, 0o644, []byte("good")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	err := WriteFile(path, 0o644, func(w io.Writer) error {
		// Write more than the buffer so that part of it reaches the
		// temporary file before the failure.
		if _, err := w.Write(make([]byte, 1<<17)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v does not wrap the writer's error", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name the file", err)
	}
	if got := readString(t, path); got != "good" {
		t.Fatalf("old contents lost: got %q", got)
	}
	if extra := leftovers(t, dir, "ckpt"); len(extra) != 0 {
		t.Fatalf("temporary files left behind: %v", extra)
	}
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing directory", filepath.Join(dir, "nope", "f"), "creating temporary file"},
		{"target is a directory", sub, "sub"},
		{"empty name", dir + string(filepath.Separator), "not a file name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteBytes(tt.path, 0o644, []byte("x"))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), filepath.Base(strings.TrimRight(tt.path, string(filepath.Separator)))) {
				t.Fatalf("error %q should name the path and say %q", err, tt.want)
			}
		})
	}
	if extra := leftovers(t, dir, "sub"); len(extra) != 0 {
		t.Fatalf("temporary files left behind: %v", extra)
	}
}

func TestWriteNewFileRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := WriteNewFile(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, "mine")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := WriteNewFile(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, "theirs")
		return err
	})
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want an fs.ErrExist naming %s", err, path)
	}
	if got := readString(t, path); got != "mine" {
		t.Fatalf("existing file overwritten: %q", got)
	}
	if extra := leftovers(t, dir, "out"); len(extra) != 0 {
		t.Fatalf("temporary files left behind: %v", extra)
	}
}

// TestKilledWriterKeepsOldFile kills -9 a process in the middle of a write
// and checks that the file still holds its old contents.
func TestKilledWriterKeepsOldFile(t *testing.T) {
	if os.Getenv("ATOMICFILE_CHILD") != "" {
		t.Skip("child process")
	}
	path := filepath.Join(t.TempDir(), "weights")
	if err := WriteBytes(path, 0o644, []byte("last good checkpoint")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSlowWriter$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "writing\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start writing: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if got := readString(t, path); got != "last good checkpoint" {
		t.Fatalf("after kill -9 the file holds %q", got)
	}
}

// TestHelperSlowWriter is the child of TestKilledWriterKeepsOldFile: it
// writes part of a new file, says so, and waits to be killed.
func TestHelperSlowWriter(t *testing.T) {
	path := os.Getenv("ATOMICFILE_CHILD")
	if path == "" {
		t.Skip("only runs as the child of TestKilledWriterKeepsOldFile")
	}
	WriteFile(path, 0o644, func(w io.Writer) error {
		w.Write(make([]byte, 1<<20))
		os.Stdout.WriteString("writing\n")
		select {} // wait for kill -9
	})
}
