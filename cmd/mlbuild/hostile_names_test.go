package main

import (
	"encoding/json"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/mlbuild/mlbuild/emit"
	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/spec"
)

// hostileNames are names a spec may try to smuggle into generated code or
// file paths: quotes, backticks, newlines, comment ends, compiler
// directives, C preprocessor lines, Go keywords and predeclared names,
// names of the generated program's own variables, path separators and
// "..", very long names, Unicode look-alikes and invisible characters,
// CUE interpolation, shell syntax and control characters.
var hostileNames = []string{
	`a"b`, "a`b", "a\nb", "a\rb", "*/", "x*/ func init() { os.Exit(1) } /*",
	"//go:generate rm -rf /", "//go:linkname x runtime.x", "#include <stdio.h>",
	`x"; os.Exit(1); "`, "x\n//line evil.go:1",
	"func", "package", "import", "go", "defer", "return", "type", "var", // Go keywords
	"main", "init", "_", "nil", "true", "len", "panic", // special and predeclared
	"model", "state", "app", "cpu", "tb0", "s0", "tForward", "stateSize", "dropoutRand", // the generated program's names
	"../../etc/passwd", "/etc/passwd", "a/b", `a\b`, "..", ".", "C:evil", "~root",
	strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("n", 100000),
	"dеnse", "ｄense", "dense\u200b", "a\u202eb", "Ꭰ", "ǅ", // Cyrillic е, fullwidth, zero width, RTL override, Cherokee, titlecase
	`\(name)`, "${HOME}", "$(rm -rf ~)", "a;b", "a b", "", "1abc", "a\x00b", "a\x1b[2Jb", "a-b", "a.b",
}

// hostileTemplates place a name where a spec can put one. %s is replaced
// by the name as a CUE string (JSON is valid CUE, and its escapes do not
// interpolate).
var hostileTemplates = map[string]string{
	"model name": `package h

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: %s
	model: {input: [1, 8, 8], layers: [{op: "flatten"}, {op: "dense", units: 4, name: "out"}]}
	training: {optimizer: {kind: "adam", lr: 1e-2}, epochs: 1, batchSize: 8}
	dataset: {trainImages: "ti", trainLabels: "tl", testImages: "si", testLabels: "sl", classes: 4, imageShape: [1, 8, 8]}
}
`,
	"layer name": `package h

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "h"
	model: {input: [1, 8, 8], layers: [{op: "flatten"}, {op: "dense", units: 4, name: %s}]}
	training: {optimizer: {kind: "adam", lr: 1e-2}, epochs: 1, batchSize: 8}
	dataset: {trainImages: "ti", trainLabels: "tl", testImages: "si", testLabels: "sl", classes: 4, imageShape: [1, 8, 8]}
}
`,
	"graph node name": `package h

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "h"
	model: {
		input: [1, 8, 8]
		nodes: {
			%[1]s: {op: "flatten", inputs: ["input"]}
			out: {op: "dense", inputs: [%[1]s], units: 4}
		}
		output: "out"
	}
	training: {optimizer: {kind: "adam", lr: 1e-2}, epochs: 1, batchSize: 8}
	dataset: {trainImages: "ti", trainLabels: "tl", testImages: "si", testLabels: "sl", classes: 4, imageShape: [1, 8, 8]}
}
`,
	"dataset file name": `package h

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "h"
	model: {input: [1, 8, 8], layers: [{op: "flatten"}, {op: "dense", units: 4, name: "out"}]}
	training: {optimizer: {kind: "adam", lr: 1e-2}, epochs: 1, batchSize: 8}
	dataset: {trainImages: %s, trainLabels: "tl", testImages: "si", testLabels: "sl", classes: 4, imageShape: [1, 8, 8]}
}
`,
}

// identifierRule is the rule names must follow (the schema's #NamePattern).
var identifierRule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// hostileGenerated is what a spec compiles to, short of the Go build: the
// main.go of the CPU program and the Metal source of its training and
// inference plans.
type hostileGenerated struct {
	goSrc []byte
	msl   string
}

// hostileGenerate loads, checks, plans and emits one spec, as compile does.
func hostileGenerate(dir, src string) (*hostileGenerated, error) {
	m, err := spec.LoadBytes(filepath.Join(dir, "h.cue"), []byte(src))
	if err != nil {
		return nil, err
	}
	if err := spec.CheckSafety(m); err != nil {
		return nil, err
	}
	plans, err := planAll(m, true, 0)
	if err != nil {
		return nil, err
	}
	goSrc, err := emit.ModelSource(&emit.Input{Model: m, Train: plans[0], Infer: plans[1], Infer1: plans[2], Backend: "cpu", Version: "test"})
	if err != nil {
		return nil, fmt.Errorf("emit: %v", err)
	}
	var msl strings.Builder
	for _, p := range plans[:2] {
		prog, err := gpu.Lower(p, gpu.Metal)
		if err != nil {
			return nil, fmt.Errorf("gpu.Lower: %v", err)
		}
		msl.WriteString(prog.Source)
	}
	return &hostileGenerated{goSrc: goSrc, msl: msl.String()}, nil
}

// goShape is Go source reduced to what can change behaviour: its tokens
// with every string literal blanked and comments set aside. It fails the
// test if a comment could be more than a comment: a directive (//go:,
// //line) or a block comment.
func goShape(t *testing.T, src []byte) (shape, strs, comments []string) {
	t.Helper()
	fset := token.NewFileSet()
	file := fset.AddFile("main.go", -1, len(src))
	var s scanner.Scanner
	var errs []string
	s.Init(file, src, func(pos token.Position, msg string) { errs = append(errs, pos.String()+": "+msg) }, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		switch tok {
		case token.COMMENT:
			if !strings.HasPrefix(lit, "// ") || strings.Contains(lit, "\n") {
				t.Errorf("%s: comment that is not a plain line comment: %q", fset.Position(pos), lit)
			}
			comments = append(comments, lit)
			continue
		case token.STRING:
			v, err := strconv.Unquote(lit)
			if err != nil {
				t.Errorf("%s: string literal %q does not unquote: %v", fset.Position(pos), lit, err)
			}
			strs = append(strs, v)
			lit = `""`
		}
		shape = append(shape, tok.String()+" "+lit)
	}
	if len(errs) > 0 {
		t.Errorf("generated Go does not scan: %v", errs)
	}
	return shape, strs, comments
}

// safeComment is what a comment holding a user's name may contain: the
// emitter's comment filter keeps identifier characters and a few symbols
// and writes ? for anything else.
var safeComment = regexp.MustCompile(`^// [A-Za-z0-9_.\-+ ×→\[\](),:=/?]*$`)

// TestHostileNames puts each hostile name in each place a spec can name
// something. Each is either rejected with an error that states the rule,
// or compiled into Go whose tokens, outside string literals, are those of
// the same spec with a benign name, and into identical Metal source.
func TestHostileNames(t *testing.T) {
	dir := t.TempDir()
	if len(hostileNames) < 30 {
		t.Fatalf("only %d hostile names", len(hostileNames))
	}
	cueString := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var rejected, accepted int
	for place, tmpl := range hostileTemplates {
		benign, err := hostileGenerate(dir, fmt.Sprintf(tmpl, cueString("benign")))
		if err != nil {
			t.Fatalf("%s: the benign spec does not compile: %v", place, err)
		}
		benignShape, _, benignComments := goShape(t, benign.goSrc)
		fixedComment := map[string]bool{}
		for _, c := range benignComments {
			fixedComment[c] = true
		}
		for _, name := range hostileNames {
			wantOK := identifierRule.MatchString(name)
			rule := "[A-Za-z_][A-Za-z0-9_]{0,63}"
			if place == "dataset file name" {
				printable := strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
				wantOK = name != "" && len(name) <= 255 && printable && !strings.ContainsAny(name, `/\`) && name != "." && name != ".." && !(len(name) >= 2 && name[1] == ':')
				rule = spec.FileNameRule
			}
			got, err := hostileGenerate(dir, fmt.Sprintf(tmpl, cueString(name)))
			short := strconv.QuoteToASCII(name)
			if len(short) > 40 {
				short = short[:40] + "…"
			}
			if err != nil {
				rejected++
				if wantOK {
					t.Errorf("%s %s: rejected, but it is legal: %v", place, short, err)
				} else if !strings.Contains(err.Error(), rule) {
					t.Errorf("%s %s: the error does not state the rule %q:\n%v", place, short, rule, err)
				}
				continue
			}
			accepted++
			if !wantOK {
				t.Errorf("%s %s: accepted, but it breaks the rule %s", place, short, rule)
				continue
			}
			shape, strs, comments := goShape(t, got.goSrc)
			for _, c := range comments {
				if !fixedComment[c] && !safeComment.MatchString(c) {
					t.Errorf("%s %s: a comment holding user text has characters outside the filter: %q", place, short, c)
				}
			}
			if strings.Join(shape, "\n") != strings.Join(benignShape, "\n") {
				t.Errorf("%s %s: the generated Go differs from the benign spec's outside string literals", place, short)
			}
			found := false
			for _, s := range strs {
				found = found || strings.Contains(s, name)
			}
			if !found {
				t.Errorf("%s %s: the name appears in no string literal of the generated Go; the test checked nothing", place, short)
			}
			if got.msl != benign.msl {
				t.Errorf("%s %s: the Metal source differs from the benign spec's", place, short)
			}
		}
	}
	t.Logf("%d names × %d places: %d rejected, %d compiled to the benign program's code", len(hostileNames), len(hostileTemplates), rejected, accepted)
	if accepted == 0 || rejected == 0 {
		t.Errorf("accepted %d, rejected %d: the cases do not cover both outcomes", accepted, rejected)
	}
}

// TestCheckSafetyFileNames checks the dataset rule on its own, with
// positions: spec.Load applies it, so every command rejects the spec.
func TestCheckSafetyFileNames(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "h.cue")
	src := fmt.Sprintf(hostileTemplates["dataset file name"], `"../../etc/passwd"`)
	os.WriteFile(p, []byte(src), 0o644)
	_, err := spec.Load(p)
	if err == nil {
		t.Fatal("spec.Load accepted ../../etc/passwd as a dataset file")
	}
	if want := p + ":9:25: dataset.trainImages \"../../etc/passwd\" contains a path separator"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to contain %q", err, want)
	}
	code, _, errOut := mlbuild(t, "validate", p)
	if code != ExitInvalid || !strings.Contains(errOut, "contains a path separator") {
		t.Errorf("validate: exit %d, stderr %q; want exit %d and the rule", code, errOut, ExitInvalid)
	}
}
