package gpuhost

import (
	"fmt"

	"github.com/mlbuild/mlbuild/rt/app"
)

// Decode is the KV-cache decode of a language model: planner.DeriveDecode's
// one-position plan lowered for the GPU, over ArenaDecodeWork (the
// position's rows and every layer's key and value caches, which stay on
// the device). A token is one recorded sequence (one CUDA graph): the
// embedding of the new id at the position in StepArgs' ArgPos word, every
// layer with its cache update, and the head. The host uploads the id and
// the position and downloads the logits, nothing else.
type Decode struct {
	// Context is T, the most positions the caches hold.
	Context int
	// Input is the new position's id (one value); Output its logits.
	Input, Output Region
	// Step computes one position: every step that feeds a cache or the
	// head. Last computes the logits of the position Step computed.
	Step, Last []PlanStep
	// Fills make the one-sample inference (OneInfer) a prefill: each
	// copies, after OneInfer's step After, the keys or values of every
	// position into a cache, so that a window of many ids costs one
	// forward pass rather than a sequence a position.
	Fills []CacheFill
}

// CacheFill is one copy of a prefill: Copy runs after step After of the
// one-sample inference.
type CacheFill struct {
	After int
	Copy  Op
}

// prefillMin is the fewest new positions that a decode computes with
// the prefill (one forward pass over the context) rather than a
// sequence a position: a few positions' sequences cost less than a pass
// over T.
const prefillMin = 4

// tokenModel is a Model whose program has a Decode: an app.TokenModel,
// so that generate costs one position's work a token.
type tokenModel struct{ *Model }

// App is the model the command line runs: m itself, or, when the program
// has a KV-cache decode, m as an app.TokenModel too.
func (m *Model) App() app.Model {
	if m.p.Decode == nil {
		return m
	}
	return tokenModel{m}
}

// TokenModel is m as an app.TokenModel, or nil when its program has no
// KV-cache decode.
func (m *Model) TokenModel() app.TokenModel {
	if m.p.Decode == nil {
		return nil
	}
	return tokenModel{m}
}

func (t tokenModel) Context() int { return t.p.Decode.Context }

// NextLogits runs the positions of ctx past those the caches hold (keep,
// at most), one sequence each, and returns the logits of the last: one
// launch a token while generating. A window of prefillMin ids or more
// with nothing cached (a prompt, or the window after generate's jump) is
// one prefill instead.
func (t tokenModel) NextLogits(ctx []int32, keep int) []float32 {
	logits, err := t.decode(ctx, keep)
	if err != nil {
		fail(t.p, fmt.Errorf("generating: %w", err))
	}
	return logits
}

// KVCacheCheck is selftest's comparison of NextLogits with the batch-1
// forward pass, within decodeTolerance.
func (t tokenModel) KVCacheCheck() app.SelfTestRow {
	row := app.KVCacheCheck(t, t)
	row.Tol = max(row.Tol, decodeTolerance(t.p.Decode))
	return row
}

// decodeTolerance is how far the decode's logits may be from the forward
// pass's where its GEMMs round their operands (bf16, tf32: a CUDA
// program runs every step in the spec's precision, the decode's too):
// the two round values that differ in their last float32 bits, so an
// operand now and then rounds the other way, by up to u of itself (the
// precision's unit roundoff), and the logits, of order 1 from selftest's
// weights, move by a few u: 1e-4 + 8u. 0 when every product is float32
// (app.KVCacheCheck's 1e-4 stands).
func decodeTolerance(dc *Decode) float64 {
	u := 0.0
	for _, steps := range [][]PlanStep{dc.Step, dc.Last} {
		for _, st := range steps {
			for _, op := range st.Ops {
				if op.Gemm != nil {
					u = max(u, op.Gemm.Shape.Precision.unitRoundoff())
				}
				if op.Conv != nil {
					u = max(u, op.Conv.Precision.unitRoundoff())
				}
			}
		}
	}
	if u == 0 {
		return 0
	}
	return 1e-4 + 8*u
}

func (m *Model) decode(ctx []int32, keep int) ([]float32, error) {
	dc := m.p.Decode
	if len(ctx) == 0 || len(ctx) > dc.Context {
		return nil, fmt.Errorf("a context of %d ids; the model reads 1 to %d", len(ctx), dc.Context)
	}
	if m.decodeIDs == nil {
		m.decodeIDs = make([]float32, 0, dc.Context)
	}
	m.decodeIDs = m.decodeIDs[:0]
	for _, id := range ctx {
		m.decodeIDs = append(m.decodeIDs, float32(id))
	}
	m.checkTokens(m.decodeIDs)
	if err := m.upload(); err != nil { // the weights, when the host wrote them
		return nil, err
	}
	from := min(keep, m.decodeCached, len(ctx)-1)
	m.decodeCached = 0 // until every position ran
	if from == 0 && len(ctx) >= prefillMin && m.decodePrefill != nil {
		logits, err := m.prefill(ctx)
		if err != nil {
			return nil, fmt.Errorf("a window of %d ids: %w", len(ctx), err)
		}
		m.decodeCached = len(ctx)
		return logits, nil
	}
	for p := from; p < len(ctx); p++ {
		seq := m.decodeStep
		if p == len(ctx)-1 {
			seq = m.decodeToken
		}
		if err := m.decodeAt(seq, ctx[p], p, p == len(ctx)-1); err != nil {
			return nil, fmt.Errorf("position %d: %w", p, err)
		}
	}
	m.decodeCached = len(ctx)
	out := dc.Output
	return m.host[out.Arena][out.Offset : out.Offset+out.Size], nil
}

// decodeAt runs seq for position p of id: on a discrete GPU the position
// (the StepArgs words) and the id go up and, when logits is set, the
// logits come back into the host copy of their region, as one Call where
// the device has it.
func (m *Model) decodeAt(seq Sequence, id int32, p int, logits bool) error {
	in, out := m.p.Decode.Input, m.p.Decode.Output
	m.hostView(ArenaArgs, false) // current with the device, for its other words
	m.args[ArgPos] = uint32(p)
	idv := m.host[in.Arena][in.Offset : in.Offset+1]
	idv[0] = float32(id)
	if m.unified {
		return m.run(seq)
	}
	ins := []Transfer{{Buf: m.bufs[ArenaArgs], Host: bytesOf(m.host[ArenaArgs])}, {Buf: m.bufs[in.Arena], Off: 4 * in.Offset, Host: bytesOf(idv)}}
	var outs []Transfer
	if logits {
		outs = append(outs, Transfer{Buf: m.bufs[out.Arena], Off: 4 * out.Offset, Host: bytesOf(m.host[out.Arena][out.Offset : out.Offset+out.Size])})
	}
	m.hostNewer[ArenaArgs] = false
	m.devNewer[ArenaDecodeWork] = true // the rest of its host copy is stale from here on
	if c, ok := m.d.(Caller); ok {
		return c.Call(seq, ins, outs)
	}
	for _, t := range ins {
		if err := m.d.Upload(t.Buf, t.Off, t.Host); err != nil {
			return err
		}
	}
	if err := seq.Launch(); err != nil {
		return err
	}
	if err := m.d.Sync(); err != nil {
		return err
	}
	for _, t := range outs {
		if err := m.d.Download(t.Host, t.Buf, t.Off); err != nil {
			return err
		}
	}
	return nil
}

// prefill runs the one-sample inference on ctx (ids at positions 0 to
// len(ctx)−1, 0 after them) with the Fills' copies, which leave every
// position's keys and values in the caches, and returns the logits of
// position len(ctx)−1: on a discrete GPU the input goes up and that
// row of the output comes back, as one Call where the device has it.
func (m *Model) prefill(ctx []int32) ([]float32, error) {
	in, out := m.p.OneInput, m.p.OneOutput
	V := out.Size / m.p.Decode.Context
	row := Region{Arena: out.Arena, Offset: out.Offset + (len(ctx)-1)*V, Size: V}
	x := m.InferInput(true)
	clear(x)
	for i, id := range ctx {
		x[i] = float32(id)
	}
	logits := m.host[row.Arena][row.Offset : row.Offset+row.Size]
	if m.unified {
		if err := m.run(m.decodePrefill); err != nil {
			return nil, err
		}
		return logits, nil
	}
	if c, ok := m.d.(Caller); ok {
		err := c.Call(m.decodePrefill,
			[]Transfer{{Buf: m.bufs[in.Arena], Off: 4 * in.Offset, Host: bytesOf(x)}},
			[]Transfer{{Buf: m.bufs[row.Arena], Off: 4 * row.Offset, Host: bytesOf(logits)}})
		m.touched()
		return logits, err
	}
	if err := m.setRegion(in, x); err != nil {
		return nil, err
	}
	if err := m.run(m.decodePrefill); err != nil {
		return nil, err
	}
	return m.slice(row), nil
}

// recordPrefill records the one-sample inference with the Fills' copies.
func (m *Model) recordPrefill() (Sequence, error) {
	dc := m.p.Decode
	var parts []any
	next := 0
	for _, f := range dc.Fills {
		if f.After < next || f.After >= len(m.p.OneInfer) {
			return nil, fmt.Errorf("gpuhost: a cache fill after step %d of %d (out of order)", f.After, len(m.p.OneInfer))
		}
		parts = append(parts, m.p.OneInfer[next:f.After+1], []Op{f.Copy})
		next = f.After + 1
	}
	return m.record("prefill", append(parts, m.p.OneInfer[next:])...)
}
