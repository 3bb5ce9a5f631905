// Package emit writes the Go program specialised to one model: every buffer
// a fixed-size array type with its constant shape, every step a function
// whose parameters are those array types (so the Go compiler re-checks each
// op's shapes when the program is built: a mismatched buffer does not
// compile), and a main that hands the model to the runtime's command line.
//
// The emitter only renders a planner.Plan; it makes no decisions of its own.
// User-provided names reach the generated source only as quoted Go strings
// (strconv.Quote) or, in comments, filtered to identifier characters, so a
// spec cannot inject code.
package emit

import (
	"bytes"
	"fmt"
	"go/format"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild"
	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

// ModulePath is the module path of every generated program. It is fixed so
// that two builds of the same plan produce the same bytes.
const ModulePath = "mlbuildprog"

// moduleImport is the import path prefix of mlbuild's own packages,
// rewritten to ModulePath in the packages programs carry.
const moduleImport = "github.com/mlbuild/mlbuild/"

// Input is everything the emitter renders.
type Input struct {
	Model   *spec.Model
	Train   *planner.Plan // training plan at the spec's batch size
	Infer   *planner.Plan // inference plan at the spec's batch size
	Infer1  *planner.Plan // inference plan at batch 1
	Backend string        // the Backend's name
	Version string        // mlbuild's version
	Weights *Weights      // weights to embed; nil for none
}

// BuildKeySymbol is the string variable of the generated main package that
// holds the program's build key (shown by `info`). The key is the hash of
// the generated files, so it cannot be written into them: mlbuild compile
// sets it at link time, go build -ldflags "-X BuildKeySymbol=KEY".
const BuildKeySymbol = "main.buildKey"

// File is one generated file, with a path relative to the module root.
type File struct {
	Path string
	Data []byte
}

// Program returns the files of the generated program's module: go.mod, the
// generated main package, and the runtime packages it links.
func Program(in *Input) ([]File, error) {
	b, err := LookupBackend(in.Backend)
	if err != nil {
		return nil, fmt.Errorf("emit: %v", err)
	}
	files, err := b.program(in)
	if err != nil || in.Weights == nil {
		return files, err
	}
	wf, err := weightsFiles(in)
	if err != nil {
		return nil, err
	}
	return append(files, wf...), nil
}

// cpuProgram returns the module of a CPU program.
func cpuProgram(in *Input) ([]File, error) {
	model, err := ModelSource(in)
	if err != nil {
		return nil, err
	}
	files := []File{
		{Path: "go.mod", Data: []byte("module " + ModulePath + "\n\ngo 1.22\n")},
		{Path: "main.go", Data: model},
	}
	rtFiles, err := RuntimeFiles(runtimePackages...)
	if err != nil {
		return nil, err
	}
	return append(files, rtFiles...), nil
}

// runtimePackages are the runtime packages under rt/ that every generated
// program links, whatever its backend.
var runtimePackages = []string{"cpu", "app", "idx", "csvdata", "npy", "safetensors", "imageio", "progress", "atomicfile", "jsontext", "npz", "textdata"}

// RuntimeFiles copies the named runtime packages (non-test sources only)
// under rt/ with their imports rewritten to the generated module.
func RuntimeFiles(pkgs ...string) ([]File, error) {
	var dirs []string
	for _, pkg := range pkgs {
		dirs = append(dirs, path.Join("rt", pkg))
	}
	return carriedFiles(dirs...)
}

// carriedFiles copies the non-test sources (Go, assembly, C headers) of
// packages of mlbuild's module that programs carry, from the one embed of
// them (mlbuild.RuntimeSources), with their imports of mlbuild's packages
// rewritten to the program's module.
func carriedFiles(dirs ...string) ([]File, error) {
	var out []File
	for _, dir := range dirs {
		entries, err := fs.ReadDir(mlbuild.RuntimeSources, dir)
		if err != nil {
			return nil, fmt.Errorf("emit: package %s is not embedded in this mlbuild: %v", dir, err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasSuffix(name, "_test.go") || !(strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".s") || strings.HasSuffix(name, ".h")) {
				continue
			}
			data, err := fs.ReadFile(mlbuild.RuntimeSources, path.Join(dir, name))
			if err != nil {
				return nil, err
			}
			data = bytes.ReplaceAll(data, []byte(`"`+moduleImport), []byte(`"`+ModulePath+"/"))
			out = append(out, File{Path: path.Join(dir, name), Data: data})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// ModelSource renders main.go of the generated program.
func ModelSource(in *Input) ([]byte, error) {
	g := &generator{mainFile: &mainFile{in: in}, trainState: map[string]string{}}
	if err := g.render(); err != nil {
		return nil, err
	}
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("emit: generated code does not parse (a bug in mlbuild): %v\n%s", err, g.buf.Bytes())
	}
	return src, nil
}

// comment makes s safe inside a // comment: identifier characters, dots,
// dashes, spaces and a few symbols only. Specs restrict names already; this
// is the second fence.
func comment(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("_.-+ ×→[](),:=/", r):
			b.WriteRune(r)
		default:
			b.WriteRune('?')
		}
	}
	return b.String()
}

func quote(s string) string { return strconv.Quote(s) }

func ints(v []int) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = strconv.Itoa(d)
	}
	return "[]int{" + strings.Join(parts, ", ") + "}"
}

func shapeText(v []int) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, "×")
}

func float(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 32)
}
