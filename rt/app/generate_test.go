package app

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/textdata"
)

// bigram is a TokenModel that really computes: the log of the smoothed
// frequencies of each id after the last id of the context, counted from
// a text. It also checks the seam's keep contract.
type bigram struct {
	t      *testing.T
	T      int
	counts [][]float64
	logits []float32
	last   []int32 // the previous call's ctx
}

func newBigram(t *testing.T, v *textdata.Vocab, text string, T int) *bigram {
	ids, err := v.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	b := &bigram{t: t, T: T, counts: make([][]float64, v.Size()), logits: make([]float32, v.Size())}
	for i := range b.counts {
		b.counts[i] = make([]float64, v.Size())
	}
	for i := 1; i < len(ids); i++ {
		b.counts[ids[i-1]][ids[i]]++
	}
	return b
}

func (b *bigram) Context() int { return b.T }

func (b *bigram) NextLogits(ctx []int32, keep int) []float32 {
	if len(ctx) < 1 || len(ctx) > b.T {
		b.t.Fatalf("context of %d ids, want 1 to %d", len(ctx), b.T)
	}
	if keep > len(b.last) || keep > len(ctx) || !slices.Equal(ctx[:keep], b.last[:keep]) {
		b.t.Fatalf("keep %d, but the context %v does not start with the last call's %v", keep, ctx, b.last)
	}
	b.last = append(b.last[:0], ctx...)
	row := b.counts[ctx[len(ctx)-1]]
	var sum float64
	for _, c := range row {
		sum += c + 0.1
	}
	for i, c := range row {
		b.logits[i] = float32(math.Log((c + 0.1) / sum))
	}
	return b.logits
}

// textFixture is the vocabulary and a bigram model of Moby-Dick when
// MLBUILD_TEXT_DIR has it, else of a paragraph of it.
func textFixture(t *testing.T, T int) (*textdata.Vocab, *bigram, string) {
	text := strings.Repeat("Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse, and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of the world.\n", 3)
	path := filepath.Join(t.TempDir(), "a.txt")
	if dir := os.Getenv("MLBUILD_TEXT_DIR"); dir != "" {
		path = filepath.Join(dir, "moby-dick.txt")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text = string(raw)
	} else {
		os.WriteFile(path, []byte(text), 0o644)
	}
	c, err := textdata.Open([]string{path}, textdata.Options{Mode: textdata.Chars, Context: T})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return c.Vocab, newBigram(t, c.Vocab, text, T), text
}

// TestGenerateGreedy: at temperature 0 (and with top-k 1 at any
// temperature) each token is the most frequent follower of the one
// before, counted here from the text apart from the model.
func TestGenerateGreedy(t *testing.T) {
	v, m, text := textFixture(t, 8)
	follower := map[rune]map[rune]int{}
	rs := []rune(text)
	for i := 1; i < len(rs); i++ {
		if follower[rs[i-1]] == nil {
			follower[rs[i-1]] = map[rune]int{}
		}
		follower[rs[i-1]][rs[i]]++
	}
	for _, s := range []Sampling{{Temperature: 0}, {Temperature: 5, TopK: 1}} {
		var out bytes.Buffer
		if _, err := generate(&out, m, v, "Call me", 40, s, 1); err != nil {
			t.Fatal(err)
		}
		got := []rune("e" + out.String())
		for i := 1; i < len(got); i++ {
			best := 0
			for _, c := range follower[got[i-1]] {
				best = max(best, c)
			}
			if follower[got[i-1]][got[i]] != best {
				t.Fatalf("%+v: %q follows %q %d times, the most frequent follower %d times (output %q)", s, got[i], got[i-1], follower[got[i-1]][got[i]], best, out.String())
			}
		}
		t.Logf("%+v: %q", s, out.String())
	}
}

// TestGenerateTopK: every token drawn is among the K most likely after
// the one before; the same seed gives the same text, another seed another.
func TestGenerateTopK(t *testing.T) {
	v, m, _ := textFixture(t, 8)
	const k = 3
	var a, b, c bytes.Buffer
	ids, err := generate(&a, m, v, "Call me", 300, Sampling{Temperature: 1, TopK: k}, 7)
	if err != nil {
		t.Fatal(err)
	}
	prev, _ := v.ID('e')
	for _, id := range ids {
		row := m.counts[prev]
		above := 0
		for _, c := range row {
			if c > row[id] {
				above++
			}
		}
		if above >= k {
			t.Fatalf("drew %q after %q, but %d tokens are more likely", v.Decode([]int32{id}), v.Decode([]int32{prev}), above)
		}
		prev = id
	}
	generate(&b, m, v, "Call me", 300, Sampling{Temperature: 1, TopK: k}, 7)
	generate(&c, m, v, "Call me", 300, Sampling{Temperature: 1, TopK: k}, 8)
	if a.String() != b.String() {
		t.Error("the same seed gave two texts")
	}
	if a.String() == c.String() {
		t.Error("seeds 7 and 8 gave the same 300 tokens")
	}
}

// TestPickTemperature: the frequencies of many draws from fixed logits
// match softmax(logits/T), and a lower temperature sharpens them.
func TestPickTemperature(t *testing.T) {
	logits := []float32{2, 1, 0, -1, 0.5}
	for _, temp := range []float64{0.5, 1, 2} {
		want := make([]float64, len(logits))
		var sum float64
		for i, l := range logits {
			want[i] = math.Exp(float64(l) / temp)
			sum += want[i]
		}
		const n = 200000
		counts := make([]float64, len(logits))
		rng := rand.New(rand.NewPCG(1, 1))
		var scratch []int
		for range n {
			counts[Sampling{Temperature: temp}.pick(logits, rng, &scratch)]++
		}
		for i := range want {
			p := want[i] / sum
			sd := math.Sqrt(p * (1 - p) / n)
			if math.Abs(counts[i]/n-p) > 5*sd {
				t.Errorf("T=%v: id %d drawn %.4f of the time, want %.4f", temp, i, counts[i]/n, p)
			}
		}
	}
	// top-k with ties at the edge keeps the lower ids
	var scratch []int
	rng := rand.New(rand.NewPCG(2, 2))
	for range 1000 {
		if id := (Sampling{Temperature: 1, TopK: 2}).pick([]float32{0, 1, 1, 1}, rng, &scratch); id != 1 && id != 2 {
			t.Fatalf("top-2 of [0 1 1 1] drew id %d", id)
		}
	}
}

// TestGeneratePrompt: a prompt outside the vocabulary, or empty, is a
// usage error naming the character; the window slides past T.
func TestGeneratePrompt(t *testing.T) {
	v, m, _ := textFixture(t, 4)
	for prompt, want := range map[string]string{"Call me 🐋": "character '🐋' (U+1F40B) is not in the vocabulary", "": "--prompt is empty"} {
		_, err := generate(io_discard{}, m, v, prompt, 5, Sampling{}, 1)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), want) {
			t.Errorf("prompt %q: %v, want a usage error with %q", prompt, err, want)
		}
	}
	// a prompt longer than T: the bigram checks each call's context and keep
	if _, err := generate(io_discard{}, m, v, "Call me Ishmael", 20, Sampling{Temperature: 1}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(io_discard{}, threeLogits{}, v, "Call", 1, Sampling{}, 1); err == nil || !strings.Contains(err.Error(), "logits for a vocabulary") {
		t.Errorf("a model of another vocabulary size: %v", err)
	}
}

// threeLogits is a model of another vocabulary: three ids.
type threeLogits struct{}

func (threeLogits) Context() int { return 4 }
func (threeLogits) NextLogits(ctx []int32, _ int) []float32 {
	return []float32{0, 1, float32(len(ctx))}
}

type io_discard struct{}

func (io_discard) Write(b []byte) (int, error) { return len(b), nil }

// windowLog is a TokenModel that records each call's context and keep.
type windowLog struct {
	T, V  int
	calls [][2]int // len(ctx), keep
	last  []int32
}

func (w *windowLog) Context() int { return w.T }

func (w *windowLog) NextLogits(ctx []int32, keep int) []float32 {
	w.calls = append(w.calls, [2]int{len(ctx), keep})
	w.last = append(w.last[:0], ctx...)
	return make([]float32, w.V)
}

// TestGenerateWindowJumps: once the text fills the context, generate moves
// the window ahead by half of it, not by one id, so a model with a KV
// cache computes about two positions a token (keep is the previous call's
// whole context between jumps and 0 at a jump), every context holds
// between T/2 and T ids, the last ones; a prompt longer than T starts
// from its last T ids.
func TestGenerateWindowJumps(t *testing.T) {
	const T, n = 8, 100
	vocab, _, _ := textFixture(t, T)
	m := &windowLog{T: T, V: vocab.Size()}
	out, err := generate(&bytes.Buffer{}, m, vocab, "ab", n, Sampling{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	computed, prev, full := 0, 0, false
	for i, c := range m.calls {
		l, keep := c[0], c[1]
		full = full || l == T
		if l > T || full && l < T/2 {
			t.Fatalf("call %d: a context of %d ids (T %d)", i, l, T)
		}
		if keep != 0 && (keep != prev || l != prev+1) {
			t.Fatalf("call %d: keep %d after a context of %d, now %d", i, keep, prev, l)
		}
		computed += l - keep
		prev = l
	}
	if computed > 2*n+T {
		t.Errorf("%d positions computed for %d tokens: the window slides instead of jumping", computed, n)
	}
	prompt, _ := vocab.Encode("ab")
	text := append(prompt, out[:len(out)-1]...) // what the last call read the end of
	if !slices.Equal(m.last, text[len(text)-len(m.last):]) {
		t.Errorf("the last context %v is not the end of the text %v", m.last, text)
	}
	m = &windowLog{T: T, V: vocab.Size()}
	if _, err := generate(&bytes.Buffer{}, m, vocab, "abcabcabcabca", 1, Sampling{}, 1); err != nil {
		t.Fatal(err)
	}
	if m.calls[0] != [2]int{T, 0} {
		t.Errorf("a prompt of 13 ids with T %d: first call %v, want the last %d ids", T, m.calls[0], T)
	}
}
