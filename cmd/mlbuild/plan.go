package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mlbuild/mlbuild/emit"
	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/spec"
)

func init() { subcommands = append(subcommands, newPlanCmd) }

// planOptions are the inputs of `mlbuild plan`.
type planOptions struct {
	files  []string
	format string // "text" or "json"
	batch  int    // 0: the spec's batch size
	fusion string // "on" or "off"
	// foldBN is --fold-batchnorm, "on" or "off".
	foldBN string
	mode   string // "train" or "infer"
	// backend is --backend, whose planning rules the plan follows.
	backend string
	// memLimit is --memory-limit, "" for this machine's memory.
	memLimit string
	stdout   io.Writer
	stderr   io.Writer
}

func newPlanCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan FILE...",
		Short: "Print the static plan of a model: steps, buffers, fusions, costs",
		Long: `Plan loads a spec and prints the static plan that 'mlbuild compile' turns
into a program: every step with its kernel, layer, operand shapes and
FLOPs (the forward pass, the loss and the backward pass derived by
reverse-mode differentiation, and the optimizer's updates; a dense or
convolution step's precision where the spec asks for bf16 or tf32),
every buffer with its arena and offset from the memory plan, the fusion decisions, and
FLOPs and bytes moved per training step with peak memory against the
naive sum of all buffers. The output is deterministic.

FLOPs count a multiply-add as 2 and any other arithmetic op as 1; bytes
count 4 per element of every operand read or written. They are estimates
for comparing plans, not hardware counters.

Examples:
  # the training plan at the spec's batch size
  mlbuild plan models/mnist.cue

  # what fusion buys: compare step counts and bytes moved
  mlbuild plan models/mnist.cue --fusion off

  # the batch norms folded into the convolutions before them (fold steps
  # at the head of the inference plan), and the plan without
  mlbuild plan bench/models/resnet18_cifar.cue --mode infer --batch 1
  mlbuild plan bench/models/resnet18_cifar.cue --mode infer --batch 1 --fold-batchnorm off

  # a spec with precision: "bf16": each step's precision, and why a
  # step stays f32 (batch 1 on the CPU, Metal, CUDA's direct kernel)
  mlbuild plan bench/models/mlp_bf16.cue --mode infer --batch 1

  # as the Metal backend plans it (its convolution methods and scratch)
  mlbuild plan models/mnist.cue --backend metal

  # the inference plan at batch 1, as JSON for scripts
  mlbuild plan models/mnist.cue --mode infer --batch 1 --format json
`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.config
			return planRun(&planOptions{
				files:    args,
				format:   c.GetString("format"),
				batch:    c.GetInt("batch"),
				fusion:   c.GetString("fusion"),
				foldBN:   c.GetString("fold-batchnorm"),
				mode:     c.GetString("mode"),
				backend:  c.GetString("backend"),
				memLimit: c.GetString("memory-limit"),
				stdout:   g.stdout,
				stderr:   g.stderr,
			})
		},
	}
	f := cmd.Flags()
	f.String("format", "text", "output format: text or json")
	f.Int("batch", 0, "batch size to plan for (default: the spec's training.batchSize)")
	f.String("fusion", "on", "fusion passes: on or off")
	f.String("fold-batchnorm", "on", "fold each inference batch norm into the layer before it where the backend can: on or off")
	f.String("mode", "train", "plan kind: train (forward, loss, backward, update) or infer (forward only, eval mode)")
	f.String("memory-limit", "", memoryLimitHelp)
	f.String("backend", "cpu", "plan as this backend's programs are planned (its convolution methods and scratch): "+emit.BackendNames())
	return cmd
}

// planRun loads the spec, builds the plan and prints it.
func planRun(opts *planOptions) error {
	if opts.format != "text" && opts.format != "json" {
		return withCode(ExitUsage, fmt.Errorf("unknown --format %q: use text or json", opts.format))
	}
	var fusion bool
	switch opts.fusion {
	case "on", "true":
		fusion = true
	case "off", "false":
	default:
		return withCode(ExitUsage, fmt.Errorf("unknown --fusion %q: use on or off", opts.fusion))
	}
	foldBN := opts.foldBN == "" // the zero planOptions of tests
	switch opts.foldBN {
	case "on", "true":
		foldBN = true
	case "off", "false", "":
	default:
		return withCode(ExitUsage, fmt.Errorf("unknown --fold-batchnorm %q: use on or off", opts.foldBN))
	}
	if opts.mode != "train" && opts.mode != "infer" {
		return withCode(ExitUsage, fmt.Errorf("unknown --mode %q: use train or infer", opts.mode))
	}
	if opts.batch < 0 {
		return withCode(ExitUsage, fmt.Errorf("--batch must be positive, got %d", opts.batch))
	}
	backend, err := emit.LookupBackend(opts.backend)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	memLimit, err := resolveMemoryLimit(opts.memLimit)
	if err != nil {
		return err
	}
	m, err := spec.Load(opts.files...)
	if err != nil {
		return reportSpecError(opts.stderr, err, opts.files...)
	}
	p, err := planner.Build(m, backend.PlanOptions(planner.Options{Batch: opts.batch, Training: opts.mode == "train", Fusion: fusion, KeepBatchNorm: !foldBN, MemoryLimit: memLimit}))
	if err != nil {
		var pe *spec.Error
		var es spec.Errors // the size bounds at --batch
		if errors.As(err, &pe) || errors.As(err, &es) {
			return reportSpecError(opts.stderr, err)
		}
		return withCode(ExitInternal, err) // an invariant broke: a bug in mlbuild
	}
	if opts.format == "json" {
		enc := json.NewEncoder(opts.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(p)
	} else {
		err = planner.WriteText(opts.stdout, p)
	}
	if err != nil {
		return withCode(ExitIO, err)
	}
	return nil
}
