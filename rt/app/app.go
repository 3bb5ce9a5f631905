// Package app is the part of every program mlbuild produces that does not
// depend on the model: the command line (train, eval, predict, bench, info,
// selftest), the training loop with validation, early stopping, checkpoints
// and progress, and loading and saving weights.
//
// The generated code supplies a Model: buffers with constant shapes and the
// forward, backward and update passes of its plans. Keeping the loop here,
// written once and tested once, leaves the generated code to what only it
// can know.
package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// ParamMeta describes one tensor of the model's state arena.
type ParamMeta struct {
	Name      string  // PyTorch state_dict name, e.g. "conv2d1.weight"
	Shape     []int   // its shape
	Offset    int     // element offset in State()
	Size      int     // elements
	Trainable bool    // false for statistics (batchnorm running mean/var)
	Init      string  // "uniform", "ones" or "zeros"
	Bound     float32 // for "uniform": U(-Bound, Bound)
	// State holds the offsets of the optimizer's state tensors, in the order
	// the optimizer names them (StateNames).
	State []int
	// Grad is the element offset of the param's gradient in State(), or -1
	// for statistics, which have none.
	Grad int
}

// LayerMeta is one layer of the spec, for `info`.
type LayerMeta struct {
	Name     string
	Op       string
	OutShape []int
	Params   int
}

// Defaults are the training settings of the spec, baked into the flags.
type Defaults struct {
	Loss            string
	HuberDelta      float64 // for the huber loss
	Optimizer       string  // sgd, adam, adamw
	LR              float64
	Schedule        string // constant, step, cosine
	StepSize        int
	Gamma           float64
	MinLR           float64
	WarmupSteps     int // cosine: a per-step schedule with this many steps of linear warmup
	Epochs          int
	Seed            int64
	ValidationSplit float64
	Patience        int
	TrainImages     string
	TrainLabels     string
	TestImages      string
	TestLabels      string

	// Accumulate, above 1, is the number of micro-batches of Batch
	// samples whose mean gradient makes one optimizer step (the spec's
	// training.accumulate): the loop runs Gradients on all but the last
	// and TrainStep on the last; 0 or 1 updates every batch.
	Accumulate int
}

// Meta is what a generated model tells the program about itself.
type Meta struct {
	Name       string
	SpecFile   string
	Backend    string
	BuildKey   string
	Version    string // mlbuild version that generated the program
	InputShape []int  // per sample
	// OutputShape is the per-sample shape of the model's output when it has
	// more than one axis (e.g. [tokens, features]); nil means [Classes].
	OutputShape []int
	Classes     int
	Batch       int
	Params      []ParamMeta
	StateNames  []string // names of the optimizer state tensors per param, e.g. ["adam_m", "adam_v"]
	Layers      []LayerMeta
	Defaults    Defaults
	// Data describes a csv or npy data set (zero for IDX files).
	Data DataSpec
	// Readers are the data files the program reads besides a dataset's
	// IDX files: its dataset's format and predict's inputs, in the order
	// predict tries them (see Reader).
	Readers []*Reader
	// Memory of the plans, in bytes, for `info`.
	StateBytes, TrainWorkBytes, InferWorkBytes int64
	// Memory says where the training and inference plans' memory goes.
	Memory []MemoryUse
	// Embedded are the weights compiled into the program by `mlbuild
	// compile --weights`, nil when there are none.
	Embedded *EmbeddedWeights
	// Vocab, when positive, says that the input holds token ids (an
	// embedding reads it): integers 0 to Vocab−1 stored as float32
	// values, one per position of InputShape [tokens]. The labels of such
	// a model with logits per token [tokens, classes] are one-hot per
	// token, [Batch, tokens, classes] (Classes counts a sample's row of
	// them, tokens·classes).
	Vocab int
	// Padded says that the model's attention masks the keys whose token
	// id is PadID (a softmax's pad in the spec): generate refuses a
	// prompt that holds that id and stops when it draws it, and the
	// gradient check's inputs hold it.
	Padded bool
	PadID  int

	// rec is what training fitted on the data (standardisation, string
	// class order), saved with the weights; loadWeights reads it back.
	rec *record
}

// UpdateGuard is implemented by models whose TrainStep skips the update
// when the loss is not finite, leaving State() as it was before the step
// (the CPU backend's). The training loop then needs no copy of the state
// before every step to trace a divergence to its op: for the MLP of the
// model benchmark that copy (8.6 MB a step) took a sixth of the epoch.
type UpdateGuard interface {
	SkipsUpdateOnNonFiniteLoss()
}

// CostlySnapshot is implemented by models whose State() crosses a bus (a
// discrete GPU's arenas, which State() downloads and the next step
// uploads again). The host-fed training loop then takes no copy of the
// state before each step: for models/gpt.cue on an H200 that moved 170 MB
// down and up a step, more time than the step. A divergence is then
// traced from the weights after the failing step's update, and says so.
type CostlySnapshot interface {
	CostlySnapshot() bool
}

// costlySnapshot reports whether m's state is too far to copy every step.
func costlySnapshot(m Model) bool {
	c, ok := m.(CostlySnapshot)
	return ok && c.CostlySnapshot()
}

// EmbeddedWeights is a safetensors file compiled into the program, so that
// the one binary predicts and evaluates with no other file: predict and
// eval use it when --weights is not given, and train starts from it.
type EmbeddedWeights struct {
	Source string // the file's name when it was compiled in, e.g. "mlp.safetensors"
	SHA256 string // the hex SHA-256 of Data, the file's bytes
	Data   []byte // the file
}

// Model is implemented by the generated code. All slices are views into
// fixed buffers; calls are not safe for concurrent use.
type Model interface {
	Meta() *Meta
	// State is the whole state arena: params, statistics, gradients and
	// optimizer state.
	State() []float32
	// TrainInput and TrainLabels are the training plan's batch buffers.
	TrainInput() []float32
	TrainLabels() []float32
	// TrainStep runs forward, loss, backward and update on the batch in the
	// training buffers and returns the mean loss. step counts from 1.
	TrainStep(lr float32, step int) float32
	// Gradients runs forward, loss and backward on the training batch
	// without updating the weights, and returns the mean loss; the
	// gradients are then in State() at each ParamMeta.Grad. The gradient
	// check of selftest uses it, and, where Defaults.Accumulate is above
	// 1, the training loop for an optimizer step's micro-batches but the
	// last: such a model also adds the gradients into the sums that the
	// next TrainStep averages, and keeps its prediction for TrainOutput.
	Gradients() float32
	// TrainOutput is the prediction of the last TrainStep (logits), or of
	// the last Gradients of a model that accumulates.
	TrainOutput() []float32
	// InferInput is the batch buffer of the inference plan: batch rows of
	// Meta().Batch, or one row when one is true.
	InferInput(one bool) []float32
	// Infer runs the inference plan and returns its output.
	Infer(one bool) []float32
	// TraceTrainForward runs the training plan's forward pass step by step,
	// calling visit with each step's layer and output, and stops when visit
	// returns false. It finds the first op that made a NaN.
	TraceTrainForward(visit func(layer string, out []float32) bool)
	// SetRand gives the model the random source of dropout.
	SetRand(seed uint64)
	// SelfTest checks the backend's kernels against the CPU reference and
	// returns one row per check.
	SelfTest() []SelfTestRow
}

// SelfTestRow is one line of `selftest`: a check, or, where Note is set,
// a remark that selftest prints after the checks and counts as neither
// passed nor failed (what a check left out, and why).
type SelfTestRow struct {
	Name     string
	MaxError float64
	Tol      float64
	Err      error
	Note     string
}

// Exit codes of a produced program.
const (
	exitOK      = 0
	exitFailure = 1 // bad input: a data or weights file, an image; not enough memory
	exitUsage   = 2
	exitNaN     = 3 // training diverged
	exitSignal  = 130
	exitBug     = 70 // a bug in mlbuild or the program: please report it
)

// usageError marks command-line mistakes.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Main runs the program's command line and exits.
func Main(m Model) {
	os.Exit(Run(m, os.Args[1:], os.Stdout, os.Stderr))
}

// Run runs one command and returns the exit code.
func Run(m Model, args []string, stdout, stderr io.Writer) (code int) {
	prog := m.Meta().Name
	defer func() {
		if r := recover(); r != nil {
			if me, ok := r.(*MemoryError); ok {
				// Allocate's refusal, from a Model method that cannot return it.
				fmt.Fprintf(stderr, "%s: %v\n", prog, me)
				code = exitFailure
				return
			}
			if te, ok := r.(*cpu.TokenIDError); ok {
				// an embedding's refusal of an id outside its vocabulary:
				// bad input, not a bug
				fmt.Fprintf(stderr, "%s: %v\n", prog, te)
				code = exitFailure
				return
			}
			fmt.Fprintf(stderr, "%s: internal error (a bug in mlbuild; please report it with this message): %v\n%s", prog, r, debug.Stack())
			code = exitBug
		}
	}()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || len(args) == 1 && args[0] == "help" {
		printUsage(m, stdout)
		return exitOK
	}
	switch args[0] {
	case "help": // help COMMAND is COMMAND --help
		args = []string{args[1], "--help"}
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	if err := applyKernelsEnv(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "train":
		err = trainCmd(m, args[1:], stdout, stderr)
	case "eval":
		err = evalCmd(m, args[1:], stdout, stderr)
	case "predict":
		err = predictCmd(m, args[1:], stdout, stderr)
	case "bench":
		err = benchCmd(m, args[1:], stdout, stderr)
	case "info":
		err = infoCmd(m, args[1:], stdout)
	case "selftest":
		err = selftestCmd(m, args[1:], stdout)
	case "version":
		err = versionCmd(m, args[1:], stdout)
	case "sample":
		err = sampleCmd(m, args[1:], stdout)
	case "generate":
		if gen := m.Meta().generator(); gen != nil {
			err = gen(m, args[1:], stdout, stderr)
		} else {
			err = usageError{fmt.Sprintf("generate writes text, but this program's dataset is not text; commands: %s", commandNames(m.Meta()))}
		}
	default:
		err = usageError{fmt.Sprintf("unknown command %q; commands: %s\nRun '%s --help' for usage.", args[0], commandNames(m.Meta()), prog)}
	}
	if err == nil || errors.Is(err, errHelpShown) {
		return exitOK
	}
	var done finishedRun
	if errors.As(err, &done) {
		fmt.Fprintln(stdout, done.msg)
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	var ue usageError
	var ne *nanError
	var ie *interruptedError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ne):
		return exitNaN
	case errors.As(err, &ie):
		return exitSignal
	}
	return exitFailure
}

// joinShape formats a shape as 1×28×28.
func joinShape(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "×")
}
