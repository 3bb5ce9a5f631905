package app

import (
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/textdata"
)

const whaleText = "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse, and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of the world.\n"

// textMeta is the Meta of a language model of context T over the files of
// dir, the last tenth held out.
func textMeta(T, vocab int, files ...string) *Meta {
	return &Meta{Name: "gpt", InputShape: []int{T}, OutputShape: []int{T, vocab}, Classes: T * vocab, Batch: 4, Readers: []*Reader{Text},
		Defaults: Defaults{Loss: "softmax_cross_entropy", Seed: 3},
		Data:     DataSpec{Format: "text", Task: "classification", Files: files, Tokens: "char", TestSplit: 0.1}}
}

// TestTextDataset opens a text dataset as training does: the labels are
// the inputs shifted by one, the split is by position (the validation
// windows are the text's tail and the same every time), and the vocabulary
// recorded for the weights refuses another text.
func TestTextDataset(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat(whaleText, 4)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte(text), 0o644)
	const T = 12
	meta := textMeta(T, 64, "a.txt")
	ds, err := openTrainSet(meta, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.close()
	if meta.rec == nil || meta.rec.vocab == "" {
		t.Fatal("training recorded no vocabulary")
	}
	v, err := textdata.ParseVocab(meta.rec.vocab)
	if err != nil {
		t.Fatal(err)
	}
	train, val := ds.split(0.5, 9) // --validation-split does not move a text's split
	runes := utf8.RuneCountInString(text)
	cut := len(text) - int(float64(len(text))*0.1)
	tail := text[cut:]
	if len(train) != utf8.RuneCountInString(text[:cut])/T || len(val) != utf8.RuneCountInString(tail)/T || len(train)+len(val) != ds.n {
		t.Fatalf("%d training and %d validation windows of %d runes", len(train), len(val), runes)
	}
	const V = 64
	window := func(idx []int) []string {
		x, y := make([]float32, len(idx)*T), make([]float32, len(idx)*T*V)
		for i := range y {
			y[i] = 7 // fill must clear the rows it writes
		}
		if err := ds.fill(x, y, idx); err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := range idx {
			ids := make([]int32, T+1)
			for j := range T {
				ids[j] = int32(x[i*T+j])
				row := y[(i*T+j)*V : (i*T+j+1)*V]
				var ones, sum float32
				for _, e := range row {
					sum += e
					if e == 1 {
						ones++
					}
				}
				if ones != 1 || sum != 1 {
					t.Fatalf("label %d of window %d is not one-hot: %v", j, i, row)
				}
				ids[j+1] = int32(argmax(row))
				if j > 0 && ids[j] != int32(argmax(y[(i*T+j-1)*V:(i*T+j)*V])) {
					t.Fatalf("label %d of window %d is not the next input %v", j-1, i, x[i*T+j])
				}
			}
			out = append(out, v.Decode(ids))
		}
		return out
	}
	for _, w := range window(val) {
		if !strings.Contains(tail, w) {
			t.Errorf("validation window %q is not in the text's last tenth", w)
		}
	}
	if a, b := window(val[:3]), window(val[:3]); strings.Join(a, "|") != strings.Join(b, "|") {
		t.Errorf("validation windows change: %q then %q", a, b)
	}
	if a, b := window(train[:3]), window(train[:3]); strings.Join(a, "|") == strings.Join(b, "|") {
		t.Errorf("training windows repeat: %q", a)
	}
	// The vocabulary travels in the weights' metadata; another text is refused.
	md := map[string]string{}
	meta.rec.metadata(md)
	rec, err := readRecord(meta, "w.safetensors", md)
	if err != nil {
		t.Fatal(err)
	}
	test, err := openTestSet(meta, dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	if test.n != len(val) {
		t.Errorf("eval reads %d windows, want the %d of the validation split", test.n, len(val))
	}
	test.close()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte(strings.Replace(text, "Call", "Kall", 1)), 0o644)
	if _, err := openTestSet(meta, dir, rec); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("another text with the stored vocabulary: %v", err)
	}
	if _, err := readRecord(meta, "w.safetensors", map[string]string{}); err == nil || !strings.Contains(err.Error(), "w.safetensors holds no mlbuild.text.vocab") {
		t.Errorf("weights without a vocabulary: %v", err)
	}
	notLM := textMeta(T, 64, "a.txt")
	notLM.OutputShape = nil
	if _, err := openTrainSet(notLM, dir, 0); err == nil || !strings.Contains(err.Error(), "this model's output is 768") {
		t.Errorf("a classifier on a text dataset: %v", err)
	}
	small := textMeta(T, 8, "a.txt")
	if _, err := openTrainSet(small, dir, 0); err == nil || !strings.Contains(err.Error(), "but the model has 8 ids") {
		t.Errorf("a vocabulary larger than the model's: %v", err)
	}
}

// lmModel is linearModel with a language model's seam: the bigram of
// generate_test.go. Its weights are linearModel's; the vocabulary travels
// in their metadata as a trained model's would.
type lmModel struct {
	*linearModel
	*bigram
}

// TestGenerateCommand runs `generate` on weights that carry a vocabulary:
// the text streams to stdout, the same seed repeats it (on --threads 2
// too, which sets the kernels' threads), a prompt outside
// the vocabulary is a usage error, a model whose padding id is a token is
// refused, weights without a vocabulary are refused, and a program of
// another dataset has no generate.
func TestGenerateCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.txt")
	text := strings.Repeat(whaleText, 3)
	os.WriteFile(path, []byte(text), 0o644)
	c, err := textdata.Open([]string{path}, textdata.Options{Mode: textdata.Chars, Context: 8})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	lin := newLinearModel()
	m := lmModel{lin, newBigram(t, c.Vocab, text, 8)}
	lin.meta.Readers = []*Reader{Text}
	lin.meta.Data = DataSpec{Format: "text", Task: "classification", Files: []string{"a.txt"}, Tokens: "char", TestSplit: 0.1}
	lin.meta.OutputShape = []int{8, c.Vocab.Size()}
	lin.meta.rec = &record{vocab: c.Vocab.String()}
	w := filepath.Join(dir, "w.safetensors")
	if err := saveWeights(m, w); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := Run(m, append([]string{"generate", "--weights", w}, args...), &out, &errs)
		return code, out.String(), errs.String()
	}
	code, out, errs := run("--prompt", "Call me", "--tokens", "60", "--seed", "4")
	if code != 0 || utf8.RuneCountInString(out) != 61 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("exit %d, %d runes %q, stderr %s", code, utf8.RuneCountInString(out), out, errs)
	}
	if _, again, _ := run("--prompt", "Call me", "--tokens", "60", "--seed", "4"); again != out {
		t.Errorf("the same seed wrote %q, then %q", out, again)
	}
	// Each token reaches stdout as it is drawn: 60 writes of one token,
	// then the newline.
	var streamed writeLog
	if code := Run(m, []string{"generate", "--weights", w, "--prompt", "Call me", "--tokens", "60", "--seed", "4"}, &streamed, io.Discard); code != 0 ||
		len(streamed.writes) != 61 || strings.Join(streamed.writes, "") != out {
		t.Errorf("stdout had %d writes %q, want the 60 tokens one at a time and the newline of %q", len(streamed.writes), streamed.writes, out)
	}
	code, _, errs = run("--prompt", "Call me 🐋")
	if code != exitUsage || !strings.Contains(errs, "'🐋' (U+1F40B) is not in the vocabulary") {
		t.Errorf("prompt outside the vocabulary: exit %d, %s", code, errs)
	}
	defer cpu.SetThreads(cpu.Threads())
	cpu.SetThreads(1)
	if code, threaded, errs := run("--prompt", "Call me", "--tokens", "60", "--seed", "4", "--threads", "2"); code != 0 || threaded != out || cpu.Threads() != 2 {
		t.Errorf("--threads 2: exit %d, %d threads after, %q (on all cores %q), %s", code, cpu.Threads(), threaded, out, errs)
	}
	code, _, errs = run("--prompt", "Call", "--threads", "-1")
	if code != exitUsage || !strings.Contains(errs, "--threads must be 0") {
		t.Errorf("--threads -1: exit %d, %s", code, errs)
	}
	code, _, errs = run("--prompt", "Call", "--top-k", "-1")
	if code != exitUsage || !strings.Contains(errs, "--top-k -1") {
		t.Errorf("--top-k -1: exit %d, %s", code, errs)
	}
	// a model that masks a token of its vocabulary as padding: the
	// decode plan cannot honour the mask
	lin.meta.Padded, lin.meta.PadID = true, 3
	code, _, errs = run("--prompt", "Call")
	if want := "the model's attention masks id 3 as padding, but that id is the token"; code != exitFailure || !strings.Contains(errs, want) {
		t.Errorf("padding id 3 of a vocabulary of %d: exit %d, %s; want %q", c.Vocab.Size(), code, errs, want)
	}
	lin.meta.PadID = c.Vocab.Size() // an id of its own: generates
	if code, again, errs := run("--prompt", "Call me", "--tokens", "60", "--seed", "4"); code != 0 || again != out {
		t.Errorf("padding id %d, past the vocabulary: exit %d, %q (unpadded %q), %s", c.Vocab.Size(), code, again, out, errs)
	}
	lin.meta.Padded = false
	lin.meta.rec = nil
	bare := filepath.Join(dir, "bare.safetensors")
	saveWeights(m, bare)
	var o, e bytes.Buffer
	if code := Run(m, []string{"generate", "--weights", bare, "--prompt", "Call"}, &o, &e); code != exitFailure || !strings.Contains(e.String(), "holds no mlbuild.text.vocab") {
		t.Errorf("weights without a vocabulary: exit %d, %s", code, e.String())
	}
	other := newLinearModel()
	if code := Run(other, []string{"generate", "--prompt", "x"}, &o, &e); code != exitUsage || !strings.Contains(e.String(), "not text") {
		t.Errorf("generate in a program of images: exit %d, %s", code, e.String())
	}
}

// TestTextHelp: a text model's program lists generate, not predict or
// sample, and names its files.
func TestTextHelp(t *testing.T) {
	m := newBigramLM(8, 32, 4, "moby.txt", "more.txt")
	var out bytes.Buffer
	Run(m, []string{"--help"}, &out, &out)
	if s := out.String(); !strings.Contains(s, "generate") || strings.Contains(s, "predict") || strings.Contains(s, "sample") {
		t.Errorf("usage of a text model's program:\n%s", s)
	}
	out.Reset()
	Run(m, []string{"info"}, &out, &out)
	if !strings.Contains(out.String(), "text (moby.txt, more.txt)") {
		t.Errorf("info:\n%s", out.String())
	}
	out.Reset()
	Run(m, []string{"eval", "--help"}, &out, &out)
	if !strings.Contains(out.String(), "moby.txt, more.txt: the last 0.1 of the text") {
		t.Errorf("eval --help:\n%s", out.String())
	}
}

// TestTokenCorrectCountsAsTokenLoss: the count a training step takes
// from tokenCorrect is tokenLoss's, on rows with ties for the largest
// logit, NaNs and infinities, and padded rows (labels all 0) that
// neither counts.
func TestTokenCorrectCountsAsTokenLoss(t *testing.T) {
	const rows, V = 2000, 7
	r := rand.New(rand.NewPCG(9, 10))
	logits, onehot := make([]float32, rows*V), make([]float32, rows*V)
	for i := range logits {
		logits[i] = float32(r.IntN(4)) // many ties
	}
	padded := 0
	for p := range rows {
		if p%7 == 5 {
			padded++
		} else {
			onehot[p*V+r.IntN(V)] = 1
		}
		switch p % 50 {
		case 1:
			logits[p*V+r.IntN(V)] = float32(math.NaN())
		case 2:
			logits[p*V+r.IntN(V)] = float32(math.Inf(1))
		case 3:
			for j := range V {
				logits[p*V+j] = float32(math.Inf(-1))
			}
		}
	}
	_, want, counted := tokenLoss(logits, onehot, V)
	if got, _ := tokenCorrect(logits, onehot, V); got != want || want == 0 || want == rows || counted != rows-padded {
		t.Fatalf("tokenCorrect counts %d, tokenLoss %d of %d rows (want %d, the rows with a label)", got, want, counted, rows-padded)
	}
}

// bf16LM is lmModel with a decode that can multiply in bf16: it records
// each DecodeBF16 call and the first weight it would round then.
type bf16LM struct {
	lmModel
	def     bool
	calls   []bool
	rounded []float32
}

func (m *bf16LM) DefaultBF16() bool { return m.def }
func (m *bf16LM) DecodeBF16(on bool) {
	m.calls = append(m.calls, on)
	m.rounded = append(m.rounded, m.State()[lmW])
}

// TestGeneratePrecision: --precision picks what DecodeBF16 is told (the
// model's default without the flag), once, after the weights are loaded
// (it rounds them); a value other than f32 and bf16, and bf16 for a model
// whose decode has no bf16 (here the bigram, as --kv-cache=false and the
// GPU programs), are usage errors that say why, before any text.
func TestGeneratePrecision(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.txt")
	text := strings.Repeat(whaleText, 3)
	os.WriteFile(path, []byte(text), 0o644)
	c, err := textdata.Open([]string{path}, textdata.Options{Mode: textdata.Chars, Context: 8})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	lin := newLinearModel()
	plain := lmModel{lin, newBigram(t, c.Vocab, text, 8)}
	lin.meta.Readers = []*Reader{Text}
	lin.meta.Data = DataSpec{Format: "text", Task: "classification", Files: []string{"a.txt"}, Tokens: "char", TestSplit: 0.1}
	lin.meta.OutputShape = []int{8, c.Vocab.Size()}
	lin.meta.rec = &record{vocab: c.Vocab.String()}
	lin.state[lmW] = 0.75
	w := filepath.Join(dir, "w.safetensors")
	if err := saveWeights(plain, w); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		def  bool
		args []string
		want bool
	}{
		{false, nil, false},
		{true, nil, true},
		{true, []string{"--precision", "f32"}, false},
		{false, []string{"--precision", "bf16"}, true},
	} {
		m := &bf16LM{lmModel: plain, def: tc.def}
		lin.state[lmW] = 0 // loadWeights puts back 0.75
		var out, errs bytes.Buffer
		code := Run(m, append([]string{"generate", "--weights", w, "--prompt", "Call", "--tokens", "5"}, tc.args...), &out, &errs)
		if code != 0 || !slices.Equal(m.calls, []bool{tc.want}) || m.rounded[0] != 0.75 {
			t.Errorf("default bf16 %v, %v: exit %d, DecodeBF16 calls %v (want [%v]) on the first weight %v (want the loaded 0.75); %s",
				tc.def, tc.args, code, m.calls, tc.want, m.rounded, errs.String())
		}
	}
	for _, tc := range []struct {
		m    Model
		args []string
		want string
	}{
		{&bf16LM{lmModel: plain}, []string{"--precision", "fp8"}, `--precision "fp8": want f32 or bf16`},
		{&bf16LM{lmModel: plain}, []string{"--precision", "BF16"}, `--precision "BF16": want f32 or bf16`},
		{plain, []string{"--precision", "bf16"}, "--precision bf16: this program generates in f32 only"},
	} {
		var out, errs bytes.Buffer
		code := Run(tc.m, append([]string{"generate", "--weights", w, "--prompt", "Call", "--tokens", "5"}, tc.args...), &out, &errs)
		if code != exitUsage || !strings.Contains(errs.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out.String(), errs.String(), exitUsage, tc.want)
		}
		if m, ok := tc.m.(*bf16LM); ok && len(m.calls) > 0 {
			t.Errorf("%v: DecodeBF16 called %v", tc.args, m.calls)
		}
	}
	var out, errs bytes.Buffer
	if code := Run(plain, []string{"generate", "--weights", w, "--prompt", "Call", "--tokens", "5", "--precision", "f32"}, &out, &errs); code != 0 {
		t.Errorf("--precision f32 on a model without bf16: exit %d, %s", code, errs.String())
	}
}

// writeLog records each Write's bytes, to see how output arrives.
type writeLog struct{ writes []string }

func (l *writeLog) Write(b []byte) (int, error) {
	l.writes = append(l.writes, string(b))
	return len(b), nil
}
