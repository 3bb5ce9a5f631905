// Package npy reads and writes NumPy's .npy array files (format versions 1,
// 2 and 3): a magic string, a header that is a Python dict literal with the
// element type, the memory order and the shape, then the elements. It reads
// little-endian float32, float64, uint8, int32 and int64 arrays in C order
// and writes float32 ones; files of 1 MiB or more are memory-mapped where
// the OS allows, so arrays larger than memory cost only what is touched.
//
// Every error names the file and says what is wrong in terms a user can act
// on: an element type it does not read (with the one that would do), a
// Fortran-order array (and how to save it in C order), a file cut short
// (with both byte counts).
//
// This package is copied into each generated program's module (it is
// embedded in the mlbuild binary), so it imports only the standard library.
package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Magic opens every .npy file.
const Magic = "\x93NUMPY"

// MaxElements bounds the elements a header may declare, so that a corrupt
// or hostile header cannot ask for an absurd allocation.
const MaxElements = 1<<40 - 1

// mapThreshold is the file size from which Open maps instead of reading.
const mapThreshold = 1 << 20

// Dtype is an element type the reader knows.
type Dtype struct {
	Descr string // NumPy's descr, e.g. "<f4"
	Name  string // e.g. "float32"
	Size  int    // bytes per element
}

var dtypes = []Dtype{
	{"<f4", "float32", 4}, {"<f8", "float64", 8}, {"|u1", "uint8", 1},
	{"<i4", "int32", 4}, {"<i8", "int64", 8},
}

// lookupDtype finds descr among the known types ("u1" is also written
// "<u1" or "|u1").
func lookupDtype(descr string) (Dtype, bool) {
	for _, d := range dtypes {
		if d.Descr == descr || (d.Size == 1 && (descr == "<u1" || descr == "u1")) {
			return d, true
		}
	}
	return Dtype{}, false
}

// Array is an array opened from a file: its type and shape, and its
// elements, mapped or in memory, converted on access.
type Array struct {
	File  string
	Dtype Dtype
	Shape []int
	data  []byte
	unmap func() error
}

// Open opens a .npy file, mapping it into memory when it is large.
func Open(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() >= mapThreshold {
		if data, unmap, err := mapFile(f, fi.Size()); err == nil {
			a, err := Parse(path, data)
			if err != nil {
				unmap()
				return nil, err
			}
			a.unmap = unmap
			return a, nil
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Close releases a mapped file; arrays read into memory need nothing.
func (a *Array) Close() error {
	if a.unmap == nil {
		return nil
	}
	u := a.unmap
	a.unmap, a.data = nil, nil
	return u()
}

// Parse reads an array from the bytes of a whole file; name names it in
// messages. The elements are not copied. (It checks the header as
// readHeader does, which ReadFrom uses, in code of its own: every program
// links Parse, only those of npz datasets ReadFrom, and sharing the code
// cost every program a page.)
func Parse(name string, b []byte) (*Array, error) {
	if !bytes.HasPrefix(b, []byte(Magic)) {
		return nil, fmt.Errorf("%s: not a NumPy .npy file (it does not start with \\x93NUMPY); save arrays with numpy.save", name)
	}
	if len(b) < 10 {
		return nil, fmt.Errorf("%s: the file ends inside its header (%d bytes)", name, len(b))
	}
	major := b[6]
	var hlen, start int
	switch major {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf("%s: the file ends inside its header (%d bytes)", name, len(b))
		}
		h := binary.LittleEndian.Uint32(b[8:12])
		if int64(h) > int64(len(b)) {
			return nil, fmt.Errorf("%s: the header claims %d bytes but the file has %d", name, h, len(b))
		}
		hlen, start = int(h), 12
	default:
		return nil, fmt.Errorf("%s: .npy format version %d.%d is not supported (1, 2 and 3 are)", name, major, b[7])
	}
	if start+hlen > len(b) {
		return nil, fmt.Errorf("%s: the header claims %d bytes but the file ends after %d", name, hlen, len(b)-start)
	}
	h, err := parseHeader(string(b[start : start+hlen]))
	if err != nil {
		return nil, fmt.Errorf("%s: header: %v", name, err)
	}
	dt, ok := lookupDtype(h.descr)
	if !ok {
		return nil, fmt.Errorf("%s: element type %s is not supported: %s", name, strconv.Quote(h.descr), dtypeAdvice(h.descr))
	}
	if h.fortran && len(h.shape) > 1 {
		return nil, fmt.Errorf("%s: the array is in Fortran (column-major) order; save it in C order, e.g. numpy.save(path, numpy.ascontiguousarray(a))", name)
	}
	n := int64(1)
	for _, d := range h.shape {
		if d < 0 {
			return nil, fmt.Errorf("%s: shape %s has a negative size", name, shapeText(h.shape))
		}
		if d > 0 && n > MaxElements/int64(d) {
			return nil, fmt.Errorf("%s: shape %s has more than %d elements", name, shapeText(h.shape), int64(MaxElements))
		}
		n *= int64(d)
	}
	body := b[start+hlen:]
	want := n * int64(dt.Size)
	if int64(len(body)) < want {
		return nil, fmt.Errorf("%s: the file is cut short: shape %s of %s needs %d bytes of data but %d follow the header", name, shapeText(h.shape), dt.Name, want, len(body))
	}
	if int64(len(body)) > want {
		return nil, fmt.Errorf("%s: %d bytes follow the %d bytes of data that shape %s of %s needs; the file is not one array", name, int64(len(body))-want, want, shapeText(h.shape), dt.Name)
	}
	return &Array{File: name, Dtype: dt, Shape: h.shape, data: body}, nil
}

// headerInfo is what a header says: the element type, the shape, where
// the data start and how many bytes they take.
type headerInfo struct {
	dt    Dtype
	shape []int
	start int
	bytes int64
}

// prefixLen is the bytes before a header: magic, version and header length.
func prefixLen(b []byte) int {
	if len(b) > 6 && b[6] != 1 {
		return 12
	}
	return 10
}

// readHeader reads and checks the header at the start of b, which holds
// at least the header; size is the file's size, for messages.
func readHeader(name string, b []byte, size int64) (headerInfo, error) {
	if !bytes.HasPrefix(b, []byte(Magic)) {
		return headerInfo{}, fmt.Errorf("%s: not a NumPy .npy file (it does not start with \\x93NUMPY); save arrays with numpy.save", name)
	}
	if len(b) < 10 {
		return headerInfo{}, fmt.Errorf("%s: the file ends inside its header (%d bytes)", name, len(b))
	}
	major := b[6]
	var hlen, start int
	switch major {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return headerInfo{}, fmt.Errorf("%s: the file ends inside its header (%d bytes)", name, len(b))
		}
		h := binary.LittleEndian.Uint32(b[8:12])
		if int64(h) > size {
			return headerInfo{}, fmt.Errorf("%s: the header claims %d bytes but the file has %d", name, h, size)
		}
		hlen, start = int(h), 12
	default:
		return headerInfo{}, fmt.Errorf("%s: .npy format version %d.%d is not supported (1, 2 and 3 are)", name, major, b[7])
	}
	if start+hlen > len(b) {
		return headerInfo{}, fmt.Errorf("%s: the header claims %d bytes but the file ends after %d", name, hlen, len(b)-start)
	}
	h, err := parseHeader(string(b[start : start+hlen]))
	if err != nil {
		return headerInfo{}, fmt.Errorf("%s: header: %v", name, err)
	}
	dt, ok := lookupDtype(h.descr)
	if !ok {
		return headerInfo{}, fmt.Errorf("%s: element type %s is not supported: %s", name, strconv.Quote(h.descr), dtypeAdvice(h.descr))
	}
	if h.fortran && len(h.shape) > 1 {
		return headerInfo{}, fmt.Errorf("%s: the array is in Fortran (column-major) order; save it in C order, e.g. numpy.save(path, numpy.ascontiguousarray(a))", name)
	}
	n := int64(1)
	for _, d := range h.shape {
		if d < 0 {
			return headerInfo{}, fmt.Errorf("%s: shape %s has a negative size", name, shapeText(h.shape))
		}
		if d > 0 && n > MaxElements/int64(d) {
			return headerInfo{}, fmt.Errorf("%s: shape %s has more than %d elements", name, shapeText(h.shape), int64(MaxElements))
		}
		n *= int64(d)
	}
	return headerInfo{dt: dt, shape: h.shape, start: start + hlen, bytes: n * int64(dt.Size)}, nil
}

// MaxStreamHeader bounds the header ReadFrom reads (numpy writes headers
// of a few hundred bytes and reads none over 10 000 by default).
const MaxStreamHeader = 1 << 20

// ReadFrom reads a whole .npy file from the stream r (an entry of a zip
// archive) into memory, checking its header before any data is read:
// check (when not nil) is given the shape and the element size, and the
// data may take at most maxBytes. It then reads exactly the bytes the
// header declares and fails at the first byte more, so that a compressed
// stream costs the memory its header's shape needs, however far it would
// inflate. name names the array in messages.
func ReadFrom(name string, r io.Reader, maxBytes int64, check func(shape []int, elemSize int) error) (*Array, error) {
	prefix := make([]byte, 12)
	n, err := io.ReadFull(r, prefix[:10])
	if err != nil {
		return nil, readErr(name, prefix[:n], err)
	}
	if p := prefixLen(prefix); p > 10 && bytes.HasPrefix(prefix, []byte(Magic)) {
		if n, err := io.ReadFull(r, prefix[10:p]); err != nil {
			return nil, readErr(name, prefix[:10+n], err)
		}
	} else {
		prefix = prefix[:10]
	}
	if !bytes.HasPrefix(prefix, []byte(Magic)) {
		return nil, fmt.Errorf("%s: not a NumPy .npy file (it does not start with \\x93NUMPY); save arrays with numpy.save", name)
	}
	var hlen uint64
	if len(prefix) == 10 {
		hlen = uint64(binary.LittleEndian.Uint16(prefix[8:10]))
	} else {
		hlen = uint64(binary.LittleEndian.Uint32(prefix[8:12]))
	}
	if hlen > MaxStreamHeader {
		return nil, fmt.Errorf("%s: the header claims %d bytes, more than the %d a header may have here", name, hlen, MaxStreamHeader)
	}
	head := make([]byte, len(prefix)+int(hlen))
	copy(head, prefix)
	if n, err := io.ReadFull(r, head[len(prefix):]); err != nil {
		return nil, readErr(name, head[:len(prefix)+n], err)
	}
	hd, err := readHeader(name, head, int64(len(head)))
	if err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(hd.shape, hd.dt.Size); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	if hd.bytes > maxBytes {
		return nil, fmt.Errorf("%s: shape %s of %s takes %d bytes, more than the %d this reader reads into memory; save it with numpy.save as its own .npy file, which is memory-mapped", name, shapeText(hd.shape), hd.dt.Name, hd.bytes, maxBytes)
	}
	b := make([]byte, int64(len(head))+hd.bytes)
	copy(b, head)
	if n, err := io.ReadFull(r, b[len(head):]); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, fmt.Errorf("%s: the array is cut short: shape %s of %s needs %d bytes of data but %d follow the header", name, shapeText(hd.shape), hd.dt.Name, hd.bytes, n)
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n > 0 {
		return nil, fmt.Errorf("%s: more bytes follow the %d bytes of data that shape %s of %s needs; the member is not one array", name, hd.bytes, shapeText(hd.shape), hd.dt.Name)
	}
	return &Array{File: name, Dtype: hd.dt, Shape: hd.shape, data: b[len(head):]}, nil
}

// readErr words a stream that ends, or fails, inside a header.
func readErr(name string, got []byte, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		if !bytes.HasPrefix(got, []byte(Magic)[:min(len(got), len(Magic))]) {
			return fmt.Errorf("%s: not a NumPy .npy file (it does not start with \\x93NUMPY); save arrays with numpy.save", name)
		}
		return fmt.Errorf("%s: the file ends inside its header (%d bytes)", name, len(got))
	}
	return fmt.Errorf("%s: %v", name, err)
}

// dtypeAdvice says what to do about an element type the reader does not
// take.
func dtypeAdvice(descr string) string {
	switch {
	case strings.HasPrefix(descr, ">"):
		return "the array is big-endian; convert it with a.astype(a.dtype.newbyteorder('<'))"
	case strings.Contains(descr, "O"):
		return "object arrays hold Python objects, not numbers; convert to a numeric type"
	case strings.HasPrefix(descr, "<f2"):
		return "convert float16 to float32 with a.astype('float32')"
	}
	return "use float32, float64, uint8, int32 or int64 (a.astype('float32'))"
}

// header is the dict of a .npy header.
type header struct {
	descr   string
	fortran bool
	shape   []int
}

// parseHeader reads the Python dict literal of a header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (150, 4), }.
func parseHeader(s string) (header, error) {
	var h header
	s = strings.TrimRight(s, " \t\n\x00")
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return h, fmt.Errorf("%s is not a dict", clip(s))
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	seen := map[string]bool{}
	for body != "" {
		key, rest, err := quoted(body)
		if err != nil {
			return h, err
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, ":") {
			return h, fmt.Errorf("expected ':' after key %q", key)
		}
		rest = strings.TrimSpace(rest[1:])
		if seen[key] {
			return h, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "descr":
			if h.descr, rest, err = quoted(rest); err != nil {
				return h, fmt.Errorf("descr: %v", err)
			}
		case "fortran_order":
			switch {
			case strings.HasPrefix(rest, "False"):
				rest = rest[5:]
			case strings.HasPrefix(rest, "True"):
				h.fortran, rest = true, rest[4:]
			default:
				return h, fmt.Errorf("fortran_order is %s, not True or False", clip(rest))
			}
		case "shape":
			if h.shape, rest, err = tuple(rest); err != nil {
				return h, fmt.Errorf("shape: %v", err)
			}
		default:
			return h, fmt.Errorf("unknown key %q", key)
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, ",") {
			rest = strings.TrimSpace(rest[1:])
		} else if rest != "" {
			return h, fmt.Errorf("expected ',' or '}' before %s", clip(rest))
		}
		body = rest
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf("the key %q is missing", k)
		}
	}
	return h, nil
}

// quoted reads a Python string literal ('x' or "x", no escapes).
func quoted(s string) (string, string, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", "", fmt.Errorf("expected a quoted string at %s", clip(s))
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 {
		return "", "", fmt.Errorf("unterminated string at %s", clip(s))
	}
	return s[1 : 1+end], s[2+end:], nil
}

// tuple reads a tuple of non-negative ints, e.g. (150, 4) or (2,) or (),
// allowing Python 2's long suffix (2L,).
func tuple(s string) ([]int, string, error) {
	if !strings.HasPrefix(s, "(") {
		return nil, "", fmt.Errorf("expected a tuple at %s", clip(s))
	}
	end := strings.IndexByte(s, ')')
	if end < 0 {
		return nil, "", errors.New("unterminated tuple")
	}
	shape := []int{}
	for _, part := range strings.Split(s[1:end], ",") {
		part = strings.TrimSuffix(strings.TrimSpace(part), "L")
		if part == "" {
			continue
		}
		v, err := strconv.ParseInt(part, 10, 64)
		if err != nil || v < 0 || v > MaxElements {
			return nil, "", fmt.Errorf("size %q is not a size", part)
		}
		shape = append(shape, int(v))
	}
	return shape, s[end+1:], nil
}

func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

// shapeText formats a shape as NumPy prints it: (150, 4).
func shapeText(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	if len(s) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// ShapeText formats the array's shape as NumPy prints it.
func (a *Array) ShapeText() string { return shapeText(a.Shape) }

// Rows is the size of the first axis (1 for a scalar).
func (a *Array) Rows() int {
	if len(a.Shape) == 0 {
		return 1
	}
	return a.Shape[0]
}

// RowSize is the number of elements per row: the product of the sizes
// after the first.
func (a *Array) RowSize() int {
	n := 1
	for i := 1; i < len(a.Shape); i++ {
		n *= a.Shape[i]
	}
	return n
}

// At returns element i (in C order) as a float64.
func (a *Array) At(i int) float64 {
	b := a.data[i*a.Dtype.Size:]
	switch a.Dtype.Name {
	case "float32":
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case "float64":
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case "uint8":
		return float64(b[0])
	case "int32":
		return float64(int32(binary.LittleEndian.Uint32(b)))
	case "int64":
		return float64(int64(binary.LittleEndian.Uint64(b)))
	}
	return math.NaN()
}

// Gather copies the rows named by idx into dst (len(idx)×RowSize values)
// as float32.
func (a *Array) Gather(dst []float32, idx []int) {
	w := a.RowSize()
	for k, r := range idx {
		out := dst[k*w : (k+1)*w]
		base := r * w
		if a.Dtype.Name == "float32" {
			src := a.data[base*4 : (base+w)*4]
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[i*4:]))
			}
			continue
		}
		for i := range out {
			out[i] = float32(a.At(base + i))
		}
	}
}

// IsInteger reports whether the elements are of an integer type.
func (a *Array) IsInteger() bool {
	return a.Dtype.Name == "uint8" || a.Dtype.Name == "int32" || a.Dtype.Name == "int64"
}
