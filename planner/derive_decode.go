package planner

import (
	"fmt"
	"math"
)

// deriveDecode is not in the passes table: it does not change a plan but
// derives a second one from it, as the emitter asks (DeriveDecode).

// Kernels of a decode plan (DeriveDecode), which no other plan holds.
const (
	// KDecodeEmbedding: y = weight[id] (+ pos[p]) for the one new
	// position p, which the program sets before the step runs. In: id
	// [1,1], weight [V,D], pos [T,D] (optional). Out: y [1,1,D].
	KDecodeEmbedding Kernel = "decode_embedding"
	// KAttendCached: causal attention of the new position p over the
	// positions 0..p: it writes the new key and value rows at row p of
	// the caches, then for each head h the scores Alpha·q_h·k_h[j] for
	// j ≤ p, their softmax, and y_h = Σ_j softmax_j·v_h[j].
	// In: q, k, v [1,1,H,hd] (the new position's projections).
	// Out: y [1,1,H,hd], kcache, vcache [T,H,hd] (kept across calls).
	// Attr: Alpha (the scale of the scores).
	KAttendCached Kernel = "attend_cached"
)

// Decode is a one-position plan of a language model and what its program
// needs to run it.
type Decode struct {
	// Plan computes one new position p: its steps read and write rows
	// ([1,1,...]) where the full plan has [1,T,...], and its attention
	// steps (KAttendCached) read the earlier positions' keys and values
	// from cache buffers. Forward[:Tail] run for every new position
	// (they feed a cache or the tail); Forward[Tail:] compute the output
	// of the last position alone. Plan.Output is the logits row ([1,1,V]).
	Plan *Plan
	Tail int
	// Context is T, the most positions; Caches lists the cache buffers.
	Context int
	Caches  []BufID
	// Fills are where the full plan computes each cache's rows, in
	// Caches' order: a program may fill the caches from one forward pass
	// of the full plan over a window (a batched prefill) rather than a
	// position at a time.
	Fills []CacheFill
	// Padded says that the model's attention masks the keys whose token
	// id is PadID. The decode plan does not: a program generating text
	// never feeds that id (it refuses a model whose padding id is a token,
	// and stops when it draws the padding id), so no cached key is ever
	// padding.
	Padded bool
	PadID  int
}

// CacheFill is where the full plan holds one cache's rows: after its
// step After, its buffer Buf ([1,T,H,hd]) holds every position's keys
// (or values) in the cache's layout [T,H,hd], until a later step reuses
// its storage.
type CacheFill struct {
	After int
	Buf   BufID
}

// DeriveDecode derives the one-position decode plan of p, the batch-1
// inference plan of a model whose input is a token sequence: what lets
// its program generate a token with one position's work instead of a
// forward pass over the whole context (a KV cache).
//
// Before: p is a verified batch-1 inference plan. After (when no error):
// the returned plan holds, in p's order, every position-wise step of p
// (embedding, layernorm over a position's features, dense, element-wise
// ops, add) on the new position's row, and each causal attention of p —
// matmul(q·kᵀ) → (mulconst) → causal softmax → (dropout) → matmul(·v) →
// transpose back, or the one causal attention step a target with fused
// attention kernels has in their place (fuse_attention.go), whose q, k
// and v are transposes of one row of [T,H,hd] views — as one
// KAttendCached step over per-layer caches. Its params
// are p's (same names); its work buffers have offsets of their own (each
// its storage: a row is small; the caches persist). An error says what
// the pass did not recognise; the program then generates with the full
// forward pass.
func DeriveDecode(p *Plan) (*Decode, error) {
	if p.Training || p.Batch != 1 {
		return nil, fmt.Errorf("not a batch-1 inference plan")
	}
	if len(p.Forward) == 0 || p.Forward[0].Kernel != KEmbedding || p.Forward[0].In[0] != p.Input {
		return nil, fmt.Errorf("the input is not a token sequence read by an embedding")
	}
	in := p.Buffers[p.Input].Shape
	if len(in) != 2 {
		return nil, fmt.Errorf("the input %v is not [1,T]", in)
	}
	d := &decoder{p: p, T: in[1], rows: map[BufID]BufID{}, producer: map[BufID]int{}, readers: map[BufID][]int{}}
	d.q = &Plan{Model: p.Model, Batch: 1, Fusion: p.Fusion, Precision: p.Precision, Labels: NoBuf, Loss: NoBuf}
	for i, s := range p.Forward {
		for _, o := range s.Out {
			if o != NoBuf {
				d.producer[d.root(o)] = i
			}
		}
		for _, b := range s.In {
			if b != NoBuf {
				d.readers[d.root(b)] = append(d.readers[d.root(b)], i)
			}
		}
	}
	// Params keep their buffers' ids and state-arena places: a decode
	// step's weights are the full plan's.
	for _, b := range p.Buffers {
		if b.Arena == "state" {
			d.rows[b.ID] = d.add(b)
		}
	}
	for _, b := range d.q.Buffers {
		if b.AliasOf != NoBuf {
			d.q.Buffers[b.ID].AliasOf = d.rows[b.AliasOf]
		}
	}
	// The weights' bfloat16 twins stay twins (the update and the program
	// write them); the decode's rows have none.
	for _, t := range p.Twins {
		of, ok1 := d.rows[t.Of]
		tw, ok2 := d.rows[t.Twin]
		if ok1 && ok2 {
			d.q.Twins = append(d.q.Twins, Twin{Of: of, Twin: tw, Note: t.Note}) // a weight's: live throughout
		}
	}
	d.q.Params = nil
	for _, pr := range p.Params {
		pr.Buf, pr.Grad, pr.State = d.rows[pr.Buf], NoBuf, nil
		d.q.Params = append(d.q.Params, pr)
	}
	skip := make([]bool, len(p.Forward))
	tail := -1
	for i, s := range p.Forward {
		if skip[i] {
			continue
		}
		if s.Kernel == KTranspose {
			continue // an attention's head split, which attention checks and skips, or refused below
		}
		if err := d.step(i, s, skip, &tail); err != nil {
			return nil, fmt.Errorf("step %d (%s, layer %s): %v", i, s.Kernel, s.Layer, err)
		}
	}
	for i, s := range p.Forward {
		if s.Kernel == KTranspose && !skip[i] {
			return nil, fmt.Errorf("step %d (transpose, layer %s) is part of no causal attention", i, s.Layer)
		}
	}
	if tail < 0 {
		return nil, fmt.Errorf("no causal attention")
	}
	out, ok := d.rows[p.Output]
	if !ok {
		return nil, fmt.Errorf("the output is not computed position by position")
	}
	d.q.Output = out
	d.q.Input = d.rows[p.Input]
	d.q.WorkSize, d.q.NaiveWorkSize = d.work, d.work
	return &Decode{Plan: d.q, Tail: tail, Context: d.T, Caches: d.caches, Fills: d.fills, Padded: d.padded, PadID: d.padID}, nil
}

type decoder struct {
	p, q     *Plan
	T        int
	rows     map[BufID]BufID // p's buffer → q's (its row, or the same param)
	producer map[BufID]int   // p's storage buffer → the step that writes it
	readers  map[BufID][]int // p's storage buffer → the steps that read it (or a view of it)
	work     int
	caches   []BufID
	fills    []CacheFill
	// padded and padID: the padding mask of the attentions (one id for
	// all of them)
	padded bool
	padID  int
}

func (d *decoder) root(b BufID) BufID {
	for d.p.Buffers[b].AliasOf != NoBuf {
		b = d.p.Buffers[b].AliasOf
	}
	return b
}

// add appends b to q with a new id, placing a work buffer that owns
// storage after the others, at an offset aligned as assignBuffers aligns
// (Align): the GPU programs bind each buffer at its offset, and a GEMM
// or a kernel's vector access may need it aligned.
func (d *decoder) add(b Buffer) BufID {
	b.ID = BufID(len(d.q.Buffers))
	b.Shape = append([]int(nil), b.Shape...)
	b.Size = 1
	for _, n := range b.Shape {
		b.Size *= n
	}
	if b.Arena != "state" {
		b.Arena = "work"
		if b.AliasOf == NoBuf {
			b.Offset = d.work
			d.work += alignUp(b.Size)
		} else {
			b.Offset = d.q.Buffers[b.AliasOf].Offset
		}
	}
	d.q.Buffers = append(d.q.Buffers, b)
	return b.ID
}

// row returns q's row of p's position-wise buffer b: [1,T,rest] becomes
// [1,1,rest], [T,rest] (a dense step's view) [1,rest], [T] (a layernorm's
// statistics) [1].
func (d *decoder) row(b BufID) (BufID, error) {
	if r, ok := d.rows[b]; ok {
		return r, nil
	}
	buf := d.p.Buffers[b]
	var shape []int
	switch s := buf.Shape; {
	case len(s) >= 2 && s[0] == 1 && s[1] == d.T:
		shape = append([]int{1, 1}, s[2:]...)
	case len(s) >= 1 && s[0] == d.T:
		shape = append([]int{1}, s[1:]...)
	default:
		return NoBuf, fmt.Errorf("%s %v is not one row per position", buf.Name, s)
	}
	nb := buf
	nb.Shape = shape
	if buf.AliasOf != NoBuf {
		a, err := d.row(buf.AliasOf)
		if err != nil {
			return NoBuf, err
		}
		nb.AliasOf = a
	}
	r := d.add(nb)
	d.rows[b] = r
	return r, nil
}

// operands maps a step's operands to their rows (NoBuf stays NoBuf).
func (d *decoder) operands(ids []BufID) ([]BufID, error) {
	out := make([]BufID, len(ids))
	for i, b := range ids {
		if b == NoBuf {
			out[i] = NoBuf
			continue
		}
		r, err := d.row(b)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func (d *decoder) step(i int, s Step, skip []bool, tail *int) error {
	switch s.Kernel {
	case KEmbedding:
		if i != 0 {
			return fmt.Errorf("an embedding past the first step")
		}
		id, err := d.row(s.In[0])
		if err != nil {
			return err
		}
		out, err := d.operands(s.Out)
		if err != nil {
			return err
		}
		in := []BufID{id, d.rows[s.In[1]], NoBuf}
		if len(s.In) > 2 && s.In[2] != NoBuf {
			in[2] = d.rows[s.In[2]]
		}
		d.emit(Step{Kernel: KDecodeEmbedding, Layer: s.Layer, In: in, Out: out})
		return nil
	case KLayerNorm, KSoftmax, KLogSoftmax:
		if len(d.p.Buffers[s.In[0]].Shape) < 3 || s.Attr.Axis < 2 || s.Attr.Causal {
			return fmt.Errorf("does not work within one position")
		}
	case KGemm, KUnary, KBinary, KDropout:
		for _, b := range s.In {
			if b != NoBuf && d.p.Buffers[b].Arena == "state" {
				continue
			}
			if b != NoBuf && d.p.Buffers[b].Size != d.p.Buffers[s.Out[0]].Size && s.Kernel == KBinary {
				return fmt.Errorf("broadcasts over positions")
			}
		}
	case KMatMul:
		return d.attention(i, s, skip, tail)
	case KAttention:
		return d.fusedAttention(s, skip, tail)
	default:
		return fmt.Errorf("not a position-wise step")
	}
	in, err := d.operands(s.In)
	if err != nil {
		return err
	}
	out, err := d.operands(s.Out)
	if err != nil {
		return err
	}
	st := s
	st.In, st.Out = in, out
	d.emit(st)
	return nil
}

func (d *decoder) emit(s Step) { d.q.Forward = append(d.q.Forward, s) }

// sole returns the one step that reads p's buffer b (or a view of it).
func (d *decoder) sole(b BufID) (int, bool) {
	r := d.readers[d.root(b)]
	if len(r) != 1 {
		return 0, false
	}
	return r[0], true
}

// headSplit checks that b is written by a transpose of perm of a
// [1,T,H,hd] view of a position-wise buffer, read by nothing else, and
// returns that view and the transpose's index.
func (d *decoder) headSplit(b BufID, perm []int) (BufID, int, error) {
	j, ok := d.producer[d.root(b)]
	if !ok || d.p.Forward[j].Kernel != KTranspose || !equalShapes(d.p.Forward[j].Attr.Perm, perm) {
		return NoBuf, 0, fmt.Errorf("%s is not a transpose %v of the heads", d.p.Buffers[b].Name, perm)
	}
	v := d.p.Forward[j].In[0]
	if s := d.p.Buffers[v].Shape; len(s) != 4 || s[0] != 1 || s[1] != d.T {
		return NoBuf, 0, fmt.Errorf("%s %v is not [1,T,heads,hd]", d.p.Buffers[v].Name, s)
	}
	if r, ok := d.sole(v); !ok || r != j {
		return NoBuf, 0, fmt.Errorf("%s is read by other steps too", d.p.Buffers[v].Name)
	}
	return v, j, nil
}

// attention recognises a causal attention from its first matmul (q·kᵀ)
// and writes it as one KAttendCached step, marking its other steps
// (transposes, scale, softmax, dropout, the second matmul, the merging
// transpose) to skip. The transposes of q, k and v came earlier and were
// not written: step leaves a transpose to this function, and a transpose
// that is part of no attention stays unwritten, its readers refused.
func (d *decoder) attention(i int, s Step, skip []bool, tail *int) error {
	fw := d.p.Forward
	q, tq, err := d.headSplit(s.In[0], []int{0, 2, 1, 3})
	if err != nil {
		return err
	}
	k, tk, err := d.headSplit(s.In[1], []int{0, 2, 3, 1})
	if err != nil {
		return err
	}
	used := []int{tq, tk}
	next := func(b BufID) (int, Step, error) {
		j, ok := d.sole(b)
		if !ok {
			return 0, Step{}, fmt.Errorf("%s is not read by one step", d.p.Buffers[b].Name)
		}
		return j, fw[j], nil
	}
	scale := 1.0
	j, st, err := next(s.Out[0])
	if err != nil {
		return err
	}
	if st.Kernel == KUnary && len(st.Attr.Chain) == 1 && st.Attr.Chain[0].Op == "mulconst" {
		scale = st.Attr.Chain[0].Alpha
		used = append(used, j)
		if j, st, err = next(st.Out[0]); err != nil {
			return err
		}
	}
	if st.Kernel != KSoftmax || !st.Attr.Causal {
		return fmt.Errorf("q·kᵀ is not followed by a causal softmax")
	}
	if err := d.padding(st.Attr); err != nil {
		return err
	}
	used = append(used, j)
	if j, st, err = next(st.Out[0]); err != nil {
		return err
	}
	if st.Kernel == KDropout {
		used = append(used, j)
		if j, st, err = next(st.Out[0]); err != nil {
			return err
		}
	}
	if st.Kernel != KMatMul || d.root(st.In[1]) == d.root(st.Out[0]) {
		return fmt.Errorf("the attention probabilities are not multiplied by v")
	}
	used = append(used, j)
	v, tv, err := d.headSplit(st.In[1], []int{0, 2, 1, 3})
	if err != nil {
		return err
	}
	used = append(used, tv)
	return d.attendCached(s.Layer, q, k, v, st.Out[0], scale, used, tk, tv, skip, tail)
}

// fusedAttention writes a causal fused attention step (KAttention, which
// a target with fused attention kernels plans: fuse_attention.go) as one
// KAttendCached step, as attention does the unfused steps it replaced.
func (d *decoder) fusedAttention(s Step, skip []bool, tail *int) error {
	if !s.Attr.Causal {
		return fmt.Errorf("an attention without the causal mask")
	}
	if err := d.padding(s.Attr); err != nil {
		return err
	}
	q, tq, err := d.headSplit(s.In[0], []int{0, 2, 1, 3})
	if err != nil {
		return err
	}
	k, tk, err := d.headSplit(s.In[1], []int{0, 2, 3, 1})
	if err != nil {
		return err
	}
	v, tv, err := d.headSplit(s.In[2], []int{0, 2, 1, 3})
	if err != nil {
		return err
	}
	return d.attendCached(s.Layer, q, k, v, s.Out[0], s.Attr.Scale, []int{tq, tk, tv}, tk, tv, skip, tail)
}

// padding records the padding mask of an attention whose steps a's
// attributes belong to: a decode plan drops the mask (Decode.Padded says
// why), so every attention must mask the same id or none.
func (d *decoder) padding(a Attr) error {
	first := len(d.caches) == 0
	switch {
	case !first && a.Padding != d.padded:
		return fmt.Errorf("one attention masks padding and another does not")
	case !first && a.PadID != d.padID:
		return fmt.Errorf("the attentions mask different padding ids (%d and %d)", d.padID, a.PadID)
	}
	d.padded, d.padID = a.Padding, a.PadID
	return nil
}

// attendCached writes the KAttendCached step of an attention over the
// [1,T,H,hd] views q, k and v whose heads' output ctx [1,H,T,hd] a
// transpose merges back, and marks the forward steps used (and that
// transpose) to skip; tk and tv are the transposes that split k's and v's
// heads, after which the full plan's k and v fill the caches (prefill).
func (d *decoder) attendCached(layer string, q, k, v, ctx BufID, scale float64, used []int, tk, tv int, skip []bool, tail *int) error {
	j, ok := d.sole(ctx)
	if !ok {
		return fmt.Errorf("%s is not read by one step", d.p.Buffers[ctx].Name)
	}
	st := d.p.Forward[j]
	if st.Kernel != KTranspose || !equalShapes(st.Attr.Perm, []int{0, 2, 1, 3}) {
		return fmt.Errorf("the heads are not merged back by a transpose")
	}
	used = append(used, j)
	if math.IsNaN(scale) {
		return fmt.Errorf("the scale is NaN")
	}
	shape := d.p.Buffers[q].Shape
	if !equalShapes(d.p.Buffers[k].Shape, shape) || !equalShapes(d.p.Buffers[v].Shape, shape) {
		return fmt.Errorf("q, k and v differ in shape")
	}
	in, err := d.operands([]BufID{q, k, v})
	if err != nil {
		return err
	}
	y, err := d.row(st.Out[0])
	if err != nil {
		return err
	}
	var caches []BufID
	for _, n := range []string{"k", "v"} {
		c := d.add(Buffer{Name: layer + ".cache_" + n, Kind: KindActivation, Shape: []int{d.T, shape[2], shape[3]}, AliasOf: NoBuf})
		caches = append(caches, c)
	}
	d.caches = append(d.caches, caches...)
	// The transposes that read k and v are their last readers: right
	// after them k and v still hold every position's rows.
	d.fills = append(d.fills, CacheFill{After: tk, Buf: k}, CacheFill{After: tv, Buf: v})
	d.emit(Step{Kernel: KAttendCached, Layer: layer, In: in, Out: []BufID{y, caches[0], caches[1]}, Attr: Attr{Alpha: scale}})
	*tail = len(d.q.Forward)
	for _, u := range used {
		skip[u] = true
	}
	return nil
}
