package emit

import (
	"fmt"
	"strings"

	"github.com/mlbuild/mlbuild/planner"
)

// The CPU program's KV-cache decode (planner.DeriveDecode): its kernels'
// calls (kernelCall dispatches to them) and the methods that make the
// model an app.TokenModel, so that generate costs one position's work a
// token.

// decodeEmbeddingCall gathers the new position's token row (checked
// against the vocabulary) plus its position's row of the table.
func (g *generator) decodeEmbeddingCall(st planner.Step, in, out []operand) (string, error) {
	w := in[1].buf.Shape
	pos := "nil"
	if in[2].param != "" {
		pos = fmt.Sprintf("%s[dPos*%d:(dPos+1)*%d]", in[2].param, w[1], w[1])
	}
	return fmt.Sprintf("cpu.EmbeddingFwd(%s, %s, %s, %s, %s, 1, 1, %d, %d)", quote(st.Layer), in[0].slice(), in[1].slice(), pos, out[0].slice(), w[0], w[1]), nil
}

// attendCachedCall appends the new position's key and value to the
// layer's caches and attends over the positions up to it.
func (g *generator) attendCachedCall(st planner.Step, in, out []operand) (string, error) {
	s := in[0].buf.Shape // [1,1,H,hd]
	return fmt.Sprintf("cpu.AttendCached(%s, %s, %s, %s, %s, %s, dScores[:], dPos, %d, %d, %s)", in[0].slice(), in[1].slice(), in[2].slice(),
		out[0].slice(), out[1].slice(), out[2].slice(), s[2], s[3], float(st.Attr.Alpha)), nil
}

// renderDecode writes the decode plan of the batch-1 inference plan, when
// planner.DeriveDecode recognises the model, as the model's Context and
// NextLogits; otherwise a comment with the reason, and the program's
// generate runs the full forward pass a token.
func (g *generator) renderDecode(o *planView) error {
	dec, err := planner.DeriveDecode(o.plan)
	if err != nil {
		if tokenVocab(o.plan) > 0 {
			g.p("// No KV cache: generate runs the whole forward pass a token (%s).", comment(err.Error()))
			g.p("")
		}
		return nil
	}
	d := &planView{prefix: "d", plan: dec.Plan}
	if err := g.declareBuffers(d, false); err != nil {
		return err
	}
	// a row of attention scores a head, so that AttendCached can run the
	// heads on the threads
	heads := 1
	for _, st := range dec.Plan.Forward {
		if st.Kernel == planner.KAttendCached {
			heads = max(heads, dec.Plan.Buffers[st.In[0]].Shape[2])
		}
	}
	// the dense weights a token multiplies, each once, for --precision bf16
	g.bf16Weights = map[string]int{}
	defer func() { g.bf16Weights = nil }()
	var bf16Order []planner.BufID
	size16, row16 := 0, 0
	for _, st := range dec.Plan.Forward {
		if st.Kernel != planner.KGemm || len(st.In) < 2 {
			continue
		}
		w := dec.Plan.Buffers[st.In[1]]
		if w.Kind != planner.KindParam || len(w.Shape) != 2 || dec.Plan.Buffers[st.In[0]].Size != w.Shape[1] {
			continue
		}
		row16 = max(row16, w.Shape[1])
		if _, ok := g.bf16Weights[w.Name]; !ok {
			g.bf16Weights[w.Name] = size16
			bf16Order = append(bf16Order, w.ID)
			size16 += w.Size
		}
	}
	g.p("// The KV-cache decode: dWork holds its rows and caches; dPos is the")
	g.p("// position the steps compute, dCached how many leading positions")
	g.p("// the caches hold; dScores has a row of scores a head.")
	g.p("const dWorkSize = %d", dec.Plan.WorkSize)
	g.p("")
	g.p("var (")
	g.p("dWork []float32")
	g.p("dPos, dCached int")
	g.p("dScores [%d]float32", heads*dec.Context)
	g.p("// dBF16 makes the dense steps multiply the bfloat16 copies of their")
	g.p("// weights in dW16, their input row rounded into dRow16 (DecodeBF16).")
	g.p("dBF16 bool")
	g.p("dW16 []uint16")
	g.p("dRow16 [%d]uint16", max(row16, 1))
	g.p("// dPrefillBF16 makes the one-sample inference's dense steps multiply")
	g.p("// in bf16 on AMX while dPrefill runs with DecodeBF16 on.")
	g.p("dPrefillBF16 bool")
	g.p(")")
	g.p("")
	g.p("// useDecode makes the decode arena on its first call and points the")
	g.p("// decode plan's buffers into it.")
	g.p("func useDecode() {")
	g.p("if dWork != nil {")
	g.p("return")
	g.p("}")
	g.p(`app.Allocate(&meta, "generation", 1, app.Arena{Name: "state", Size: stateSize, Data: &state}, app.Arena{Name: "generation work", Size: dWorkSize, Data: &dWork})`)
	g.p("viewState()")
	for _, s := range d.views {
		g.p("%s", s)
	}
	g.p("dCached = 0")
	g.p("}")
	g.p("")
	if err := g.renderPhase(d, "Forward", dec.Plan.Forward[:dec.Tail], false); err != nil {
		return err
	}
	last := &planView{prefix: "dl", plan: dec.Plan, vars: d.vars}
	if err := g.renderPhase(last, "Forward", dec.Plan.Forward[dec.Tail:], false); err != nil {
		return err
	}
	prefill := g.renderPrefill(o, d, dec)
	g.p("// KVCacheCheck is selftest's comparison of NextLogits with Infer.")
	g.p("func (m model) KVCacheCheck() app.SelfTestRow { return app.KVCacheCheck(m, m) }")
	g.p("")
	g.p("// KVCacheBF16Check is KVCacheCheck with the decode in bf16.")
	g.p("func (m model) KVCacheBF16Check() app.SelfTestRow { return app.KVCacheBF16Check(m, m) }")
	g.p("")
	g.p("func (model) Context() int { return %d }", dec.Context)
	g.p("")
	g.p("// DefaultBF16 says whether generate multiplies in bf16 unless told: the")
	g.p("// spec's precision is %s.", dec.Plan.Precision)
	g.p("func (model) DefaultBF16() bool { return %v }", dec.Plan.Precision == planner.PrecisionBF16)
	g.p("")
	g.p("// DecodeBF16 makes NextLogits multiply the dense layers' weights as")
	g.p("// they are now rounded to bfloat16 (on), or the float32 weights; the")
	g.p("// caches start over.")
	g.p("func (model) DecodeBF16(on bool) {")
	g.p("useDecode()")
	g.p("dCached, dBF16, dW16 = 0, on, nil")
	g.p("if !on {")
	g.p("return")
	g.p("}")
	g.p("dW16 = make([]uint16, %d)", size16)
	for _, id := range bf16Order {
		off := g.bf16Weights[dec.Plan.Buffers[id].Name]
		g.p("cpu.ToBF16(dW16[%d:%d], %s[:]) // %s", off, off+dec.Plan.Buffers[id].Size, d.vars[id], dec.Plan.Buffers[id].Name)
	}
	g.p("}")
	g.p("")
	g.p("// NextLogits computes the positions of ctx past those the caches hold")
	g.p("// (keep, at most), each with one position's work, and returns the")
	g.p("// logits of the last.")
	if prefill {
		g.p("// With the caches empty, %d ids or more (a prompt, a window that", prefillMin(dec.Context))
		g.p("// moved) are one forward pass instead (dPrefill).")
	}
	g.p("func (model) NextLogits(ctx []int32, keep int) []float32 {")
	g.p("useDecode()")
	g.p("from := min(keep, dCached, len(ctx)-1)")
	if prefill {
		in, out := o.plan.Buffers[o.plan.Input], o.plan.Buffers[o.plan.Output]
		row := out.Size / dec.Context
		g.p("if from == 0 && len(ctx) >= %d { // a prompt or a moved window: one forward pass", prefillMin(dec.Context))
		g.p("useOne()")
		g.p("clear(%s[:])", o.vars[in.ID])
		g.p("for i, id := range ctx {")
		g.p("%s[i] = float32(id)", o.vars[in.ID])
		g.p("}")
		g.p("dPrefill()")
		g.p("dCached = len(ctx)")
		g.p("return %s[(len(ctx)-1)*%d : len(ctx)*%d]", o.vars[out.ID], row, row)
		g.p("}")
	}
	g.p("for p := from; p < len(ctx); p++ {")
	g.p("dPos = p")
	g.p("%s[0] = float32(ctx[p])", d.vars[dec.Plan.Input])
	g.p("dForward()")
	g.p("}")
	g.p("dCached = len(ctx)")
	g.p("dlForward()")
	g.p("return %s[:]", d.vars[dec.Plan.Output])
	g.p("}")
	g.p("")
	return nil
}

// prefillMin is the fewest positions NextLogits computes with one forward
// pass of the batch-1 inference plan (dPrefill) rather than a position at
// a time, for a context of T: that pass costs the whole context's work,
// in matrix products that read each weight once. For models/gpt.cue on
// one core here it took ~82 ms, the time of ~36 positions one at a time
// (2.2 ms each in f32): so T/8, and at least 4 (rt/gpuhost's rule).
func prefillMin(T int) int { return max(4, T/8) }

// renderPrefill writes dPrefill, the batch-1 inference plan's forward
// steps with each cache's rows copied into it after the step that computes
// them (planner.Decode.Fills), and reports whether it did: a plan whose
// Fills do not match its caches keeps the position-at-a-time path.
func (g *generator) renderPrefill(o, d *planView, dec *planner.Decode) bool {
	if len(dec.Fills) != len(dec.Caches) || len(o.forward) != len(o.plan.Forward) || o.plan.Input == planner.NoBuf {
		return false
	}
	after := map[int][]string{}
	for i, f := range dec.Fills {
		c := dec.Caches[i]
		if o.plan.Buffers[f.Buf].Size != dec.Plan.Buffers[c].Size {
			return false
		}
		after[f.After] = append(after[f.After], fmt.Sprintf("copy(%s[:], %s[:]) // %s", d.vars[c], o.vars[f.Buf], dec.Plan.Buffers[c].Name))
	}
	g.p("// dPrefill is the one-sample inference with each layer's keys and")
	g.p("// values copied into the caches after the step that computes them:")
	g.p("// a prompt or a moved window in one forward pass of matrix products,")
	g.p("// whose dense steps multiply in bf16 with DecodeBF16 on where the CPU")
	g.p("// has AMX (cpu.BF16Inference; elsewhere bf16 would be slower than")
	g.p("// float32, which they keep).")
	g.p("func dPrefill() {")
	g.p("cpu.DecodeTeamRest() // its products run on ParallelFor's workers")
	g.p("dPrefillBF16 = dBF16 && cpu.BF16Native()")
	g.p("defer func() { dPrefillBF16 = false }()")
	for i, c := range o.forward {
		g.p("%s(%s)", c.fn, strings.Join(c.args, ", "))
		for _, line := range after[i] {
			g.p("%s", line)
		}
	}
	g.p("}")
	g.p("")
	return true
}
