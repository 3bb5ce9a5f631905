package emit

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild"
)

// h1 is the go.sum hash of a module zip: the SHA-256 of a listing of each
// file's SHA-256 and name, in name order, as the go command computes it
// (golang.org/x/mod/sumdb/dirhash, Hash1), written out here from its
// definition.
func h1(t *testing.T, data []byte) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(zr.File))
	byName := map[string]*zip.File{}
	for _, f := range zr.File {
		names = append(names, f.Name)
		byName[f.Name] = f
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, name := range names {
		r, err := byName[name].Open()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		fmt.Fprintf(sum, "%x  %s\n", h.Sum(nil), name)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(sum.Sum(nil))
}

// TestCarriedModuleMatchesGoSum: the purego zip mlbuild carries is the
// very module its go.sum names, so programs build against the code
// mlbuild's own tests ran.
func TestCarriedModuleMatchesGoSum(t *testing.T) {
	want := ""
	prefix := Purego.Path + " " + Purego.Version + " "
	for _, line := range strings.Split(string(mlbuild.GoSum), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			want = rest
		}
	}
	if want == "" {
		t.Fatalf("go.sum has no line for %s %s: update the carried zip and emit.Purego together", Purego.Path, Purego.Version)
	}
	if got := h1(t, Purego.Zip); got != want {
		t.Fatalf("third_party zip of %s %s hashes to %s, go.sum says %s: the carried copy is not the module mlbuild builds against", Purego.Path, Purego.Version, got, want)
	}
}

// TestCarriedModuleVendorTree: the vendor folder lists every package it
// holds, keeps the license, and leaves out tests and examples.
func TestCarriedModuleVendorTree(t *testing.T) {
	files, err := VendorFiles(Purego)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string][]byte{}
	for _, f := range files {
		have[f.Path] = f.Data
		if strings.HasSuffix(f.Path, "_test.go") || strings.Contains(f.Path, "/examples/") {
			t.Errorf("vendored %s, which no program builds", f.Path)
		}
	}
	mods := string(have["vendor/modules.txt"])
	for _, want := range []string{
		"# github.com/ebitengine/purego v0.11.3\n## explicit; go ",
		"\ngithub.com/ebitengine/purego\n",
		"\ngithub.com/ebitengine/purego/objc\n",
		"\ngithub.com/ebitengine/purego/internal/fakecgo\n",
	} {
		if !strings.Contains(mods, want) {
			t.Errorf("vendor/modules.txt lacks %q:\n%s", want, mods)
		}
	}
	if _, ok := have["vendor/github.com/ebitengine/purego/LICENSE"]; !ok {
		t.Error("purego's LICENSE is not carried into the vendor folder")
	}
	if _, ok := have["vendor/github.com/ebitengine/purego/dlfcn_linux.go"]; !ok {
		t.Error("vendor folder lacks purego's Linux dlopen")
	}
}

// TestCarriedModuleBuildsOffline builds a program that imports purego for
// Linux and macOS with an empty module cache and no network: everything
// comes from the vendor folder the emitter writes.
func TestCarriedModuleBuildsOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	dir := t.TempDir()
	vendor, err := VendorFiles(Purego)
	if err != nil {
		t.Fatal(err)
	}
	main := `package main

import "github.com/ebitengine/purego"

func main() { _, _ = purego.Dlopen("libc.so.6", purego.RTLD_NOW) }
`
	files := append([]File{{Path: "go.mod", Data: GoMod(Purego)}, {Path: "main.go", Data: []byte(main)}}, vendor...)
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(t.TempDir(), "prog"), ".") // -trimpath: as mlbuild compile builds (see goEnv)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), BuildEnv(files, target[0], target[1])...), "GOMODCACHE="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s/%s: a program importing the carried purego does not build offline from an empty module cache: %v\n%s", target[0], target[1], err, out)
		}
	}
}
