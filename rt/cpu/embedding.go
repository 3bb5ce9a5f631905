package cpu

import (
	"fmt"
	"math"
)

// TokenIDError is a token id that is not an index of the embedding's
// vocabulary: ids arrive in the float32 input buffer as exact integers in
// [0, Vocab), and EmbeddingFwd checks every one before reading a row.
// The kernel cannot return an error from inside a step, so it panics with
// this value and rt/app reports it as a failure of the input, exit 1.
type TokenIDError struct {
	Layer    string  // the embedding layer
	Position int     // index of the id in the batch, sample·T + t
	ID       float32 // the value found
	Vocab    int
}

func (e *TokenIDError) Error() string {
	if e.ID != float32(math.Trunc(float64(e.ID))) || math.IsInf(float64(e.ID), 0) {
		return fmt.Sprintf("%s: token id %v at position %d of the batch is not an integer: ids are integers 0 to %d (vocabulary %d)",
			e.Layer, e.ID, e.Position, e.Vocab-1, e.Vocab)
	}
	return fmt.Sprintf("%s: token id %v at position %d of the batch is outside the vocabulary of %d (ids are 0 to %d)",
		e.Layer, e.ID, e.Position, e.Vocab, e.Vocab-1)
}

// CheckTokenIDs returns a *TokenIDError for the first id of ids that is
// not an integer in [0, vocab), or nil.
func CheckTokenIDs(layer string, ids []float32, vocab int) error {
	for i, v := range ids {
		if !(v >= 0 && v < float32(vocab)) || v != float32(math.Trunc(float64(v))) {
			return &TokenIDError{Layer: layer, Position: i, ID: v, Vocab: vocab}
		}
	}
	return nil
}

// EmbeddingFwd writes y[i, :] = w[ids[i], :] (+ pos[i mod seq, :] when pos
// is not nil) for the rows ids of length rows = batch·seq, y being
// [rows, dim], w [vocab, dim] and pos [seq, dim]. It checks every id first
// (CheckTokenIDs) and panics with the *TokenIDError, naming layer, before
// reading any row.
func EmbeddingFwd(layer string, ids, w, pos, y []float32, rows, seq, vocab, dim int) {
	if err := CheckTokenIDs(layer, ids[:rows], vocab); err != nil {
		panic(err)
	}
	ParallelFor(rows, rowGrain(dim), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			id := int(ids[i])
			dst := y[i*dim : (i+1)*dim]
			copy(dst, w[id*dim:(id+1)*dim])
			if pos != nil {
				p := pos[(i%seq)*dim : (i%seq+1)*dim]
				for j := range dst {
					dst[j] += p[j]
				}
			}
		}
	})
}

// EmbeddingBwd writes the gradients of EmbeddingFwd: dw (when not nil) is
// zeroed and gets each dy row scatter-added into the row of its id; dpos
// (when not nil) the sum of dy over the batch at each position. The ids
// were checked by the forward. It runs serially over the rows, as two
// tokens of one id add into the same row of dw.
func EmbeddingBwd(ids, dy, dw, dpos []float32, rows, seq, vocab, dim int) {
	if dw != nil {
		clear(dw[:vocab*dim])
		for i := 0; i < rows; i++ {
			id := int(ids[i])
			d := dw[id*dim : (id+1)*dim]
			g := dy[i*dim : (i+1)*dim]
			for j := range d {
				d[j] += g[j]
			}
		}
	}
	if dpos != nil {
		clear(dpos[:seq*dim])
		for i := 0; i < rows; i++ {
			d := dpos[(i%seq)*dim : (i%seq+1)*dim]
			g := dy[i*dim : (i+1)*dim]
			for j := range d {
				d[j] += g[j]
			}
		}
	}
}

// SoftmaxCausalFwd writes the causal softmax of x viewed as [outer, t, t]:
// row i of each [t, t] matrix (a query position) is the softmax of its
// entries 0..i (the keys at or before it), and its entries past i are 0,
// as if their scores were −∞. Their gradient is then 0 too, so
// SoftmaxBwd with axis t, inner 1 is the backward.
func SoftmaxCausalFwd(x, y []float32, outer, t int) {
	ParallelFor(outer*t, rowGrain(t), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			i := r % t
			out := y[r*t : (r+1)*t]
			softmaxRow(x[r*t:r*t+i+1], out[:i+1])
			clear(out[i+1:])
		}
	})
}
