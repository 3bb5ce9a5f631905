package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/onnx"
	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/atomicfile"
	"github.com/mlbuild/mlbuild/rt/safetensors"
	"github.com/mlbuild/mlbuild/spec"
)

func init() { subcommands = append(subcommands, newImportCmd) }

// ExitUnreadableModel is the exit code of `mlbuild import` for an .onnx
// file that cannot be read or is malformed (bad lengths, huge dimensions,
// external data outside the model's folder). It shares the number 2 with
// ExitUsage: both mean the input given on the command line is unusable.
const ExitUnreadableModel = 2

// importOptions are the inputs of `mlbuild import`.
type importOptions struct {
	file   string
	outDir string
	name   string
	force  bool
	stdout io.Writer
	stderr io.Writer
}

func newImportCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import MODEL.onnx",
		Short: "Turn an ONNX model into a spec and its weights",
		Long: `Import reads an ONNX model (as torch.onnx.export writes it) and writes
NAME.cue, a spec whose layers compute what the graph computes, and
NAME.safetensors, the trained weights under mlbuild's names
("conv1.weight"). The spec is in the sequential form when the graph is a
chain and in the graph form otherwise; each layer carries a comment naming
the ONNX node it came from. Import prints which layer each node became.

What exporters put around the real ops is folded away: initializers (also
when listed as graph inputs), Constant, Identity, the shape arithmetic of
x.view(x.size(0), -1), Gemm and MatMul+Add (into dense, with transB, alpha
and beta), Dropout in eval mode. A dynamic batch dimension becomes
mlbuild's implicit batch; a batch fixed in the graph is accepted with a
warning. docs/onnx.md lists the ops and opsets covered.

Every node is checked before anything is written, also past a refused
one where its output's shape is known: if some cannot be imported, one
report lists each (node, op, opset, why, what to do) and import exits 1.
A model of an opset newer than the importer knows (23), a value written by
two nodes, and a model too large for a spec (1 MiB) exit 1 too. An
unreadable or malformed file exits 2. The written spec is validated and
planned before it is written; a failure there is a bug in the importer,
and says so (exit 70).

Examples:
  # writes mnist.cue and mnist.safetensors in the current directory
  mlbuild import mnist.onnx

  # choose the folder and the model's name
  mlbuild import exported/model.onnx -o specs --name lenet

  # then build it and run it on the imported weights
  mlbuild compile specs/lenet.cue && ./lenet predict --weights specs/lenet.safetensors digit.png

  # or build one binary that carries the weights (no --weights to give it)
  mlbuild compile specs/lenet.cue --weights specs/lenet.safetensors && ./lenet predict digit.png`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.config
			return importRun(&importOptions{
				file:   args[0],
				outDir: c.GetString("output"),
				name:   c.GetString("name"),
				force:  c.GetBool("force"),
				stdout: g.stdout,
				stderr: g.stderr,
			})
		},
	}
	f := cmd.Flags()
	f.StringP("output", "o", ".", "folder to write NAME.cue and NAME.safetensors into")
	f.String("name", "", "the model's name (default: the file's name, made an identifier)")
	f.Bool("force", false, "replace NAME.cue or NAME.safetensors if they exist")
	return cmd
}

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// importRun imports one model.
func importRun(opts *importOptions) error {
	name := opts.name
	if name == "" {
		name = identifierFrom(strings.TrimSuffix(filepath.Base(opts.file), filepath.Ext(opts.file)))
	}
	if !namePattern.MatchString(name) {
		return withCode(ExitUsage, fmt.Errorf("--name %q is not a safe identifier: names must match [A-Za-z_][A-Za-z0-9_]{0,63}", name))
	}
	m, err := onnx.ReadFile(opts.file)
	if err != nil {
		return withCode(ExitUnreadableModel, fmt.Errorf("cannot read the model: %v", err))
	}
	im, err := onnx.Import(m)
	var ie *onnx.ImportError
	if errors.As(err, &ie) {
		fmt.Fprintf(opts.stderr, "%s: %d node(s) cannot be imported:\n", opts.file, len(ie.Problems))
		for _, p := range ie.Problems {
			fmt.Fprintf(opts.stderr, "  node %s (%s, opset %d): %s\n", p.Node, p.Op, p.Opset, p.Why)
			if p.Fix != "" {
				fmt.Fprintf(opts.stderr, "      what to do: %s\n", p.Fix)
			}
		}
		if s := ie.Summary(); s != "" {
			fmt.Fprintln(opts.stderr, s)
		}
		return silentExit(ExitInvalid)
	}
	if err != nil {
		return withCode(ExitInternal, err)
	}

	cuePath := filepath.Join(opts.outDir, name+".cue")
	weightsPath := filepath.Join(opts.outDir, name+".safetensors")
	src := im.Spec(name, filepath.Base(opts.file), name+".safetensors")
	tensors := im.Weights()
	if err := checkSpecSize(opts.file, src, im); err != nil {
		return withCode(ExitInvalid, err)
	}
	start := time.Now()
	if err := checkImported(cuePath, src, im, tensors); err != nil {
		if time.Since(start) >= spec.EvalTimeout {
			// spec.Load gave up waiting for CUE: a limit, not a bug
			return withCode(ExitInvalid, fmt.Errorf("%s: the model is too large for mlbuild: its spec (%d layers) did not evaluate within the %v mlbuild allows a spec; nothing was written", opts.file, len(im.Layers), spec.EvalTimeout))
		}
		return withCode(ExitInternal, fmt.Errorf("importer bug: the spec written for %s does not check: %v\n(please report it with the model; the spec was not written)", opts.file, err))
	}
	if !opts.force {
		for _, p := range []string{cuePath, weightsPath} {
			if _, err := os.Stat(p); err == nil {
				return withCode(ExitIO, fmt.Errorf("%s exists; pass --force to replace it, or choose -o or --name", p))
			}
		}
	}
	if err := os.MkdirAll(opts.outDir, 0o755); err != nil {
		return withCode(ExitIO, err)
	}
	md := map[string]string{"format": "pt", "mlbuild.model": name, "mlbuild.source": filepath.Base(opts.file)}
	if err := safetensors.Write(weightsPath, tensors, md); err != nil {
		return withCode(ExitIO, err)
	}
	if err := atomicfile.WriteBytes(cuePath, 0o644, src); err != nil {
		return withCode(ExitIO, err)
	}
	for _, w := range im.Warnings {
		fmt.Fprintf(opts.stderr, "warning: %s\n", w)
	}
	printMapping(opts.stdout, im)
	fmt.Fprintf(opts.stdout, "wrote %s (%d layers, %s form) and %s (%d tensors)\n", cuePath, len(im.Layers),
		map[bool]string{true: "sequential", false: "graph"}[im.IsChain()], weightsPath, len(tensors))
	return nil
}

// checkSpecSize refuses a model whose spec would be larger than mlbuild
// evaluates (spec.MaxSpecBytes): a size limit, reported as such, where
// checkImported would call it an importer bug.
func checkSpecSize(file string, src []byte, im *onnx.Imported) error {
	if len(src) <= spec.MaxSpecBytes {
		return nil
	}
	return fmt.Errorf("%s: the model is too large for mlbuild: its spec would have %d layers in %d bytes, more than the %d bytes (1 MiB) mlbuild evaluates in one spec; nothing was written", file, len(im.Layers), len(src), spec.MaxSpecBytes)
}

// printMapping prints which layer each ONNX node became.
func printMapping(w io.Writer, im *onnx.Imported) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tOP\tLAYER\tHOW")
	for _, m := range im.Mapping {
		layer := m.Layer
		if layer == "" {
			layer = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Node, m.Op, layer, m.How)
	}
	tw.Flush()
}

// checkImported loads the spec the importer made and plans it, and checks
// that the schema computes the shapes the importer computed and that the
// planner asks for exactly the weights the importer wrote. Any difference
// is a bug in the importer.
func checkImported(path string, src []byte, im *onnx.Imported, tensors []safetensors.Tensor) error {
	m, err := spec.LoadBytes(path, src)
	if err != nil {
		var b bytes.Buffer
		var es spec.Errors
		if errors.As(err, &es) {
			for _, e := range es {
				fmt.Fprintf(&b, "\n  %s", e.Error())
			}
			return fmt.Errorf("the schema rejects it:%s", b.String())
		}
		return err
	}
	for _, l := range im.Layers {
		n := m.Node(l.Name)
		if n == nil {
			return fmt.Errorf("layer %s is missing from the loaded spec", l.Name)
		}
		if !slices.Equal(n.OutShape, l.OutShape) {
			return fmt.Errorf("layer %s: the schema computes %v, the importer %v", l.Name, n.OutShape, l.OutShape)
		}
	}
	p, err := planner.Build(m, planner.Options{Batch: 1})
	if err != nil {
		return fmt.Errorf("the planner rejects it: %v", err)
	}
	have := map[string][]int{}
	for _, t := range tensors {
		have[t.Name] = t.Shape
	}
	for _, prm := range p.Params {
		shape, ok := have[prm.Name]
		if !ok {
			return fmt.Errorf("the model needs weight %s, which the importer did not write", prm.Name)
		}
		if want := p.Buffers[prm.Buf].Shape; !slices.Equal(shape, want) {
			return fmt.Errorf("weight %s: the model needs shape %v, the importer wrote %v", prm.Name, want, shape)
		}
		delete(have, prm.Name)
	}
	for name := range have {
		return fmt.Errorf("the importer wrote weight %s, which the model does not have", name)
	}
	return nil
}

// identifierFrom makes a model name from a file name.
func identifierFrom(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] >= '0' && out[0] <= '9' {
		out = "m" + out
	}
	if len(out) > 64 {
		out = out[:64]
	}
	return out
}
