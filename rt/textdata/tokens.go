package textdata

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Tokens is a split decoded whole into token ids, for a reader that keeps
// it in memory (a GPU's device-resident training gathers its windows
// itself): the window that Windows reads after a draw of rng is
// IDs[k:k+T], its targets IDs[k+1:k+T+1], where k is what Draw returns
// for the same state of rng.
type Tokens struct {
	IDs []int32
	// starts[i] is the byte offset of token i from the split's start
	// (Chars mode; nil in Bytes mode, where it is i).
	starts []uint32
	split  Split
}

// ReadTokens decodes split s whole. A split of more than maxTokens tokens,
// or of 4 GiB or more, is refused with an error (a caller that can read
// windows from the files instead does so): it costs 4 bytes a token, 8 in
// Chars mode.
func (c *Corpus) ReadTokens(s Split, maxTokens int64) (*Tokens, error) {
	if s.Tokens > maxTokens || s.End-s.Start >= math.MaxUint32 {
		return nil, fmt.Errorf("the %s split has %d tokens in %d bytes: more than the %d tokens (and 4 GiB) that are read whole", c.splitName(&s), s.Tokens, s.End-s.Start, maxTokens)
	}
	t := &Tokens{IDs: make([]int32, 0, s.Tokens), split: s}
	if c.Mode == Chars {
		t.starts = make([]uint32, 0, s.Tokens)
	}
	err := c.eachToken(s, func(r rune, off int64) error {
		id, ok := c.Vocab.ID(r)
		if !ok {
			return fmt.Errorf("%s: %s is not in the vocabulary", c.where(off), quoteToken(c.Mode, r))
		}
		if int64(len(t.IDs)) == s.Tokens {
			return fmt.Errorf("the %s split holds more than its %d tokens: did a file change after it was opened?", c.splitName(&s), s.Tokens)
		}
		t.IDs = append(t.IDs, id)
		if t.starts != nil {
			t.starts = append(t.starts, uint32(off-s.Start))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if int64(len(t.IDs)) != s.Tokens {
		return nil, fmt.Errorf("the %s split holds %d tokens, not its %d: did a file change after it was opened?", c.splitName(&s), len(t.IDs), s.Tokens)
	}
	return t, nil
}

// Draw is the index in IDs of the first token of the window that Windows
// would read next with rng, and it draws from rng as Windows does for one
// window. The window's T tokens and its targets lie inside IDs.
func (t *Tokens) Draw(rng *rand.Rand) int {
	off := t.split.drawStart(rng) - t.split.Start
	if t.starts == nil {
		return int(off)
	}
	// the first token at or after off, as Windows moves to a rune start
	return sort.Search(len(t.starts), func(i int) bool { return int64(t.starts[i]) >= off })
}

// Windows is the number of window starts: Draw returns 0 to Windows()−1.
func (t *Tokens) Windows(T int) int { return len(t.IDs) - T }
