package app

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/mlbuild/mlbuild/rt/textdata"
)

// padBigram is the bigram of a model trained on documents: its ids are
// the vocabulary's, then three that were never a target (their logits
// the largest, so that drawing them shows), then the pad id, whose logit
// is the largest once the context holds end ids and negligible before.
type padBigram struct {
	*bigram
	pad    int32
	end    int
	logits []float32
}

func (m *padBigram) NextLogits(ctx []int32, keep int) []float32 {
	b := m.bigram.NextLogits(ctx, keep)
	copy(m.logits, b)
	for i := len(b); i < int(m.pad); i++ {
		m.logits[i] = 100
	}
	m.logits[m.pad] = -50
	if len(ctx) >= m.end {
		m.logits[m.pad] = 50
	}
	return m.logits
}

// TestGenerateStopsAtPad: a model trained on documents ends its text when
// it draws the pad id (the end of a document): generate returns the ids up
// to it, writes the tokens before it, and the command then its newline;
// the ids between the vocabulary and the pad id are never drawn, and
// before the pad the text is the model's without documents.
func TestGenerateStopsAtPad(t *testing.T) {
	const T = 64
	v, bg, _ := textFixture(t, T)
	pad := int32(v.Size() + 3)
	vp, err := textdata.ParseVocab(v.String() + ";pad=" + strconv.Itoa(int(pad)))
	if err != nil {
		t.Fatal(err)
	}
	prompt := "Call me"
	m := &padBigram{bigram: bg, pad: pad, end: len(prompt) + 5, logits: make([]float32, pad+1)}
	var plain bytes.Buffer
	if _, err := generate(&plain, bg, v, prompt, 60, Sampling{}, 1); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sampling{{}, {Temperature: 0.8, TopK: 200}, {Temperature: 1}} {
		var out bytes.Buffer
		bg.last = nil
		ids, err := generate(&out, m, vp, prompt, 60, s, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 6 || ids[5] != pad || utf8.RuneCountInString(out.String()) != 5 {
			t.Errorf("%+v: ids %v and text %q, want 5 tokens and the pad id %d, which ends the text", s, ids, out.String(), pad)
		}
		for _, id := range ids {
			if int(id) >= v.Size() && id != pad {
				t.Errorf("%+v: drew id %d, which was never a target", s, id)
			}
		}
		if s.Temperature == 0 && out.String() != string([]rune(plain.String())[:5]) {
			t.Errorf("greedy text %q before the pad, want the start of %q", out.String(), plain.String())
		}
	}
	// The command: the text up to the pad, then the newline.
	lin := newLinearModel()
	bg.last = nil
	lm := struct {
		*linearModel
		*padBigram
	}{lin, m}
	lin.meta.Readers = []*Reader{Text}
	lin.meta.Data = DataSpec{Format: "text", Task: "classification", Files: []string{"moby-dick.txt"}, Tokens: "char", TestSplit: 0.1, Documents: "\n\n"}
	lin.meta.OutputShape = []int{T, int(pad) + 1}
	lin.meta.rec = &record{vocab: vp.String()}
	w := filepath.Join(t.TempDir(), "w.safetensors")
	if err := saveWeights(lm, w); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := Run(lm, []string{"generate", "--weights", w, "--prompt", prompt, "--tokens", "60", "--temperature", "0"}, &out, &errs); code != 0 || out.String() != string([]rune(plain.String())[:5])+"\n" {
		t.Errorf("generate: exit %d, stdout %q, want %q and a newline; %s", code, out.String(), string([]rune(plain.String())[:5]), errs.String())
	}
	// A model too narrow for the weights' pad id is refused.
	lin.meta.OutputShape = []int{T, int(pad)}
	out.Reset()
	errs.Reset()
	if code := Run(lm, []string{"generate", "--weights", w, "--prompt", prompt}, &out, &errs); code != exitFailure || !bytes.Contains(errs.Bytes(), []byte("pads documents with id")) {
		t.Errorf("pad id past the model's ids: exit %d, %s", code, errs.String())
	}
}

// TestKVCacheCheckSkipsPadding: the KV cache's checks feed a padded
// model every id but its padding id, which the decode plan does not
// mask (a prefill over it would disagree with the decode), and an
// unpadded one every id.
func TestKVCacheCheckSkipsPadding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		meta Meta
		want [4]bool // the ids drawn
	}{
		{Meta{Padded: true, PadID: 2}, [4]bool{true, true, false, true}},
		{Meta{Padded: true, PadID: 3}, [4]bool{true, true, true, false}},
		{Meta{}, [4]bool{true, true, true, true}},
	} {
		var seen [4]bool
		for range 1000 {
			seen[checkID(&c.meta, 4, rng)] = true
		}
		if seen != c.want {
			t.Errorf("padded %v, id %d: drew %v, want %v", c.meta.Padded, c.meta.PadID, seen, c.want)
		}
	}
}
