package app

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/textdata"
)

// mobyDickDir is the folder of `make data-text`'s moby-dick.txt, or a skip.
func mobyDickDir(t *testing.T) string {
	dir := os.Getenv("MLBUILD_TEXT_DIR")
	if dir == "" {
		t.Skip("MLBUILD_TEXT_DIR is not set (make data-text)")
	}
	return dir
}

// documentsMeta is textMeta over Moby-Dick cut into its paragraphs.
func documentsMeta(T, vocab int) *Meta {
	meta := textMeta(T, vocab, "moby-dick.txt")
	meta.Data.Documents = "\n\n"
	return meta
}

// TestTextDocuments opens Moby-Dick in documents mode as training does:
// a sample per paragraph, each the paragraph's tokens (from an offset
// inside it when it is longer than T) then the pad id V−1; each label the
// next token one-hot, the pad id after the paragraph's last token, and a
// row of zeros after it. The validation samples are the same every time,
// the training ones drawn afresh, and --limit does not move the
// validation ones; the pad id is stored with the
// vocabulary; a model without an id to spare is refused; and the windows
// are not offered to a device (resident).
func TestTextDocuments(t *testing.T) {
	dir := mobyDickDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "moby-dick.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	const T, V, pad = 64, 90, 89 // Moby-Dick has 89 distinct characters
	meta := documentsMeta(T, V)
	ds, err := openTrainSet(meta, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.close()
	src := ds.text.(*textSource)
	if !strings.HasSuffix(meta.rec.vocab, ";pad=89") {
		t.Errorf("recorded vocabulary %s does not end in the pad id 89", quoteShort(meta.rec.vocab))
	}
	v, err := textdata.ParseVocab(meta.rec.vocab)
	if err != nil {
		t.Fatal(err)
	}
	train, val := ds.split(0.5, 9)
	c := src.c
	wantTrain, wantVal := splitParagraphs(text[:c.Train.End]), splitParagraphs(text[c.Val.Start:])
	if len(train) != len(wantTrain) || len(val) != len(wantVal) || ds.n != len(train)+len(val) {
		t.Fatalf("%d training and %d validation samples, want the %d and %d paragraphs of the splits", len(train), len(val), len(wantTrain), len(wantVal))
	}
	if r, err := src.resident(nil); r != nil || err != nil {
		t.Errorf("documents offered to a device: %v, %v", r, err)
	}
	// samples checks the samples idx, of the paragraphs docs, and returns
	// their inputs and labels, and how many reached the paragraph's end
	// before T and how many did not.
	samples := func(idx []int, docs []string) (string, int, int) {
		x, y := make([]float32, len(idx)*T), make([]float32, len(idx)*T*V)
		for i := range y {
			y[i] = 7 // fill must clear the rows it writes
		}
		if err := ds.fill(x, y, idx); err != nil {
			t.Fatal(err)
		}
		short, full := 0, 0
		for k, i := range idx {
			doc := docs[i-idx[0]]
			ids := make([]int32, T)
			n := T
			for j := range T {
				ids[j] = int32(x[k*T+j])
				if ids[j] == pad && n == T {
					n = j
				}
				if j >= n && ids[j] != pad {
					t.Fatalf("sample %d: id %d after the pad id at %d", i, ids[j], n)
				}
			}
			for j := range T {
				row := y[(k*T+j)*V : (k*T+j+1)*V]
				var sum float32
				for _, e := range row {
					sum += e
				}
				want := float32(1)
				if j >= n {
					want = 0
				}
				if sum != want || (want == 1 && row[argmax(row)] != 1) {
					t.Fatalf("sample %d: label %d (of %d tokens) sums to %v, want %v: %v", i, j, n, sum, want, row)
				}
				switch {
				case j+1 < n && argmax(row) != int(ids[j+1]):
					t.Fatalf("sample %d: label %d is %d, not the next id %d", i, j, argmax(row), ids[j+1])
				case j+1 == n && n < T && argmax(row) != pad:
					t.Fatalf("sample %d: the label of the last token is %d, not the pad id", i, argmax(row))
				}
			}
			got := v.Decode(ids[:n])
			if n < T {
				short++
				if got != doc {
					t.Fatalf("sample %d is %q, want its paragraph %q", i, got, doc)
				}
			} else {
				full++
				if !strings.Contains(doc, got) {
					t.Fatalf("sample %d %q is not in its paragraph %q", i, got, doc)
				}
			}
		}
		return v.Decode(func() []int32 {
			ids := make([]int32, len(x))
			for i, f := range x {
				ids[i] = int32(f)
			}
			return ids
		}()), short, full
	}
	a, short, full := samples(train[:300], wantTrain)
	if short < 50 || full < 50 {
		t.Errorf("%d short and %d long paragraphs among the first 300", short, full)
	}
	if b, _, _ := samples(train[:300], wantTrain); a == b {
		t.Error("the training samples of long paragraphs are drawn once")
	}
	a, _, _ = samples(val, wantVal)
	if b, _, _ := samples(val, wantVal); a != b {
		t.Error("the validation samples change")
	}
	// --limit leaves the validation samples as they are.
	limited, err := openTrainSet(documentsMeta(T, V), dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer limited.close()
	_, lval := limited.split(0.5, 9)
	x, y := make([]float32, len(val)*T), make([]float32, len(val)*T*V)
	lx := make([]float32, len(val)*T)
	if err := ds.fill(x, y, val); err != nil {
		t.Fatal(err)
	}
	if err := limited.fill(lx, y, lval); err != nil {
		t.Fatal(err)
	}
	if len(lval) != len(val) || !slices.Equal(x, lx) {
		t.Errorf("--limit 100 moves the validation samples")
	}
	// Without an id to spare for the pad, the model is refused.
	if _, err := openTrainSet(documentsMeta(T, 89), dir, 0); err == nil || !strings.Contains(err.Error(), "documents mode reserves id classes−1 = 88 (the model's last id) for padding: raise classes to 90") {
		t.Errorf("a model of 89 ids: %v", err)
	}
}

// splitParagraphs is the documents of text at "\n\n", the empty ones
// left out, as strings.Split finds them.
func splitParagraphs(text string) []string {
	var docs []string
	for _, d := range strings.Split(text, "\n\n") {
		if d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

// TestTokenLossSkipsPadding: rows of zero labels are not counted by
// tokenLoss, tokenCorrect or (in documents mode) the training accuracy's
// positions, and the others' sum is that of the rows alone.
func TestTokenLossSkipsPadding(t *testing.T) {
	const V = 5
	logits := []float32{
		1, 2, 3, 4, 5, // target 4: correct
		5, 4, 3, 2, 1, // padding
		0, 0, 9, 0, 0, // target 1: wrong
		9, 0, 0, 0, 0, // padding (its argmax is 0, as its zero label's)
	}
	onehot := make([]float32, len(logits))
	onehot[4], onehot[2*V+1] = 1, 1
	sum, correct, counted := tokenLoss(logits, onehot, V)
	want, wantCorrect, wantCounted := tokenLoss(append(logits[:V:V], logits[2*V:3*V]...), append(onehot[:V:V], onehot[2*V:3*V]...), V)
	if sum != want || correct != wantCorrect || counted != wantCounted || counted != 2 || correct != 1 {
		t.Errorf("tokenLoss with padding: %v, %d of %d; without: %v, %d of %d, want 1 of 2", sum, correct, counted, want, wantCorrect, wantCounted)
	}
	if got, _ := tokenCorrect(logits, onehot, V); got != 1 {
		t.Errorf("tokenCorrect counts %d, want 1 (the padding never)", got)
	}
	// training's accuracy: of the 2 positions with a label in documents
	// mode, of all 4 in a plain text
	meta := &Meta{OutputShape: []int{4, V}}
	for _, c := range []struct {
		docs bool
		want int
	}{{true, 2}, {false, 4}} {
		if got, n := (&textSource{docs: c.docs}).correct(meta, logits, onehot); got != 1 || n != c.want {
			t.Errorf("documents %v: correct counts %d of %d, want 1 of %d", c.docs, got, n, c.want)
		}
	}
}

// TestTrainTextDocuments trains the bigram language model on Moby-Dick's
// paragraphs: eval's loss and accuracy are those of the counted tokens
// (the loss below uniform guessing), the weights carry the pad id, and
// weights trained without documents (no pad id) are refused by train
// --init, train --resume and eval of the documents text, and the other
// way round.
func TestTrainTextDocuments(t *testing.T) {
	dir := mobyDickDir(t)
	out := t.TempDir()
	const T, V = 128, 90
	docs := newBigramLM(T, V, 8, "moby-dick.txt")
	docs.meta.Data.Documents = "\n\n"
	plain := newBigramLM(T, V, 8, "moby-dick.txt")
	wd, wp := filepath.Join(out, "docs.safetensors"), filepath.Join(out, "plain.safetensors")
	var o, e bytes.Buffer
	for _, r := range []struct {
		m *bigramLM
		w string
	}{{docs, wd}, {plain, wp}} {
		if code := Run(r.m, []string{"train", "--data", dir, "--out", r.w, "--epochs", "1", "--limit", "800", "--quiet"}, &o, &e); code != 0 {
			t.Fatalf("train: exit %d\n%s", code, e.String())
		}
	}
	o.Reset()
	if code := Run(docs, []string{"eval", "--data", dir, "--weights", wd, "--json"}, &o, &e); code != 0 {
		t.Fatalf("eval: exit %d\n%s", code, e.String())
	}
	loss, acc := evalLossAccuracy(o.String())
	if !(loss > 1.5 && loss < 0.7*math.Log(V)) || !(acc > 0.15 && acc < 0.5) {
		t.Errorf("eval after training on paragraphs: loss %v (uniform: %.2f), accuracy %v\n%s", loss, math.Log(V), acc, o.String())
	}
	md, err := readMetadata(wd)
	if err != nil {
		t.Fatal(err)
	}
	// The same, counted here from the table eval loaded: the mean over the
	// positions with a label, which is not the mean over all of them.
	rec, err := readRecord(&docs.meta, wd, md)
	if err != nil {
		t.Fatal(err)
	}
	test, err := openTestSet(&docs.meta, dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]int, test.n)
	for i := range idx {
		idx[i] = i
	}
	x, y := make([]float32, test.n*T), make([]float32, test.n*T*V)
	if err := test.fill(x, y, idx); err != nil {
		t.Fatal(err)
	}
	test.close()
	var sum float64
	counted, correct := 0, 0
	for p, id := range x {
		row, hot := docs.state[int(id)*V:(int(id)+1)*V], y[p*V:(p+1)*V]
		target := argmax(hot)
		if hot[target] == 0 {
			continue
		}
		z := 0.0
		for _, l := range row {
			z += math.Exp(float64(l))
		}
		sum += math.Log(z) - float64(row[target])
		counted++
		if argmax(row) == target {
			correct++
		}
	}
	wantLoss, wantAcc, overAll := sum/float64(counted), float64(correct)/float64(counted), sum/float64(len(x))
	t.Logf("eval: loss %.4f, accuracy %.4f; counted here %.4f, %.4f over %d of %d positions (over all %.4f)", loss, acc, wantLoss, wantAcc, counted, len(x), overAll)
	if math.Abs(loss-wantLoss) > 1e-4 || math.Abs(acc-wantAcc) > 1e-4 || wantLoss-overAll < 0.05 {
		t.Errorf("eval: loss %v, accuracy %v; want %v and %v, the means over the %d positions with a label of %d (over all: %v)", loss, acc, wantLoss, wantAcc, counted, len(x), overAll)
	}
	if !strings.HasSuffix(md[mdVocab], ";pad=89") {
		t.Errorf("the weights' vocabulary %s carries no pad id 89", quoteShort(md[mdVocab]))
	}
	for _, tc := range []struct {
		m    *bigramLM
		from string
		want string
	}{
		{docs, wp, "pad id none (not cut into documents), not 89"},
		{plain, wd, "pad id 89, not none (not cut into documents)"},
	} {
		// (--epochs past the checkpoint's: a finished run's resume does nothing)
		ckpt := strings.TrimSuffix(tc.from, ".safetensors") + ".ckpt.safetensors"
		for _, from := range [][]string{{"--init", tc.from}, {"--resume", ckpt, "--epochs", "50"}} {
			e.Reset()
			w3 := filepath.Join(out, "w3.safetensors")
			args := append([]string{"train", "--data", dir, "--out", w3, "--checkpoint", filepath.Join(out, "w3.ckpt.safetensors"), "--epochs", "1", "--limit", "800", "--quiet"}, from...)
			if code := Run(tc.m, args, &o, &e); code != exitFailure || !strings.Contains(e.String(), "the weights' vocabulary is not this text's") || !strings.Contains(e.String(), tc.want) {
				t.Errorf("train %s %s: exit %d, %s", from[0], filepath.Base(from[1]), code, e.String())
			}
			if _, err := os.Stat(w3); err == nil {
				t.Errorf("train %s %s wrote %s", from[0], filepath.Base(from[1]), w3)
			}
		}
		e.Reset()
		if code := Run(tc.m, []string{"eval", "--data", dir, "--weights", tc.from}, &o, &e); code != exitFailure || !strings.Contains(e.String(), "does not match") {
			t.Errorf("eval of %s: exit %d, %s", filepath.Base(tc.from), code, e.String())
		}
	}
}
