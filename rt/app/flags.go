package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
)

// The produced program follows the command-line habits of the mlbuild
// command: flags go before or after operands (`predict digit.png --weights
// w.safetensors`), `--` ends the flags, `-h` and `--help` print a command's
// help on stdout and exit 0, usage lists every flag with two dashes, and
// `--version` says which mlbuild built the program.

// commandHelp is what `COMMAND --help` prints besides the flags.
type commandHelp struct {
	name     string
	operands string // after the flags in the usage line, e.g. "INPUT..."
	required string // the flags that must be given, e.g. "--data DIR"
	summary  string // one line, for the program's usage
	long     string // paragraphs, for the command's help
	examples string // command lines, without the program name
}

// commands lists the program's commands in the order its usage shows them.
var commands = []commandHelp{
	{name: "train", required: "--data DIR",
		summary: "train the model; checkpoints at epochs' ends and on Ctrl-C",
		long: `Train reads the spec's IDX training files from --data and trains the model
with the spec's settings (flags override them). It writes a checkpoint
after every epoch (when epochs take less than 20 times the write, as
often as that allows, and after the last) and on Ctrl-C, and the weights
to --out; with a validation split the weights kept are the best seen. --resume continues
an interrupted run with its own settings (epochs, learning rate, limit,
validation split, patience, seed and data folder); a flag given with
--resume overrides the interrupted run's value, and says so.

A new run starts from the seed's initialisation, or from weights with
--init FILE (a weights file, e.g. one that mlbuild import wrote, or the
weights of a checkpoint): epoch 1 and a fresh optimizer state, where
--resume would continue a run. A program compiled with embedded weights
starts from them unless --init names a file or says seed (--init ./seed
for a file called seed); the first line of the output says which.`,
		examples: `train --data data/mnist
train --data data/mnist --epochs 3 --metrics metrics.jsonl
train --resume NAME.ckpt.safetensors
train --data data/mnist --init NAME.safetensors --lr 1e-4`},
	{name: "eval", required: "--data DIR --weights FILE",
		summary: "accuracy and loss of trained weights on the test files",
		long:    `Eval runs the inference plan over the spec's IDX test files in --data.`,
		examples: `eval --data data/mnist --weights NAME.safetensors
eval --data data/mnist --weights NAME.safetensors --json`},
	{name: "predict", required: "--weights FILE", operands: "INPUT...",
		summary: "the most probable class of images (PNG, JPEG, PGM) or .npy, IDX or CSV samples",
		long: `Predict prints the most probable class and its probability for each
INPUT: a PNG, JPEG, PGM or PPM image of the model's input size (read as
its channels, grey or RGB, pixels scaled to [0, 1], and normalised as
training recorded; --resize resamples another size), or a file of many
samples: a .npy array, an IDX images file or a CSV file (the first
--limit of them). A program reads the files its spec's dataset calls
for: .npy arrays always, images and IDX files for a model of images
(an IDX, image-folder, npy or npz dataset), CSV files for a model of
rows of features (a CSV, npy or npz dataset); one of an IDX or
image-folder dataset takes no CSV file, one of a CSV dataset no image.`,
		examples: `predict --weights NAME.safetensors digit.png
predict digit.png --weights NAME.safetensors --top 3
predict --weights NAME.safetensors --resize photo.jpg`},
	{name: "sample", required: "--data DIR", operands: "OUT",
		summary: "write an image of the data set to a PNG file, to try predict on",
		long: `Sample writes image --index of the spec's IDX test files (--train: the
training files) to OUT, a PNG file (a PGM file when OUT ends in .pgm), and
prints its label: an input for predict.`,
		examples: `sample --data data/mnist --index 0 digit.png
predict --weights NAME.safetensors digit.png`},
	{name: "generate", required: "--weights FILE --prompt TEXT",
		summary: "continue a prompt with text the model writes, token by token",
		long: `Generate continues --prompt with --tokens tokens, each drawn from the
model's next-token distribution and written to stdout as soon as it is
drawn: the --top-k most likely tokens (0: all), their logits divided by
--temperature (0: always the most likely token). --seed makes the text
repeatable. The prompt's characters must all be in the vocabulary that
training stored with the weights; the model reads at most its context
length of the last tokens. Where the program has a KV cache (--kv-cache
below says whether), a token costs one position's work; once the text
passes the context, the window slides and each token recomputes it.
--precision bf16 (the CPU programs' cache) rounds the dense layers'
weights to bfloat16 once and multiplies in bf16, reading half the bytes
a token: faster where the weights' streaming bounds a token, and the
text can differ from f32's; a spec that trains in bf16 makes it the
default.`,
		examples: `generate --weights NAME.safetensors --prompt "Call me" --tokens 500
generate --weights NAME.safetensors --prompt "Call me" --temperature 0
generate --weights NAME.safetensors --prompt "Call me" --precision bf16`},
	{name: "bench", summary: "forward latency and throughput, and training-step time",
		long:     `Bench times the inference plan at the spec's batch size and at batch 1, and one training step, on random data.`,
		examples: `bench --json`},
	{name: "info", summary: "the model, its shapes, the backend, the build key, memory",
		long: `Info describes the program: the spec it was compiled from, the backend, the
build key, the mlbuild and Go versions, and each layer's output shape.`,
		examples: `info`},
	{name: "selftest", summary: "every kernel of the backend against the CPU reference",
		long:     `Selftest checks the backend's kernels against the CPU reference and prints a pass/fail table.`,
		examples: `selftest`},
	{name: "version", summary: "the versions of mlbuild and Go that built this program",
		long: `Version prints the model's name and the versions of mlbuild and Go that built
the program (also --version).`,
		examples: `version`},
}

// helpOf returns the help entry of a command.
func helpOf(name string) (commandHelp, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return commandHelp{}, false
}

// errHelpShown reports that help was printed: the program exits 0.
var errHelpShown = errors.New("help shown")

// newFlags starts the flag set of one command. Its errors and help are
// printed by parseFlags, never by the flag package.
func newFlags(meta *Meta, command string) *flag.FlagSet {
	fs := flag.NewFlagSet(meta.Name+" "+command, flag.ContinueOnError)
	fs.SetOutput(helpMeta{meta}) // discards; printCommandHelp reads meta from it
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args with flags and operands in any order and returns
// the operands. Everything after `--` is an operand. -h and --help print
// the command's help on stdout and return errHelpShown; a mistake returns
// a usageError that names the flag with two dashes and the way to help.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	var operands []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(fs, stdout)
			return nil, errHelpShown
		}
		if err != nil {
			return nil, usageError{fmt.Sprintf("%s\nRun '%s --help' for usage.", flagMessage(err), fs.Name())}
		}
		rest := fs.Args()
		used := len(args) - len(rest)
		if used > 0 && args[used-1] == "--" {
			return append(operands, rest...), nil
		}
		if len(rest) == 0 {
			return operands, nil
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

// flagMessage rewrites the flag package's messages, which write flags
// with one dash, in the words and dashes of mlbuild's own command line.
func flagMessage(err error) string {
	msg := err.Error()
	for _, r := range []struct{ prefix, with string }{
		{"flag provided but not defined: -", "unknown flag: --"},
		{"flag needs an argument: -", "flag needs an argument: --"},
		{"bad flag syntax: ", "bad flag syntax: "},
	} {
		if rest, ok := strings.CutPrefix(msg, r.prefix); ok {
			return r.with + strings.TrimPrefix(rest, "-")
		}
	}
	// invalid value "x" for flag -epochs: parse error
	if before, after, ok := strings.Cut(msg, " for flag -"); ok {
		name, why, _ := strings.Cut(after, ": ")
		return fmt.Sprintf("%s for --%s: %s", strings.Replace(before, "invalid value", "invalid argument", 1), name, why)
	}
	return msg
}

// printCommandHelp prints a command's help: what it does, its usage line,
// every flag with its default, and examples.
func printCommandHelp(fs *flag.FlagSet, w io.Writer) {
	prog, name, _ := strings.Cut(fs.Name(), " ")
	h, _ := helpFor(metaOf(fs), name)
	if h.long != "" {
		fmt.Fprintf(w, "%s\n\n", h.long)
	}
	required := h.required
	if f := fs.Lookup("weights"); f != nil && strings.Contains(f.Usage, overridesEmbedded) {
		required = strings.Replace(required, "--weights FILE", "", 1) // the embedded weights serve
	}
	fmt.Fprintf(w, "Usage:\n  %s\n\n", strings.Join(strings.Fields(fmt.Sprintf("%s %s %s [flags] %s", prog, name, required, h.operands)), " "))
	fmt.Fprintln(w, "Flags:")
	type row struct{ left, usage string }
	var rows []row
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(f)
		left := "    --" + f.Name
		if !isBoolFlag(f) {
			left += " " + placeholder
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		rows = append(rows, row{left, usage})
	})
	rows = append(rows, row{"-h, --help", "print this help"})
	width := 0
	for _, r := range rows {
		width = max(width, len(r.left))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.usage)
	}
	if h.examples != "" {
		fmt.Fprintln(w, "\nExamples:")
		for _, line := range strings.Split(h.examples, "\n") {
			fmt.Fprintf(w, "  %s %s\n", prog, line)
		}
	}
}

// isBoolFlag reports whether f takes no value (--quiet).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagsGiven returns the names of the flags set on the command line.
func flagsGiven(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// printUsage is the program's usage: its commands, each with the flags it
// needs, and the way to each command's help.
func printUsage(m Model, w io.Writer) {
	meta := m.Meta()
	fmt.Fprintf(w, "%s: a model compiled by mlbuild from %s (backend %s)\n\nUsage:\n  %s COMMAND [flags]\n\nCommands:\n",
		meta.Name, meta.SpecFile, meta.Backend, meta.Name)
	for _, c := range commandsFor(meta) {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	if e := meta.Embedded; e != nil {
		fmt.Fprintf(w, `
Weights:
  %s is compiled in (sha256 %s…): predict and eval use it
  unless --weights names another file, and train starts from it (see
  'train --help', --init).
`, e.Source, e.shortHash())
	}
	fmt.Fprintf(w, `
Flags:
  -h, --help     help for %[1]s (and '%[1]s COMMAND --help' for a command's flags)
      --version  the versions of mlbuild and Go that built %[1]s

Run '%[1]s COMMAND --help' for a command's flags and examples.
`, meta.Name)
}

// versionText is what `version` and `--version` print.
func versionText(meta *Meta) string {
	return fmt.Sprintf("%s (from %s, backend %s, build %s): mlbuild %s, %s %s/%s\n",
		meta.Name, meta.SpecFile, meta.Backend, meta.BuildKey, meta.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func versionCmd(m Model, args []string, stdout io.Writer) error {
	if err := noOperands(newFlags(m.Meta(), "version"), args, stdout); err != nil {
		return err
	}
	fmt.Fprint(stdout, versionText(m.Meta()))
	return nil
}

// noOperands parses the flags of a command that takes no operands.
func noOperands(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	operands, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(operands) > 0 {
		_, command, _ := strings.Cut(fs.Name(), " ")
		return usageError{fmt.Sprintf("%s takes no arguments, got %q\nRun '%s --help' for usage.", command, operands, fs.Name())}
	}
	return nil
}

// MaxThreads is the most --threads a program accepts, or the machine's
// cores when it has more: past the cores, threads only cost memory (a
// stack each; a million took 3.1 GB) and time (eight times slower).
const MaxThreads = 1024

// checkThreads refuses a negative --threads (0 means all cores) and one
// above MaxThreads (or the cores, when there are more).
func checkThreads(n int) error {
	if n < 0 {
		return usageError{fmt.Sprintf("--threads must be 0 (all cores) or more, got %d", n)}
	}
	if limit := max(MaxThreads, runtime.NumCPU()); n > limit {
		return usageError{fmt.Sprintf("--threads must be at most %d (this machine has %d cores; 0 uses all of them), got %d", limit, runtime.NumCPU(), n)}
	}
	return nil
}
