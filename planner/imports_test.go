package planner

import (
	"bufio"
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlannerImportsNoRuntime: the planner decides what the runtime would
// otherwise decide at run time, so no package it depends on (this module's
// packages, followed transitively; the standard library and other modules
// cannot import ours) may be a runtime package under rt/. It is what `go
// list -deps ./planner | grep /rt/` checks, done with go/build.
func TestPlannerImportsNoRuntime(t *testing.T) {
	root, module := moduleRoot(t)
	runtime := module + "/rt"
	seen := map[string][]string{} // package -> the import chain that reached it
	var walk func(path string, chain []string)
	walk = func(path string, chain []string) {
		if _, ok := seen[path]; ok {
			return
		}
		chain = append(append([]string(nil), chain...), path)
		seen[path] = chain
		if path == runtime || strings.HasPrefix(path, runtime+"/") {
			t.Errorf("planner depends on the runtime package %s: %s", path, strings.Join(chain, " -> "))
			return
		}
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, module)))
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				walk(imp, chain)
			}
		}
	}
	walk(module+"/planner", nil)
	if len(seen) < 2 {
		t.Fatalf("walked only %v; the planner imports at least spec", seen)
	}
}

// moduleRoot returns the directory holding go.mod above the test's
// working directory, and the module path it declares.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(rest), `"`)
				}
			}
			t.Fatalf("%s/go.mod declares no module", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the planner")
		}
		dir = parent
	}
}
