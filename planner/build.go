package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// Options choose what kind of plan Build makes.
type Options struct {
	// Batch is the batch size every per-sample shape is planned for; 0 means
	// the spec's training batch size.
	Batch int
	// Training adds the loss, the backward pass and the optimizer updates;
	// false gives a forward-only inference plan (dropout is the identity,
	// batchnorm uses its running statistics).
	Training bool
	// Fusion runs the fusion passes; turning it off measures their effect.
	Fusion bool
	// KeepBatchNorm keeps an inference plan's batch norms as steps of
	// their own where the target would fold them into the layer before
	// (fold_batchnorm.go): turning folding off measures its effect.
	KeepBatchNorm bool
	// Target is the backend the plan is for: its rules choose each
	// convolution's method and scratch. The zero Target means CPU.
	Target Target
	// MemoryLimit is the most bytes the state and work arenas may take
	// together; 0 means no limit.
	MemoryLimit int64
	// MemoryLimitSource says where MemoryLimit comes from ("this machine's
	// memory", "the most a 32-bit program can address"), for the message
	// of a plan above it; empty says nothing.
	MemoryLimitSource string
}

// pass is one verb of the planner: a function in its own file whose doc
// comment says what holds before and after it.
type pass struct {
	name  string                // the function, as "invalid plan after NAME" reports it
	file  string                // the file that holds it and its contract
	only  condition             // the plans it runs for
	run   func(*building) error // calls the function with what it takes
	needs []string              // passes that must come before it in the table
}

// condition says which plans a pass runs for.
type condition uint8

const (
	everyPlan   condition = 0
	inTraining  condition = 1 << iota // Options.Training
	withFusion                        // Options.Fusion
	inInference                       // !Options.Training
)

// holds reports whether a pass with condition c runs for opts.
func (c condition) holds(opts Options) bool {
	return (c&inTraining == 0 || opts.Training) && (c&withFusion == 0 || opts.Fusion) && (c&inInference == 0 || !opts.Training)
}

// String names the condition as the pass table in docs/architecture.md does.
func (c condition) String() string {
	switch c {
	case everyPlan:
		return "every plan"
	case inTraining:
		return "training"
	case withFusion:
		return "fusion"
	case inTraining | withFusion:
		return "training, fusion"
	case inInference | withFusion:
		return "inference, fusion"
	}
	return fmt.Sprintf("condition(%d)", uint8(c))
}

// building is what the passes of one Build share.
type building struct {
	m      *spec.Model
	opts   Options
	target Target
	batch  int
	p      *Plan // nil until lower has run
}

// passes is the planner's pass order: Build runs them top to bottom, each
// where its condition holds, and Verify after each. A pass's needs are the
// passes whose After its Before relies on; TestPassOrder checks that each
// comes earlier in the table, and docs/architecture.md quotes the table.
var passes = [...]pass{
	{name: "lower", file: "lower.go", run: func(b *building) (err error) {
		b.p, err = lower(b.m, b.batch, b.opts.Training)
		if err == nil {
			b.p.Fusion = b.opts.Fusion
		}
		return err
	}},
	{name: "addLoss", file: "loss.go", only: inTraining, needs: []string{"lower"},
		run: func(b *building) error { return addLoss(b.p, b.m) }},
	{name: "foldBatchNorm", file: "fold_batchnorm.go", only: inInference | withFusion, needs: []string{"lower"},
		run: func(b *building) error { foldBatchNorm(b.p, b.target); return nil }},
	{name: "fuseEpilogue", file: "fuse_epilogue.go", only: withFusion, needs: []string{"lower", "foldBatchNorm"},
		run: func(b *building) error { fuseEpilogue(b.p); return nil }},
	{name: "fuseSiLU", file: "fuse_silu.go", only: withFusion, needs: []string{"lower"},
		run: func(b *building) error { fuseSiLU(b.p, b.target); return nil }},
	{name: "fuseReLU6", file: "fuse_relu6.go", only: withFusion, needs: []string{"lower", "fuseEpilogue"},
		run: func(b *building) error { fuseReLU6(b.p, b.target); return nil }},
	{name: "fuseSiLUEpilogue", file: "fuse_silu_epilogue.go", only: inInference | withFusion, needs: []string{"fuseEpilogue", "fuseSiLU"},
		run: func(b *building) error { fuseSiLUEpilogue(b.p, b.target); return nil }},
	{name: "fuseNormAct", file: "fuse_norm_act.go", only: withFusion, needs: []string{"lower", "foldBatchNorm", "fuseEpilogue"},
		run: func(b *building) error { fuseNormAct(b.p, b.target); return nil }},
	{name: "fuseElementwise", file: "fuse_elementwise.go", only: withFusion, needs: []string{"lower"},
		run: func(b *building) error { fuseElementwise(b.p); return nil }},
	{name: "fuseAttention", file: "fuse_attention.go", only: withFusion, needs: []string{"lower", "fuseElementwise"},
		run: func(b *building) error { fuseAttention(b.p, b.target); return nil }},
	{name: "fuseAttentionLayout", file: "fuse_attention_layout.go", only: inTraining | withFusion, needs: []string{"fuseAttention"},
		run: func(b *building) error { fuseAttentionLayout(b.p); return nil }},
	{name: "differentiate", file: "differentiate.go", only: inTraining, needs: []string{"addLoss", "fuseEpilogue", "fuseSiLU", "fuseReLU6", "fuseNormAct", "fuseElementwise", "fuseAttention", "fuseAttentionLayout"},
		run: func(b *building) error { differentiate(b.p); return nil }},
	{name: "optimize", file: "optimize.go", only: inTraining, needs: []string{"differentiate"},
		run: func(b *building) error { return optimize(b.p, b.m.Training.Optimizer, b.m.Training.ClipNorm) }},
	{name: "accumulate", file: "accumulate.go", only: inTraining, needs: []string{"optimize"},
		run: func(b *building) error { accumulate(b.p, b.m.Training.Accumulate); return nil }},
	{name: "fuseUpdate", file: "fuse_update.go", only: inTraining, needs: []string{"optimize"},
		run: func(b *building) error { fuseUpdate(b.p, b.target); return nil }},
	{name: "fuseActBwd", file: "fuse_act_bwd.go", only: inTraining | withFusion, needs: []string{"fuseEpilogue", "differentiate"},
		run: func(b *building) error { fuseActBwd(b.p, b.target); return nil }},
	{name: "keepLess", file: "keep_less.go", only: inTraining, needs: []string{"differentiate"},
		run: func(b *building) error { keepLess(b.p); return nil }},
	{name: "fuseSumAct", file: "fuse_sum_act.go", only: withFusion, needs: []string{"lower", "keepLess"},
		run: func(b *building) error { fuseSumAct(b.p, b.target); return nil }},
	{name: "fuseAccumulateGemm", file: "fuse_accumulate_gemm.go", only: inTraining | withFusion, needs: []string{"differentiate", "keepLess"},
		run: func(b *building) error { fuseAccumulateGemm(b.p, b.target); return nil }},
	{name: "fuseAccumulateNorm", file: "fuse_accumulate_norm.go", only: inTraining | withFusion, needs: []string{"differentiate", "keepLess"},
		run: func(b *building) error { fuseAccumulateNorm(b.p, b.target); return nil }},
	{name: "shareSumGrads", file: "share_sum_grads.go", only: inTraining | withFusion, needs: []string{"differentiate", "keepLess", "fuseAccumulateGemm", "fuseAccumulateNorm"},
		run: func(b *building) error { shareSumGrads(b.p, b.target); return nil }},
	{name: "fuseAccumulateAct", file: "fuse_accumulate_act.go", only: inTraining | withFusion, needs: []string{"differentiate", "keepLess", "fuseAccumulateGemm", "fuseAccumulateNorm", "shareSumGrads"},
		run: func(b *building) error { fuseAccumulateAct(b.p, b.target); return nil }},
	{name: "chooseMethods", file: "choose_methods.go", needs: []string{"lower", "differentiate"},
		run: func(b *building) error { return chooseMethods(b.p, b.target, b.m.Precision) }},
	{name: "choosePrecisions", file: "choose_precisions.go", needs: []string{"lower", "differentiate", "chooseMethods"},
		run: func(b *building) error {
			b.p.Precision = b.m.Precision
			return choosePrecisions(b.p, b.target)
		}},
	{name: "chooseLossRows", file: "choose_loss_rows.go", only: inTraining, needs: []string{"addLoss", "differentiate"},
		run: func(b *building) error { chooseLossRows(b.p, b.target); return nil }},
	{name: "fusePool", file: "fuse_pool.go", only: withFusion, needs: []string{"fuseEpilogue", "fuseElementwise", "fuseActBwd", "chooseMethods"},
		run: func(b *building) error { fusePool(b.p, b.target); return nil }},
	{name: "fuseConvSum", file: "fuse_conv_sum.go", only: inInference | withFusion, needs: []string{"fuseSumAct", "chooseMethods", "fusePool"},
		run: func(b *building) error { fuseConvSum(b.p, b.target); return nil }},
	{name: "fuseNormSum", file: "fuse_norm_sum.go", only: inTraining | withFusion, needs: []string{"fuseSumAct", "shareSumGrads", "choosePrecisions"},
		run: func(b *building) error { fuseNormSum(b.p, b.target); return nil }},
	{name: "castInput", file: "cast_input.go", needs: []string{"chooseMethods", "choosePrecisions", "fuseConvSum"},
		run: func(b *building) error { castInput(b.p, b.target); return nil }},
	{name: "twinOperands", file: "twin_operands.go", needs: []string{"choosePrecisions", "fuseUpdate", "fusePool"},
		run: func(b *building) error { twinOperands(b.p, b.target); return nil }},
	{name: "storeBF16", file: "store_bf16.go", needs: []string{"twinOperands"},
		run: func(b *building) error { storeBF16(b.p, b.target); return nil }},
	{name: "storeChannelsLast", file: "store_channels_last.go", needs: []string{"storeBF16"},
		run: func(b *building) error { storeChannelsLast(b.p, b.target); return nil }},
	{name: "measureCosts", file: "measure_costs.go", needs: finalPhases,
		run: func(b *building) error { return measureCosts(b.p) }},
	{name: "assignBuffers", file: "assign_buffers.go", needs: finalPhases,
		run: func(b *building) error { return assignBuffers(b.p, b.opts.MemoryLimit, b.opts.MemoryLimitSource) }},
}

// finalPhases are the passes that add or rewrite steps or buffers: after
// them "all phases are final".
var finalPhases = []string{"lower", "addLoss", "foldBatchNorm", "fuseEpilogue", "fuseSiLU", "fuseReLU6", "fuseSiLUEpilogue", "fuseNormAct", "fuseElementwise", "fuseAttention", "fuseAttentionLayout", "differentiate", "optimize",
	"accumulate", "fuseUpdate", "fuseActBwd", "keepLess", "fuseSumAct", "fuseAccumulateGemm", "fuseAccumulateNorm", "shareSumGrads", "fuseAccumulateAct", "chooseMethods", "choosePrecisions", "chooseLossRows", "fusePool", "fuseConvSum", "fuseNormSum", "castInput", "twinOperands", "storeBF16", "storeChannelsLast"}

// Build plans m for opts.Target: it runs the table passes in order and
// checks the plan's invariants with Verify after each one, so
// that a bug in one pass is reported at that pass and not as a wrong
// number at run time.
func Build(m *spec.Model, opts Options) (*Plan, error) {
	return buildPlan(m, opts, nil)
}

// buildPlan is Build; after each pass that ran and verified, it calls ran (when
// not nil) with the pass's name, so a test can see what Build runs.
func buildPlan(m *spec.Model, opts Options, ran func(pass string)) (*Plan, error) {
	if m == nil || len(m.Nodes) == 0 {
		return nil, fmt.Errorf("planner: the model has no layers")
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = m.Training.BatchSize
	}
	if batch <= 0 {
		return nil, &spec.Error{Pos: m.Nodes[0].Pos, Layer: m.Nodes[0].Name,
			Message: "no batch size: the spec's training.batchSize is not set and none was given"}
	}
	// Every size the plan computes is within the bounds at this batch,
	// which a command line may set apart from the spec's.
	if err := spec.CheckLimitsAt(m, batch); err != nil {
		return nil, err
	}
	b := &building{m: m, opts: opts, target: opts.Target, batch: batch}
	if b.target.Conv == nil {
		b.target = CPU
	}
	if opts.KeepBatchNorm {
		b.target.FoldBatchNorm, b.target.NoFoldWhy = false, ""
	}
	for _, ps := range passes {
		if !ps.only.holds(opts) {
			continue
		}
		if err := ps.run(b); err != nil {
			return nil, positioned(m, err)
		}
		if err := Verify(b.p); err != nil {
			return nil, positioned(m, fmt.Errorf("planner: invalid plan after %s (a bug in mlbuild): %w", ps.name, err))
		}
		if ran != nil {
			ran(ps.name)
		}
	}
	return b.p, nil
}

// positioned fills in the spec position of a *spec.Error the planner made
// (or of a *StepError's layer) so that messages point at the user's file.
func positioned(m *spec.Model, err error) error {
	switch e := err.(type) {
	case *spec.Error:
		if e.Pos.File == "" {
			if n := m.Node(e.Layer); n != nil {
				e.Pos = n.Pos
			}
		}
		return e
	}
	if u, ok := err.(interface{ Unwrap() error }); ok {
		if se, ok := u.Unwrap().(*StepError); ok {
			if n := m.Node(se.Layer); n != nil && n.Pos.File != "" {
				return fmt.Errorf("%s:%d:%d: %w", n.Pos.File, n.Pos.Line, n.Pos.Col, err)
			}
		}
	}
	return err
}
