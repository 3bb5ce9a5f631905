package app

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"

	"github.com/mlbuild/mlbuild/rt/textdata"
)

// Text reads a text dataset (rt/textdata): the spec's files joined, a
// vocabulary of the training split stored with the weights, and random
// windows of the model's context length. It also carries generate, so
// that only the programs of text datasets link the sampler and the
// tokenizer.
var Text = &Reader{Format: "text", openTrain: openTextTrain, openTest: openTextTest, generate: generateCmd}

// mdVocab is the metadata key of a text dataset's vocabulary
// (textdata.Vocab's String), written by train beside the weights and
// required by eval and generate.
const mdVocab = "mlbuild.text.vocab"

// textSource is the windows of a corpus as samples: sample i < nTrain is
// a window of the training split, drawn afresh each time from the run's
// stream (so each epoch sees other windows), and sample nTrain+j the j-th
// window of the validation split, the same window every time (so that
// validation losses compare). The inputs are the T token ids of the
// window as float32 (exact below 2^24) and the labels the T next tokens
// one-hot, [T, V] (V the model's logits per position): the layout of a
// model whose input is token ids (see Meta.OutputShape).
//
// In documents mode (the spec's documents separator) sample i < nTrain
// is the i-th document of the training split, from an offset drawn
// afresh from the run's stream when it is longer than T tokens, and
// sample nTrain+j the j-th document of the validation split, from the
// same offset every time; the inputs are padded with the pad id
// V−1 after the document's end, the label of its last token is the pad
// id (one-hot), and the padded positions' labels are rows of zeros,
// which the loss (rt/cpu's SoftmaxXent) and the evaluation ignore.
type textSource struct {
	c      *textdata.Corpus
	T, V   int
	docs   bool // documents mode
	nTrain int
	seed   uint64
	rng    *rand.Rand
	ids    []int32
	tg     []int32
	buf    []byte
	// tokens is the training split read whole when a device gathers the
	// windows itself (residentText); nil when they are read from the files.
	tokens *textdata.Tokens
}

// resident returns r with the training split of a text on the device,
// or nil when the text is too long to keep whole or r declines; each
// epoch's window starts are then drawn by textSource.residentOrder.
func (s *textSource) resident(r Resident) (Resident, error) {
	if s.docs || s.c.Train.Tokens > residentTextMax {
		return nil, nil // documents are padded on the host, batch by batch
	}
	tk, err := s.c.ReadTokens(s.c.Train, residentTextMax)
	if err != nil {
		return nil, err
	}
	ids := make([]float32, len(tk.IDs))
	for i, id := range tk.IDs {
		ids[i] = float32(id)
	}
	ok, err := r.LoadTrainWindows(ids, tk.Windows(s.T))
	if err != nil || !ok {
		return nil, err
	}
	s.tokens = tk
	return r, nil
}

// residentOrder draws the window starts (indices into tokens.IDs) of an
// epoch's batches first to steps−1, bs windows each, from the run's
// stream as fill would draw their windows; the batches before first are
// left 0 (they were trained before a resume).
func (s *textSource) residentOrder(first, steps, bs int) []int {
	order := make([]int, steps*bs)
	for i := first * bs; i < len(order); i++ {
		order[i] = s.tokens.Draw(s.rng)
	}
	return order
}

func (s *textSource) fill(x, y []float32, idx []int) error {
	if s.docs {
		return s.fillDocs(x, y, idx)
	}
	T := s.T
	for k, i := range idx {
		split, rng := s.c.Train, s.rng
		if i >= s.nTrain {
			split, rng = s.c.Val, rand.New(rand.NewPCG(s.seed, uint64(i)))
		}
		if err := s.c.Windows(split, rng, 1, T, s.ids, s.tg, s.buf); err != nil {
			return err
		}
		row := y[k*T*s.V : (k+1)*T*s.V]
		clear(row)
		for j := range T {
			x[k*T+j] = float32(s.ids[j])
			row[j*s.V+int(s.tg[j])] = 1
		}
	}
	return nil
}

// valDocStream is the first stream (rand.NewPCG's second word) of the
// validation documents' offsets: document j draws from stream
// valDocStream+j, apart from the training stream 1.
const valDocStream = 1 << 32

// fillDocs is fill in documents mode: sample i is a document, padded.
func (s *textSource) fillDocs(x, y []float32, idx []int) error {
	T := s.T
	for k, i := range idx {
		split, doc, rng := s.c.Train, i, s.rng
		if i >= s.nTrain {
			// the j-th validation document's own stream, whatever --limit
			// leaves of the training documents, so that train's
			// validation and eval read the same samples
			split, doc = s.c.Val, i-s.nTrain
			rng = rand.New(rand.NewPCG(s.seed, valDocStream+uint64(doc)))
		}
		n, err := s.c.DocWindow(split, doc, T, rng, s.ids, s.tg, s.buf)
		if err != nil {
			return err
		}
		row := y[k*T*s.V : (k+1)*T*s.V]
		clear(row) // the positions after the document's end: no label
		for j := range T {
			x[k*T+j] = float32(s.ids[j])
			if j < n {
				row[j*s.V+int(s.tg[j])] = 1
			}
		}
	}
	return nil
}

func (s *textSource) close() { s.c.Close() }

// bytesRead is the bytes of the text's files read so far: the data rate's
// count (batchLoader.bytesRead).
func (s *textSource) bytesRead() int64 { return s.c.BytesRead() }

func (s *textSource) windowTokens() int { return s.T }

// textMode is the spec's token mode, "char" when it names none.
func (m *Meta) textMode() textdata.Mode {
	if m.Data.Tokens == "" {
		return textdata.Chars
	}
	return textdata.Mode(m.Data.Tokens)
}

// outputShape is the per-sample shape of the model's output.
func (m *Meta) outputShape() []int {
	if m.OutputShape != nil {
		return m.OutputShape
	}
	return []int{m.Classes}
}

// vocabCapacity is the number of ids the model has: the last axis of its
// output (its logits per position; Classes counts a sample's labels,
// tokens·ids).
func (m *Meta) vocabCapacity() int {
	if n := len(m.OutputShape); n > 0 {
		return m.OutputShape[n-1]
	}
	return m.Classes
}

// openText opens the spec's text files in dir with vocab (nil: build it)
// as samples: one window of T tokens per T tokens of each split.
func openText(meta *Meta, dir string, vocab *textdata.Vocab) (*dataset, *textSource, error) {
	T := meta.inputSize()
	if o := meta.OutputShape; len(o) != 2 || o[0] != T {
		return nil, nil, fmt.Errorf("a text dataset trains a language model, whose output is [context, vocabulary] for its input of %d token ids; this model's output is %s", T, joinShape(meta.outputShape()))
	}
	var paths []string
	for _, f := range meta.Data.Files {
		paths = append(paths, filepath.Join(dir, f))
	}
	o := textdata.Options{Mode: meta.textMode(), Context: T, ValFrac: meta.Data.TestSplit, Vocab: vocab}
	docs := meta.Data.Documents != ""
	if docs {
		o.Documents, o.Pad = meta.Data.Documents, int32(meta.vocabCapacity()-1)
	}
	c, err := textdata.Open(paths, o)
	var pe *textdata.PadError
	if errors.As(err, &pe) {
		return nil, nil, fmt.Errorf("the training text has %d distinct tokens (%s mode), but documents mode reserves id classes−1 = %d (the model's last id) for padding: raise classes to %d", pe.Tokens, meta.textMode(), pe.Pad, pe.Tokens+1)
	}
	if err != nil {
		return nil, nil, err
	}
	if n, max := c.Vocab.Size(), meta.vocabCapacity(); n > max {
		c.Close()
		return nil, nil, fmt.Errorf("the training text has %d distinct tokens (%s mode), but the model has %d ids (its output's last axis): make the vocabulary of the spec %d or more, or use byte tokens", n, c.Mode, max, n)
	}
	src := &textSource{c: c, T: T, V: meta.vocabCapacity(), docs: docs, nTrain: max(int(c.Train.Tokens)/T, 1), seed: uint64(meta.Defaults.Seed),
		ids: make([]int32, T), tg: make([]int32, T), buf: make([]byte, c.BufSize(T))}
	src.rng = rand.New(rand.NewPCG(src.seed, 1))
	if docs {
		src.nTrain = len(c.Train.Docs) // Open refuses a split without one
	}
	n := src.nTrain
	switch {
	case docs:
		n += len(c.Val.Docs)
	case c.Val.Tokens > 0:
		n += max(int(c.Val.Tokens)/T, 1)
	}
	return &dataset{src: src, n: n, features: T, width: T * src.V, text: src}, src, nil
}

// openTextTrain is Text's openTrain: it builds the vocabulary and records
// it for the weights.
func openTextTrain(meta *Meta, dir string, limit int) (*dataset, error) {
	ds, src, err := openText(meta, dir, nil)
	if err != nil {
		return nil, err
	}
	if limit > 0 && limit < src.nTrain {
		nVal := ds.n - src.nTrain
		src.nTrain = limit
		ds.n = limit + nVal
	}
	meta.rec = &record{vocab: src.c.Vocab.String()}
	return ds, nil
}

// openTextTest is Text's openTest: the validation split's windows, read
// with the vocabulary stored with the weights.
func openTextTest(meta *Meta, dir string, rec *record) (*dataset, error) {
	v, err := recordVocab(rec)
	if err != nil {
		return nil, err
	}
	ds, src, err := openText(meta, dir, v)
	if err != nil {
		return nil, err
	}
	if src.c.Val.Tokens == 0 {
		ds.close()
		return nil, fmt.Errorf("the text dataset holds out no validation split (testSplit is 0): nothing to evaluate")
	}
	// only the validation windows: samples nTrain… of the source
	ds.n -= src.nTrain
	ds.src = offsetSource{src, src.nTrain}
	return ds, nil
}

// offsetSource is a source whose sample i is sample i+off of another.
type offsetSource struct {
	textSrc *textSource
	off     int
}

func (o offsetSource) fill(x, y []float32, idx []int) error {
	moved := make([]int, len(idx))
	for k, i := range idx {
		moved[k] = i + o.off
	}
	return o.textSrc.fill(x, y, moved)
}

func (o offsetSource) close() { o.textSrc.close() }

// sameVocab refuses a training run that starts from weights (flag
// --resume or --init, the weights' file path) whose stored vocabulary is
// not the one the training text gives: their ids would stand for other
// tokens, and the run would train on without a word. Weights that carry
// none (imported ones) pass.
func (s *textSource) sameVocab(flag, path, stored string) error {
	if stored == "" || stored == s.c.Vocab.String() {
		return nil
	}
	theirs, err := textdata.ParseVocab(stored)
	if err != nil {
		return fmt.Errorf("%s %s: the metadata %s: %v", flag, path, mdVocab, err)
	}
	if err := s.c.Vocab.Same(theirs); err != nil {
		return fmt.Errorf("%s %s: the weights' vocabulary is not this text's (in theirs %v): their ids would stand for other characters, or pad otherwise; train on the text (and documents separator) they were trained on, or without %s", flag, path, err, flag)
	}
	return nil
}

// recordVocab is the vocabulary stored with the weights.
func recordVocab(rec *record) (*textdata.Vocab, error) {
	if rec == nil || rec.vocab == "" {
		return nil, fmt.Errorf("the weights carry no vocabulary (metadata %s): train them with this program on the text dataset", mdVocab)
	}
	v, err := textdata.ParseVocab(rec.vocab)
	if err != nil {
		return nil, fmt.Errorf("the weights' metadata %s: %v", mdVocab, err)
	}
	return v, nil
}

// positionalSplit is split for a text dataset: the training windows and
// the validation windows of the split by position (the spec's
// testSplit), whatever --validation-split says; seed seeds the windows.
func (s *textSource) positionalSplit(n int, seed int64) (train, val []int) {
	s.seed = uint64(seed)
	s.rng = rand.New(rand.NewPCG(s.seed, 1))
	for i := range n {
		if i < s.nTrain {
			train = append(train, i)
		} else {
			val = append(val, i)
		}
	}
	return train, val
}

// correct counts the positions of a training batch whose largest logit
// is the next token, and the positions that have a label: all of them,
// but in documents mode, where the padding's rows of zero labels do not
// count.
func (s *textSource) correct(meta *Meta, out, labels []float32) (correct, labelled int) {
	V := meta.vocabCapacity()
	correct, labelled = tokenCorrect(out[:len(labels)], labels, V)
	if !s.docs {
		labelled = len(labels) / V
	}
	return correct, labelled
}

// tokenCorrect is tokenLoss's counts alone: the rows of V logits whose
// first largest logit is their one-hot target, and the rows that have a
// target (a row of zero labels, a padded position, is neither). A
// training step counts its batch's with it after every step, where
// tokenLoss's exponentials (a GPT's 16,384 rows of 89 logits) cost a GPU
// step's time again.
func tokenCorrect(logits, onehot []float32, V int) (correct, labelled int) {
	for p := 0; p*V < len(onehot); p++ {
		row, hot := logits[p*V:(p+1)*V], onehot[p*V:(p+1)*V]
		best, mx := 0, float32(math.Inf(-1))
		t := 0 // argmax(hot), in the same pass
		for i, v := range row {
			if v > mx {
				best, mx = i, v
			}
			if hot[i] > hot[t] {
				t = i
			}
		}
		if hot[t] == 0 {
			continue // no target
		}
		labelled++
		if best == t {
			correct++
		}
	}
	return correct, labelled
}

// evaluate is evaluate for a language model on a text dataset:
// each sample's output is T rows of logits (one per position, the
// vocabulary's ids wide) and its labels the T next-token ids; the loss
// is the mean over positions of softmax cross-entropy, the accuracy the
// share of positions whose largest logit is the next token, both over the
// positions that have a label (in documents mode not the padding).
// Samples counts windows.
func (s *textSource) evaluate(m Model, ds *dataset, indices []int, meta *Meta) (evalResult, error) {
	B, T, V := meta.Batch, s.T, meta.vocabCapacity()
	x := m.InferInput(false)
	labels := make([]float32, B*T*V)
	per := len(x) / B
	rows := newRowInference(m)
	loader := newBatchLoader(ds, B)
	defer loader.stop()
	loader.start(indices)
	var lossSum float64
	correct, counted := 0, 0
	for start := 0; start < len(indices); start += B {
		n := min(B, len(indices)-start)
		if err := loader.next(x[:n*per], labels[:n*T*V]); err != nil {
			return evalResult{}, err
		}
		out := rows.run(x, n)
		l, c, k := tokenLoss(out[:n*T*V], labels[:n*T*V], V)
		lossSum += l
		correct += c
		counted += k
	}
	r := evalResult{Samples: len(indices), Correct: correct}
	if counted > 0 {
		r.Accuracy = float64(correct) / float64(counted)
		r.Loss = lossSum / float64(counted)
	}
	r.accuracy, r.loss = r.Accuracy, r.Loss
	return r, nil
}

// tokenLoss is the summed softmax cross-entropy of rows of V logits
// against their one-hot target rows, the number of rows whose largest
// logit is the target, and the number of rows counted: a row whose
// targets are all 0 (a padded position) is skipped.
func tokenLoss(logits, onehot []float32, V int) (sum float64, correct, counted int) {
	for p := 0; p*V < len(onehot); p++ {
		t := argmax(onehot[p*V : (p+1)*V])
		if onehot[p*V+t] == 0 {
			continue // no target
		}
		counted++
		row := logits[p*V : (p+1)*V]
		best, mx := 0, math.Inf(-1)
		for i, v := range row {
			if float64(v) > mx {
				best, mx = i, float64(v)
			}
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		sum += mx + math.Log(z) - float64(row[t])
		if best == t {
			correct++
		}
	}
	return sum, correct, counted
}

// argmax is the index of the first largest value.
func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
