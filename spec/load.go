package spec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/mlbuild/mlbuild/schema"
)

// MaxSpecBytes bounds the total size of a spec's files. Real specs are a few
// kilobytes; the bound keeps a stray data file from being evaluated.
const MaxSpecBytes = 1 << 20

// EvalTimeout bounds how long Load waits for CUE to evaluate a spec. CUE
// evaluation cannot be interrupted, so on time-out Load returns an error and
// leaves the evaluation to finish in the background.
var EvalTimeout = 20 * time.Second

// source is one spec file: the name the user gave, its absolute path and
// its contents.
type source struct {
	name string
	abs  string
	data []byte
}

// Load reads one model spec (one file, or several files of one CUE
// package), checks it against the schema and returns the shaped Model. When
// the spec is not legal the error is an Errors value holding every problem
// found, each positioned in the user's files.
func Load(files ...string) (*Model, error) {
	if len(files) == 0 {
		return nil, Errors{{Message: "no spec file given"}}
	}
	var srcs []source
	total := 0
	for _, f := range files {
		data, rerr := readSpecFile(f, MaxSpecBytes-total)
		if rerr != nil {
			return nil, Errors{*rerr}
		}
		total += len(data)
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, Errors{{Pos: Pos{File: f}, Message: err.Error()}}
		}
		srcs = append(srcs, source{name: f, abs: abs, data: data})
	}
	return loadSources(srcs)
}

// readSpecFile reads the spec file name, refusing anything but a regular
// file (a FIFO would block, a device such as /dev/zero never ends) and
// reading at most limit+1 bytes, so that a file too large costs no more
// memory than the bound.
func readSpecFile(name string, limit int) ([]byte, *Error) {
	fail := func(msg string) ([]byte, *Error) {
		return nil, &Error{Pos: Pos{File: name}, Message: msg}
	}
	ioMsg := func(err error) string {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "cannot read the spec: " + pe.Err.Error()
		}
		return "cannot read the spec: " + err.Error()
	}
	// Stat before opening: opening a FIFO waits for a writer.
	fi, err := os.Stat(name)
	if err != nil {
		return fail(ioMsg(err))
	}
	if !fi.Mode().IsRegular() {
		return fail(notRegular(fi))
	}
	f, err := os.Open(name)
	if err != nil {
		return fail(ioMsg(err))
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return fail(ioMsg(err))
	}
	if !fi.Mode().IsRegular() { // replaced since the Stat
		return fail(notRegular(fi))
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return fail(ioMsg(err))
	}
	if len(data) > limit {
		return nil, &Error{Pos: Pos{File: name, Line: 1, Col: 1}, Message: fmt.Sprintf("the spec is larger than %d bytes; mlbuild does not evaluate specs this large", MaxSpecBytes)}
	}
	return data, nil
}

// notRegular says what a spec file that is not a regular file is.
func notRegular(fi os.FileInfo) string {
	what := "not a regular file"
	switch m := fi.Mode(); {
	case m.IsDir():
		what = "a directory"
	case m&os.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&os.ModeCharDevice != 0:
		what = "a character device"
	case m&os.ModeDevice != 0:
		what = "a device"
	case m&os.ModeSocket != 0:
		what = "a socket"
	}
	return "cannot read the spec: it is " + what + ", not a regular file"
}

// LoadBytes is Load for a spec held in memory, as if read from filename
// (whose directory is searched for a CUE module like Load's files are).
func LoadBytes(filename string, src []byte) (*Model, error) {
	if len(src) > MaxSpecBytes {
		return nil, Errors{{Pos: Pos{File: filename, Line: 1, Col: 1}, Message: fmt.Sprintf("the spec is larger than %d bytes; mlbuild does not evaluate specs this large", MaxSpecBytes)}}
	}
	abs, err := filepath.Abs(filename)
	if err != nil {
		return nil, Errors{{Pos: Pos{File: filename}, Message: err.Error()}}
	}
	return loadSources([]source{{name: filename, abs: abs, data: src}})
}

// loadSources evaluates the spec under the time bound, turning a panic in
// CUE into an error.
func loadSources(srcs []source) (*Model, error) {
	for _, s := range srcs {
		if err := checkNesting(s); err != nil {
			return nil, Errors{*err}
		}
	}
	type result struct {
		m   *Model
		err error
	}
	done := make(chan result, 1)
	defer limitMemory(MaxEvalMemory)()
	over := make(chan int64, 1)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	overErr := func(grown int64) error {
		return Errors{{Pos: Pos{File: srcs[0].name, Line: 1, Col: 1}, Message: fmt.Sprintf("evaluating the spec took more than %s of memory (%s), so mlbuild stopped waiting: the spec builds values too large for a model (a string or list doubled over and over, a huge comprehension)", FormatBytes(MaxEvalMemory), FormatBytes(grown))}}
	}
	var now func(int64)
	if hook := OverMemory; hook != nil {
		now = func(grown int64) { hook(overErr(grown)) }
	}
	go watchMemory(heapBytes(), MaxEvalMemory, stopWatch, over, now)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: Errors{{Pos: Pos{File: srcs[0].name}, Message: fmt.Sprintf("internal error while evaluating the spec (please report it): %v", r)}}}
			}
		}()
		m, err := evaluate(srcs)
		done <- result{m, err}
	}()
	timer := time.NewTimer(EvalTimeout)
	defer timer.Stop()
	select {
	case grown := <-over:
		return nil, overErr(grown)
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		// Names and file names reach generated code and the file system:
		// every command checks them, not only compile.
		if err := CheckSafety(r.m); err != nil {
			return nil, err
		}
		// The size bounds again, with the model totals CUE does not add up.
		if err := CheckLimits(r.m); err != nil {
			return nil, err
		}
		if err := CheckLossInput(r.m); err != nil {
			return nil, err
		}
		return r.m, nil
	case <-timer.C:
		return nil, Errors{{Pos: Pos{File: srcs[0].name, Line: 1, Col: 1}, Message: fmt.Sprintf("evaluating the spec took longer than %v, so mlbuild stopped waiting: the spec is too large or too deeply nested", EvalTimeout)}}
	}
}

// evaluate builds the CUE instance with the embedded schema overlaid at
// cue.mod/pkg, validates it and decodes the Model.
func evaluate(srcs []source) (*Model, error) {
	dir := filepath.Dir(srcs[0].abs)
	for _, s := range srcs[1:] {
		if filepath.Dir(s.abs) != dir {
			return nil, Errors{{Pos: Pos{File: s.name}, Message: "all files of one spec must be in one directory (" + filepath.Dir(srcs[0].name) + ")"}}
		}
	}
	pos := newPositions(srcs)
	// Parse first: syntax errors come out positioned, all of them.
	var all Errors
	for _, s := range srcs {
		f, err := parser.ParseFile(s.abs, s.data, parser.ParseComments)
		if err != nil {
			all = append(all, pos.translateAll(err, nil)...)
			continue
		}
		pos.index(s, f)
	}
	if len(all) > 0 {
		return nil, all
	}

	root := moduleRoot(dir)
	overlay := map[string]load.Source{}
	for _, s := range srcs {
		overlay[s.abs] = load.FromBytes(s.data)
	}
	modFile := filepath.Join(root, "cue.mod", "module.cue")
	if _, err := os.Stat(modFile); err != nil {
		overlay[modFile] = load.FromString(fmt.Sprintf("module: \"mlbuild.local/spec@v0\"\nlanguage: version: %q\n", schema.LanguageVersion))
	}
	for _, f := range schema.Files() {
		overlay[filepath.Join(root, filepath.FromSlash(schema.PkgDir), f.Name)] = load.FromBytes(f.Data)
	}
	args := make([]string, len(srcs))
	for i, s := range srcs {
		args[i] = s.abs
	}
	bounds := newImportBounds(srcs, overlay)
	insts := load.Instances(args, &load.Config{Dir: dir, ModuleRoot: root, Overlay: overlay, ParseFile: bounds.parseFile})
	if es := bounds.errors(); len(es) > 0 {
		return nil, es
	}
	if len(insts) != 1 {
		return nil, Errors{{Pos: Pos{File: srcs[0].name}, Message: "the files do not form one CUE package"}}
	}
	inst := insts[0]
	if inst.Err != nil {
		return nil, pos.translateAll(inst.Err, nil)
	}
	if !slices.Contains(inst.ImportPaths, schema.ImportPath) {
		return nil, Errors{{Pos: Pos{File: srcs[0].name, Line: 1, Col: 1}, Message: fmt.Sprintf("the spec does not use mlbuild's schema: add `import \"%s\"` and embed schema.#Spec at the top level (see `mlbuild init`)", schema.ImportPath)}}
	}
	ctx := cuecontext.New()
	v := ctx.BuildInstance(inst)
	if es := checkGraph(v, pos); len(es) > 0 {
		return nil, es
	}
	if err := validateAll(v); err != nil {
		return nil, withMissingFields(pos.translateAll(err, &v), missingFields(v, pos))
	}
	if es := checkNumbers(v, pos); len(es) > 0 {
		return nil, es
	}
	m, err := decode(v, pos)
	if err != nil {
		return nil, err
	}
	m.File = srcs[0].name
	return m, nil
}

// validateAll validates the whole spec and, when that fails, each part of
// it on its own. CUE stops short of reporting missing values once it has
// found a conflict, so a spec with a wrong learning rate and a layer without
// its kernel would otherwise show only the first; validating the parts
// separately reports both. Duplicates are removed by translateAll.
func validateAll(v cue.Value) error {
	opts := []cue.Option{cue.Concrete(true), cue.Hidden(true)}
	err := v.Validate(opts...)
	if err == nil {
		return nil
	}
	parts := []cue.Value{v.LookupPath(cue.ParsePath("training")), v.LookupPath(cue.ParsePath("dataset")), v.LookupPath(cue.ParsePath("model.input")),
		v.LookupPath(cue.MakePath(cue.Str("model"), cue.Hid("_check", schema.ImportPath)))}
	for _, group := range []string{"model.layers", "model.nodes"} {
		g := v.LookupPath(cue.ParsePath(group))
		if !g.Exists() {
			continue
		}
		if it, lerr := g.List(); lerr == nil {
			for it.Next() {
				parts = append(parts, it.Value())
			}
		} else if it, ferr := g.Fields(); ferr == nil {
			for it.Next() {
				parts = append(parts, it.Value())
			}
		}
	}
	for _, p := range parts {
		if !p.Exists() {
			continue
		}
		if perr := p.Validate(opts...); perr != nil {
			err = cueerrors.Append(cueerrors.Promote(err, ""), cueerrors.Promote(perr, ""))
		}
	}
	return err
}

// moduleRoot is the nearest directory at or above dir holding cue.mod, or
// dir itself, where Load then supplies a module file of its own.
func moduleRoot(dir string) string {
	for d := dir; ; {
		if st, err := os.Stat(filepath.Join(d, "cue.mod")); err == nil && st.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// positions maps absolute file names back to the names the user gave, and
// value paths (as in "model.layers.3") to where the user wrote them.
type positions struct {
	names map[string]string
	paths map[string]token.Pos
}

func newPositions(srcs []source) *positions {
	p := &positions{names: map[string]string{}, paths: map[string]token.Pos{}}
	for _, s := range srcs {
		p.names[s.abs] = s.name
	}
	return p
}

// index records the position of every field and list element of a user
// file by its label path. Embedded expressions (schema.#Spec & {...}) keep
// the path of the struct that embeds them.
func (p *positions) index(s source, f *ast.File) {
	var walk func(n ast.Node, path string)
	add := func(path string, at token.Pos) {
		if _, ok := p.paths[path]; !ok && at.IsValid() {
			p.paths[path] = at
		}
	}
	join := func(path, label string) string {
		if path == "" {
			return label
		}
		return path + "." + label
	}
	walk = func(n ast.Node, path string) {
		switch x := n.(type) {
		case *ast.File:
			for _, d := range x.Decls {
				walk(d, path)
			}
		case *ast.EmbedDecl:
			if path == "" {
				// a field missing from the spec as a whole is reported
				// where the spec embeds the schema
				add("", x.Pos())
			}
			walk(x.Expr, path)
		case *ast.BinaryExpr:
			walk(x.X, path)
			walk(x.Y, path)
		case *ast.ParenExpr:
			walk(x.X, path)
		case *ast.StructLit:
			for _, d := range x.Elts {
				walk(d, path)
			}
		case *ast.Field:
			label, _, err := ast.LabelName(x.Label)
			if err != nil {
				return
			}
			fp := join(path, label)
			add(fp, x.Pos())
			walk(x.Value, fp)
		case *ast.ListLit:
			for i, e := range x.Elts {
				ep := join(path, fmt.Sprint(i))
				add(ep, e.Pos())
				walk(e, ep)
			}
		}
	}
	walk(f, "")
}

// userPos converts a CUE position to a Pos if it lies in a user file.
func (p *positions) userPos(tp token.Pos) (Pos, bool) {
	if !tp.IsValid() {
		return Pos{}, false
	}
	name, ok := p.names[tp.Filename()]
	if !ok {
		return Pos{}, false
	}
	return Pos{File: name, Line: tp.Line(), Col: tp.Column()}, true
}

// lookup returns where the user wrote path or its longest written prefix
// (at worst the embedding of schema.#Spec).
func (p *positions) lookup(path []string) (Pos, bool) {
	for n := len(path); n >= 0; n-- {
		if tp, ok := p.paths[strings.Join(path[:n], ".")]; ok {
			return p.userPos(tp)
		}
	}
	return Pos{}, false
}

// firstFile is a fallback position: line 1 of the first user file.
func (p *positions) firstFile() Pos {
	best := ""
	for _, name := range p.names {
		if best == "" || name < best {
			best = name
		}
	}
	return Pos{File: best, Line: 1, Col: 1}
}
