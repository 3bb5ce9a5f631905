// Package schema embeds mlbuild's CUE schema (the .cue files of this
// folder), so that the binary checks specs against exactly the rules it was
// built with, and `mlbuild init` can write the same files for stock CUE tools.
package schema

import (
	"embed"
	"io/fs"
	"sort"
)

// ImportPath is the CUE import path specs use for the schema:
//
//	import "github.com/mlbuild/mlbuild/schema"
const ImportPath = "github.com/mlbuild/mlbuild/schema"

// PkgDir is where the schema lives inside a CUE module, relative to the
// module root: the cue.mod/pkg folder CUE searches for imports that no
// dependency provides.
const PkgDir = "cue.mod/pkg/" + ImportPath

// LanguageVersion is the CUE language version mlbuild's module files
// declare; it matches the cuelang.org/go version mlbuild is built with.
const LanguageVersion = "v0.16.0"

//go:embed *.cue
var files embed.FS

// Files returns the schema's .cue files by base name, in name order.
func Files() []File {
	entries, _ := fs.ReadDir(files, ".")
	var out []File
	for _, e := range entries {
		data, err := files.ReadFile(e.Name())
		if err != nil {
			continue // cannot happen for an embedded file
		}
		out = append(out, File{Name: e.Name(), Data: data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// File is one embedded schema file.
type File struct {
	Name string
	Data []byte
}
