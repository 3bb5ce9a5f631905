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

// Build plans m for opts.Target: it runs the passes in order (lower, add
// the loss, fuse, differentiate, optimize, choose methods and precisions, fuse pools into
// convolutions, measure costs, assign buffers) and checks the plan's invariants with Verify after each
// one, so that a bug in one pass is reported at that pass and not as a
// wrong number at run time.
func Build(m *spec.Model, opts Options) (*Plan, error) {
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
	target := opts.Target
	if target.Conv == nil {
		target = CPU
	}
	p, err := lower(m, batch, opts.Training)
	if err != nil {
		return nil, err
	}
	check := func(pass string) error {
		if err := Verify(p); err != nil {
			return positioned(m, fmt.Errorf("planner: invalid plan after %s (a bug in mlbuild): %w", pass, err))
		}
		return nil
	}
	p.Fusion = opts.Fusion
	if err := check("lower"); err != nil {
		return nil, err
	}
	if opts.Training {
		if err := addLoss(p, m); err != nil {
			return nil, err
		}
		if err := check("addLoss"); err != nil {
			return nil, err
		}
	}
	if opts.Fusion {
		fuseEpilogue(p)
		if err := check("fuseEpilogue"); err != nil {
			return nil, err
		}
		fuseElementwise(p)
		if err := check("fuseElementwise"); err != nil {
			return nil, err
		}
	}
	if opts.Training {
		differentiate(p)
		if err := check("differentiate"); err != nil {
			return nil, err
		}
		if err := optimize(p, m.Training.Optimizer); err != nil {
			return nil, positioned(m, err)
		}
		if err := check("optimize"); err != nil {
			return nil, err
		}
		fuseUpdate(p, target)
		if err := check("fuseUpdate"); err != nil {
			return nil, err
		}
		if opts.Fusion {
			fuseActBwd(p, target)
			if err := check("fuseActBwd"); err != nil {
				return nil, err
			}
		}
	}
	if err := chooseMethods(p, target); err != nil {
		return nil, positioned(m, err)
	}
	if err := check("chooseMethods"); err != nil {
		return nil, err
	}
	p.Precision = m.Precision
	if err := choosePrecisions(p, target); err != nil {
		return nil, positioned(m, err)
	}
	if err := check("choosePrecisions"); err != nil {
		return nil, err
	}
	if opts.Fusion {
		fusePool(p, target)
		if err := check("fusePool"); err != nil {
			return nil, err
		}
	}
	if err := measureCosts(p); err != nil {
		return nil, positioned(m, err)
	}
	if err := assignBuffers(p, opts.MemoryLimit, opts.MemoryLimitSource); err != nil {
		return nil, positioned(m, err)
	}
	if err := check("assignBuffers"); err != nil {
		return nil, err
	}
	return p, nil
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
