package spec

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// namePattern is the schema's #NamePattern: model, layer and node names
// end up in generated code, weight names and default file names.
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// NameRule and FileNameRule are the rules CheckSafety enforces, worded for
// error messages and documentation.
const (
	NameRule     = "names must match [A-Za-z_][A-Za-z0-9_]{0,63} (ASCII letters, digits and _, not starting with a digit, at most 64 characters)"
	FileNameRule = "dataset file names must be plain file names inside the --data folder: not empty, at most 255 bytes, no / or \\, no drive letter, not . or .., no control or invisible characters"
)

// CheckSafety re-checks, on the decoded Model, every string that a spec
// puts into generated code or joins to a path: the model's and the
// layers' names (the schema already restricts them; this is the second
// fence, so that a change in the schema cannot open the generated code to
// injection) and the dataset's file names, which a produced program joins
// to its --data folder and which therefore must not climb out of it.
// The result is an Errors value, one positioned entry per bad string, or
// nil.
func CheckSafety(m *Model) error {
	src, _ := os.ReadFile(m.File) // only used to position messages
	var es Errors
	if !namePattern.MatchString(m.Name) {
		es = append(es, Error{Pos: findString(m.File, src, "name", m.Name),
			Message: fmt.Sprintf("model name %s is not a safe identifier: %s", QuoteShort(m.Name), NameRule)})
	}
	for _, n := range m.Nodes {
		if !namePattern.MatchString(n.Name) {
			es = append(es, Error{Pos: n.Pos,
				Message: fmt.Sprintf("layer name %s is not a safe identifier: %s", QuoteShort(n.Name), NameRule)})
		}
	}
	d := m.Dataset
	files := []struct{ field, value string }{
		{"trainImages", d.TrainImages}, {"trainLabels", d.TrainLabels},
		{"testImages", d.TestImages}, {"testLabels", d.TestLabels},
	}
	if d.Format == "csv" || d.Format == "npy" || d.Format == "npz" || d.Format == "imagefolder" {
		files = []struct{ field, value string }{{"train", d.Train}}
		for _, f := range []struct{ field, value string }{{"trainLabels", d.TrainLabels}, {"test", d.Test}, {"testLabels", d.TestLabels}} {
			if f.value != "" { // optional files
				files = append(files, f)
			}
		}
	}
	if d.Format == "text" {
		files = files[:0]
		for _, f := range d.Files {
			files = append(files, struct{ field, value string }{"files", f})
		}
	}
	for _, f := range files {
		if d.Format == "" && f.value == "" {
			continue // no dataset section
		}
		if why := unsafeFileName(f.value); why != "" {
			es = append(es, Error{Pos: findString(m.File, src, f.field, f.value),
				Message: fmt.Sprintf("dataset.%s %s %s: %s", f.field, QuoteShort(f.value), why, FileNameRule)})
		}
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

// unsafeFileName says what is wrong with a dataset file name, or "".
func unsafeFileName(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > 255:
		return fmt.Sprintf("is %d bytes long", len(s))
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case s == "." || s == "..":
		return "names a folder"
	case strings.ContainsAny(s, `/\`):
		return "contains a path separator"
	case len(s) >= 2 && s[1] == ':':
		return "starts with a drive letter"
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return "contains a control or invisible character"
		}
	}
	return ""
}

// findString positions a message about value, written as the field key,
// in the spec's source: the first line that holds both the key and the
// quoted value, else the first that holds the value, else line 1.
func findString(file string, src []byte, key, value string) Pos {
	quoted := []byte(strconv.Quote(value))
	fallback := Pos{File: file, Line: 1, Col: 1}
	found := false
	for i, line := range bytes.Split(src, []byte("\n")) {
		col := bytes.Index(line, quoted)
		if col < 0 {
			continue
		}
		p := Pos{File: file, Line: i + 1, Col: col + 1}
		if bytes.Contains(line, []byte(key)) {
			return p
		}
		if !found {
			fallback, found = p, true
		}
	}
	return fallback
}
