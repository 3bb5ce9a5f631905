package csvdata

import (
	"io"
	"runtime"
	"strings"
	"testing"
)

// cellStream is a line of n bytes of tiny cells ("0,0,0,…") and no end
// of line, produced as it is read.
type cellStream struct{ left int }

func (c *cellStream) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.left)
	for i := range n {
		p[i] = "0,"[(c.left-i)%2]
	}
	c.left -= n
	return n, nil
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeLineRefusedEarly: a line of 16 MiB of tiny cells, in a file the
// spec reads 10 columns of, is refused at line 1 within the line bound
// (LineLimit(10) bytes), after allocating a few times that; it was read
// whole and split into 8 million cells first (a 1 GiB line passed 8 GB),
// for the comma-separated and the blank-separated reader, with and
// without a header.
func TestHugeLineRefusedEarly(t *testing.T) {
	for _, o := range []Options{
		{MaxColumns: 10, Labels: []Column{{Index: -1}}},
		{MaxColumns: 10, Labels: []Column{{Index: -1}}, Header: true},
		{MaxColumns: 10, Labels: []Column{{Index: -1}}, Delimiter: ' '},
	} {
		var err error
		got := allocated(func() {
			_, err = Parse("huge.csv", &cellStream{left: 16 << 20}, o)
		})
		if err == nil || !strings.HasPrefix(err.Error(), "huge.csv:1: the line is longer than 6656 bytes") {
			t.Errorf("%+v: got %v, want the line refused at line 1", o, err)
		}
		if got > 1<<20 {
			t.Errorf("%+v: refusing the line allocated %d bytes; the bound is a few lines of %d bytes", o, got, LineLimit(10))
		}
	}
	// Every reader stops at the line that is too long, with its number.
	text := "1,2,3\n4,5,6\n" + strings.Repeat("7,", 5000) + "8\n"
	if _, err := Parse("t.csv", strings.NewReader(text), Options{MaxColumns: 3, Labels: []Column{{Index: -1}}}); err == nil || !strings.HasPrefix(err.Error(), "t.csv:3: the line is longer than") {
		t.Errorf("a long third line: %v", err)
	}
}

// TestTooManyColumns: a row with more cells than the spec's columns is
// refused at its line, however short.
func TestTooManyColumns(t *testing.T) {
	text := "1,2,0\n1,2,3,4,5,0\n"
	_, err := Parse("t.csv", strings.NewReader(text), Options{MaxColumns: 3, Labels: []Column{{Index: -1}}})
	if err == nil || !strings.Contains(err.Error(), "t.csv:2: the row has 6 fields, more than the 3 columns the spec's dataset reads") {
		t.Errorf("got %v", err)
	}
}

// TestByteOrderMark: a UTF-8 byte order mark before the first cell is
// not part of it: a headerless file's first number reads, a header's
// first name matches.
func TestByteOrderMark(t *testing.T) {
	tb, err := Parse("bom.csv", strings.NewReader("\ufeff1.5,2,0\n3,4,1\n"), Options{Labels: []Column{{Index: -1}}})
	if err != nil || tb.X[0] != 1.5 {
		t.Fatalf("headerless: %v", err)
	}
	tb, err = Parse("bom.csv", strings.NewReader("\ufeffy,a,b\n0,1,2\n"), Options{Header: true, Labels: []Column{{Name: "y"}}})
	if err != nil || tb.Features != 2 || tb.LabelCells[0] != "0" {
		t.Fatalf("header: %v", err)
	}
}

// TestLabelNamedTwice: a label column picked by a name the header gives
// two columns is ambiguous (it took the first silently).
func TestLabelNamedTwice(t *testing.T) {
	_, err := Parse("t.csv", strings.NewReader("y,a,y\n0,1,2\n"), Options{Header: true, Labels: []Column{{Name: "y"}}})
	if err == nil || !strings.Contains(err.Error(), `t.csv: the header names two columns "y" (columns 1 and 3), so label column "y" is ambiguous`) {
		t.Errorf("got %v", err)
	}
}
