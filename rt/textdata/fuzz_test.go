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
