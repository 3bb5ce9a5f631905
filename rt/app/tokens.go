package app

import "github.com/mlbuild/mlbuild/rt/cpu"

// randomInputs fills x, an input batch, with random values that the model
// accepts: uniform in [0, 1), or token ids drawn from the vocabulary when
// the input holds them (Meta.Vocab), for bench and the gradient check.
func randomInputs(meta *Meta, rng *cpu.Rand, x []float32) {
	vocab := meta.Vocab
	if vocab == 0 && meta.format() == "text" {
		vocab = meta.vocabCapacity() // a text model that reads ids without an embedding
	}
	for i := range x {
		x[i] = rng.Float32()
		if vocab > 0 {
			x[i] = float32(rng.Intn(vocab))
		}
	}
	if meta.Padded {
		padInputs(meta, x)
	}
}

// padInputs puts the padding id of a model with padding masks into the
// samples of x, so that the gradient check runs through every case of
// the mask: sample b mod 4 is 0: no padding; 1: its last quarter padded
// (the padding at the end, as a dataset of documents gives it); 2: its
// first two positions and one in the middle (a causal query that sees
// no key); 3: padding only.
func padInputs(meta *Meta, x []float32) {
	T := meta.inputSize()
	pad := float32(meta.PadID)
	for b := 0; (b+1)*T <= len(x); b++ {
		row := x[b*T : (b+1)*T]
		switch b % 4 {
		case 1:
			for i := T - T/4; i < T; i++ {
				row[i] = pad
			}
		case 2:
			row[0], row[min(1, T-1)], row[T/2] = pad, pad, pad
		case 3:
			for i := range row {
				row[i] = pad
			}
		}
	}
}

// randomLabels clears labels and sets one random class per row: per
// sample, or per token for a model that reads token ids and has logits
// per token (Meta.Vocab, OutputShape [tokens, classes]).
func randomLabels(meta *Meta, rng *cpu.Rand, labels []float32) {
	clear(labels)
	rows, classes := meta.Batch, meta.Classes
	switch {
	case meta.Vocab > 0 && len(meta.OutputShape) == 2:
		rows, classes = meta.Batch*meta.OutputShape[0], meta.OutputShape[1]
	case meta.format() == "text":
		classes = meta.vocabCapacity()
		rows = len(labels) / classes
	}
	for r := 0; r < rows; r++ {
		labels[r*classes+rng.Intn(classes)] = 1
	}
}
