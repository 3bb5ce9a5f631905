package app

import (
	"io"
	"strings"
	"unicode/utf8"
)

// columns lines up the tab-terminated cells of the text written to it
// when flushed: the tables of info, bench, selftest and eval's confusion
// matrix. It lays out text as text/tabwriter does with a padding of two
// spaces and no minimum width (elastic tabstops: a column's width is that
// of its widest cell among the adjacent lines that have the column, plus
// the padding; a line's last cell, which no tab ends, is not in a
// column), in a fraction of the machine code; TestColumnsAsTabwriter
// compares the two.
type columns struct {
	w          io.Writer
	alignRight bool // pad before the text of a cell, not after it
	text       []byte
}

// columnPadding is the spaces between the widest cell and the next column.
const columnPadding = 2

func newColumns(w io.Writer, alignRight bool) *columns {
	return &columns{w: w, alignRight: alignRight}
}

// Write keeps p until Flush.
func (c *columns) Write(p []byte) (int, error) {
	c.text = append(c.text, p...)
	return len(p), nil
}

// Flush writes the text written so far, aligned.
func (c *columns) Flush() error {
	lines := strings.Split(string(c.text), "\n")
	c.text = c.text[:0]
	cells := make([][]string, len(lines))
	for i, l := range lines {
		cells[i] = strings.Split(l, "\t")
	}
	// The text after the last newline has no empty last cell: a tab that
	// ends it ends a cell of a column, not the line.
	if last := cells[len(cells)-1]; last[len(last)-1] == "" {
		cells[len(cells)-1] = last[:len(last)-1]
	}
	out := c.layout(nil, cells, nil)
	// Every line but the last ended with a newline; layout ends each one
	// with a newline, so drop the last line's.
	out = out[:len(out)-1]
	_, err := c.w.Write(out)
	return err
}

// layout appends lines, whose first len(widths) columns have those widths,
// finding the blocks of adjacent lines that have a cell in the next column
// and laying each out with that column's width added.
func (c *columns) layout(out []byte, lines [][]string, widths []int) []byte {
	col := len(widths)
	inColumn := func(line []string) bool { return len(line)-1 > col }
	done := 0
	for i := 0; i < len(lines); {
		if !inColumn(lines[i]) {
			i++
			continue
		}
		out = c.write(out, lines[done:i], widths)
		j, width := i, 0
		for ; j < len(lines) && inColumn(lines[j]); j++ {
			width = max(width, utf8.RuneCountInString(lines[j][col])+columnPadding)
		}
		out = c.layout(out, lines[i:j], append(widths[:col:col], width))
		done, i = j, j
	}
	return c.write(out, lines[done:], widths)
}

// write appends lines with their cells padded to widths, each line ended
// by a newline.
func (c *columns) write(out []byte, lines [][]string, widths []int) []byte {
	for _, line := range lines {
		for k, cell := range line {
			pad := 0
			if k < len(widths) {
				pad = widths[k] - utf8.RuneCountInString(cell)
			}
			if c.alignRight {
				out = append(out, strings.Repeat(" ", pad)...)
			}
			out = append(out, cell...)
			if !c.alignRight {
				out = append(out, strings.Repeat(" ", pad)...)
			}
		}
		out = append(out, '\n')
	}
	return out
}
