package gpuhost

import (
	"errors"
	"fmt"
)

// Collective points inside a data-parallel step. A replica's training
// step is recorded not as one sequence but as parts, each a recorded
// segment of the step's ops followed by the sums that must happen there:
//
//	(advance, gather,) forward … [sums of a batch norm's statistics] … forward, copy of the prediction,
//	backward … [start the sums of bucket 0] … backward … [start bucket 1] … backward,
//	[join] update (, record)
//
// A bucket of gradients (Buckets over Program.Gradients) is started with
// StartAllReduce right after the backward step that last touches any of
// its bytes, so its sums run while the rest of the backward pass computes;
// the update is launched after Join, so it reads every sum. The sums of a
// synchronised batch norm (an Op with Sum set) are AllReduce in the
// stream: the next op needs them. Every rank records the same parts from
// the same tables, so the ranks make the same collective calls in the same
// order.
//
// The segments are CUDA graphs (or Metal command buffers) and the NCCL
// calls go between them, not into the graphs: see docs/distributed.md for
// why.

// stepPart is one part of a data-parallel step: Join first when update is
// set, then the segment (nil when empty), then its sums (none at the end).
type stepPart struct {
	seq     Sequence
	sums    []Arg
	overlap bool // StartAllReduce (joined before the update); else AllReduce
	update  bool // the update's segment: Join before it
}

// dataParallel is what a replica of a data-parallel run records its steps
// around (Model.dp; nil on one GPU).
type dataParallel struct {
	// bucketBytes bounds a bucket (DefaultBucketBytes unless a test sets
	// another).
	bucketBytes int
	// afterBackward starts every bucket after the backward pass (no
	// overlap), as a test's reference.
	afterBackward bool
	// host is the host-fed step's parts.
	host []stepPart
}

// stepItem is one op of a step being cut into parts, or a collective
// point (encode nil).
type stepItem struct {
	encode  func(Encoder) error
	sums    []Arg
	overlap bool
	update  bool
}

// launchParts launches a step's parts on one rank; with update false it
// stops before the update (gradients only). It does not wait.
func launchParts(parts []stepPart, c Collective, update bool) error {
	for _, p := range parts {
		if p.update {
			if !update {
				return nil
			}
			if err := c.Join(); err != nil {
				return err
			}
		}
		if p.seq != nil {
			if err := p.seq.Launch(); err != nil {
				return err
			}
		}
		if len(p.sums) == 0 {
			continue
		}
		var err error
		if p.overlap {
			err = c.StartAllReduce(p.sums)
		} else {
			err = c.AllReduce(p.sums)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// recordParts records items as parts named after name.
func (m *Model) recordParts(name string, items []stepItem) ([]stepPart, error) {
	var parts []stepPart
	var cur []func(Encoder) error
	update := false
	flush := func(sums []Arg, overlap bool) error {
		p := stepPart{sums: sums, overlap: overlap, update: update}
		update = false
		if len(cur) > 0 {
			ops := cur
			seq, err := m.d.Record(fmt.Sprintf("%s, part %d", name, len(parts)+1), func(enc Encoder) error {
				for _, f := range ops {
					if err := f(enc); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			p.seq = seq
		}
		cur = nil
		if p.seq != nil || len(p.sums) > 0 || p.update {
			parts = append(parts, p)
		}
		return nil
	}
	for _, it := range items {
		switch {
		case it.encode != nil:
			cur = append(cur, it.encode)
		case it.update:
			if err := flush(nil, false); err != nil {
				return nil, err
			}
			update = true
		default:
			if err := flush(it.sums, it.overlap); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(nil, false); err != nil {
		return nil, err
	}
	return parts, nil
}

// stepItems lists the ops of a replica's training step with its
// collective points: head, the forward pass (a batch norm's sums where an
// Op has Sum set), the copy of the prediction, the backward pass with
// each bucket started after the step that last touches it, the join, the
// update and tail.
func (m *Model) stepItems(head, tail []func(Encoder) error) ([]stepItem, error) {
	p := m.p
	var items []stepItem
	for _, f := range head {
		items = append(items, stepItem{encode: f})
	}
	steps := func(sts []PlanStep) {
		for i := range sts {
			st := &sts[i]
			for j := range st.Ops {
				op := &st.Ops[j]
				if op.Sum {
					items = append(items, stepItem{sums: m.argsOf(op.Binds)})
					continue
				}
				items = append(items, stepItem{encode: func(enc Encoder) error {
					if err := m.encode(enc, op); err != nil {
						return fmt.Errorf("step %q, op %d: %w", st.Name, j, err)
					}
					return nil
				}})
			}
		}
	}
	steps(p.TrainForward)
	items = append(items, stepItem{encode: func(enc Encoder) error { return m.encode(enc, &p.CopyOutput) }})
	buckets, err := m.gradientBuckets()
	if err != nil {
		return nil, err
	}
	ready := bucketsReady(p.TrainBackward, buckets)
	if m.dp.afterBackward {
		for k := range ready {
			ready[k] = len(p.TrainBackward) - 1
		}
	}
	next := 0
	start := func(after int) {
		k := next
		for next < len(buckets) && ready[next] <= after {
			next++
		}
		if next > k {
			items = append(items, stepItem{sums: buckets[k:next], overlap: true})
		}
	}
	start(-1)
	for i := range p.TrainBackward {
		steps(p.TrainBackward[i : i+1])
		start(i)
	}
	items = append(items, stepItem{update: true})
	steps(p.TrainUpdate)
	for _, f := range tail {
		items = append(items, stepItem{encode: f})
	}
	return items, nil
}

// argsOf is binds as a device's buffer arguments.
func (m *Model) argsOf(binds []Bind) []Arg {
	out := make([]Arg, len(binds))
	for i, b := range binds {
		out[i] = Arg{Buf: m.bufs[b.Arena], Offset: b.Offset, Bytes: b.Bytes}
	}
	return out
}

// gradientBuckets cuts the program's gradients (less those a batch norm's
// sums already summed in the step) into buckets of m.dp.bucketBytes.
func (m *Model) gradientBuckets() ([]Arg, error) {
	p := m.p
	if len(p.Gradients) == 0 {
		return nil, errors.New("gpuhost: the program lists no gradients to sum across GPUs")
	}
	summed := map[[2]int]bool{}
	for _, sts := range [][]PlanStep{p.TrainForward, p.TrainBackward} {
		for _, st := range sts {
			for _, op := range st.Ops {
				for _, b := range op.Binds {
					if op.Sum && b.Arena == ArenaState {
						summed[[2]int{b.Offset, b.Bytes}] = true
					}
				}
			}
		}
	}
	var spans []Arg
	for _, g := range p.Gradients {
		if summed[[2]int{4 * g.Offset, 4 * g.Size}] {
			continue
		}
		spans = append(spans, Arg{Buf: m.bufs[ArenaState], Offset: 4 * g.Offset, Bytes: 4 * g.Size})
	}
	return Buckets(spans, m.dp.bucketBytes)
}

// bucketsReady gives each bucket (of the state arena) the index of the
// last backward step with an op that touches any of its bytes (−1: none),
// made non-decreasing so that buckets start in their order on every rank.
func bucketsReady(backward []PlanStep, buckets []Arg) []int {
	ready := make([]int, len(buckets))
	for k, b := range buckets {
		ready[k] = -1
		for i := range backward {
			if stepTouches(&backward[i], b.Offset, b.Offset+b.Bytes) {
				ready[k] = i
			}
		}
		if k > 0 {
			ready[k] = max(ready[k], ready[k-1])
		}
	}
	return ready
}

// stepTouches says whether an op of st reads or writes bytes lo to hi of
// the state arena.
func stepTouches(st *PlanStep, lo, hi int) bool {
	for _, b := range st.spans() {
		if b.Arena == ArenaState && b.Offset < hi && lo < b.Offset+b.Bytes {
			return true
		}
	}
	return false
}

// spans lists the bytes of the arenas that st's ops may read or write: each
// kernel's buffer arguments, each library convolution's tensors (with its
// epilogue's Bias and Z), and each GEMM operand from its first element to
// its last (the rows between, and the matrices of a batch), so a span may
// hold bytes the op skips but never misses one it touches.
func (st *PlanStep) spans() []Bind {
	var out []Bind
	for _, op := range st.Ops {
		out = append(out, op.Binds...)
		if c := op.Conv; c != nil {
			out = append(out, c.X, c.W, c.Y)
			for _, b := range []*Bind{c.Bias, c.Z} {
				if b != nil {
					out = append(out, *b)
				}
			}
		}
		g := op.Gemm
		if g == nil {
			continue
		}
		s := g.Shape
		batch := max(s.Batch, 1)
		for i, x := range []struct {
			m          Matrix
			rows, cols int
			size       int
		}{
			{g.A, pick(s.TransA, s.K, s.M), pick(s.TransA, s.M, s.K), g.Elem.Size()},
			{g.B, pick(s.TransB, s.N, s.K), pick(s.TransB, s.K, s.N), g.Elem.Size()},
			{g.C, s.M, s.N, 4},
		} {
			size := max(x.size, 1)
			row := x.m.RowBytes
			if row == 0 {
				row = size * x.cols
			}
			out = append(out, Bind{Arena: x.m.Arena, Offset: x.m.Offset, Bytes: (x.rows-1)*row + size*x.cols + (batch-1)*g.MatrixBytes[i]})
		}
	}
	return out
}

// pick is a if c, else b.
func pick(c bool, a, b int) int {
	if c {
		return a
	}
	return b
}
