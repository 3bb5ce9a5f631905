package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/spec"
)

func init() { subcommands = append(subcommands, newValidateCmd) }

// validateOptions are the inputs of `mlbuild validate`.
type validateOptions struct {
	files  []string
	format string // "text" or "json"
	stdout io.Writer
	stderr io.Writer
}

func newValidateCmd(g *globalOptions) *cobra.Command {
	opts := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check model specs against the schema",
		Long: `Validate checks each spec file against mlbuild's schema: every layer's
output shape is computed from its input and parameters, and every
disagreement is reported as FILE:LINE:COL: layer NAME: message on stderr.
All problems of a file are reported, not only the first.

Each FILE is one spec. To check a spec split over several files of one
CUE package, use 'mlbuild shapes' or 'mlbuild compile' on the files together.

Exit status: 0 when every spec is legal, 1 when any is not, 2 on usage
errors, 4 when a file cannot be read.

With --format json, the problems go to stdout as one JSON object per file:
{"file": ..., "valid": ..., "errors": [{"pos": {"file", "line", "col"},
"layer", "message"}]}.

Examples:
  # check the flagship model
  mlbuild validate models/mnist.cue

  # check several specs; the exit status says whether all are legal
  mlbuild validate models/*.cue

  # machine-readable output for editors and scripts
  mlbuild validate --format json models/mnist.cue
`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.files = args
			opts.format = g.config.GetString("format")
			opts.stdout, opts.stderr = g.stdout, g.stderr
			return validateRun(opts)
		},
	}
	cmd.Flags().String("format", "text", "output format: text or json")
	return cmd
}

// validateResult is one file's outcome in --format json.
type validateResult struct {
	File   string      `json:"file"`
	Valid  bool        `json:"valid"`
	Errors spec.Errors `json:"errors"`
}

// validateRun checks every file and reports each one's problems.
func validateRun(opts *validateOptions) error {
	if opts.format != "text" && opts.format != "json" {
		return withCode(ExitUsage, fmt.Errorf("unknown --format %s: use text or json", spec.QuoteShort(opts.format)))
	}
	failed, code := false, ExitInvalid
	enc := json.NewEncoder(opts.stdout)
	enc.SetEscapeHTML(false) // messages hold ">=1", not "\u003e=1"
	for _, f := range opts.files {
		_, err := spec.Load(f)
		es := specErrors(f, err)
		if len(es) > 0 {
			failed = true
			code = max(code, specExitCode(err, f)) // 4 or 70 over 1
		}
		if opts.format == "json" {
			if es == nil {
				es = spec.Errors{}
			}
			if err := enc.Encode(validateResult{File: f, Valid: len(es) == 0, Errors: es}); err != nil {
				return withCode(ExitIO, err)
			}
			continue
		}
		for _, e := range es {
			fmt.Fprintln(opts.stderr, e.Error())
		}
	}
	if failed {
		return silentExit(code)
	}
	return nil
}

// specErrors returns the positioned problems in err (nil when err is nil);
// an error that is not a spec.Errors becomes one problem of file.
func specErrors(file string, err error) spec.Errors {
	if err == nil {
		return nil
	}
	var es spec.Errors
	if errors.As(err, &es) {
		return es
	}
	return spec.Errors{{Pos: spec.Pos{File: file}, Message: err.Error()}}
}
