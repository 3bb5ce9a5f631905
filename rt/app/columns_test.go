package app

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestColumnsAsTabwriter: columns lays out what text/tabwriter does with
// the settings the commands used (padding 2 with spaces, left or right
// aligned): the tables of the commands, and random ones with ragged rows,
// rows without tabs, empty cells, multi-byte runes and no final newline.
func TestColumnsAsTabwriter(t *testing.T) {
	texts := []string{
		"",
		"no tabs\n",
		"model:\tmnist\nspec:\tmodels/mnist.cue\nbackend:\tcpu\n",
		"layer\top\toutput\tparams\nconv2d1\tconv2d\t32×28×28\t832\ntotal\t\t\t1234\n",
		"model\tmnist (backend cpu)\ninference, batch 250\t1.234 ms\t2026 images/s\n(median of 10 runs)\n",
		"true \\ predicted\t0\t1\t\n0\t980\t0\t\n1\t2\t1133\t\n",
		"a\tb\nunended\tlast",
	}
	rng := rand.New(rand.NewSource(1))
	words := []string{"", "x", "ab", "×", "32×28×28", "longer cell", "é"}
	for range 300 {
		var b strings.Builder
		for range rng.Intn(8) {
			for range rng.Intn(5) {
				b.WriteString(words[rng.Intn(len(words))] + "\t")
			}
			b.WriteString(words[rng.Intn(len(words))])
			if rng.Intn(10) > 0 {
				b.WriteString("\n")
			}
		}
		texts = append(texts, b.String())
	}
	for _, right := range []bool{false, true} {
		flags := uint(0)
		if right {
			flags = tabwriter.AlignRight
		}
		for _, text := range texts {
			var want, got bytes.Buffer
			tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', flags)
			c := newColumns(&got, right)
			// written in two pieces, as the commands write a table in several
			for _, w := range []interface{ Write([]byte) (int, error) }{tw, c} {
				fmt.Fprint(w, text[:len(text)/2])
				fmt.Fprint(w, text[len(text)/2:])
			}
			tw.Flush()
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("right-aligned %v, text %q:\ngot\n%q\nwant (text/tabwriter)\n%q", right, text, got.String(), want.String())
			}
		}
	}
}
