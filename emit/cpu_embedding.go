package emit

import (
	"fmt"
	"strconv"

	"github.com/mlbuild/mlbuild/planner"
)

// The CPU calls of embeddings (kernelCall in cpu.go dispatches to them).

// embeddingCall calls the embedding's row gather (which checks every id
// against the vocabulary, naming the layer) or its scatter-add backward.
func (g *generator) embeddingCall(st planner.Step, in, out []operand) (string, error) {
	ids := in[0].buf.Shape // [B, T]
	if len(ids) != 2 {
		return "", fmt.Errorf("embedding ids %v are not [B,T]", ids)
	}
	rows, seq := ids[0]*ids[1], ids[1]
	if st.Kernel == planner.KEmbedding {
		w := in[1].buf.Shape
		return fmt.Sprintf("cpu.EmbeddingFwd(%s, %s, %s, %s, %s, %d, %d, %d, %d)", strconv.Quote(st.Layer), in[0].slice(), in[1].slice(), in[2].slice(),
			out[0].slice(), rows, seq, w[0], w[1]), nil
	}
	dy := in[1].buf.Shape
	vocab := 0
	if out[0].param != "" {
		vocab = out[0].buf.Shape[0]
	}
	return fmt.Sprintf("cpu.EmbeddingBwd(%s, %s, %s, %s, %d, %d, %d, %d)", in[0].slice(), in[1].slice(), out[0].slice(), out[1].slice(),
		rows, seq, vocab, dy[2]), nil
}

// tokenVocab is the vocabulary of the embedding that reads plan p's input
// (its weight's rows), or 0 when no embedding does: the program's
// app.Meta.Vocab, which tells the runtime that the input holds token ids.
// Of several embeddings, the smallest vocabulary holds for all.
func tokenVocab(p *planner.Plan) int {
	v := 0
	for _, s := range p.Forward {
		if s.Kernel == planner.KEmbedding {
			if n := p.Buffers[s.In[1]].Shape[0]; v == 0 || n < v {
				v = n
			}
		}
	}
	return v
}

// padID is the padding id of plan p's attention masks (planner's
// Attr.Padding), and whether it has one: the program's app.Meta.PadID
// and Padded. Of several, the first; a plan whose masks differ gets no
// decode plan (DeriveDecode refuses it).
func padID(p *planner.Plan) (int, bool) {
	for _, s := range p.Forward {
		if s.Attr.Padding {
			return s.Attr.PadID, true
		}
	}
	return 0, false
}

// tokenLayer is the layer of the embedding whose vocabulary is
// tokenVocab(p) (the first of them), "" when no embedding reads the
// input: the GPU program's TokenLayer, the layer named by a bad id's error.
func tokenLayer(p *planner.Plan) string {
	v := tokenVocab(p)
	for _, s := range p.Forward {
		if s.Kernel == planner.KEmbedding && p.Buffers[s.In[1]].Shape[0] == v {
			return s.Layer
		}
	}
	return ""
}
