package textdata

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// mobyDick is the joined text of `make data-text`, or a skip.
func mobyDick(t testing.TB) string {
	dir := os.Getenv("MLBUILD_TEXT_DIR")
	if dir == "" {
		t.Skip("MLBUILD_TEXT_DIR is not set (make data-text)")
	}
	return filepath.Join(dir, "moby-dick.txt")
}

func write(t testing.TB, name, text string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRoundTripMobyDick encodes the whole book and decodes it back, in
// both modes, with the vocabulary built from all of it, and checks that
// every byte value round-trips through a full byte vocabulary.
func TestRoundTripMobyDick(t *testing.T) {
	path := mobyDick(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, mode := range []Mode{Bytes, Chars} {
		c, err := Open([]string{path}, Options{Mode: mode, Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := c.Vocab.Encode(text)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		want := len(text)
		if mode == Chars {
			want = utf8.RuneCountInString(text)
		}
		if len(ids) != want || int64(want) != c.Train.Tokens {
			t.Errorf("%s: %d ids, %d tokens counted, want %d", mode, len(ids), c.Train.Tokens, want)
		}
		if got := c.Vocab.Decode(ids); got != text {
			t.Errorf("%s: decoding the encoded book does not give the book back", mode)
		}
		// every distinct token has its own id, in increasing order
		for i := 1; i < c.Vocab.Size(); i++ {
			if c.Vocab.Tokens[i-1] >= c.Vocab.Tokens[i] {
				t.Fatalf("%s: vocabulary not in increasing order at %d", mode, i)
			}
		}
		t.Logf("%s: %d tokens, vocabulary %d", mode, len(ids), c.Vocab.Size())
		c.Close()
		// the book's last tenth has no token that the rest lacks
		c, err = Open([]string{path}, Options{Mode: mode, Context: 256, ValFrac: 0.1})
		if err != nil {
			t.Fatalf("%s, last 10%% held out: %v", mode, err)
		}
		c.Close()
	}
	all := make([]rune, 256)
	for i := range all {
		all[i] = rune(i)
	}
	v, err := NewVocab(Bytes, all)
	if err != nil {
		t.Fatal(err)
	}
	var every []byte
	for i := range 256 {
		every = append(every, byte(i))
	}
	ids, err := v.Encode(string(every))
	if err != nil {
		t.Fatal(err)
	}
	if v.Decode(ids) != string(every) {
		t.Error("not every byte round-trips")
	}
}

// TestWindows checks that targets are the ids shifted by one token, that
// each window is text of its split (and the validation windows of the
// tail), and that the windows depend on the seed alone.
func TestWindows(t *testing.T) {
	text := "Ahab’s leg: “thar she blows!” " + strings.Repeat("Call me Ishmael. Some years ago—never mind how long precisely—", 20) + "Ahab’s leg: “thar she blows!”"
	p := write(t, "a.txt", text)
	for _, mode := range []Mode{Bytes, Chars} {
		const T, n = 16, 200
		c, err := Open([]string{p}, Options{Mode: mode, Context: T, ValFrac: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		if c.Train.End != c.Val.Start || c.Val.End != int64(len(text)) || c.Train.Start != 0 {
			t.Fatalf("%s: splits %+v %+v do not tile the text", mode, c.Train, c.Val)
		}
		cut := len(text) - int(float64(len(text))*0.1)
		if c.Val.Start < int64(cut) || c.Val.Start > int64(cut)+3 {
			t.Errorf("%s: validation starts at %d, want the token at or after %d", mode, c.Val.Start, cut)
		}
		trainText, valText := text[:c.Train.End], text[c.Val.Start:]
		for _, s := range []struct {
			split Split
			text  string
		}{{c.Train, trainText}, {c.Val, valText}} {
			ids, tg := make([]int32, n*T), make([]int32, n*T)
			buf := make([]byte, c.BufSize(T))
			if err := c.Windows(s.split, rand.New(rand.NewPCG(1, 2)), n, T, ids, tg, buf); err != nil {
				t.Fatal(err)
			}
			starts := map[string]bool{}
			for i := range n {
				row, trow := ids[i*T:(i+1)*T], tg[i*T:(i+1)*T]
				for j := 0; j+1 < T; j++ {
					if trow[j] != row[j+1] {
						t.Fatalf("%s: window %d: target %d is %d, want the next id %d", mode, i, j, trow[j], row[j+1])
					}
				}
				window := c.Vocab.Decode(append(append([]int32(nil), row...), trow[T-1]))
				if !strings.Contains(s.text, window) {
					t.Fatalf("%s: window %q is not in its split", mode, window)
				}
				starts[window] = true
			}
			if len(starts) < 20 {
				t.Errorf("%s: only %d distinct windows of %d", mode, len(starts), n)
			}
			again, tg2 := make([]int32, n*T), make([]int32, n*T)
			c.Windows(s.split, rand.New(rand.NewPCG(1, 2)), n, T, again, tg2, buf)
			other := make([]int32, n*T)
			c.Windows(s.split, rand.New(rand.NewPCG(3, 2)), n, T, other, tg2, buf)
			if !equal(ids, again) || equal(ids, other) {
				t.Errorf("%s: windows are not a function of the seed", mode)
			}
		}
		c.Close()
	}
}

func equal(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestLastWindowReachesEnd checks that the split's last tokens are in
// some window: with text exactly T+1 tokens long every window is all of it.
func TestLastWindowReachesEnd(t *testing.T) {
	p := write(t, "a.txt", "héllo wörld") // 11 runes
	c, err := Open([]string{p}, Options{Mode: Chars, Context: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids, tg := make([]int32, 30), make([]int32, 30)
	if err := c.Windows(c.Train, rand.New(rand.NewPCG(5, 5)), 3, 10, ids, tg, make([]byte, c.BufSize(10))); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := c.Vocab.Decode(append(ids[i*10:i*10+10:i*10+10], tg[i*10+9])); got != "héllo wörld" {
			t.Errorf("window %d is %q", i, got)
		}
	}
}

// TestVocabStored checks that a vocabulary survives its string form and
// that a corpus whose training split has other tokens is refused.
func TestVocabStored(t *testing.T) {
	p := write(t, "a.txt", "the whale, the whale\nand the sea")
	c, err := Open([]string{p}, Options{Mode: Chars, Context: 4})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	v, err := ParseVocab(c.Vocab.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Same(c.Vocab); err != nil || v.Decode(mustEncode(t, v, "the sea")) != "the sea" {
		t.Fatalf("vocabulary %s does not survive its string form: %v", c.Vocab, err)
	}
	if _, err := Open([]string{p}, Options{Mode: Chars, Context: 4, Vocab: v}); err != nil {
		t.Errorf("the same text with its own vocabulary: %v", err)
	}
	q := write(t, "b.txt", "the whale, the whale\nand the sky")
	_, err = Open([]string{q}, Options{Mode: Chars, Context: 4, Vocab: v})
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("another text's vocabulary: got %v, want a refusal", err)
	}
	_, err = Open([]string{p}, Options{Mode: Bytes, Context: 4, Vocab: v})
	if err == nil || !strings.Contains(err.Error(), "token mode") {
		t.Errorf("byte text with a char vocabulary: got %v, want a refusal", err)
	}
	for _, bad := range []string{"", "char", "word:61", "char:zz", "char:61,61", "byte:100", "char:"} {
		if _, err := ParseVocab(bad); err == nil {
			t.Errorf("ParseVocab(%q) accepted", bad)
		}
	}
}

func mustEncode(t *testing.T, v *Vocab, s string) []int32 {
	ids, err := v.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestBadInput checks each refusal's message: where and what.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	good := write(t, "good.txt", strings.Repeat("abcdefgh", 10))
	cases := []struct {
		name, text string
		mode       Mode
		want       string
	}{
		{"bad.txt", "first line\nsec\xffond", Chars, "bad.txt:2:4 (byte 14): invalid UTF-8"},
		{"empty.txt", "", Chars, "empty.txt: empty file"},
		{"short.txt", "héllo", Chars, "short.txt: 5 tokens, fewer than the context length 8"},
		{"short.txt", "hello", Bytes, "short.txt: 5 tokens, fewer than the context length 8"},
		{"tail.txt", strings.Repeat("abcdefgh", 10) + "z", Chars, "the validation split (the last part of the text) holds character 'z'"},
	}
	for _, tc := range cases {
		p := write(t, tc.name, tc.text)
		c, err := Open([]string{good, p}, Options{Mode: tc.mode, Context: 8, ValFrac: 0.1})
		if err == nil {
			c.Close()
			t.Errorf("%s accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Open([]string{good, filepath.Join(dir, "missing.txt")}, Options{Mode: Chars, Context: 8}); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open([]string{dir}, Options{Mode: Chars, Context: 8}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("folder: %v", err)
	}
	// invalid UTF-8 is any byte in byte mode
	if c, err := Open([]string{write(t, "bin", "sec\xffond\x00\x80")}, Options{Mode: Bytes, Context: 4}); err != nil {
		t.Errorf("byte mode refuses bytes: %v", err)
	} else {
		c.Close()
	}
}

// TestFilesJoined checks that two files are one text, windows crossing
// the boundary.
func TestFilesJoined(t *testing.T) {
	a, b := write(t, "a.txt", "abcdé"), write(t, "b.txt", "fghíj")
	c, err := Open([]string{a, b}, Options{Mode: Chars, Context: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, c.Train.End)
	if _, err := c.ReadAt(buf, 0); err != nil || string(buf) != "abcdéfghíj" {
		t.Fatalf("joined text %q, %v", buf, err)
	}
	seen := map[string]bool{}
	ids, tg := make([]int32, 4*100), make([]int32, 4*100)
	c.Windows(c.Train, rand.New(rand.NewPCG(1, 1)), 100, 4, ids, tg, make([]byte, c.BufSize(4)))
	for i := range 100 {
		seen[c.Vocab.Decode(append(ids[i*4:i*4+4:i*4+4], tg[i*4+3]))] = true
	}
	for _, w := range []string{"abcdé", "bcdéf", "cdéfg", "défgh", "éfghí", "fghíj"} {
		if !seen[w] {
			t.Errorf("window %q never drawn (drawn: %v)", w, seen)
		}
	}
}

// TestVocabLimit: a text of more distinct characters than a vocabulary
// holds is refused at the first one over, before the table grows further.
func TestVocabLimit(t *testing.T) {
	var b strings.Builder
	for r, n := rune(0x4e00), 0; n < MaxVocab+10; r++ {
		if r >= 0xd800 && r < 0xe000 {
			continue
		}
		b.WriteRune(r)
		n++
	}
	p := write(t, "cjk.txt", b.String())
	_, err := Open([]string{p}, Options{Mode: Chars, Context: 8})
	if err == nil || !strings.Contains(err.Error(), "65537-th distinct token") || !strings.Contains(err.Error(), "cjk.txt:1:65537") {
		t.Errorf("got %v", err)
	}
	if c, err := Open([]string{p}, Options{Mode: Bytes, Context: 8}); err != nil {
		t.Errorf("byte tokens: %v", err)
	} else {
		c.Close()
	}
}

// TestOpenStreams: Open and Windows read a corpus through buffers of
// their own size, never whole (issue #31's text larger than memory):
// Moby-Dick joined 48 times (59 MB) opens, builds its vocabulary, checks
// its validation split and gives 1,000 windows of 256 characters in under
// 8 MiB of allocations (3.2 MB when this test was written, most of it a
// 64 KiB read buffer a file).
func TestOpenStreams(t *testing.T) {
	const T = 256
	paths := copies(mobyDick(t), 48)
	var c *Corpus
	got := allocatedBy(t, func() error {
		var err error
		if c, err = Open(paths, Options{Mode: Chars, Context: T, ValFrac: 0.1}); err != nil {
			return err
		}
		ids, tg, buf := make([]int32, T), make([]int32, T), make([]byte, c.BufSize(T))
		rng := rand.New(rand.NewPCG(1, 2))
		for range 1000 {
			if err := c.Windows(c.Train, rng, 1, T, ids, tg, buf); err != nil {
				return err
			}
		}
		return nil
	})
	defer c.Close()
	if c.Train.Tokens+c.Val.Tokens < 50_000_000 {
		t.Fatalf("the joined text has %d tokens, fewer than 48 copies of Moby-Dick", c.Train.Tokens+c.Val.Tokens)
	}
	if got > 8<<20 {
		t.Errorf("opening %d tokens and drawing 1,000 windows allocated %d bytes, over 8 MiB: was the text read whole?", c.Train.Tokens+c.Val.Tokens, got)
	}
}

// copies is n times the path p, a text joined with itself.
func copies(p string, n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = p
	}
	return paths
}

// allocatedBy is the bytes that f allocates (runtime.MemStats'
// TotalAlloc after a GC); an error of f fails t.
func allocatedBy(t *testing.T, f func() error) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := f()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return after.TotalAlloc - before.TotalAlloc
}
