package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/spec"
)

func init() { subcommands = append(subcommands, newShapesCmd) }

// shapesOptions are the inputs of `mlbuild shapes`.
type shapesOptions struct {
	files  []string
	stdout io.Writer
	stderr io.Writer
}

func newShapesCmd(g *globalOptions) *cobra.Command {
	opts := &shapesOptions{}
	return &cobra.Command{
		Use:   "shapes FILE...",
		Short: "Print every layer's output shape, parameters and FLOPs",
		Long: `Shapes loads one spec (a file, or several files of one CUE package) and
prints a table like Keras' model.summary(): each layer in execution order,
its op, its per-sample output shape (the batch dimension is implicit), its
trainable parameter count and its forward FLOPs per sample, then totals.

FLOPs count a multiply-add as 2; a bias add, an element-wise op and each
element of a pooling window as 1; softmax as 3 per element; reshapes,
flatten, transpose and dropout as 0 (see docs/specs.md).

Examples:
  mlbuild shapes models/mnist.cue
`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.files = args
			opts.stdout, opts.stderr = g.stdout, g.stderr
			return shapesRun(opts)
		},
	}
}

// shapesRun loads the spec and prints its summary table.
func shapesRun(opts *shapesOptions) error {
	m, err := spec.Load(opts.files...)
	if err != nil {
		for _, e := range specErrors(opts.files[0], err) {
			fmt.Fprintln(opts.stderr, e.Error())
		}
		return silentExit(specExitCode(err, opts.files...))
	}
	writeShapes(opts.stdout, m)
	return nil
}

// writeShapes prints the summary table of m.
func writeShapes(w io.Writer, m *spec.Model) {
	fmt.Fprintf(w, "model %s (%s), output %s\n\n", spec.Short(m.Name), m.File, spec.Short(m.Output))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layer\top\tinputs\toutput shape\tparams\tFLOPs\t")
	var params, flops int64
	for i := range m.Nodes {
		n := &m.Nodes[i]
		// Load has checked the counts against the bounds (spec.CheckLimits);
		// the sums saturate rather than wrap for a Model made elsewhere.
		p, f := n.Params(), n.ForwardFLOPs()
		params, _ = spec.AddCount(params, p)
		flops, _ = spec.AddCount(flops, f)
		var inputs []string
		for _, in := range n.Inputs {
			inputs = append(inputs, spec.Short(in))
		}
		if len(inputs) == 0 {
			inputs = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", spec.Short(n.Name), spec.Short(string(n.Op)), strings.Join(inputs, ","), shapeText(n.OutShape), group(p), group(f))
	}
	fmt.Fprintf(tw, "total\t\t\t\t%s\t%s\t\n", group(params), group(flops))
	tw.Flush()
}

// shapeText formats a per-sample shape as [1, 28, 28].
func shapeText(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// group writes n with thousands separators, for reading large counts.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
