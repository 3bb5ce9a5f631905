package textdata

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokensDrawMatchesWindows: a split read whole with ReadTokens and
// windows taken at Draw's indices are, draw for draw, the windows and
// targets that Windows reads from the files with the same generator,
// in both token modes; on text with runes of 1 to 3 bytes, and on
// Moby-Dick when MLBUILD_TEXT_DIR has it.
func TestTokensDrawMatchesWindows(t *testing.T) {
	texts := map[string]string{"runes": "Ahab’s leg: “thar she blows!” " + strings.Repeat("Call me Ishmael. Some years ago—never mind how long precisely—", 20) + "Ahab’s leg: “thar she blows!”"}
	if dir := os.Getenv("MLBUILD_TEXT_DIR"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "moby-dick.txt"))
		if err != nil {
			t.Fatal(err)
		}
		texts["moby-dick"] = string(b)
	}
	for name, text := range texts {
		p := write(t, name+".txt", text)
		for _, mode := range []Mode{Bytes, Chars} {
			const T, n = 16, 500
			c, err := Open([]string{p}, Options{Mode: mode, Context: T, ValFrac: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []Split{c.Train, c.Val} {
				tk, err := c.ReadTokens(s, 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(tk.IDs)) != s.Tokens {
					t.Fatalf("%s %s: %d ids, the split has %d tokens", name, mode, len(tk.IDs), s.Tokens)
				}
				ids, tg := make([]int32, n*T), make([]int32, n*T)
				if err := c.Windows(s, rand.New(rand.NewPCG(7, 9)), n, T, ids, tg, make([]byte, c.BufSize(T))); err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(7, 9))
				for i := range n {
					k := tk.Draw(rng)
					if k < 0 || k >= tk.Windows(T) {
						t.Fatalf("%s %s: draw %d is %d, outside the %d window starts", name, mode, i, k, tk.Windows(T))
					}
					if !equal(tk.IDs[k:k+T], ids[i*T:(i+1)*T]) || !equal(tk.IDs[k+1:k+T+1], tg[i*T:(i+1)*T]) {
						t.Fatalf("%s %s: window %d at token %d differs from the one Windows read", name, mode, i, k)
					}
				}
			}
			if _, err := c.ReadTokens(c.Train, c.Train.Tokens-1); err == nil || !strings.Contains(err.Error(), "read whole") {
				t.Errorf("%s %s: a split over the bound: error %v", name, mode, err)
			}
			c.Close()
		}
	}
}
