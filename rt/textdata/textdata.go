// Package textdata reads a text dataset for a language model: one or more
// UTF-8 files joined in order, a byte- or character-level vocabulary built
// from the training split, a split by position (the validation split is
// the text's tail), and random windows of T tokens with their next-token
// targets; or, in documents mode, each split cut into documents at a
// separator, and a window of each document padded with a pad id.
//
// Memory is bounded whatever the size of the files: Open reads them once
// through a 64 KiB buffer (to check them and build the vocabulary), and a
// batch reads each window with ReadAt, at most 4·(T+1)+3 bytes a window; what
// stays in memory is the vocabulary (at most MaxVocab entries), one
// open file per input file and, in documents mode, the index of the
// documents (16 bytes a document, at most MaxDocuments of them).
package textdata

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// MaxVocab is the most distinct tokens a character-level vocabulary may
// hold, so that a text of arbitrary runes cannot grow it without bound.
const MaxVocab = 1 << 16

// Mode is how text becomes tokens: "byte" (every byte a token, any file)
// or "char" (every Unicode code point a token, the files valid UTF-8).
type Mode string

const (
	Bytes Mode = "byte"
	Chars Mode = "char"
)

// Vocab maps tokens to ids: the tokens of the training split in
// increasing order (bytes, or runes by code point), so that the same text
// always gives the same ids.
type Vocab struct {
	Mode   Mode
	Tokens []rune // id → token (a byte value in Bytes mode)
	// Pad is the id that pads a document after its end, and the label of
	// its last token (documents mode: Options.Documents); NoPad when the
	// text is not cut into documents. It is no token's id (Pad ≥ Size()):
	// no text encodes to it, and it decodes to no text.
	Pad int32
	ids map[rune]int32
}

// NoPad is Vocab.Pad of a text that is not cut into documents.
const NoPad = -1

// NewVocab makes the vocabulary of the given tokens, sorted and unique.
func NewVocab(mode Mode, tokens []rune) (*Vocab, error) {
	if mode != Bytes && mode != Chars {
		return nil, fmt.Errorf("unknown token mode %q: choose byte or char", string(mode))
	}
	t := append([]rune(nil), tokens...)
	sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
	v := &Vocab{Mode: mode, Pad: NoPad, ids: make(map[rune]int32, len(t))}
	for i, r := range t {
		if i > 0 && t[i-1] == r {
			return nil, fmt.Errorf("vocabulary lists token %s twice", quoteToken(mode, r))
		}
		if mode == Bytes && (r < 0 || r > 255) || mode == Chars && !utf8.ValidRune(r) {
			return nil, fmt.Errorf("vocabulary token %d is not a %s", r, mode)
		}
		v.ids[r] = int32(len(v.Tokens))
		v.Tokens = append(v.Tokens, r)
	}
	if len(v.Tokens) == 0 {
		return nil, errors.New("empty vocabulary")
	}
	if len(v.Tokens) > MaxVocab {
		return nil, fmt.Errorf("vocabulary of %d tokens is over the limit of %d", len(v.Tokens), MaxVocab)
	}
	return v, nil
}

// Size is the number of ids.
func (v *Vocab) Size() int { return len(v.Tokens) }

// ID is the id of token r, false when the vocabulary lacks it.
func (v *Vocab) ID(r rune) (int32, bool) {
	id, ok := v.ids[r]
	return id, ok
}

// Encode turns s into ids: its bytes or its runes. A token outside the
// vocabulary (or invalid UTF-8 in Chars mode) is an error that quotes it
// and gives its byte offset in s.
func (v *Vocab) Encode(s string) ([]int32, error) {
	var out []int32
	if v.Mode == Bytes {
		for i := 0; i < len(s); i++ {
			id, ok := v.ids[rune(s[i])]
			if !ok {
				return nil, fmt.Errorf("byte %d: %s is not in the vocabulary", i, quoteToken(Bytes, rune(s[i])))
			}
			out = append(out, id)
		}
		return out, nil
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return nil, fmt.Errorf("byte %d: invalid UTF-8", i)
			}
		}
		id, ok := v.ids[r]
		if !ok {
			return nil, fmt.Errorf("byte %d: %s is not in the vocabulary", i, quoteToken(Chars, r))
		}
		out = append(out, id)
	}
	return out, nil
}

// Token appends the text of id to b: its byte, or its rune in UTF-8;
// nothing for the pad id.
func (v *Vocab) Token(b []byte, id int32) []byte {
	if id == v.Pad {
		return b
	}
	r := v.Tokens[id]
	if v.Mode == Bytes {
		return append(b, byte(r))
	}
	return utf8.AppendRune(b, r)
}

// Decode is the text of ids.
func (v *Vocab) Decode(ids []int32) string {
	var b []byte
	for _, id := range ids {
		b = v.Token(b, id)
	}
	return string(b)
}

// String encodes the vocabulary for a weights file's metadata: the mode,
// a colon, and the tokens' values in hexadecimal, comma-separated
// ("char:a,20,41"), then in documents mode ";pad=" and the pad id in
// decimal ("char:a,20,41;pad=63"). It is plain ASCII, whatever the tokens.
func (v *Vocab) String() string {
	var b strings.Builder
	b.WriteString(string(v.Mode))
	b.WriteByte(':')
	for i, r := range v.Tokens {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(r), 16))
	}
	if v.Pad != NoPad {
		b.WriteString(";pad=")
		b.WriteString(strconv.Itoa(int(v.Pad)))
	}
	return b.String()
}

// ParseVocab reads what String wrote.
func ParseVocab(s string) (*Vocab, error) {
	mode, list, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("vocabulary %q: want MODE:TOKENS", short(s))
	}
	list, padText, hasPad := strings.Cut(list, ";pad=")
	var tokens []rune
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(f, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("vocabulary %q: token %q is not a hexadecimal number", short(s), short(f))
		}
		tokens = append(tokens, rune(n))
	}
	v, err := NewVocab(Mode(mode), tokens)
	if err != nil {
		return nil, fmt.Errorf("vocabulary %q: %v", short(s), err)
	}
	if hasPad {
		pad, err := strconv.ParseInt(padText, 10, 32)
		if err != nil || pad < int64(v.Size()) {
			return nil, fmt.Errorf("vocabulary %q: pad id %q is not a decimal number of %d or more (the ids below are the tokens')", short(s), short(padText), v.Size())
		}
		v.Pad = int32(pad)
	}
	return v, nil
}

// Same reports whether v and w give every token the same id; when not,
// the error says where they first differ.
func (v *Vocab) Same(w *Vocab) error {
	if v.Mode != w.Mode {
		return fmt.Errorf("token mode %s, not %s", w.Mode, v.Mode)
	}
	for i := range min(len(v.Tokens), len(w.Tokens)) {
		if v.Tokens[i] != w.Tokens[i] {
			return fmt.Errorf("id %d is %s, not %s", i, quoteToken(w.Mode, w.Tokens[i]), quoteToken(v.Mode, v.Tokens[i]))
		}
	}
	if len(v.Tokens) != len(w.Tokens) {
		return fmt.Errorf("%d tokens, not %d", len(w.Tokens), len(v.Tokens))
	}
	if v.Pad != w.Pad {
		return fmt.Errorf("pad id %s, not %s", padName(w.Pad), padName(v.Pad))
	}
	return nil
}

// padName is a pad id for messages: "none" for NoPad.
func padName(id int32) string {
	if id == NoPad {
		return "none (not cut into documents)"
	}
	return strconv.Itoa(int(id))
}

func quoteToken(mode Mode, r rune) string {
	if mode == Bytes {
		return fmt.Sprintf("byte 0x%02x", r)
	}
	return fmt.Sprintf("character %q (U+%04X)", r, r)
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// part is one file of a corpus, at offset off of the joined text.
type part struct {
	path string
	f    *os.File
	off  int64
	size int64
}

// Corpus is the joined text of a dataset's files, read at offsets.
type Corpus struct {
	Mode  Mode
	Vocab *Vocab
	parts []part
	size  int64
	// Train and Val are the splits: byte ranges of the joined text, each
	// starting at a token's first byte.
	Train, Val Split
	read       atomic.Int64 // bytes ReadAt has read
}

// BytesRead is how many bytes of the files ReadAt has read (the windows,
// and a split read whole), for a data rate.
func (c *Corpus) BytesRead() int64 { return c.read.Load() }

// Split is a byte range [Start, End) of the corpus with its first possible
// window start: the last offset with T+1 tokens before End.
type Split struct {
	Start, End int64
	Tokens     int64
	// Docs are the split's documents in order (documents mode; nil
	// otherwise).
	Docs      []Document
	lastStart int64
}

// Document is one document of a split (documents mode): a byte range
// [Start, End) of the corpus that holds at least one token and no
// separator. Its ends are a separator, a file's end or the split's ends.
type Document struct{ Start, End int64 }

// MaxDocuments is the most documents Open indexes, all splits together:
// the index costs 16 bytes a document, so at most 256 MiB.
const MaxDocuments = 1 << 24

// PadError is Open's refusal of a pad id that is a token's id: the
// training split has Tokens distinct tokens (ids 0 to Tokens−1), and
// documents mode would pad with Pad, one of them.
type PadError struct {
	Tokens int
	Pad    int32
}

func (e *PadError) Error() string {
	return fmt.Sprintf("the training split has %d distinct tokens (ids 0 to %d), but documents mode pads with id %d: the pad id must be %d or more", e.Tokens, e.Tokens-1, e.Pad, e.Tokens)
}

// Options say how Open reads a corpus.
type Options struct {
	Mode    Mode
	Context int     // T: the tokens of a window
	ValFrac float64 // the fraction of the text (by bytes) that is the validation split, its tail; 0 for none
	// Vocab, when not nil, is the vocabulary to use (from a weights
	// file): Open checks that the training split's tokens are exactly its
	// tokens (and its pad id Pad) and refuses the corpus otherwise.
	Vocab *Vocab
	// Documents, when not "", turns on documents mode: each split is cut
	// into documents at every occurrence of this separator (leftmost
	// first, not overlapping; it belongs to no document), at each file's
	// end and at the split point; empty documents are left out. A
	// document may be shorter than T tokens (a file too), and samples are
	// read with DocWindow.
	Documents string
	// Pad is documents mode's pad id (Vocab.Pad): an id that is no
	// token's, at least the number of the training split's distinct
	// tokens (Open returns a *PadError otherwise).
	Pad int32
}

// Position is a place in one file, for messages: "FILE:LINE:COL (byte N)".
type Position struct {
	Path      string
	Line, Col int
	Offset    int64
}

func (p Position) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s (byte %d)", p.Path, p.Offset)
	}
	return fmt.Sprintf("%s:%d:%d (byte %d)", p.Path, p.Line, p.Col, p.Offset)
}

// Open opens the files of a corpus, checks them (each exists, is not
// empty, holds at least T+1 tokens and, in Chars mode, is valid UTF-8),
// splits the joined text at ValFrac from its end, and builds the
// vocabulary of the training split, or checks Options.Vocab against it.
func Open(paths []string, o Options) (*Corpus, error) {
	if o.Mode != Bytes && o.Mode != Chars {
		return nil, fmt.Errorf("unknown token mode %q: choose byte or char", string(o.Mode))
	}
	if o.Context < 1 {
		return nil, fmt.Errorf("context length %d: want 1 or more", o.Context)
	}
	if !(o.ValFrac >= 0 && o.ValFrac < 1) {
		return nil, fmt.Errorf("validation fraction %v: want 0 or more and below 1", o.ValFrac)
	}
	if len(paths) == 0 {
		return nil, errors.New("a text dataset needs at least one file")
	}
	var cut *docCutter
	if o.Documents != "" {
		if o.Pad < 0 {
			return nil, fmt.Errorf("documents mode needs a pad id of 0 or more, not %d", o.Pad)
		}
		if o.Mode == Chars && !utf8.ValidString(o.Documents) {
			return nil, fmt.Errorf("document separator %q is not valid UTF-8: use byte tokens", short(o.Documents))
		}
		cut = newDocCutter(o.Documents)
	}
	c := &Corpus{Mode: o.Mode}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			c.Close()
			return nil, err
		}
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = fmt.Errorf("%s: not a regular file", p)
		} else if err == nil && st.Size() == 0 {
			err = fmt.Errorf("%s: empty file (a text dataset's files need at least %d tokens each)", p, o.Context+1)
		}
		if err != nil {
			f.Close()
			c.Close()
			return nil, err
		}
		c.parts = append(c.parts, part{path: p, f: f, off: c.size, size: st.Size()})
		c.size += st.Size()
	}
	// The split point, moved forward to a token's first byte.
	valFrom := c.size - int64(float64(c.size)*o.ValFrac)
	seen := map[rune]bool{}
	var trainTokens, valTokens int64
	for i := range c.parts {
		pt := &c.parts[i]
		n, err := c.scan(pt, valFrom, o.Mode, seen, &trainTokens, &valTokens, cut)
		if err != nil {
			c.Close()
			return nil, err
		}
		if n < int64(o.Context)+1 && cut == nil {
			c.Close()
			return nil, fmt.Errorf("%s: %d tokens, fewer than the context length %d plus the one token each window predicts", pt.path, n, o.Context)
		}
	}
	if c.Val.Start == 0 {
		c.Val.Start = c.size
	}
	c.Train = Split{Start: 0, End: c.Val.Start, Tokens: trainTokens}
	c.Val = Split{Start: c.Val.Start, End: c.size, Tokens: valTokens}
	if cut != nil {
		c.Train.Docs, c.Val.Docs = cut.docs[0], cut.docs[1]
	}
	tokens := make([]rune, 0, len(seen))
	for r := range seen {
		tokens = append(tokens, r)
	}
	v, err := NewVocab(o.Mode, tokens)
	if err != nil {
		c.Close()
		return nil, err
	}
	if cut != nil {
		if int(o.Pad) < v.Size() {
			c.Close()
			return nil, &PadError{Tokens: v.Size(), Pad: o.Pad}
		}
		v.Pad = o.Pad
	}
	if o.Vocab != nil {
		if err := o.Vocab.Same(v); err != nil {
			c.Close()
			return nil, fmt.Errorf("the vocabulary stored with the weights does not match this text's training split (%v): train on this text, or give the text the weights were trained on", err)
		}
		v = o.Vocab
	}
	c.Vocab = v
	for _, s := range []*Split{&c.Train, &c.Val} {
		if s.Tokens == 0 {
			continue
		}
		if cut != nil {
			if len(s.Docs) == 0 {
				c.Close()
				return nil, fmt.Errorf("the %s split (bytes %d to %d of the text) holds no document: it is separators %q alone", c.splitName(s), s.Start, s.End, short(o.Documents))
			}
			continue // documents are read whole or from an offset in them, with padding
		}
		if s.Tokens < int64(o.Context)+1 {
			c.Close()
			return nil, fmt.Errorf("the %s split has %d tokens, fewer than the context length %d plus one", c.splitName(s), s.Tokens, o.Context)
		}
		last, err := c.lastStart(s, o.Context+1)
		if err != nil {
			c.Close()
			return nil, err
		}
		s.lastStart = last
	}
	// A validation token that the training split lacks has no id.
	if c.Val.Tokens > 0 {
		if err := c.checkVal(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Corpus) splitName(s *Split) string {
	if s == &c.Val {
		return "validation"
	}
	return "training"
}

// scan reads one file through a buffer: it checks UTF-8 (Chars mode),
// counts its tokens (into train or val by the cut), records the training
// split's tokens in seen, and sets Val.Start to the first token at or
// after cut. In documents mode (docs not nil) it also cuts the file
// into documents. It returns the file's token count.
func (c *Corpus) scan(pt *part, cut int64, mode Mode, seen map[rune]bool, train, val *int64, docs *docCutter) (int64, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(pt.f, 0, pt.size), 64<<10)
	var n int64
	line, col := 1, 1
	var enc [utf8.UTFMax]byte
	if docs != nil {
		docs.begin(pt.off, pt.off >= cut)
	}
	for off := int64(0); off < pt.size; {
		var r rune
		size := 1
		if mode == Bytes {
			b, err := br.ReadByte()
			if err != nil {
				return n, fmt.Errorf("%s: %v", pt.path, err)
			}
			r = rune(b)
		} else {
			var err error
			r, size, err = br.ReadRune()
			if err != nil {
				return n, fmt.Errorf("%s: %v", pt.path, err)
			}
			if r == utf8.RuneError && size == 1 {
				return n, fmt.Errorf("%s: invalid UTF-8 (use byte tokens for text that is not UTF-8)", Position{pt.path, line, col, off})
			}
		}
		at := pt.off + off
		if at >= cut {
			if c.Val.Start == 0 {
				c.Val.Start = at
				if docs != nil && at > pt.off { // the split point ends this file's document
					if err := docs.end(at); err != nil {
						return n, fmt.Errorf("%s: %v", Position{pt.path, line, col, off}, err)
					}
					docs.begin(at, true)
				}
			}
			*val++
		} else {
			if !seen[r] {
				if len(seen) == MaxVocab {
					return n, fmt.Errorf("%s: %s is the training split's %d-th distinct token, over the limit of a vocabulary; use byte tokens", Position{pt.path, line, col, off}, quoteToken(mode, r), MaxVocab+1)
				}
				seen[r] = true
			}
			*train++
		}
		if docs != nil {
			b := enc[:1]
			if mode == Bytes {
				enc[0] = byte(r)
			} else {
				b = utf8.AppendRune(enc[:0], r)
			}
			for k, x := range b {
				if !docs.feed(x) {
					continue
				}
				// the separator ends at this byte: the document before it
				// ends where it starts, the next starts after it
				next := at + int64(k) + 1
				if err := docs.end(next - int64(len(docs.sep))); err != nil {
					return n, fmt.Errorf("%s: %v", Position{pt.path, line, col, off}, err)
				}
				docs.begin(next, at >= cut)
			}
		}
		n++
		off += int64(size)
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	if docs != nil {
		if err := docs.end(pt.off + pt.size); err != nil {
			return n, fmt.Errorf("%s: %v", Position{pt.path, line, col, pt.size}, err)
		}
	}
	return n, nil
}

// docCutter cuts the text into documents as scan reads it: it matches the
// separator byte by byte (Knuth–Morris–Pratt, so that a separator whose
// start repeats within it, "aab" in "aaab", is still found) and records
// each non-empty document of the training split (docs[0]) and of the
// validation split (docs[1]).
type docCutter struct {
	sep     []byte
	fail    []int // fail[i]: the longest proper prefix of sep[:i+1] that ends it
	matched int   // bytes of sep matched so far
	start   int64 // the current document's first byte
	val     bool  // the current document is in the validation split
	docs    [2][]Document
	n       int
}

func newDocCutter(sep string) *docCutter {
	d := &docCutter{sep: []byte(sep), fail: make([]int, len(sep))}
	for i, k := 1, 0; i < len(sep); i++ {
		for k > 0 && sep[i] != sep[k] {
			k = d.fail[k-1]
		}
		if sep[i] == sep[k] {
			k++
		}
		d.fail[i] = k
	}
	return d
}

// begin starts a document at byte at, in the validation split when val;
// a separator begun before it is forgotten.
func (d *docCutter) begin(at int64, val bool) {
	d.start, d.val, d.matched = at, val, 0
}

// feed matches byte b and reports whether it completes the separator;
// matching then starts over, so that separators do not overlap.
func (d *docCutter) feed(b byte) bool {
	for d.matched > 0 && d.sep[d.matched] != b {
		d.matched = d.fail[d.matched-1]
	}
	if d.sep[d.matched] == b {
		d.matched++
	}
	if d.matched == len(d.sep) {
		d.matched = 0
		return true
	}
	return false
}

// end ends the current document at byte at (exclusive), recording it
// unless it is empty; an index past MaxDocuments is an error.
func (d *docCutter) end(at int64) error {
	if at <= d.start {
		return nil
	}
	if d.n == MaxDocuments {
		return fmt.Errorf("the text's %d-th document is over the limit of %d documents that are indexed: use a separator that occurs less often, or fewer files", MaxDocuments+1, MaxDocuments)
	}
	d.n++
	k := 0
	if d.val {
		k = 1
	}
	d.docs[k] = append(d.docs[k], Document{d.start, at})
	d.start = at
	return nil
}

// ReadAt reads the joined text, counting the bytes (BytesRead).
func (c *Corpus) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.readAt(b, off)
	c.read.Add(int64(n))
	return n, err
}

// readAt is ReadAt's reading.
func (c *Corpus) readAt(b []byte, off int64) (int, error) {
	n := 0
	for _, pt := range c.parts {
		if off+int64(n) >= pt.off+pt.size || len(b) == n {
			continue
		}
		m, err := pt.f.ReadAt(b[n:min(len(b), n+int(pt.off+pt.size-off-int64(n)))], off+int64(n)-pt.off)
		n += m
		if err != nil && err != io.EOF {
			return n, err
		}
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// where turns a corpus offset into a file position (line and column
// unknown: 0).
func (c *Corpus) where(off int64) Position {
	for _, pt := range c.parts {
		if off < pt.off+pt.size {
			return Position{Path: pt.path, Offset: off - pt.off}
		}
	}
	return Position{}
}

// lastStart is the offset of the k-th token before s.End: the last window
// start in s.
func (c *Corpus) lastStart(s *Split, k int) (int64, error) {
	if c.Mode == Bytes {
		return s.End - int64(k), nil
	}
	buf := make([]byte, min(int64(4*k), s.End-s.Start))
	from := s.End - int64(len(buf))
	if _, err := c.ReadAt(buf, from); err != nil && err != io.EOF {
		return 0, err
	}
	i := len(buf)
	for range k {
		_, size := utf8.DecodeLastRune(buf[:i])
		i -= size
	}
	return from + int64(i), nil
}

// checkVal reads the validation split once for tokens without an id.
func (c *Corpus) checkVal() error {
	return c.eachToken(c.Val, func(r rune, off int64) error {
		if _, ok := c.Vocab.ID(r); !ok {
			fix := "give a smaller validation fraction"
			if c.Mode == Chars {
				fix += ", or byte tokens"
			}
			return fmt.Errorf("%s: the validation split (the last part of the text) holds %s, which the training split lacks, so it has no id: %s", c.where(off), quoteToken(c.Mode, r), fix)
		}
		return nil
	})
}

// eachToken calls fn with every token of split s (a byte, or a rune in
// Chars mode) and its offset in the corpus, in order, until fn returns an
// error, which it returns.
func (c *Corpus) eachToken(s Split, fn func(r rune, off int64) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(c, s.Start, s.End-s.Start), 64<<10)
	off := s.Start
	for {
		var r rune
		size := 1
		var err error
		if c.Mode == Bytes {
			var b byte
			b, err = br.ReadByte()
			r = rune(b)
		} else {
			r, size, err = br.ReadRune()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(r, off); err != nil {
			return err
		}
		off += int64(size)
	}
}

// drawStart is a window's start byte, drawn uniformly from s's window
// starts (before Windows moves it to a token's first byte): one draw of
// rng.
func (s *Split) drawStart(rng *rand.Rand) int64 {
	return s.Start + rng.Int64N(s.lastStart-s.Start+1)
}

// Close closes the files.
func (c *Corpus) Close() {
	for _, pt := range c.parts {
		pt.f.Close()
	}
	c.parts = nil
}

// BufSize is the scratch Windows needs for windows of T tokens: T+1
// bytes, or in Chars mode T+1 runes of up to 4 bytes after up to 3 bytes
// of the rune that a random start falls into.
func (c *Corpus) BufSize(T int) int {
	if c.Mode == Chars {
		return 4*(T+1) + 3
	}
	return T + 1
}

// Windows reads n random windows of split s into ids and targets (each
// n·T long, row i the i-th window): targets are ids shifted by one token,
// so targets[i·T+j] is the token after ids[i·T+j]. A window starts at a
// byte drawn uniformly from the split's window starts, moved forward to a
// token's first byte (in Chars mode a window after a longer rune is a
// little likelier). buf is scratch of BufSize(T) bytes; the result
// depends on rng alone.
func (c *Corpus) Windows(s Split, rng *rand.Rand, n, T int, ids, targets []int32, buf []byte) error {
	if s.Tokens < int64(T)+1 {
		return fmt.Errorf("the split has %d tokens, fewer than %d", s.Tokens, T+1)
	}
	w := c.BufSize(T)
	buf = buf[:w]
	for i := range n {
		start := s.drawStart(rng)
		end := min(start+int64(w), s.End)
		m, err := c.ReadAt(buf[:end-start], start)
		if err != nil && err != io.EOF {
			return err
		}
		b := c.tokenStart(buf[:m])
		row, tg := ids[i*T:(i+1)*T], targets[i*T:(i+1)*T]
		for j := 0; j <= T; j++ {
			var id int32
			if id, b, err = c.next(b, start); err != nil {
				return err
			}
			if j < T {
				row[j] = id
			}
			if j > 0 {
				tg[j-1] = id
			}
		}
	}
	return nil
}

// tokenStart is b from its first token's first byte: in Chars mode
// past the bytes of a rune that b starts inside.
func (c *Corpus) tokenStart(b []byte) []byte {
	if c.Mode == Chars {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return b
}

// next is the id of b's first token and the bytes after it; start, where
// the read that gave b began, places an error about a token outside the
// vocabulary.
func (c *Corpus) next(b []byte, start int64) (int32, []byte, error) {
	r, size := rune(b[0]), 1
	if c.Mode == Chars {
		r, size = utf8.DecodeRune(b)
	}
	id, ok := c.Vocab.ID(r)
	if !ok {
		return 0, nil, fmt.Errorf("%s: %s is not in the vocabulary", c.where(start), quoteToken(c.Mode, r))
	}
	return id, b[size:], nil
}

// DocWindow reads document i of split s (documents mode) as a sample of
// T ids: the document's tokens from a token offset, then the pad id up to
// T. It returns n, how many of the ids are the document's; targets[j] is
// the token after ids[j] for j < n, where the one after the document's
// last token is the pad id (its end), and -1 (no target) for j ≥ n.
//
// A document of T tokens or fewer is read from its start, without a draw
// of rng. A longer one is read from an offset drawn as Windows draws a
// window's start: a byte uniformly from those that leave T tokens before
// the document's end, moved forward to a token's first byte (one draw of
// rng). So a sample never reaches past its document's end, and its last
// target is the pad id exactly when it ends there. buf is scratch of
// BufSize(T) bytes; the result depends on rng alone.
func (c *Corpus) DocWindow(s Split, i, T int, rng *rand.Rand, ids, targets []int32, buf []byte) (int, error) {
	d := s.Docs[i]
	buf = buf[:c.BufSize(T)]
	start := d.Start
	last, err := c.docLastStart(d, T, buf)
	if err != nil {
		return 0, err
	}
	if last > d.Start {
		start += rng.Int64N(last - d.Start + 1)
	}
	end := min(start+int64(len(buf)), d.End)
	m, err := c.ReadAt(buf[:end-start], start)
	if err != nil && err != io.EOF {
		return 0, err
	}
	b := c.tokenStart(buf[:m])
	ids, targets = ids[:T], targets[:T]
	n := 0 // tokens read
	for ; n <= T && len(b) > 0; n++ {
		var id int32
		if id, b, err = c.next(b, start); err != nil {
			return 0, err
		}
		if n < T {
			ids[n] = id
		}
		if n > 0 {
			targets[n-1] = id
		}
	}
	if n > T { // T tokens and the one after them, all of the document
		return T, nil
	}
	targets[n-1] = c.Vocab.Pad // the document ends after its n-th token
	for j := n; j < T; j++ {
		ids[j], targets[j] = c.Vocab.Pad, -1
	}
	return n, nil
}

// docLastStart is the first byte of the T-th token before d's end (the
// last start of a sample that holds T of d's tokens), or d.Start when d
// has T tokens or fewer. In Chars mode it reads up to 4·T bytes of d's
// end into buf.
func (c *Corpus) docLastStart(d Document, T int, buf []byte) (int64, error) {
	if c.Mode == Bytes {
		return max(d.Start, d.End-int64(T)), nil
	}
	from := max(d.Start, d.End-4*int64(T))
	b := buf[:d.End-from]
	if _, err := c.ReadAt(b, from); err != nil && err != io.EOF {
		return 0, err
	}
	i := len(b)
	for k := 0; k < T && i > 0; k++ {
		_, size := utf8.DecodeLastRune(b[:i])
		i -= size
	}
	return from + int64(i), nil
}
