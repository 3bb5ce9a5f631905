package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// TestDecodeStatsLines: timedModel counts generate's calls, those after
// the prompt and the jumps of the window apart (keep 0), and
// writeDecodeStats reports them and the team's account a token.
func TestDecodeStatsLines(t *testing.T) {
	const T, n = 8, 40
	vocab, _, _ := textFixture(t, T)
	m := &timedModel{TokenModel: &windowLog{T: T, V: vocab.Size()}}
	if _, err := generate(&bytes.Buffer{}, m, vocab, "ab", n, Sampling{}, 1); err != nil {
		t.Fatal(err)
	}
	windows := 0
	for _, c := range m.TokenModel.(*windowLog).calls {
		if c[1] == 0 {
			windows++
		}
	}
	if m.calls != n || m.windows != windows || len(m.token) != n-windows || windows < 2 {
		t.Fatalf("%d calls, %d with keep 0, %d timed alone; want %d, %d (at least the prompt and a jump), %d", m.calls, m.windows, len(m.token), n, windows, n-windows)
	}
	var out strings.Builder
	writeDecodeStats(&out, m, cpu.DecodeStats{Team: 4, Steps: 10 * n, Parts: 30 * n, Own: n * time.Microsecond})
	for _, want := range []string{
		"decode stats: 40 tokens in ",
		"calls after the prompt or a jump",
		"team of 4, a token: 10.0 steps of 3.0 parts",
		"the caller 1.0 µs in its parts",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the lines lack %q:\n%s", want, out.String())
		}
	}
}
