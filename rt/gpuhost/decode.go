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
}

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
// launch a token while generating. A prompt (or a window that moved)
// runs through the same sequence a position at a time.
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
	if len(m.decodeIDs) != len(ctx) {
		m.decodeIDs = make([]float32, len(ctx))
	}
	for i, id := range ctx {
		m.decodeIDs[i] = float32(id)
	}
	m.checkTokens(m.decodeIDs)
	if err := m.upload(); err != nil { // the weights, when the host wrote them
		return nil, err
	}
	from := min(keep, m.decodeCached, len(ctx)-1)
	m.decodeCached = 0 // until every position ran
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
