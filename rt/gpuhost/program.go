// Package gpuhost is the host side of every GPU program mlbuild produces,
// whatever the GPU: it turns the model's tables (the plans lowered to
// kernel launches and GEMMs, written by the emitter into the program's
// main.go) into recorded sequences on a Device, implements app.Model over
// them, and runs selftest (each plan step on the GPU against its CPU
// reference). The generated main.go keeps only the model's tables; the
// Metal device (package mps) and the CUDA device (package cuda) plug in
// behind the Device interface.
package gpuhost

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/app"
)

// Arenas: the device buffers a table entry can refer to.
const (
	ArenaState       = iota // params, statistics, gradients, optimizer state (all plans)
	ArenaTrainWork          // the training plan's work arena
	ArenaEvalWork           // the inference plan's work arena
	ArenaOneWork            // the one-sample inference plan's work arena
	ArenaTrainInput         // the training batch
	ArenaTrainLabels        // its labels (one-hot rows, or regression targets)
	ArenaArgs               // the per-step arguments (uint32 words, StepArgs layout)
	ArenaLogits             // the training prediction, copied out of the work arena
	ArenaDecodeWork         // the KV-cache decode's rows and caches (none without a Decode)
	ArenaCount
)

var arenaNames = [ArenaCount]string{"state", "training work", "inference work", "one-sample work",
	"training input", "training labels", "step arguments", "training output", "generation work"}

// Bind is one kernel buffer argument: an arena, a byte offset, and the
// bytes the kernel touches from there.
type Bind struct{ Arena, Offset, Bytes int }

// Matrix is one GEMM operand: an arena, a byte offset and the row stride
// in bytes.
type Matrix struct{ Arena, Offset, RowBytes int }

// GemmShape is what a GEMM is made for: C = Alpha·op(A)·op(B) + Beta·C,
// Batch times over consecutive matrices when Batch is above 1, with
// products in Precision (the plan step's; zero: exact float32).
type GemmShape struct {
	TransA, TransB bool
	M, N, K        int
	Alpha, Beta    float32
	Batch          int
	Precision      Precision
}

// GemmOp is one GEMM of a plan. In a batched GEMM (Shape.Batch above 1)
// the operands' consecutive matrices are MatrixBytes apart (A, B, C).
// Elem is A's and B's element type (ElemBF16: bfloat16 twins their
// producers wrote; C is float32).
type GemmOp struct {
	Shape       GemmShape
	A, B, C     Matrix
	MatrixBytes [3]int
	Elem        Elem
}

// BF16Twin is a weight's bfloat16 twin in the state arena: Of's Size
// float32 values rounded to bfloat16 (to nearest, ties to even), two to a
// float32 place from place Offset on, in Of's order or, where KRSC is
// set, in KRSC order. The update kernels keep it current; the host
// writes it whenever it has written the state arena (the weights at
// start, after loading them), before the device reads it.
type BF16Twin struct {
	Of     Region
	Offset int
	// KRSC, when not zero, is the filter [OC, C/Groups, KH·KW] that Of
	// holds in KCRS order, whose twin holds it in KRSC order (the filter
	// of library convolutions on channels-last tensors, Conv.NHWC):
	// element (o, c, t) of Of at (o·KH·KW + t)·C/Groups + c of the twin,
	// as NarrowBF16NHWC stores a tensor [OC, C/Groups, KH·KW].
	KRSC [3]int
}

// ConvOp is one library convolution of a plan (Encoder.Conv): the
// product Product of geometry Geom on the packed tensors X, W and Y (each
// an arena, a byte offset and its bytes) of element type Elem (all three
// alike: float32, the zero value, or bfloat16 in precision bf16),
// output = Alpha·product + Beta·output, in Precision; with NHWC, X and Y
// are channels-last and W is KRSC (Conv.NHWC; the zero value is NCHW and
// KCRS). A forward with Bias set carries an epilogue (Conv.Bias, Conv.Z
// and Conv.Act): Y = Act(Alpha·product + Z + Bias per output channel),
// Bias and Z of element type Elem; nil Bias, Z and a zero Act (the
// zero value, and a program generated before ConvOp had them) are none.
type ConvOp struct {
	Geom        ConvGeom
	Product     ConvProduct
	X, W, Y     Bind
	Alpha, Beta float32
	Precision   Precision
	Elem        Elem
	NHWC        bool
	Bias, Z     *Bind // nil: none
	Act         ConvAct
}

// Op is one kernel launch (Groups threadgroups of Threadgroup threads) or,
// when Gemm is set, one GEMM, or when Conv is set one library
// convolution. When Sum is set it is no kernel but a
// collective point of a replica's step: in a data-parallel run each
// rank's Binds are summed over the ranks before the next op (synchronised
// batch norm's statistics); a device outside one does nothing for it.
type Op struct {
	Kernel              string
	Binds               []Bind
	Groups, Threadgroup int
	Gemm                *GemmOp
	Conv                *ConvOp
	Sum                 bool
}

// Region is a tensor of a plan: arena, offset (in float32 places) and
// elements; a region of bfloat16 elements (PlanStep.CheckBF16) takes
// half as many places, rounded up.
type Region struct{ Arena, Offset, Size int }

// RefFunc is a plan step's CPU reference, run on copies of the arenas:
// state, the plan's work arena, the training input and labels.
type RefFunc func(sa, wa, xa, ya []float32, lr float32, step int, seed uint32) float32

// PlanStep is one step of a plan: its GPU ops, its CPU reference, the
// regions selftest compares, and the length of the longest sum behind one
// output element (which scales the tolerance).
type PlanStep struct {
	Name  string
	Layer string
	Ops   []Op
	Ref   RefFunc
	Check []Region
	// CheckBF16 are the regions selftest compares that hold bfloat16
	// elements: outputs the plan stores in bfloat16.
	CheckBF16 []Region
	Reduce    int
	// Precision is the rounding of the products of the step's own
	// kernels where they multiply on tensor tiles (the fused attention's
	// in a bf16 or tf32 plan), for selftest's tolerance; a GEMM op
	// carries its own (GemmShape.Precision).
	Precision Precision
}

// Program is everything the generated main.go tells the host: sizes in
// float32 elements, where the plans' inputs and outputs are, the kernel
// library and the step tables.
type Program struct {
	Meta *app.Meta
	// Source is the kernel library in the device's language; Kernels names
	// each kernel with the bytes of each of its buffer arguments.
	Source  string
	Kernels []KernelInfo

	StateSize, TrainWorkSize, EvalWorkSize, OneWorkSize int
	TrainInputSize, TrainLabelsSize, OutputSize         int
	// TokenLayer is the embedding that reads the input's token ids, which
	// the host checks against Meta.Vocab before the device reads them
	// (tokens.go); "" when the input holds none.
	TokenLayer string

	TrainOutput, TrainLoss Region
	EvalInput, EvalOutput  Region
	OneInput, OneOutput    Region

	// CopyOutput copies the training prediction into ArenaLogits inside
	// the training step, before the backward pass reuses its storage.
	CopyOutput Op

	TrainForward, TrainBackward, TrainUpdate []PlanStep
	EvalInfer, OneInfer                      []PlanStep
	// EvalFolds and OneFolds are how many of EvalInfer's and OneInfer's
	// first steps fold batch norms into the weights (fold.go): the Model
	// runs them only when the weights changed.
	EvalFolds, OneFolds int

	// GemmShapes are the distinct GEMMs of all plans, each checked against
	// cpu.Sgemm by selftest.
	GemmShapes []GemmShape

	// BF16Twins are the weights' bfloat16 twins, which bf16 GEMMs and
	// library convolutions read
	// (none in other programs).
	BF16Twins []BF16Twin

	// Resident, when set, lets the device keep the training set and run
	// many steps between host synchronisations (see resident.go).
	Resident *ResidentKernels

	// Decode, when set, is the KV-cache decode of a language model, which
	// makes the model an app.TokenModel (decode.go); DecodeWorkSize is
	// its arena, ArenaDecodeWork.
	Decode         *Decode
	DecodeWorkSize int

	// Gradients are the spans of the state arena that the backward pass
	// writes (every trainable param's gradient), in the order it finishes
	// them: what data-parallel training sums across GPUs between the
	// backward pass and the update.
	Gradients []Region
	// Replicas are the training plan lowered again at a share of the
	// batch, one per GPU count a data-parallel run of this program may use
	// (ascending); none where the backend makes none.
	Replicas []Replica

	// syncBN is a replica program's Replica.SyncBN, and noSyncBN its
	// NoSyncBN (ForGPUs).
	syncBN   []SyncStep
	noSyncBN string
}

// withSyncBN is a replica program (ForGPUs) with its batch norm steps
// synchronised; an error when the model has none, or its batch norms
// have no synchronised kernels (Replica.NoSyncBN).
func (p *Program) withSyncBN() (*Program, error) {
	if p.noSyncBN != "" {
		return nil, fmt.Errorf("--sync-bn: %s: %s", p.Meta.Name, p.noSyncBN)
	}
	if len(p.syncBN) == 0 {
		return nil, fmt.Errorf("--sync-bn: %s has no batch norm layer, so there are no statistics to synchronise", p.Meta.Name)
	}
	q := *p
	q.TrainForward, q.TrainBackward = slices.Clone(p.TrainForward), slices.Clone(p.TrainBackward)
	for _, s := range p.syncBN {
		dst := q.TrainForward
		if s.Backward {
			dst = q.TrainBackward
		}
		if s.Index < 0 || s.Index >= len(dst) || dst[s.Index].Layer != s.Step.Layer {
			return nil, fmt.Errorf("gpuhost: synchronised batch norm step %d of layer %s does not match the replica's tables (a bug in mlbuild's emitter)", s.Index, s.Step.Layer)
		}
		dst[s.Index] = s.Step
	}
	q.syncBN = nil
	return &q, nil
}

// Replica is the training plan at Batch/GPUs rows, for each of GPUs
// replicas of a data-parallel run: the training fields of Program at that
// batch. Its loss kernel divides by the global batch, so the sum of the
// replicas' gradients is the global mean's. Its steps have no CPU
// references (selftest checks the program's own plan); the state arena is
// the program's.
type Replica struct {
	GPUs int

	TrainWorkSize, TrainInputSize, TrainLabelsSize, OutputSize int

	TrainOutput, TrainLoss Region
	CopyOutput             Op

	TrainForward, TrainBackward, TrainUpdate []PlanStep
	Resident                                 *ResidentKernels

	// SyncBN are the batch norm steps lowered with synchronised batch
	// norm (train --sync-bn), which replace the steps of the same index;
	// none when the model has no batch norm.
	SyncBN []SyncStep
	// NoSyncBN, where set, says why a model with batch norms has no
	// SyncBN, for --sync-bn's error.
	NoSyncBN string
}

// SyncStep is one step of a replica with synchronised batch norm: it
// replaces forward (or, with Backward, backward) step Index. Its Ops sum
// the statistics over the replicas at a collective point (Op.Sum).
type SyncStep struct {
	Backward bool
	Index    int
	Step     PlanStep
}

// ReplicaGPUs lists the GPU counts the program trains on: 1 and its
// replicas'.
func (p *Program) ReplicaGPUs() []int {
	n := []int{1}
	for _, r := range p.Replicas {
		n = append(n, r.GPUs)
	}
	return n
}

// ForGPUs is the program one of n replicas runs: p with its training
// tables replaced by the replica's and Meta's batch by the share (p itself
// for n = 1). A count the program has no tables for is an error listing
// the counts it has.
func (p *Program) ForGPUs(n int) (*Program, error) {
	if n == 1 {
		return p, nil
	}
	for i := range p.Replicas {
		r := &p.Replicas[i]
		if r.GPUs != n {
			continue
		}
		q := *p
		meta := *p.Meta
		meta.Batch = p.Meta.Batch / n
		q.Meta = &meta
		q.TrainWorkSize, q.TrainInputSize, q.TrainLabelsSize, q.OutputSize = r.TrainWorkSize, r.TrainInputSize, r.TrainLabelsSize, r.OutputSize
		q.TrainOutput, q.TrainLoss, q.CopyOutput = r.TrainOutput, r.TrainLoss, r.CopyOutput
		q.TrainForward, q.TrainBackward, q.TrainUpdate, q.Resident = r.TrainForward, r.TrainBackward, r.TrainUpdate, r.Resident
		q.Replicas, q.syncBN, q.noSyncBN = nil, r.SyncBN, r.NoSyncBN
		q.Decode, q.DecodeWorkSize = nil, 0 // replicas train; generate runs on one GPU
		return &q, nil
	}
	var have []string
	for _, g := range p.ReplicaGPUs() {
		have = append(have, strconv.Itoa(g))
	}
	return nil, fmt.Errorf("this program trains on %s GPU(s), not %d: each GPU trains on an equal share of the global batch of %d, "+
		"and the program holds the tables of a share only for those counts (CUDA programs: 2, 4 and 8 where they divide the batch)",
		strings.Join(have, " or "), n, p.Meta.Batch)
}
