// Package csvdata reads tables of numbers from delimited text files, the
// form most tabular data sets arrive in: feature columns of numbers and
// one or more label columns (class indices, class names or real-valued
// targets), with or without a header row naming the columns.
//
// Every error names the file, the line and the column (by number, and by
// name when there is a header) and says what was expected: a cell that is
// not a number, an empty cell, a row with the wrong number of fields, a
// label column that does not exist.
//
// This package is copied into each generated program's module (it is
// embedded in the mlbuild binary), so it imports only the standard library.
package csvdata

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxCells bounds the cells a table may hold (rows times columns), so that
// a hostile file cannot ask for an absurd allocation.
const MaxCells = 1 << 28

// Column picks a column by its header name or by its index (0 is the
// first; negative indices count from the end, -1 is the last).
type Column struct {
	Name  string // used when not empty; needs a header row
	Index int
}

// String describes the column as the spec wrote it.
func (c Column) String() string {
	if c.Name != "" {
		return strconv.Quote(c.Name)
	}
	return strconv.Itoa(c.Index)
}

// Options say how a file is laid out and which columns are what.
type Options struct {
	// Delimiter separates cells: ',' (the default when 0), ';', '\t', or
	// ' ', which splits on runs of spaces and tabs (no quoting).
	Delimiter rune
	// SkipRows lines are skipped before the header or the first data row
	// (scikit-learn's files open with a line of counts).
	SkipRows int
	// Header says the first line after SkipRows names the columns.
	Header bool
	// Labels are the label columns, in order; none when the labels come
	// from another file.
	Labels []Column
	// Drop are columns that are neither features nor labels.
	Drop []Column
	// MaxColumns, when positive, is the most columns a row may have: the
	// spec's features, labels and dropped columns. It bounds the memory a
	// line takes: a line longer than LineLimit(MaxColumns) bytes, or a row
	// of more cells, is refused with its line number as soon as it is
	// read, so that one huge line (a file of another kind, a wrong
	// delimiter, a hostile file) is not read whole first.
	MaxColumns int
}

// Bytes a line may take per column, and besides, under MaxColumns:
// generous for numbers (float32 needs at most 15 characters) and class
// names, and still a small bound.
const (
	bytesPerColumn = 256
	lineSlack      = 4096
)

// LineLimit is the longest line, in bytes, a file of columns columns may
// have.
func LineLimit(columns int) int { return lineSlack + bytesPerColumn*columns }

// lineLimiter passes its reader's bytes on until a line runs longer than
// max bytes, and then fails with a *LineTooLongError.
type lineLimiter struct {
	r    io.Reader
	max  int
	line int // the line being read, from 1
	run  int // bytes of it so far
	err  error
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			l.line++
			l.run = 0
			continue
		}
		l.run++
		if l.run > l.max {
			l.err = &LineTooLongError{Line: l.line, Limit: l.max}
			return i, l.err
		}
	}
	return n, err
}

// LineTooLongError is a line longer than Options.MaxColumns allows.
type LineTooLongError struct{ Line, Limit int }

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("line %d is longer than %d bytes", e.Line, e.Limit)
}

// utf8BOM is the byte order mark some editors put before UTF-8 text.
const utf8BOM = "\xef\xbb\xbf"

// Table is a file read into memory: the feature columns as float32 values
// in row-major order, and the label cells as text, to be converted by
// Targets or Classes, whose meaning the caller knows.
type Table struct {
	File     string
	Rows     int
	Features int
	// X holds Rows×Features values.
	X []float32
	// FeatureNames and LabelNames are the header names of the columns
	// (column numbers as text without a header).
	FeatureNames, LabelNames []string
	// LabelCells holds Rows×len(LabelNames) cells, as written.
	LabelCells []string
	// Line is each row's line number in the file, for messages.
	Line []int
	// labelCols are the label columns' indices in the file, for messages.
	labelCols []int
}

// Read reads and checks a whole file.
func Read(path string, o Options) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(path, f, o)
}

// record is one line split into cells.
type record struct {
	line  int
	cells []string
}

// reader yields records from either encoding/csv or blank-separated text.
type reader interface {
	next() (record, error) // io.EOF at the end
}

type csvReader struct {
	file string
	r    *csv.Reader
}

func (c *csvReader) next() (record, error) {
	cells, err := c.r.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			if pe.StartLine != pe.Line {
				return record{}, fmt.Errorf("%s:%d: the row starting here breaks off at line %d, column %d: %v", c.file, pe.StartLine, pe.Line, pe.Column, pe.Err)
			}
			return record{}, fmt.Errorf("%s:%d: column %d: %v", c.file, pe.Line, pe.Column, pe.Err)
		}
		return record{}, err
	}
	line, _ := c.r.FieldPos(0)
	return record{line: line, cells: cells}, nil
}

type blankReader struct {
	s    *bufio.Scanner
	line int
}

func (b *blankReader) next() (record, error) {
	for b.s.Scan() {
		b.line++
		cells := strings.Fields(b.s.Text())
		if len(cells) == 0 {
			continue // blank lines separate nothing
		}
		return record{line: b.line, cells: cells}, nil
	}
	if err := b.s.Err(); err != nil {
		return record{}, err
	}
	return record{}, io.EOF
}

// checkedReader applies Options.MaxColumns to another reader's records,
// and words the error of a line that is too long.
type checkedReader struct {
	rd         reader
	file       string
	limiter    *lineLimiter
	maxColumns int
}

func (c *checkedReader) next() (record, error) {
	rec, err := c.rd.next()
	var long *LineTooLongError
	if c.limiter != nil && c.limiter.err != nil && err != io.EOF && errors.As(c.limiter.err, &long) {
		return record{}, fmt.Errorf("%s:%d: the line is longer than %d bytes, more than %d columns (what the spec's dataset reads) take; is this the file the spec means, with the delimiter it says?", c.file, long.Line, long.Limit, c.maxColumns)
	}
	if err != nil {
		return record{}, err
	}
	if c.maxColumns > 0 && len(rec.cells) > c.maxColumns {
		return record{}, fmt.Errorf("%s:%d: the row has %d fields, more than the %d columns the spec's dataset reads (features, labels and dropped columns)", c.file, rec.line, len(rec.cells), c.maxColumns)
	}
	return rec, nil
}

// Parse reads a table from r; file names it in messages.
func Parse(file string, r io.Reader, o Options) (*Table, error) {
	if o.SkipRows < 0 {
		return nil, fmt.Errorf("%s: skipRows is %d; it must not be negative", file, o.SkipRows)
	}
	// A byte order mark is not part of the first cell (a header's first
	// name, or a headerless file's first number).
	br := bufio.NewReader(r)
	if b, _ := br.Peek(len(utf8BOM)); string(b) == utf8BOM {
		br.Discard(len(utf8BOM))
	}
	r = br
	var limiter *lineLimiter
	maxLine := 16 << 20
	if o.MaxColumns > 0 {
		maxLine = LineLimit(o.MaxColumns)
		limiter = &lineLimiter{r: r, max: maxLine, line: 1}
		r = limiter
	}
	var rd reader
	switch o.Delimiter {
	case 0, ',', ';', '\t', '|':
		cr := csv.NewReader(r)
		if o.Delimiter != 0 {
			cr.Comma = o.Delimiter
		}
		cr.FieldsPerRecord = -1 // checked below, with a clearer message
		cr.ReuseRecord = false
		rd = &csvReader{file: file, r: cr}
	case ' ':
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, min(64<<10, maxLine+1)), maxLine+1)
		rd = &blankReader{s: sc}
	default:
		return nil, fmt.Errorf("%s: delimiter %q is not supported: use \",\", \";\", \"\\t\", \"|\" or \" \" (runs of blanks)", file, o.Delimiter)
	}
	rd = &checkedReader{rd: rd, file: file, limiter: limiter, maxColumns: o.MaxColumns}
	for i := 0; i < o.SkipRows; i++ {
		if _, err := rd.next(); err != nil {
			if err == io.EOF {
				return nil, fmt.Errorf("%s: the file ends within the %d rows to skip", file, o.SkipRows)
			}
			return nil, err
		}
	}
	t := &Table{File: file}
	var names []string
	width := -1
	headerLine := 0
	if o.Header {
		rec, err := rd.next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: the file is empty; a header row was expected", file)
		}
		if err != nil {
			return nil, err
		}
		names = rec.cells
		for i, n := range names {
			names[i] = strings.TrimSpace(n)
		}
		width = len(names)
		headerLine = rec.line
	}
	var kinds []colKind // per column: feature, label or dropped
	var labelCols []int
	for {
		rec, err := rd.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if width < 0 {
			width = len(rec.cells)
		}
		if kinds == nil {
			if kinds, labelCols, err = resolve(file, names, width, o); err != nil {
				return nil, err
			}
			t.labelCols = labelCols
			for c, k := range kinds {
				if k == feature {
					t.Features++
					t.FeatureNames = append(t.FeatureNames, colName(names, c))
				}
			}
			for _, c := range labelCols {
				t.LabelNames = append(t.LabelNames, colName(names, c))
			}
		}
		if len(rec.cells) != width {
			what := "the first row"
			if o.Header {
				what = fmt.Sprintf("the header (line %d)", headerLine)
			}
			return nil, fmt.Errorf("%s:%d: the row has %d fields but %s has %d", file, rec.line, len(rec.cells), what, width)
		}
		if (t.Rows+1)*width > MaxCells {
			return nil, fmt.Errorf("%s:%d: more than %d cells; the table is too large to read into memory", file, rec.line, MaxCells)
		}
		for c, cell := range rec.cells {
			if kinds[c] != feature {
				continue
			}
			v, err := parseNumber(cell)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: column %d (%s): %v", file, rec.line, c+1, colName(names, c), err)
			}
			t.X = append(t.X, v)
		}
		for _, c := range labelCols {
			t.LabelCells = append(t.LabelCells, strings.TrimSpace(rec.cells[c]))
		}
		t.Line = append(t.Line, rec.line)
		t.Rows++
	}
	if t.Rows == 0 {
		return nil, fmt.Errorf("%s: no data rows", file)
	}
	return t, nil
}

type colKind uint8

const (
	feature colKind = iota
	label
	dropped
)

// resolve finds the label and dropped columns among width columns.
func resolve(file string, names []string, width int, o Options) ([]colKind, []int, error) {
	kinds := make([]colKind, width)
	find := func(role string, c Column) (int, error) {
		if c.Name != "" {
			if names == nil {
				return 0, fmt.Errorf("%s: %s column %q is named, but the file has no header row (set header: true, or give the column's index)", file, role, c.Name)
			}
			found := -1
			for i, n := range names {
				if n != c.Name {
					continue
				}
				if found >= 0 {
					return 0, fmt.Errorf("%s: the header names two columns %q (columns %d and %d), so %s column %q is ambiguous; rename one, or give the column's index", file, c.Name, found+1, i+1, role, c.Name)
				}
				found = i
			}
			if found >= 0 {
				return found, nil
			}
			return 0, fmt.Errorf("%s: no %s column %q; the header names %s", file, role, c.Name, strings.Join(names, ", "))
		}
		i := c.Index
		if i < 0 {
			i += width
		}
		if i < 0 || i >= width {
			return 0, fmt.Errorf("%s: %s column %d does not exist: the rows have %d columns (0 to %d, or -1 to -%d from the end)", file, role, c.Index, width, width-1, width)
		}
		return i, nil
	}
	var labels []int
	for _, c := range o.Labels {
		i, err := find("label", c)
		if err != nil {
			return nil, nil, err
		}
		if kinds[i] == label {
			return nil, nil, fmt.Errorf("%s: label column %s is listed twice", file, c)
		}
		kinds[i] = label
		labels = append(labels, i)
	}
	for _, c := range o.Drop {
		i, err := find("dropped", c)
		if err != nil {
			return nil, nil, err
		}
		if kinds[i] == label {
			return nil, nil, fmt.Errorf("%s: column %s is both a label and dropped", file, c)
		}
		kinds[i] = dropped
	}
	return kinds, labels, nil
}

// colName is a column's header name, or its number without a header.
func colName(names []string, c int) string {
	if names != nil && c < len(names) && names[c] != "" {
		return strconv.Quote(names[c])
	}
	return "index " + strconv.Itoa(c)
}

// parseNumber reads a cell as a finite float32.
func parseNumber(cell string) (float32, error) {
	s := strings.TrimSpace(cell)
	if s == "" {
		return 0, errors.New("empty cell; expected a number (missing values are not supported: fill or drop them first)")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a number", quoteCell(s))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
		return 0, fmt.Errorf("%s is not a finite float32 number", quoteCell(s))
	}
	return float32(v), nil
}

// quoteCell quotes a cell for a message, cut to a readable length.
func quoteCell(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

// where names label column j of row r for messages.
func (t *Table) where(r, j int) string {
	return fmt.Sprintf("%s:%d: column %d (%s)", t.File, t.Line[r], t.labelCols[j]+1, t.LabelNames[j])
}

// Targets converts the label cells to real-valued targets, row-major
// (Rows×len(LabelNames)).
func (t *Table) Targets() ([]float32, error) {
	k := len(t.LabelNames)
	y := make([]float32, len(t.LabelCells))
	for i, cell := range t.LabelCells {
		v, err := parseNumber(cell)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", t.where(i/k, i%k), err)
		}
		y[i] = v
	}
	return y, nil
}

// Classes converts the single label column to class indices in
// [0, classes). When every cell is a whole number, the cells are the
// indices themselves (names, if given, only name them); otherwise each cell
// is a class name and is looked up in names, or, when names is empty, the
// names are the distinct cells in sorted order (returned, so that the
// order can be recorded and reused).
func (t *Table) Classes(classes int, names []string) ([]int32, []string, error) {
	if len(t.LabelNames) != 1 {
		return nil, nil, fmt.Errorf("%s: a classification task reads one label column, but %d are given", t.File, len(t.LabelNames))
	}
	out := make([]int32, t.Rows)
	if allIntegers(t.LabelCells) {
		for r, cell := range t.LabelCells {
			v, _ := strconv.ParseInt(cell, 10, 64)
			if v < 0 || v >= int64(classes) {
				return nil, nil, fmt.Errorf("%s: label %s is outside the %d classes 0 to %d", t.where(r, 0), cell, classes, classes-1)
			}
			out[r] = int32(v)
		}
		return out, nil, nil
	}
	if len(names) == 0 {
		names = DistinctSorted(t.LabelCells)
		if len(names) > classes {
			return nil, nil, fmt.Errorf("%s: the label column %s holds %d distinct classes (%s) but the model has %d", t.File, t.LabelNames[0], len(names), summarise(names), classes)
		}
	}
	index := make(map[string]int32, len(names))
	for i, n := range names {
		index[n] = int32(i)
	}
	for r, cell := range t.LabelCells {
		v, ok := index[cell]
		if !ok {
			return nil, nil, fmt.Errorf("%s: label %s is not one of the classes %s", t.where(r, 0), quoteCell(cell), summarise(names))
		}
		out[r] = v
	}
	return out, names, nil
}

// allIntegers reports whether every cell is a whole decimal number.
func allIntegers(cells []string) bool {
	for _, c := range cells {
		if _, err := strconv.ParseInt(c, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// DistinctSorted returns the distinct strings in byte order: the stable
// class order of string labels.
func DistinctSorted(cells []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cells {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// summarise lists names for a message, cut after a few.
func summarise(names []string) string {
	var b bytes.Buffer
	for i, n := range names {
		if i == 8 {
			fmt.Fprintf(&b, ", … (%d in all)", len(names))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteCell(n))
	}
	return b.String()
}
