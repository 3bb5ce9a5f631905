package emit

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mlbuild/mlbuild/emit/gpu"
	"github.com/mlbuild/mlbuild/planner"
)

// Data-parallel training's tables (rt/gpuhost's replicated.go): a GPU
// program's tables are fixed to the plan's batch B, so a run on N GPUs,
// each training on B/N rows of every batch, needs the training plan again
// at B/N. The emitter plans and lowers it for each count of the device's
// replicas (CUDA: 2, 4 and 8) that divides B, with the loss divided by
// the global batch (gpu.LowerShareInto), and writes it as a
// gpuhost.Replica: the training fields of the program at that batch, with
// no CPU references (selftest checks the program's own plan). The state
// arena is the program's, which the replica plans must lay out alike (a
// check here). Program.Gradients lists the gradients' spans, which the
// host sums across the GPUs between backward and update.

// replicaPlan is one replica's training plan being rendered.
type replicaPlan struct {
	*gpuPlan
	copyName, resident string
	// syncBN are the batch norm steps lowered with synchronised batch
	// norm (gpu.LowerSyncBNInto), which `train --sync-bn` runs instead;
	// noSyncBN says why there are none for a plan with batch norms.
	syncBN   []syncStep
	noSyncBN string
}

// syncStep is one step of a replica's plan lowered with synchronised
// batch norm: the index of a forward (or backward) step and its ops.
type syncStep struct {
	backward bool
	index    int
	step     planner.Step
	ops      []gpu.Op
}

// replicaPlans plans, lowers and registers the kernels of every replica
// the device makes for this batch; none for a device without replicas.
func (g *gpuGen) replicaPlans() ([]*replicaPlan, error) {
	tp := g.in.Train
	if len(g.dev.replicas) == 0 || g.in.Model == nil {
		return nil, nil
	}
	if g.in.Model.Training.Accumulate > 1 {
		// The replicas' sums would add each rank's gradients before
		// they reach grad_sum at the end of the backward pass, while
		// accumulation adds them into it there: until the sums move
		// to the update's start, such a program trains on one GPU.
		return nil, nil
	}
	var out []*replicaPlan
	for _, n := range g.dev.replicas {
		if tp.Batch%n != 0 {
			continue
		}
		pl, err := planner.Build(g.in.Model, planner.Options{Training: true, Fusion: tp.Fusion, Batch: tp.Batch / n, Target: g.dev.target})
		if err != nil {
			return nil, fmt.Errorf("emit: planning the share of %d GPUs (batch %d): %w", n, tp.Batch/n, err)
		}
		if err := sameState(tp, pl); err != nil {
			return nil, fmt.Errorf("emit: the plan of the share of %d GPUs (batch %d) %v (a bug in mlbuild's planner)", n, pl.Batch, err)
		}
		mp := &gpuPlan{planView: &planView{prefix: fmt.Sprintf("r%d", n), plan: pl}, work: "arenaTrainWork", shares: n}
		if err := g.lower(mp); err != nil {
			return nil, err
		}
		rp := &replicaPlan{gpuPlan: mp}
		if why := channelsLastNorms(pl); why != "" {
			rp.noSyncBN = why
		} else if rp.syncBN, err = g.syncBNSteps(pl, n); err != nil {
			return nil, err
		}
		if rp.copyName, err = g.register(gpu.CopyKernel(pl.Buffers[pl.Output].Size), "copy_output"); err != nil {
			return nil, err
		}
		if rp.resident, err = g.residentKernels(pl); err != nil {
			return nil, err
		}
		out = append(out, rp)
	}
	return out, nil
}

// channelsLastNorms says why a plan's batch norms have no synchronised
// lowering: one names a tensor stored channels last (the planner's
// store_channels_last.go), which the synchronised kernels do not read;
// "" when none does.
func channelsLastNorms(pl *planner.Plan) string {
	for _, st := range append(slices.Clone(pl.Forward), pl.Backward...) {
		if st.Kernel != planner.KBatchNorm && st.Kernel != planner.KBatchNormBwd {
			continue
		}
		if id := pl.ChannelsLastOperand(st); id != planner.NoBuf {
			return fmt.Sprintf("batch norm %s reads or writes %s, which the bf16 plan stores channels last, and synchronised batch norm has no channels-last kernels yet: train without --sync-bn, or with precision f32 or tf32", st.Layer, pl.Buffers[id].Name)
		}
	}
	return ""
}

// syncBNSteps lowers the batch norm steps of a replica's plan with
// synchronised batch norm; none when the plan has no batch norm.
func (g *gpuGen) syncBNSteps(pl *planner.Plan, n int) ([]syncStep, error) {
	has := false
	for _, st := range pl.Forward {
		has = has || st.Kernel == planner.KBatchNorm
	}
	if !has {
		return nil, nil
	}
	prog, err := gpu.LowerSyncBNInto(g.lib, pl, n)
	if err != nil {
		return nil, fmt.Errorf("emit: lowering the share of %d GPUs with synchronised batch norm: %w", n, err)
	}
	var out []syncStep
	for i, st := range pl.Forward {
		if st.Kernel == planner.KBatchNorm {
			out = append(out, syncStep{false, i, st, prog.ForwardSteps[i]})
		}
	}
	for i, st := range pl.Backward {
		if st.Kernel == planner.KBatchNormBwd {
			out = append(out, syncStep{true, i, st, prog.BackwardSteps[i]})
		}
	}
	return out, nil
}

// sameState checks that a replica's plan lays out the state arena as the
// program's training plan does: its size and every param, gradient and
// optimizer state at the same offset, and every weight's bfloat16 twin
// at the same offset in the same order (its update kernels write them,
// the host writes them at the training plan's places).
func sameState(tp, pl *planner.Plan) error {
	if tp.StateSize != pl.StateSize || len(tp.Params) != len(pl.Params) {
		return fmt.Errorf("has a state arena of %d elements and %d params, the program's %d and %d", pl.StateSize, len(pl.Params), tp.StateSize, len(tp.Params))
	}
	off := func(p *planner.Plan, id planner.BufID) int {
		if id == planner.NoBuf {
			return -1
		}
		return p.Buffers[id].Offset
	}
	for i, a := range tp.Params {
		b := pl.Params[i]
		same := a.Name == b.Name && off(tp, a.Buf) == off(pl, b.Buf) && off(tp, a.Grad) == off(pl, b.Grad) && len(a.State) == len(b.State)
		for k := 0; same && k < len(a.State); k++ {
			same = off(tp, a.State[k]) == off(pl, b.State[k])
		}
		if !same {
			return fmt.Errorf("places param %s (or its gradient or optimizer state) elsewhere in the state arena", a.Name)
		}
	}
	twins := func(p *planner.Plan) []planner.Buffer {
		var out []planner.Buffer
		for _, t := range p.Twins {
			if b := p.Buffers[t.Twin]; b.Kind == planner.KindParamBF16 {
				out = append(out, b)
			}
		}
		return out
	}
	ta, tb := twins(tp), twins(pl)
	if len(ta) != len(tb) {
		return fmt.Errorf("has %d weights' bfloat16 twins, the program's %d", len(tb), len(ta))
	}
	for i, a := range ta {
		if b := tb[i]; a.Name != b.Name || a.Offset != b.Offset || a.Layout != b.Layout {
			return fmt.Errorf("places or orders the bfloat16 twin %s otherwise than the program's training plan (%s at %d, layout %q, against %d, %q)", a.Name, b.Name, b.Offset, b.Layout, a.Offset, a.Layout)
		}
	}
	return nil
}

// gradientRegions are the state arena's spans of the trainable params'
// gradients, in the order the backward pass last writes them (a param
// read twice gets its gradient summed: its last write finishes it).
func gradientRegions(tp *planner.Plan) []string {
	last := map[planner.BufID]int{}
	for i, st := range tp.Backward {
		for _, id := range st.Out {
			last[id] = i
		}
	}
	type span struct{ step, off, size int }
	var spans []span
	for _, p := range tp.Params {
		if !p.Trainable || p.Grad == planner.NoBuf {
			continue
		}
		b := tp.Buffers[p.Grad]
		spans = append(spans, span{last[p.Grad], b.Offset, b.Size})
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].step < spans[j].step })
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = fmt.Sprintf("{arenaState, %d, %d}", s.off, s.size)
	}
	return out
}

// renderReplicaFields writes the Program's Gradients and Replicas fields.
func (g *gpuGen) renderReplicaFields(replicas []*replicaPlan) error {
	g.p("// The gradients' spans, summed across GPUs in data-parallel training, in")
	g.p("// the order the backward pass finishes them.")
	g.p("Gradients: []region{%s},", strings.Join(gradientRegions(g.in.Train), ", "))
	g.p("// The training plan at each share of the batch that --gpus N may use.")
	g.p("Replicas: []gpuhost.Replica{")
	for _, r := range replicas {
		pl := r.plan
		outLoc, err := g.locate(r.gpuPlan, pl.Output)
		if err != nil {
			return err
		}
		lossLoc, err := g.locate(r.gpuPlan, pl.Loss)
		if err != nil {
			return err
		}
		outSize := pl.Buffers[pl.Output].Size
		g.p("{")
		g.p("GPUs: %d, // batch %d each", r.shares, pl.Batch)
		g.p("TrainWorkSize: %d, TrainInputSize: %d, TrainLabelsSize: %d, OutputSize: %d,", pl.WorkSize, pl.Buffers[pl.Input].Size, pl.Buffers[pl.Labels].Size, outSize)
		g.p("TrainOutput: region{%s, %d, %d}, TrainLoss: region{%s, %d, 1},", outLoc.arena, outLoc.off, outSize, lossLoc.arena, lossLoc.off)
		g.p("CopyOutput: op{Kernel: %q, Binds: []bind{{%s, %d, %d}, {arenaLogits, 0, %d}}, Groups: %d, Threadgroup: 256},",
			r.copyName, outLoc.arena, 4*outLoc.off, 4*outSize, 4*outSize, (outSize+255)/256)
		g.p("TrainForward: %sForward, TrainBackward: %sBackward, TrainUpdate: %sUpdate,", r.prefix, r.prefix, r.prefix)
		g.p("Resident: %s,", r.resident)
		if len(r.syncBN) > 0 {
			g.p("SyncBN: %sSyncBN,", r.prefix)
		}
		if r.noSyncBN != "" {
			g.p("NoSyncBN: %s,", quote(r.noSyncBN))
		}
		g.p("},")
	}
	g.p("},")
	return nil
}

// renderReplicaTables writes each replica's step tables.
func (g *gpuGen) renderReplicaTables(replicas []*replicaPlan) error {
	for _, r := range replicas {
		pl := r.plan
		for _, ph := range []struct {
			name, short string
			steps       planner.Phase
			ops         [][]gpu.Op
		}{
			{"Forward", "Fwd", pl.Forward, r.forward},
			{"Backward", "Bwd", pl.Backward, r.backward},
			{"Update", "Upd", pl.Update, r.update},
		} {
			g.p("// %s%s is the %s of the training plan at batch %d, the share of each of %d GPUs.", r.prefix, ph.name, strings.ToLower(ph.name), pl.Batch, r.shares)
			g.p("var %s%s = []step{", r.prefix, ph.name)
			for i, st := range ph.steps {
				_, entry, err := g.renderStep(r.gpuPlan, ph.short, i, st, ph.ops[i], true)
				if err != nil {
					return fmt.Errorf("emit: %s %s step %d (%s, layer %s): %v", r.prefix, strings.ToLower(ph.name), i, st.Kernel, st.Layer, err)
				}
				g.p("%s", entry)
			}
			g.p("}")
			g.p("")
		}
		if len(r.syncBN) == 0 {
			continue
		}
		g.p("// %sSyncBN are the batch norm steps of the share of %d GPUs with synchronised batch norm (train --sync-bn).", r.prefix, r.shares)
		g.p("var %sSyncBN = []gpuhost.SyncStep{", r.prefix)
		for _, s := range r.syncBN {
			short := "Fwd"
			if s.backward {
				short = "Bwd"
			}
			_, entry, err := g.renderStep(r.gpuPlan, short, s.index, s.step, s.ops, true)
			if err != nil {
				return fmt.Errorf("emit: %s synchronised batch norm step %d (layer %s): %v", r.prefix, s.index, s.step.Layer, err)
			}
			g.p("{Backward: %v, Index: %d, Step: step%s", s.backward, s.index, entry)
			g.p("},")
		}
		g.p("}")
		g.p("")
	}
	return nil
}
