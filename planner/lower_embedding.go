package planner

import (
	"math"

	"github.com/mlbuild/mlbuild/spec"
)

// The lowering of embeddings: token ids to vectors (lowerNode and
// declareParams in lower.go dispatch to it).

// embeddingStd is the deviation of the embedding tables' initial values,
// GPT-2's (and nanoGPT's) normal(0, 0.02); the tables are drawn uniform
// with that deviation, U(−0.02·√3, 0.02·√3), the inits mlbuild has.
const embeddingStd = 0.02

// embeddingParams declares the table [vocab, dim] ("weight", as
// nn.Embedding names it) and, with positions, the position table
// [tokens, dim] ("pos").
func (l *lowering) embeddingParams(n *spec.Node) error {
	in, err := l.inShape(n, 0)
	if err != nil {
		return err
	}
	if len(in) != 1 || n.Vocab < 1 || n.Dim < 1 {
		return fail(n, "embedding needs token ids [tokens], a vocabulary and a width; got %s, vocab %d, dim %d", shapeString(in), n.Vocab, n.Dim)
	}
	l.addTable(n, "weight", []int{n.Vocab, n.Dim})
	if n.Positions {
		l.addTable(n, "pos", []int{in[0], n.Dim})
	}
	return nil
}

// addTable declares one trainable table of n, drawn uniform with
// deviation embeddingStd.
func (l *lowering) addTable(n *spec.Node, suffix string, shape []int) {
	l.addParam(n, suffix, shape, true, "uniform", 1)
	l.p.Params[len(l.p.Params)-1].Bound = embeddingStd * math.Sqrt(3)
}

// lowerEmbedding lowers an embedding of the model input's token ids.
func (l *lowering) lowerEmbedding(n *spec.Node) error {
	ids, err := l.input(n, 0)
	if err != nil {
		return err
	}
	if l.p.Buffers[l.p.root(ids)].Kind != KindInput {
		return fail(n, "embedding reads token ids, which only the model input holds; its input %q is computed by the model", n.Inputs[0])
	}
	l.emit(n, KEmbedding, []BufID{ids, l.param(n, "weight"), l.param(n, "pos")}, []BufID{l.output(n)}, Attr{})
	return nil
}

// readsTokens reports whether an embedding step reads the plan's input,
// which then holds token ids.
func (p *Plan) readsTokens() bool {
	for _, s := range p.Forward {
		if s.Kernel == KEmbedding {
			return true
		}
	}
	return false
}
