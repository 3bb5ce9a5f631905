package textdata

import (
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// splitDocs is the documents of text cut at sep as strings.Split cuts it
// (leftmost, not overlapping), the empty ones left out: what Open's
// documents mode must index.
func splitDocs(text, sep string) []string {
	var docs []string
	for _, d := range strings.Split(text, sep) {
		if d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

// docText is document i of split s, read back from the corpus.
func docText(t *testing.T, c *Corpus, s Split, i int) string {
	d := s.Docs[i]
	b := make([]byte, d.End-d.Start)
	if _, err := c.ReadAt(b, d.Start); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocumentsMobyDick cuts Moby-Dick into its paragraphs (documents
// mode, separator "\n\n"), and at other separators, some of whose starts
// repeat within them ("ee" in "eee", "\n\nC" after "\n\n\nCHAPTER"): the
// documents are those of strings.Split with the empty ones left out, in
// each split and in each file, in both token modes.
func TestDocumentsMobyDick(t *testing.T) {
	path := mobyDick(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	c, err := Open([]string{path}, Options{Mode: Chars, Context: 64, Documents: "\n\n", Pad: 200})
	if err != nil {
		t.Fatal(err)
	}
	// 2,790 paragraphs, counted apart from Go (Python's str.split).
	if n := len(c.Train.Docs); n != 2790 || len(c.Val.Docs) != 0 {
		t.Errorf("%d training and %d validation documents, want the book's 2,790 paragraphs", n, len(c.Val.Docs))
	}
	first, last := docText(t, c, c.Train, 0), docText(t, c, c.Train, len(c.Train.Docs)-1)
	if first != "CONTENTS" || !strings.HasSuffix(last, "only found another orphan.\n") || strings.Contains(last, "\n\n") {
		t.Errorf("first document %q, last %q", first, last)
	}
	if c.Vocab.Pad != 200 || !strings.HasSuffix(c.Vocab.String(), ";pad=200") {
		t.Errorf("pad id %d, vocabulary %q", c.Vocab.Pad, c.Vocab.String())
	}
	c.Close()
	for _, mode := range []Mode{Chars, Bytes} {
		for _, sep := range []string{"\n\n", "\n\n\n", "\n\nC", "ee", "eel", " the ", "—", "CHAPTER"} {
			c, err := Open([]string{path, path}, Options{Mode: mode, Context: 64, ValFrac: 0.1, Documents: sep, Pad: 300})
			if err != nil {
				t.Fatalf("%s, %q: %v", mode, sep, err)
			}
			// the second file is the split: its text up to the split
			// point, then the validation split
			n := int64(len(text))
			want := [][]string{
				append(splitDocs(text, sep), splitDocs(text[:c.Train.End-n], sep)...),
				splitDocs(text[c.Val.Start-n:], sep),
			}
			for k, s := range []Split{c.Train, c.Val} {
				if len(s.Docs) != len(want[k]) {
					t.Fatalf("%s, %q: split %d has %d documents, want %d", mode, sep, k, len(s.Docs), len(want[k]))
				}
				for i := range s.Docs {
					if got := docText(t, c, s, i); got != want[k][i] {
						t.Fatalf("%s, %q: split %d document %d is %q, want %q", mode, sep, k, i, short(got), short(want[k][i]))
					}
				}
			}
			c.Close()
		}
	}
}

// TestDocWindowMobyDick reads every paragraph of Moby-Dick as a sample:
// the ids are the paragraph's tokens from an offset, then the pad id; the
// targets the next tokens, the pad id after the paragraph's last token,
// and -1 (none) at the padding; a sample of a paragraph longer than T
// stays inside it and, over many draws, starts at each of its offsets,
// the last of which ends at its end. The samples are a function of rng.
func TestDocWindowMobyDick(t *testing.T) {
	path := mobyDick(t)
	for _, mode := range []Mode{Chars, Bytes} {
		const T, pad = 64, 250
		c, err := Open([]string{path}, Options{Mode: mode, Context: T, Documents: "\n\n", Pad: pad})
		if err != nil {
			t.Fatal(err)
		}
		ids, tg, buf := make([]int32, T), make([]int32, T), make([]byte, c.BufSize(T))
		rng := rand.New(rand.NewPCG(4, 4))
		long := 0
		for i := range c.Train.Docs {
			doc := docText(t, c, c.Train, i)
			tokens := len(doc)
			if mode == Chars {
				tokens = utf8.RuneCountInString(doc)
			}
			n, err := c.DocWindow(c.Train, i, T, rng, ids, tg, buf)
			if err != nil {
				t.Fatal(err)
			}
			if n != min(tokens, T) {
				t.Fatalf("%s: document %d of %d tokens gives %d, want %d", mode, i, tokens, n, min(tokens, T))
			}
			for j := range T {
				switch {
				case j < n-1 && tg[j] != ids[j+1]:
					t.Fatalf("%s: document %d: target %d is %d, not the next id %d", mode, i, j, tg[j], ids[j+1])
				case j >= n && (ids[j] != pad || tg[j] != -1):
					t.Fatalf("%s: document %d: position %d after its %d tokens has id %d and target %d, want the pad %d and -1", mode, i, j, n, ids[j], tg[j], pad)
				}
			}
			text := c.Vocab.Decode(ids[:n])
			if tokens <= T {
				if text != doc || tg[n-1] != pad {
					t.Fatalf("%s: document %d: sample %q ending in target %d, want the document %q and the pad id", mode, i, text, tg[n-1], doc)
				}
				continue
			}
			long++
			// the sample and its last target lie in the document
			if tg[T-1] == pad {
				if !strings.HasSuffix(doc, text) {
					t.Fatalf("%s: document %d: sample %q ends in the pad id but is not the document's end", mode, i, text)
				}
			} else if full := c.Vocab.Decode(append(ids[:T:T], tg[T-1])); !strings.Contains(doc, full) || strings.Contains(full, "\n\n") {
				t.Fatalf("%s: document %d: sample %q is not in it", mode, i, full)
			}
		}
		if long < 1000 {
			t.Errorf("%s: %d paragraphs longer than %d tokens, want Moby-Dick's 1,000 or more", mode, long, T)
		}
		// A paragraph 3 tokens longer than the window has 4 starts: every
		// one is drawn, the last ends in the pad id.
		i := 0
		for utf8.RuneCountInString(docText(t, c, c.Train, i)) < 20 {
			i++
		}
		doc := docText(t, c, c.Train, i)
		w := utf8.RuneCountInString(doc) - 3
		if mode == Bytes {
			w = len(doc) - 3
		}
		ids, tg = make([]int32, w), make([]int32, w)
		buf = make([]byte, c.BufSize(w))
		seen := map[string]bool{}
		ends := 0
		for range 400 {
			if n, err := c.DocWindow(c.Train, i, w, rng, ids, tg, buf); err != nil || n != w {
				t.Fatalf("%s: %d tokens, %v", mode, n, err)
			}
			seen[c.Vocab.Decode(ids)] = true
			if tg[w-1] == pad {
				ends++
			}
		}
		if len(seen) != 4 || ends == 0 {
			t.Errorf("%s: document %q in windows of %d: %d distinct samples, %d ending in the pad id; want 4, some", mode, doc, w, len(seen), ends)
		}
		// the same stream gives the same samples, another another
		draw := func(seed uint64) string {
			r := rand.New(rand.NewPCG(seed, 1))
			var all []int32
			for i := range 50 {
				if _, err := c.DocWindow(c.Train, i, w, r, ids, tg, buf); err != nil {
					t.Fatal(err)
				}
				all = append(all, ids...)
			}
			return c.Vocab.Decode(all)
		}
		if a, b, o := draw(1), draw(1), draw(2); a != b || a == o {
			t.Errorf("%s: samples are not a function of the stream", mode)
		}
		c.Close()
	}
}

// TestDocumentsPad: the pad id must be no token's id, else Open refuses
// with a PadError; it travels in the vocabulary's string form, and a
// stored vocabulary with another pad id, or none, is refused.
func TestDocumentsPad(t *testing.T) {
	path := mobyDick(t)
	c, err := Open([]string{path}, Options{Mode: Chars, Context: 8})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	V := c.Vocab.Size()
	var pe *PadError
	if _, err := Open([]string{path}, Options{Mode: Chars, Context: 8, Documents: "\n\n", Pad: int32(V - 1)}); !errors.As(err, &pe) || pe.Tokens != V || pe.Pad != int32(V-1) {
		t.Fatalf("pad id %d of a vocabulary of %d: %v", V-1, V, err)
	}
	d, err := Open([]string{path}, Options{Mode: Chars, Context: 8, Documents: "\n\n", Pad: int32(V)})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	stored, err := ParseVocab(d.Vocab.String())
	if err != nil || stored.Pad != int32(V) || stored.Same(d.Vocab) != nil {
		t.Fatalf("the vocabulary %q read back: pad %v, %v", d.Vocab.String(), stored, err)
	}
	if got := stored.Decode(append(mustEncode(t, stored, "Ahab"), stored.Pad)); got != "Ahab" {
		t.Errorf("the pad id decodes to %q after Ahab, want no text", got)
	}
	if err := c.Vocab.Same(stored); err == nil || !strings.Contains(err.Error(), "pad id 89, not none") {
		t.Errorf("a vocabulary with a pad id against one without: %v", err)
	}
	if _, err := Open([]string{path}, Options{Mode: Chars, Context: 8, Documents: "\n\n", Pad: int32(V + 1), Vocab: stored}); err == nil || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), "pad id") {
		t.Errorf("a stored vocabulary with another pad id: %v", err)
	}
	if _, err := Open([]string{path}, Options{Mode: Chars, Context: 8, Documents: "\n\n", Pad: int32(V), Vocab: c.Vocab}); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a stored vocabulary without a pad id: %v", err)
	}
	for _, bad := range []string{";pad=", ";pad=x", ";pad=-1", ";pad=3"} {
		if _, err := ParseVocab(c.Vocab.String() + bad); err == nil || !strings.Contains(err.Error(), "pad id") {
			t.Errorf("vocabulary ending in %q: %v", bad, err)
		}
	}
}

// TestDocumentsStream: documents mode reads the text through buffers too,
// and keeps its index of documents alone (Moby-Dick joined 16 times,
// 44,640 paragraphs, 0.7 MB of index).
func TestDocumentsStream(t *testing.T) {
	const T = 256
	paths := copies(mobyDick(t), 16)
	var c *Corpus
	got := allocatedBy(t, func() error {
		var err error
		if c, err = Open(paths, Options{Mode: Chars, Context: T, ValFrac: 0.1, Documents: "\n\n", Pad: 100}); err != nil {
			return err
		}
		ids, tg, buf := make([]int32, T), make([]int32, T), make([]byte, c.BufSize(T))
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 1000 {
			if _, err := c.DocWindow(c.Train, i*37%len(c.Train.Docs), T, rng, ids, tg, buf); err != nil {
				return err
			}
		}
		return nil
	})
	defer c.Close()
	if n := len(c.Train.Docs) + len(c.Val.Docs); n < 16*2790 || n > 16*2790+1 {
		t.Fatalf("%d documents, want 16 times Moby-Dick's 2,790 (one more where the split point cuts one)", n)
	}
	if got > 8<<20 {
		t.Errorf("opening and drawing 1,000 samples allocated %d bytes, over 8 MiB: was the text read whole?", got)
	}
}
