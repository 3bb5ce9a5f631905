package app

import (
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// TestRandomInputsOfATokenModel: bench and the gradient check feed a model
// that reads token ids integers of its vocabulary, and labels one-hot per
// token, so that they run it rather than stop at the range check.
func TestRandomInputsOfATokenModel(t *testing.T) {
	meta := &Meta{Batch: 3, Classes: 4 * 5, OutputShape: []int{4, 5}, Vocab: 7}
	rng := cpu.NewRand(1)
	x := make([]float32, 3*4)
	randomInputs(meta, rng, x)
	if err := cpu.CheckTokenIDs("wte", x, meta.Vocab); err != nil {
		t.Errorf("random token ids %v: %v", x, err)
	}
	labels := make([]float32, 3*4*5)
	for i := range labels {
		labels[i] = 9 // stale values must go
	}
	randomLabels(meta, rng, labels)
	for row := 0; row < 3*4; row++ {
		var ones, sum float32
		for _, v := range labels[row*5 : (row+1)*5] {
			if v == 1 {
				ones++
			}
			sum += v
		}
		if ones != 1 || sum != 1 {
			t.Errorf("labels of token row %d: %v, want one-hot", row, labels[row*5:(row+1)*5])
		}
	}
	// a classifier's inputs stay uniform in [0, 1) and its labels one per sample
	plain := &Meta{Batch: 2, Classes: 3}
	x = make([]float32, 8)
	randomInputs(plain, rng, x)
	fractional := false
	for _, v := range x {
		fractional = fractional || v != float32(int(v))
	}
	if !fractional {
		t.Errorf("a classifier's random inputs %v are all integers", x)
	}
}
