package mlbuild

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// runtimeTrees are the folders of the runtime: the packages a produced
// program links (rt/), the GPU devices (cuda/, mps/), and their fakes and
// conformance kits.
var runtimeTrees = []string{"rt", "cuda", "mps"}

// compilerOnly are the packages (a path of this module, or a module, with
// everything under it) that no runtime package may import, directly or
// through others, nor may its tests, each with the reason. The compiler
// imports the runtime (rt/gpuhost declares the layouts generated kernels
// share with the host); the reverse never.
var compilerOnly = map[string]string{
	"github.com/mlbuild/mlbuild/spec":    "spec loads a CUE spec at compile time; a produced program has its model compiled in and reads no spec",
	"github.com/mlbuild/mlbuild/schema":  "schema holds the CUE shape rules that spec checks at compile time",
	"github.com/mlbuild/mlbuild/planner": "the planner decides at compile time what the runtime would otherwise decide at run time; a program runs the plan as tables",
	"github.com/mlbuild/mlbuild/emit":    "the emitter writes programs that link the runtime: a runtime package reaching back would pull the compiler into every program, which carries only rt/, cuda/ and mps/",
	"github.com/mlbuild/mlbuild/cache":   "the build cache keeps compiled binaries for mlbuild compile; no program uses it",
	"github.com/mlbuild/mlbuild/onnx":    "the ONNX importer turns a model file into a spec, before compiling",
	"github.com/mlbuild/mlbuild/cmd":     "commands sit on top of the compiler and the runtime; nothing imports them",
	"cuelang.org/go":                     "CUE is the spec language, read only by spec; a produced program builds with the modules mlbuild carries (third_party/), and CUE is not one",
}

// TestRuntimeImportsNoCompiler: no package under rt/, cuda/ or mps/, nor
// its tests, depends on a compiler package (see compilerOnly), on any
// target the devices build for. It reads the import graph from `go list
// -deps -test`, so a dependency through another package is found and its
// chain of imports shown.
func TestRuntimeImportsNoCompiler(t *testing.T) {
	for _, target := range []string{"linux/amd64", "darwin/arm64", "windows/amd64"} {
		t.Run(strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			goos, goarch, _ := strings.Cut(target, "/")
			graph := importGraph(t, goos, goarch)
			var roots []string
			for p := range graph {
				if inRuntime(p) && ownVariant(p) {
					roots = append(roots, p)
				}
			}
			slices.Sort(roots)
			for _, want := range []string{"github.com/mlbuild/mlbuild/rt/gpuhost", "github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest", "github.com/mlbuild/mlbuild/cuda", "github.com/mlbuild/mlbuild/mps"} {
				if !slices.Contains(roots, want) {
					t.Fatalf("go list found no %s among the runtime's packages %v", want, roots)
				}
			}
			reported := map[string]bool{} // a package and a rule, once for all its test variants
			for _, root := range roots {
				chain, rule := reachCompiler(graph, root)
				if rule == "" || reported[plainPath(root)+" "+rule] {
					continue
				}
				reported[plainPath(root)+" "+rule] = true
				what := "package"
				if plainPath(root) != root {
					what = "tests"
				}
				t.Errorf("%s (%s) depends on %s: %s\n\t%s", short(chain[0]), what, short(rule), strings.Join(mapSlice(chain, short), " -> "), compilerOnly[rule])
			}
		})
	}
}

// importGraph returns every package that the runtime's packages and their
// tests depend on, with its imports, for one target.
func importGraph(t *testing.T, goos, goarch string) map[string][]string {
	t.Helper()
	var patterns []string
	for _, d := range runtimeTrees {
		patterns = append(patterns, "./"+d+"/...")
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-test", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}"}, patterns...)...)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list for %s/%s: %v", goos, goarch, err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, ok := strings.Cut(line, "|")
		if !ok {
			t.Fatalf("go list printed %q", line)
		}
		graph[pkg] = nil
		if imports != "" {
			graph[pkg] = strings.Split(imports, ",")
		}
	}
	return graph
}

// plainPath is a package's import path without go list's test decorations:
// "p [q.test]" (p built for q's tests), "p.test" (the test binary) and
// "p_test" (p's external tests) are all p.
func plainPath(p string) string {
	p, _, _ = strings.Cut(p, " [")
	p = strings.TrimSuffix(p, ".test")
	return strings.TrimSuffix(p, "_test")
}

// ownVariant reports whether p is a package or its own tests ("p [p.test]",
// "p_test [p.test]"), not a package built for another's tests nor a test
// binary's main, whose dependencies those cover.
func ownVariant(p string) bool {
	if strings.HasSuffix(p, ".test") {
		return false
	}
	pkg, test, ok := strings.Cut(p, " [")
	return !ok || plainPath(pkg) == plainPath(strings.TrimSuffix(test, "]"))
}

func inRuntime(p string) bool {
	p = plainPath(p)
	for _, d := range runtimeTrees {
		if under(p, "github.com/mlbuild/mlbuild/"+d) {
			return true
		}
	}
	return false
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// reachCompiler searches the graph from root breadth first and returns the
// shortest chain of imports to a compiler package and the rule it breaks,
// or "" when there is none.
func reachCompiler(graph map[string][]string, root string) ([]string, string) {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for rule := range compilerOnly {
			if under(plainPath(p), rule) {
				var chain []string
				for q := p; q != ""; q = from[q] {
					if len(chain) == 0 || chain[0] != plainPath(q) {
						chain = append([]string{plainPath(q)}, chain...)
					}
				}
				return chain, rule
			}
		}
		for _, q := range graph[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil, ""
}

// short is a path of this module without the module's path.
func short(p string) string { return strings.TrimPrefix(p, "github.com/mlbuild/mlbuild/") }

func mapSlice(v []string, f func(string) string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = f(s)
	}
	return out
}
