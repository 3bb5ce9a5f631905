package gpuhost

import (
	"fmt"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// Token ids. A program whose input holds token ids (Meta.Vocab above 0:
// an embedding reads them) gets every id checked on the host before the
// device sees it, as the CPU's embedding checks them before it reads a
// row: each batch the host writes, before its upload, and a training set
// kept on the device, once, before its upload. A bad id is then the
// input's error (*cpu.TokenIDError, which rt/app reports with exit 1),
// and the kernels, which clamp each id into the table as well, never
// read outside it.

// checkTokens panics with the *cpu.TokenIDError of the first id of ids
// that is not an integer in [0, Meta.Vocab) (the panic rt/app's Run turns
// into exit 1, as for the CPU's embedding); it does nothing for a program
// without token ids.
func (m *Model) checkTokens(ids []float32) {
	if v := m.p.Meta.Vocab; v > 0 {
		if err := cpu.CheckTokenIDs(m.p.TokenLayer, ids, v); err != nil {
			panic(err)
		}
	}
}

// checkTokenSet returns an error naming the row and the
// *cpu.TokenIDError (Position within the row) of the first bad id of a
// training set of rows of width inW, or nil.
func (m *Model) checkTokenSet(x []float32, inW int) error {
	v := m.p.Meta.Vocab
	if v <= 0 || inW <= 0 {
		return nil
	}
	for r := 0; r*inW < len(x); r++ {
		if err := cpu.CheckTokenIDs(m.p.TokenLayer, x[r*inW:(r+1)*inW], v); err != nil {
			return fmt.Errorf("the training set's row %d (of %d): %w", r, len(x)/inW, err)
		}
	}
	return nil
}

// tokenIDs sets x to token ids drawn from the vocabulary when the program
// reads token ids (selftest's inputs, which its embedding's CPU reference
// checks as it would a user's).
func (m *Model) tokenIDs(x []float32, rng *cpu.Rand) {
	if v := m.p.Meta.Vocab; v > 0 {
		for i := range x {
			x[i] = float32(rng.Intn(v))
		}
	}
}
