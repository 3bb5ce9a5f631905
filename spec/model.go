// Package spec loads a model spec written in CUE, unifies it with mlbuild's
// schema (which does the dimension arithmetic), and turns the result into a
// Model: a plain Go value in which every shape is already known.
//
// A Model is the hand-off between the front end (CUE) and the planner: the
// planner never sees CUE values, and nothing below spec/ imports cuelang.org/go.
package spec

// Pos is a position in a spec file, kept so that every later stage can point
// a user back at the line that declared a layer.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// Op names the operation a Node performs. The values are the `op` strings of
// the CUE schema.
type Op string

// The operations a spec can use.
const (
	OpInput         Op = "input"
	OpDense         Op = "dense"
	OpMatMul        Op = "matmul"
	OpConv2D        Op = "conv2d"
	OpMaxPool2D     Op = "maxpool2d"
	OpAvgPool2D     Op = "avgpool2d"
	OpGlobalAvgPool Op = "globalavgpool"
	OpFlatten       Op = "flatten"
	OpReshape       Op = "reshape"
	OpTranspose     Op = "transpose"
	OpReLU          Op = "relu"
	OpLeakyReLU     Op = "leakyrelu"
	OpReLU6         Op = "relu6"
	OpSigmoid       Op = "sigmoid"
	OpTanh          Op = "tanh"
	OpGELU          Op = "gelu"
	OpSoftmax       Op = "softmax"
	OpLogSoftmax    Op = "logsoftmax"
	OpDropout       Op = "dropout"
	OpBatchNorm     Op = "batchnorm"
	OpAdd           Op = "add"
	OpSub           Op = "sub"
	OpMul           Op = "mul"
	OpAddConst      Op = "addconst"
	OpMulConst      Op = "mulconst"
	OpExp           Op = "exp"
	OpLog           Op = "log"
	OpConcat        Op = "concat"
	OpLayerNorm     Op = "layernorm"
	OpDiv           Op = "div"
	OpSqrt          Op = "sqrt"
	OpPowConst      Op = "powconst"
	OpErf           Op = "erf"
	OpReduceMean    Op = "reducemean"
	OpSlice         Op = "slice"
	OpConv1D        Op = "conv1d"
	OpMaxPool1D     Op = "maxpool1d"
	OpAvgPool1D     Op = "avgpool1d"
	OpEmbedding     Op = "embedding"
	OpResize        Op = "resize"
)

// Node is one layer of a model after the schema has computed its shapes.
//
// Shapes are per sample: the batch dimension is implicit and leading
// everywhere (a Dense layer on [784] sees a [batch, 784] tensor at run time).
// Only the fields that belong to Op are meaningful; the others are zero.
type Node struct {
	Name     string   `json:"name"` // the user's name for the layer (sequential layers get "<op><index>" when unnamed)
	Op       Op       `json:"op"`
	Inputs   []string `json:"inputs"` // names of the nodes this one reads, in argument order; empty for input
	InShapes [][]int  `json:"inShapes"`
	OutShape []int    `json:"outShape"`
	Pos      Pos      `json:"pos"`

	// dense
	Units int  `json:"units,omitempty"`
	Bias  bool `json:"bias,omitempty"` // dense, conv2d and layernorm: a learned bias is added (default true)

	// conv2d, maxpool2d, avgpool2d (all [height, width] pairs; Window gives
	// them with the defaults in place of zero fields); conv1d, maxpool1d,
	// avgpool1d hold theirs as the 2-D window of height 1 (kernel [1, k],
	// stride [1, s], padding [0, p], dilation [1, d]) that they run as
	// (OneD)
	OutChannels int    `json:"outChannels,omitempty"`
	Kernel      [2]int `json:"kernel,omitempty"`
	Stride      [2]int `json:"stride,omitempty"`
	Padding     [2]int `json:"padding,omitempty"`
	Dilation    [2]int `json:"dilation,omitempty"`
	Groups      int    `json:"groups,omitempty"`
	Rounding    string `json:"rounding,omitempty"` // "exact" (default), "floor" or "ceil" (the pools only)
	// avgpool2d: the padding's zeros do not count in a window's divisor
	// (the spec's countIncludePad: false, PyTorch's count_include_pad=False)
	ExcludePad bool `json:"excludePad,omitempty"`

	// resize: "nearest" or "bilinear" (OutShape holds the size), and
	// whether bilinear aligns the corner pixels (PyTorch's align_corners)
	Mode         string `json:"mode,omitempty"`
	AlignCorners bool   `json:"alignCorners,omitempty"`

	// softmax, logsoftmax, concat, slice, flatten (start axis), layernorm
	// (first normalised axis); per sample, never negative once decoded
	Axis int `json:"axis,omitempty"`
	// slice: the positions start to End−1 of Axis are kept
	Start int `json:"start,omitempty"`
	End   int `json:"end,omitempty"`
	// reducemean: the per-sample axes averaged over (ascending, never
	// negative once decoded), and whether they stay with size 1
	Axes     []int `json:"axes,omitempty"`
	KeepDims bool  `json:"keepdims,omitempty"`
	// transpose: a permutation of the per-sample axes
	Perm []int `json:"perm,omitempty"`
	// reshape: the target per-sample shape (already resolved, no -1)
	Shape []int `json:"shape,omitempty"`

	// leakyrelu slope; addconst/mulconst constant; powconst exponent
	Alpha float64 `json:"alpha,omitempty"`
	// dropout probability of zeroing an element
	Rate float64 `json:"rate,omitempty"`
	// softmax: mask the scores [..., queries, keys] so that query i sees
	// keys 0..i
	Causal bool `json:"causal,omitempty"`
	// softmax: mask padding, the keys whose token id in the model input
	// is *Pad (nil: no padding mask)
	Pad *int `json:"pad,omitempty"`
	// embedding: the vocabulary, the vector width, and whether a learned
	// position table [tokens, Dim] is added
	Vocab     int  `json:"vocab,omitempty"`
	Dim       int  `json:"dim,omitempty"`
	Positions bool `json:"positions,omitempty"`
	// dense: the embedding node whose weight [vocab, dim] this layer uses
	// as its own (weight tying), "" for a weight of its own
	Tie string `json:"tie,omitempty"`
	// batchnorm (and layernorm's eps)
	Eps      float64 `json:"eps,omitempty"`
	Momentum float64 `json:"momentum,omitempty"`
}

// Optimizer is the update rule and its hyper-parameters.
type Optimizer struct {
	Kind        string  `json:"kind"` // "sgd", "adam" or "adamw"
	LR          float64 `json:"lr"`
	Momentum    float64 `json:"momentum,omitempty"` // sgd
	Beta1       float64 `json:"beta1,omitempty"`    // adam, adamw
	Beta2       float64 `json:"beta2,omitempty"`
	Eps         float64 `json:"eps,omitempty"`
	WeightDecay float64 `json:"weightDecay,omitempty"`
	// DecayAll makes adamw decay every param, not only those with two or
	// more axes that no normalisation owns.
	DecayAll bool `json:"decayAll,omitempty"`
}

// Schedule changes the learning rate as training goes on.
type Schedule struct {
	Kind     string  `json:"kind"`               // "constant", "step" or "cosine"
	StepSize int     `json:"stepSize,omitempty"` // step: epochs between decays
	Gamma    float64 `json:"gamma,omitempty"`    // step: factor per decay
	MinLR    float64 `json:"minLR,omitempty"`    // cosine: final learning rate
	// WarmupSteps, for cosine, makes the schedule per optimizer step: a
	// linear rise over that many steps, then the cosine to MinLR.
	WarmupSteps int `json:"warmupSteps,omitempty"`
}

// Training holds the settings a produced binary uses as its defaults.
type Training struct {
	Loss            string    `json:"loss"` // "softmax_cross_entropy", "mse", "mae" or "huber"
	HuberDelta      float64   `json:"huberDelta,omitempty"`
	Optimizer       Optimizer `json:"optimizer"`
	Schedule        Schedule  `json:"schedule"`
	Epochs          int       `json:"epochs"`
	BatchSize       int       `json:"batchSize"`
	Seed            int64     `json:"seed"`
	ValidationSplit float64   `json:"validationSplit"`
	Patience        int       `json:"patience"` // early stopping; 0 means off
	// ClipNorm scales the gradients down to this global L2 norm when
	// they exceed it; 0 means off.
	ClipNorm float64 `json:"clipNorm,omitempty"`
	// Accumulate is the number of micro-batches of BatchSize whose
	// gradients, averaged, make one optimizer step (1: every batch).
	Accumulate int `json:"accumulate,omitempty"`
}

// Dataset binds a model to its data files.
type Dataset struct {
	Format      string `json:"format"` // "idx", "csv" or "npy"; "" without a dataset
	Task        string `json:"task"`   // "classification" or "regression"
	TrainImages string `json:"trainImages,omitempty"`
	TrainLabels string `json:"trainLabels,omitempty"` // idx: the labels file; csv, npy: labels beside Train
	TestImages  string `json:"testImages,omitempty"`
	TestLabels  string `json:"testLabels,omitempty"`
	Classes     int    `json:"classes,omitempty"`
	ImageShape  []int  `json:"imageShape,omitempty"` // per-sample shape the images are read as, e.g. [1, 28, 28]

	// csv and npy: the training and test files, or a held-out fraction.
	Train     string  `json:"train,omitempty"`
	Test      string  `json:"test,omitempty"`
	TestSplit float64 `json:"testSplit,omitempty"`
	// Files are a text dataset's files, joined in order, and Tokens its
	// token mode ("char" or "byte"); TestSplit is then the fraction of the
	// text at its end that is the validation split. Documents, when not
	// "", is the separator that cuts the text into documents, each a
	// sample padded with the id classes−1 (the schema refuses an empty
	// one).
	Files     []string `json:"files,omitempty"`
	Tokens    string   `json:"tokens,omitempty"`
	Documents string   `json:"documents,omitempty"`
	// Arrays names the features and labels arrays of an npz archive.
	Arrays struct {
		Features string `json:"features,omitempty"`
		Labels   string `json:"labels,omitempty"`
	} `json:"arrays,omitempty"`
	// Resize resamples images of another size (imagefolder, idx).
	Resize bool `json:"resize,omitempty"`
	// Pad places idx images in the centre of a zero image of imageShape's
	// height and width.
	Pad bool `json:"pad,omitempty"`
	// Normalize is the per-channel normalisation of images (imagefolder,
	// idx); nil for none.
	Normalize *Normalize `json:"normalize,omitempty"`
	// csv layout.
	Header    bool     `json:"header,omitempty"`
	SkipRows  int      `json:"skipRows,omitempty"`
	Delimiter string   `json:"delimiter,omitempty"`
	Label     []Column `json:"-"` // the label columns
	Drop      []Column `json:"-"` // the dropped columns
	// ClassNames names the classes in index order (optional).
	ClassNames []string `json:"classNames,omitempty"`
	// Targets is the number of regression targets.
	Targets int `json:"targets,omitempty"`
	// Standardize fits per-feature standardisation on the training split;
	// StandardizeTargets does the same for regression targets.
	Standardize        bool `json:"standardize,omitempty"`
	StandardizeTargets bool `json:"standardizeTargets,omitempty"`
}

// Normalize maps each image channel c to (pixel - Mean[c]) / Std[c]: the
// values given, or with Fit those of the training split.
type Normalize struct {
	Fit  bool      `json:"fit,omitempty"`
	Mean []float64 `json:"mean,omitempty"`
	Std  []float64 `json:"std,omitempty"`
}

// Column picks a CSV column by header name or, when Name is empty, by
// index (negative counts from the end).
type Column struct {
	Name  string `json:"name,omitempty"`
	Index int    `json:"index"`
}

// Model is a legal, fully shaped model: what the planner takes.
type Model struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	DType string `json:"dtype"` // "f32"
	// Precision is the arithmetic the spec asks for in matrix products:
	// "f32", "bf16" (bfloat16 operands, f32 accumulation, f32 master
	// weights) or "tf32" (TF32 operands, f32 accumulation: CUDA); the
	// planner chooses per step where it runs.
	// Empty means "f32".
	Precision string `json:"precision,omitempty"`
	// Nodes in topological order; Nodes[0] is the input.
	Nodes    []Node   `json:"nodes"`
	Output   string   `json:"output"` // the node whose value is the model's prediction
	Training Training `json:"training"`
	Dataset  Dataset  `json:"dataset"`
}

// Node returns the node called name, or nil.
func (m *Model) Node(name string) *Node {
	for i := range m.Nodes {
		if m.Nodes[i].Name == name {
			return &m.Nodes[i]
		}
	}
	return nil
}
