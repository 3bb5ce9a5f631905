package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/schema"
)

func init() { subcommands = append(subcommands, newInitCmd) }

// initOptions are the inputs of `mlbuild init`.
type initOptions struct {
	dir      string
	force    bool
	template string
	stdout   io.Writer
}

func newInitCmd(g *globalOptions) *cobra.Command {
	opts := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a starter spec and the CUE module files it needs",
		Long: `Init writes, into DIR (default: the current directory):

  model.cue                 a starter spec to edit: by --template, a small
                            MNIST classifier (mnist), a classifier of CSV
                            rows (csv), a regression from CSV (regression)
                            or a classifier of image folders (images)
  cue.mod/module.cue        a CUE module, so that stock CUE tools work here
  cue.mod/pkg/` + schema.ImportPath + `/*.cue
                            mlbuild's schema, the same files the binary embeds

With these, 'cue vet ./...' in DIR reports the same shape violations as
'mlbuild validate' (and editors with CUE support show them). Init refuses to
overwrite model.cue unless --force is given; the schema files are always
rewritten so that they match this mlbuild.

Examples:
  mlbuild init myproject
  mlbuild init --template regression house-prices
  cd myproject && mlbuild validate model.cue && cue vet ./...
`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.dir = "."
			if len(args) == 1 {
				opts.dir = args[0]
			}
			opts.force = g.config.GetBool("force")
			opts.template = g.config.GetString("template")
			opts.stdout = g.stdout
			return initRun(opts)
		},
	}
	cmd.Flags().Bool("force", false, "overwrite an existing model.cue")
	cmd.Flags().String("template", "mnist", "the starter spec: mnist, csv, regression or images")
	return cmd
}

// starterSpec is the spec `mlbuild init` writes, for a model called
// starterName (replaced by the project's name).
const starterSpec = `// A starter spec: a small classifier for 28×28 grey-scale digits (MNIST).
// Edit the layers, then run 'mlbuild validate model.cue' and
// 'mlbuild shapes model.cue'. docs/specs.md lists every op and field.
package model

import "` + schema.ImportPath + `"

schema.#Spec & {
	name: "` + starterName + `"

	model: {
		input: [1, 28, 28]
		layers: [
			{op: "conv2d", outChannels: 8, kernel: 3, padding: 1},
			{op: "relu"},
			{op: "maxpool2d", kernel: 2},
			{op: "flatten"},
			{op: "dense", units: 64},
			{op: "relu"},
			{op: "dense", units: 10},
		]
	}

	training: {
		optimizer: {kind: "adam", lr: 1e-3}
		epochs:    2
		batchSize: 128
	}

	dataset: {
		trainImages: "train-images-idx3-ubyte"
		trainLabels: "train-labels-idx1-ubyte"
		testImages:  "t10k-images-idx3-ubyte"
		testLabels:  "t10k-labels-idx1-ubyte"
		classes:     10
		imageShape: [1, 28, 28]
	}
}
`

const starterName = "starter"

// modelName turns a project folder's name into a model name: the
// characters a name may not hold (-, spaces, dots) become underscores and
// a leading digit gets an m before it, so that 'mlbuild init my-digits'
// makes a model (and a binary) called my_digits.
func modelName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "model"
	}
	var b strings.Builder
	for _, r := range filepath.Base(abs) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := strings.Trim(b.String(), "_")
	switch {
	case name == "":
		return "model"
	case name[0] >= '0' && name[0] <= '9':
		name = "m" + name
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// moduleFile is the cue.mod/module.cue `mlbuild init` writes.
var moduleFile = fmt.Sprintf("module: \"example.com/model@v0\"\nlanguage: version: %q\n", schema.LanguageVersion)

// initRun writes the starter files into opts.dir.
func initRun(opts *initOptions) error {
	if opts.template == "" {
		opts.template = "mnist"
	}
	starter, err := starterFor(opts.dir, opts.template)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	specPath := filepath.Join(opts.dir, "model.cue")
	if _, err := os.Stat(specPath); err == nil && !opts.force {
		return withCode(ExitUsage, fmt.Errorf("%s exists; use --force to overwrite it", specPath))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return withCode(ExitIO, err)
	}
	files := map[string][]byte{specPath: []byte(starter)}
	modPath := filepath.Join(opts.dir, "cue.mod", "module.cue")
	if _, err := os.Stat(modPath); errors.Is(err, fs.ErrNotExist) {
		files[modPath] = []byte(moduleFile)
	}
	for _, f := range schema.Files() {
		files[filepath.Join(opts.dir, filepath.FromSlash(schema.PkgDir), f.Name)] = f.Data
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return withCode(ExitIO, err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return withCode(ExitIO, err)
		}
	}
	next := "mlbuild validate model.cue"
	if filepath.Clean(opts.dir) != "." {
		next = "cd " + opts.dir + " && " + next
	}
	fmt.Fprintf(opts.stdout, "wrote %s (model %s) and the CUE module files; next: %s\n", specPath, modelName(opts.dir), next)
	return nil
}
