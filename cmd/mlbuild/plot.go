package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/plot"
	"github.com/mlbuild/mlbuild/rt/atomicfile"
)

func init() { subcommands = append(subcommands, newPlotCmd) }

// plotOptions are the inputs of `mlbuild plot`.
type plotOptions struct {
	metrics string
	out     string
	force   bool
	stdout  io.Writer
}

func newPlotCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plot METRICS",
		Short: "Draw learning curves (loss and accuracy) from train --metrics as SVG or PNG",
		Long: `Plot reads the JSON lines that a program's 'train --metrics FILE' writes and
draws the learning curves as an SVG file that a browser opens (or a PNG
image, when -o names a .png file): the loss and
the accuracy against the optimizer step, for every step (faint), each
epoch's training mean, and the validation set when the run held one out.
Dashed lines mark the ends of epochs.

A metrics file that several runs appended to holds several runs; plot draws
the last (a run continued with --resume is one run). The SVG goes to
METRICS with .svg for its extension unless -o names another file; an
existing file that mlbuild plot did not write is replaced only with --force.

Examples:
  ./digits train --data "$MNIST" --validation-split 0.1 --metrics metrics.jsonl
  mlbuild plot metrics.jsonl                 # writes metrics.svg
  mlbuild plot metrics.jsonl -o curves.svg
  mlbuild plot metrics.jsonl -o curves.png
`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return plotRun(&plotOptions{metrics: args[0], out: g.config.GetString("output"), force: g.config.GetBool("force"), stdout: g.stdout})
		},
	}
	cmd.Flags().StringP("output", "o", "", "the file to write, SVG or (named .png) PNG (default: METRICS with .svg for its extension)")
	cmd.Flags().Bool("force", false, "replace an output file that mlbuild plot did not write")
	return cmd
}

// plotRun reads the metrics and writes the SVG.
func plotRun(opts *plotOptions) error {
	f, err := os.Open(opts.metrics)
	if err != nil {
		return withCode(ExitIO, err)
	}
	defer f.Close()
	run, err := plot.Read(opts.metrics, f)
	if err != nil {
		return withCode(ExitInvalid, err)
	}
	out := opts.out
	if out == "" {
		out = strings.TrimSuffix(opts.metrics, filepath.Ext(opts.metrics)) + ".svg"
	}
	if _, err := os.Stat(out); err == nil && !opts.force && !writtenByPlot(out) {
		return withCode(ExitIO, fmt.Errorf("%s exists and was not written by mlbuild plot; choose another -o, remove it, or pass --force", out))
	}
	title := fmt.Sprintf("%s: %d epochs, %d steps", filepath.Base(opts.metrics), len(run.Epochs), lastStep(run))
	draw := plot.SVG
	if strings.EqualFold(filepath.Ext(out), ".png") {
		draw = plot.PNG
	}
	if err := atomicfile.WriteFile(out, 0o644, func(w io.Writer) error { return draw(w, run, title) }); err != nil {
		return withCode(ExitIO, err)
	}
	note := ""
	if run.Runs > 1 {
		note = fmt.Sprintf(" (the last of %d runs in the file)", run.Runs)
	}
	fmt.Fprintf(opts.stdout, "wrote %s: loss and accuracy over %d steps%s\n", out, lastStep(run), note)
	return nil
}

// lastStep is the run's last optimizer step.
func lastStep(r *plot.Run) int {
	n := 0
	for _, ps := range [][]plot.Point{r.StepLoss, r.Loss} {
		if len(ps) > 0 {
			n = max(n, ps[len(ps)-1].Step)
		}
	}
	return n
}

// writtenByPlot reports whether path is an SVG or PNG that mlbuild plot
// wrote: an SVG whose second line is plot.Marker, or a PNG with its
// marker chunk after the header.
func writtenByPlot(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 128)
	n, _ := io.ReadFull(f, head)
	if plot.IsPNGMarked(head[:n]) {
		return true
	}
	f.Seek(0, io.SeekStart)
	sc := bufio.NewScanner(f)
	return sc.Scan() && strings.HasPrefix(sc.Text(), "<svg ") && sc.Scan() && sc.Text() == plot.Marker
}
