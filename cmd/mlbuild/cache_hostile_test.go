package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/emit"
)

// TestBuildKeyHasGoSettings: every setting of the go command that changes
// the binary is a line of the build key, whether it comes from the
// environment or from `go env -w` (the GOENV file); a GOAMD64=v4 binary
// was served to a plain compile. Settings that cannot change the binary
// (GOCACHE) leave the key alone.
func TestBuildKeyHasGoSettings(t *testing.T) {
	files := []emit.File{{Path: "main.go", Data: []byte("package main\n\nfunc main() {}\n")}}
	for _, v := range []string{"GOAMD64", "GOARM64", "GOEXPERIMENT", "GOFLAGS"} {
		t.Setenv(v, "")
	}
	envFile := filepath.Join(t.TempDir(), "env")
	os.WriteFile(envFile, nil, 0o644)
	t.Setenv("GOENV", envFile)
	key := func(target string) (id, lines string) {
		t.Helper()
		k, err := buildKey(&compileOptions{backend: "cpu", target: target}, files, "go1.test")
		if err != nil {
			t.Fatal(err)
		}
		return k.ID().String(), k.Explain()
	}
	plain, lines := key("linux/amd64")
	if !strings.Contains(lines, `"goenv GOAMD64" v1`+"\n") {
		t.Errorf("the key lines lack GOAMD64:\n%s", lines)
	}
	t.Setenv("GOCACHE", t.TempDir())
	if id, _ := key("linux/amd64"); id != plain {
		t.Errorf("GOCACHE changed the key")
	}
	t.Setenv("GOAMD64", "v4")
	v4, lines := key("linux/amd64")
	if v4 == plain || !strings.Contains(lines, `"goenv GOAMD64" v4`) {
		t.Errorf("GOAMD64=v4 in the environment: same key, or no line:\n%s", lines)
	}
	t.Setenv("GOAMD64", "")
	os.WriteFile(envFile, []byte("GOAMD64=v3\n"), 0o644)
	if v3, lines := key("linux/amd64"); v3 == plain || v3 == v4 || !strings.Contains(lines, `"goenv GOAMD64" v3`) {
		t.Errorf("GOAMD64=v3 from go env -w: same key, or no line:\n%s", lines)
	}
	os.WriteFile(envFile, nil, 0o644)
	t.Setenv("GOEXPERIMENT", "nogreenteagc")
	if id, lines := key("linux/amd64"); id == plain || !strings.Contains(lines, `"goenv GOEXPERIMENT" nogreenteagc`) {
		t.Errorf("GOEXPERIMENT: same key, or no line:\n%s", lines)
	}
	t.Setenv("GOEXPERIMENT", "")
	arm, _ := key("linux/arm64")
	t.Setenv("GOARM64", "v8.3")
	if id, lines := key("linux/arm64"); id == arm || !strings.Contains(lines, `"goenv GOARM64" v8.3`) {
		t.Errorf("GOARM64: same key, or no line:\n%s", lines)
	}
}

// TestCompileWithoutCache: a cache that cannot be made (its folder would
// be under a file; a read-only file system fails the same way) costs the
// caching, not the compile: one note, and the binary.
func TestCompileWithoutCache(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, []byte("not a folder"), 0o644)
	out := filepath.Join(dir, "m")
	var o, e bytes.Buffer
	code := run([]string{"compile", "../../testdata/specs/valid/activations.cue", "--cache-dir", filepath.Join(blocker, "cache"), "-o", out}, &o, &e)
	if code != ExitOK {
		t.Fatalf("compile with an unusable cache: exit %d\n%s%s", code, o.String(), e.String())
	}
	if n := strings.Count(e.String(), "building without caching"); n != 1 {
		t.Errorf("stderr: want one note that the build is not cached:\n%s", e.String())
	}
	if !madeByMlbuild(out) {
		t.Errorf("no program at %s", out)
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "mlbuild-uncached-*"))
	for _, l := range left {
		if fi, err := os.Stat(l); err == nil && fi.ModTime().After(time.Now().Add(-time.Minute)) {
			t.Errorf("the uncached build left %s", l)
		}
	}
}
