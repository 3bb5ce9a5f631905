package textdata

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzText opens arbitrary bytes as a text dataset in both modes, with a
// context length and validation fraction taken from the input. It must
// never panic; an error must name the file or the split; a corpus that
// opens must give windows whose targets are the ids shifted by one and
// whose text is in the file. Crashers are kept in testdata/fuzz/FuzzText.
func FuzzText(f *testing.F) {
	f.Add([]byte("Call me Ishmael. Some years ago"), uint8(4), uint8(10))
	f.Add([]byte("héllo wörld"), uint8(10), uint8(0))
	f.Add([]byte("ab\xffcd\xe2\x80"), uint8(2), uint8(50))
	f.Add([]byte("“”"), uint8(1), uint8(50))
	f.Add([]byte{}, uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, ctx, frac uint8) {
		T := int(ctx%16) + 1
		p := filepath.Join(t.TempDir(), "in.txt")
		os.WriteFile(p, data, 0o644)
		for _, mode := range []Mode{Bytes, Chars} {
			c, err := Open([]string{p}, Options{Mode: mode, Context: T, ValFrac: float64(frac%90) / 100})
			if err != nil {
				if !strings.Contains(err.Error(), p) && !strings.Contains(err.Error(), "split") {
					t.Fatalf("%s: error %q names neither the file nor the split", mode, err)
				}
				if mode == Bytes && strings.Contains(err.Error(), "UTF-8") {
					t.Fatalf("byte mode refused UTF-8: %v", err)
				}
				continue
			}
			if mode == Chars && !utf8.Valid(data) {
				t.Fatalf("invalid UTF-8 opened in char mode")
			}
			for _, s := range []Split{c.Train, c.Val} {
				if s.Tokens == 0 {
					continue
				}
				const n = 8
				ids, tg := make([]int32, n*T), make([]int32, n*T)
				if err := c.Windows(s, rand.New(rand.NewPCG(uint64(len(data)), 1)), n, T, ids, tg, make([]byte, c.BufSize(T))); err != nil {
					t.Fatalf("%s: windows: %v", mode, err)
				}
				for i := range n {
					for j := 0; j+1 < T; j++ {
						if tg[i*T+j] != ids[i*T+j+1] {
							t.Fatalf("%s: target not shifted by one", mode)
						}
					}
					w := c.Vocab.Decode(append(append([]int32(nil), ids[i*T:(i+1)*T]...), tg[i*T+T-1]))
					if !strings.Contains(string(data[s.Start:s.End]), w) {
						t.Fatalf("%s: window %q not in its split", mode, w)
					}
				}
			}
			c.Close()
		}
	})
}

// FuzzDocuments opens arbitrary bytes in documents mode with an arbitrary
// separator, in both modes. It must never panic; a corpus that opens must
// hold, in each split, the documents strings.Split finds in the split's
// text (the empty ones left out), and each document's sample must be its
// tokens from an offset, the targets shifted by one, the pad id after the
// document's last token and after it. Crashers are kept in
// testdata/fuzz/FuzzDocuments.
func FuzzDocuments(f *testing.F) {
	f.Add([]byte("Call me Ishmael.\n\nSome years ago\n\n\nnever mind how long"), "\n\n", uint8(4), uint8(30))
	f.Add([]byte("xaaabyaabaab"), "aab", uint8(2), uint8(0))
	f.Add([]byte("héllo—wörld——"), "—", uint8(3), uint8(40))
	f.Add([]byte("ab\xffcd"), "\xff", uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, sep string, ctx, frac uint8) {
		if sep == "" {
			return
		}
		T := int(ctx%16) + 1
		p := filepath.Join(t.TempDir(), "in.txt")
		os.WriteFile(p, data, 0o644)
		const pad = 300
		for _, mode := range []Mode{Bytes, Chars} {
			c, err := Open([]string{p}, Options{Mode: mode, Context: T, ValFrac: float64(frac%90) / 100, Documents: sep, Pad: pad})
			if err != nil {
				continue
			}
			for k, s := range []Split{c.Train, c.Val} {
				var want []string
				for _, d := range strings.Split(string(data[s.Start:s.End]), sep) {
					if d != "" {
						want = append(want, d)
					}
				}
				if len(s.Docs) != len(want) {
					t.Fatalf("%s: split %d has %d documents, want %d", mode, k, len(s.Docs), len(want))
				}
				ids, tg, buf := make([]int32, T), make([]int32, T), make([]byte, c.BufSize(T))
				rng := rand.New(rand.NewPCG(uint64(len(data)), 1))
				for i, d := range s.Docs {
					doc := string(data[d.Start:d.End])
					if doc != want[i] {
						t.Fatalf("%s: split %d document %d is %q, want %q", mode, k, i, doc, want[i])
					}
					n, err := c.DocWindow(s, i, T, rng, ids, tg, buf)
					if err != nil {
						t.Fatalf("%s: document %d: %v", mode, i, err)
					}
					if n < 1 || n > T {
						t.Fatalf("%s: document %d gives %d tokens of %d", mode, i, n, T)
					}
					for j := range T {
						if j+1 < n && tg[j] != ids[j+1] || j >= n && (ids[j] != pad || tg[j] != -1) {
							t.Fatalf("%s: document %d: ids %v targets %v (%d tokens)", mode, i, ids, tg, n)
						}
					}
					got := c.Vocab.Decode(ids[:n])
					if n < T && (got != doc || tg[n-1] != pad) || !strings.Contains(doc, got) {
						t.Fatalf("%s: document %q gives %q (%d tokens), last target %d", mode, doc, got, n, tg[n-1])
					}
				}
			}
			c.Close()
		}
	})
}
