package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// dtypeSizes gives the element size in bytes of every dtype the format
// defines, so that files with other dtypes can still be checked and
// reported precisely.
var dtypeSizes = map[string]uint64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}

// littleEndian is set on a machine whose float32s are stored as the
// format's: F32 tensors are then copied, not converted.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// converters turn the little-endian bytes of a supported dtype into float32.
var converters = map[string]func(dst []float32, src []byte){
	"F32": func(dst []float32, src []byte) {
		if littleEndian && len(dst) > 0 {
			// The file's bytes are the floats' own: one memmove (46 MB
			// of resnet18 weights took 43 ms a float at a time, the most
			// of a one-sample predict's start-up).
			copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)), src[:4*len(dst)])
			return
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	},
	"F64": func(dst []float32, src []byte) {
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	},
	"F16": func(dst []float32, src []byte) {
		for i := range dst {
			dst[i] = halfToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	},
	"BF16": func(dst []float32, src []byte) {
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	},
}

// halfToFloat32 converts an IEEE 754 binary16 value, subnormals, infinities
// and NaNs included.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0: // zero
		return math.Float32frombits(sign)
	}
	// Subnormal: frac * 2^-24, exact in float32.
	v := float32(frac) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// Read reads and checks the safetensors file at path.
func Read(path string) (*File, error) {
	f, size, prefix, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// MinRead past the file's size: ReadFrom asks for that much room before
	// each read, the last one (which finds EOF) included, and with none
	// left it grew the buffer to twice the file and copied it (86 MB
	// allocated, faulted in and copied for 43 MB of weights, a third of
	// generate's start-up).
	data := make([]byte, 0, size+bytes.MinRead)
	data = append(data, prefix...)
	buf := bytes.NewBuffer(data)
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ReadBytes(path, buf.Bytes())
}

// open opens the file at path, refusing a folder, and reads its first 8
// bytes (fewer when it is shorter), which it checks, when there are 8, as
// the header length of a file of its size: a wrong file (a text file, a
// multi-gigabyte download) fails before it is read.
func open(path string) (f *os.File, size uint64, prefix []byte, err error) {
	if f, err = os.Open(path); err != nil {
		return nil, 0, nil, err // *PathError names the file
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%s: is a directory, not a safetensors file", path)
	}
	if err == nil {
		size = uint64(fi.Size())
		prefix = make([]byte, 8)
		n, _ := io.ReadFull(f, prefix)
		prefix = prefix[:n]
		if n == 8 {
			err = checkHeaderLen(path, binary.LittleEndian.Uint64(prefix), size)
		}
	}
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	return f, size, prefix, nil
}

// ReadHeader reads and checks only the header of the safetensors file at
// path (at most MaxHeaderSize bytes): its tensors' names, dtypes and
// shapes, their layout against the file's size, and the metadata. The
// tensors it returns have no Data. A caller checks them (CheckShapes)
// before Read takes the whole file into memory, so that a file of
// another model's weights, however large, costs only its header.
func ReadHeader(path string) (*File, error) {
	f, size, prefix, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if len(prefix) < 8 {
		return nil, fmt.Errorf("%s: truncated: a safetensors file starts with an 8-byte header length, but the file has %d bytes", path, len(prefix))
	}
	n := binary.LittleEndian.Uint64(prefix)
	header := make([]byte, n)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	entries, meta, err := parseHeader(path, header)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(path, entries, size-8-n); err != nil {
		return nil, err
	}
	entries = dropPads(entries)
	file := &File{Path: path, Metadata: meta, index: make(map[string]int, len(entries)), Tensors: make([]Tensor, len(entries))}
	for i, e := range entries {
		shape := make([]int, len(e.shape))
		for j, d := range e.shape {
			shape[j] = int(d) // fits: parseEntry bounds every dimension
		}
		file.Tensors[i] = Tensor{Name: e.name, Shape: shape, DType: e.dtype}
		file.index[e.name] = i
	}
	return file, nil
}

func checkHeaderLen(name string, n, fileSize uint64) error {
	if n > MaxHeaderSize {
		return fmt.Errorf("%s: the header length field says %d bytes, more than the %d a safetensors header may have; this is not a safetensors file, or it is corrupt", name, n, MaxHeaderSize)
	}
	if n > fileSize-8 {
		return fmt.Errorf("%s: truncated: the header length field says %d bytes, but the file has only %d bytes after it", name, n, fileSize-8)
	}
	return nil
}

// ReadBytes checks and decodes a safetensors file held in memory; name is
// used in messages. The tensors' data are copied out of data.
func ReadBytes(name string, data []byte) (*File, error) {
	return readBytes(name, data, true)
}

// ReadBytesInPlace checks a safetensors file held in memory as ReadBytes
// does, but decodes no tensor: the File's tensors have no Data, and
// CopyInto converts each one from data straight into the caller's buffer.
// It is for the weights compiled into a program, whose bytes (go:embed)
// are the executable's read-only data: loading them into the state arena
// is then their only copy, and no second copy of the weights is ever in
// memory. data must stay as it is while the File is used.
func ReadBytesInPlace(name string, data []byte) (*File, error) {
	return readBytes(name, data, false)
}

func readBytes(name string, data []byte, decode bool) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%s: truncated: a safetensors file starts with an 8-byte header length, but the file has %d bytes", name, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if err := checkHeaderLen(name, n, uint64(len(data))); err != nil {
		return nil, err
	}
	header := data[8 : 8+n]
	body := data[8+n:]
	entries, meta, err := parseHeader(name, header)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(name, entries, uint64(len(body))); err != nil {
		return nil, err
	}
	entries = dropPads(entries)
	f := &File{Path: name, Metadata: meta, index: make(map[string]int, len(entries))}
	f.Tensors = make([]Tensor, len(entries))
	for i, e := range entries {
		conv, ok := converters[e.dtype]
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: dtype %s is not supported: mlbuild's models compute in float32 and read F32, F64, F16 and BF16 tensors",
				name, e.name, e.dtype)
		}
		shape := make([]int, len(e.shape))
		for j, d := range e.shape {
			shape[j] = int(d) // fits: parseEntry bounds every dimension
		}
		t := Tensor{Name: e.name, Shape: shape, DType: e.dtype}
		if decode {
			t.Data = make([]float32, e.elements)
			conv(t.Data, body[e.begin:e.end])
		} else {
			if f.raw == nil {
				f.raw = make([][]byte, len(entries))
			}
			f.raw[i] = body[e.begin:e.end]
		}
		f.Tensors[i] = t
		f.index[e.name] = i
	}
	return f, nil
}

// PadPrefix begins the names of the tensors that only fill gaps: `mlbuild
// compile --weights` lays the embedded file out as the program's state
// arena, whose buffers are aligned, so that the weights can be mapped as
// the arena instead of copied into it. A pad is a U8 tensor; readers skip
// it (its bytes still count in the layout check). To other readers it is
// an ordinary tensor of bytes.
const PadPrefix = "mlbuild.pad."

// dropPads returns entries without the pads.
func dropPads(entries []entry) []entry {
	kept := entries[:0:0]
	for _, e := range entries {
		if e.dtype != "U8" || !strings.HasPrefix(e.name, PadPrefix) {
			kept = append(kept, e)
		}
	}
	return kept
}

// DataStart is the offset in a safetensors file's bytes of its data
// section (after the 8-byte length and the header); data must be a file
// that ReadBytes or ReadBytesInPlace accepted.
func DataStart(data []byte) int {
	return 8 + int(binary.LittleEndian.Uint64(data))
}

// entry is one tensor as the header describes it.
type entry struct {
	name       string
	dtype      string
	shape      []uint64
	begin, end uint64
	elements   uint64
}

// parseHeader decodes the JSON header strictly: a single object, no
// duplicate keys at any level, the required fields of every tensor with the
// right types, metadata values that are strings. Trailing whitespace (the
// format pads the header with spaces) is allowed.
func parseHeader(name string, header []byte) ([]entry, map[string]string, error) {
	if !utf8.Valid(header) {
		return nil, nil, fmt.Errorf("%s: the header is not valid UTF-8; this is not a safetensors file, or it is corrupt", name)
	}
	if len(header) == 0 || header[0] != '{' {
		start := header[:min(len(header), 16)]
		return nil, nil, fmt.Errorf("%s: the header must be a JSON object starting with '{', it starts with %q", name, start)
	}
	v, err := jsontext.Parse(header)
	if err != nil {
		var se *jsontext.SyntaxError
		if errors.As(err, &se) && len(se.Keys) > 0 && se.Keys[0] != metadataKey {
			tensor := se.Keys[0]
			se.Keys = se.Keys[1:]
			return nil, nil, fmt.Errorf("%s: tensor %q: the header is not valid JSON: %v", name, tensor, se)
		}
		return nil, nil, fmt.Errorf("%s: the header is not valid JSON: %v", name, err)
	}
	meta := map[string]string{}
	var entries []entry
	for i := range v.Fields {
		fld := &v.Fields[i]
		if fld.Key == metadataKey {
			if meta, err = parseMetadata(&fld.Value); err != nil {
				return nil, nil, fmt.Errorf("%s: %s: %v", name, metadataKey, err)
			}
			continue
		}
		e, err := parseEntry(fld.Key, &fld.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: tensor %q: %v", name, fld.Key, err)
		}
		entries = append(entries, e)
	}
	return entries, meta, nil
}

func parseMetadata(v *jsontext.Value) (map[string]string, error) {
	if v.Kind == jsontext.Null {
		return map[string]string{}, nil
	}
	if v.Kind != jsontext.Object {
		return nil, fmt.Errorf("want an object, found %s", clip(v.Raw))
	}
	meta := make(map[string]string, len(v.Fields))
	for _, f := range v.Fields {
		if f.Value.Kind != jsontext.String {
			return nil, fmt.Errorf("value of %q must be a string, found %s", f.Key, clip(f.Value.Raw))
		}
		meta[f.Key] = f.Value.Text
	}
	return meta, nil
}

// clip shortens raw JSON for a message.
func clip(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

func parseEntry(name string, v *jsontext.Value) (entry, error) {
	if v.Kind != jsontext.Object {
		return entry{}, fmt.Errorf("want an object with dtype, shape and data_offsets, found %s", clip(v.Raw))
	}
	e := entry{name: name}
	var haveDtype, haveShape, haveOffsets bool
	var err error
	for i := range v.Fields {
		f := &v.Fields[i].Value
		switch v.Fields[i].Key {
		case "dtype":
			if f.Kind != jsontext.String {
				return entry{}, fmt.Errorf("dtype must be a string, found %s", clip(f.Raw))
			}
			e.dtype = f.Text
			haveDtype = true
		case "shape":
			if e.shape, err = parseUints(f); err != nil {
				return entry{}, fmt.Errorf("shape: %v", err)
			}
			haveShape = true
		case "data_offsets":
			offs, err := parseUints(f)
			if err != nil || len(offs) != 2 {
				return entry{}, fmt.Errorf("data_offsets must be two byte offsets [begin, end], found %s", clip(f.Raw))
			}
			e.begin, e.end = offs[0], offs[1]
			haveOffsets = true
		}
		// Other keys are ignored, as the reference implementation does.
	}
	switch {
	case !haveDtype:
		return entry{}, errors.New("no dtype")
	case !haveShape:
		return entry{}, errors.New("no shape")
	case !haveOffsets:
		return entry{}, errors.New("no data_offsets")
	}
	size, ok := dtypeSizes[e.dtype]
	if !ok {
		return entry{}, fmt.Errorf("unknown dtype %q", e.dtype)
	}
	if e.end < e.begin {
		return entry{}, fmt.Errorf("data_offsets [%d, %d] end before they begin", e.begin, e.end)
	}
	// Multiply with overflow checks: the product must equal the span,
	// which is bounded by the file size.
	elements := uint64(1)
	for _, d := range e.shape {
		if d > math.MaxInt32 {
			return entry{}, fmt.Errorf("shape %v has an absurdly large dimension", e.shape)
		}
		hi, lo := bits.Mul64(elements, d)
		if hi != 0 || lo > math.MaxInt32*16 {
			return entry{}, fmt.Errorf("shape %v is absurdly large", e.shape)
		}
		elements = lo
	}
	if elements*size != e.end-e.begin {
		return entry{}, fmt.Errorf("shape %v of %s needs %d bytes, but data_offsets [%d, %d] span %d",
			e.shape, e.dtype, elements*size, e.begin, e.end, e.end-e.begin)
	}
	e.elements = elements
	return e, nil
}

// parseUints decodes a JSON array of non-negative integers.
func parseUints(v *jsontext.Value) ([]uint64, error) {
	if v.Kind != jsontext.Array {
		return nil, fmt.Errorf("want an array of non-negative integers, found %s", clip(v.Raw))
	}
	out := make([]uint64, len(v.Items))
	for i, n := range v.Items {
		u, err := strconv.ParseUint(n.Text, 10, 64)
		if n.Kind != jsontext.Number || err != nil {
			return nil, fmt.Errorf("want an array of non-negative integers, found %s", clip(n.Raw))
		}
		out[i] = u
	}
	return out, nil
}

// byOffsets orders entries by where their data begins, then ends, for
// sort.Stable (sort's non-generic sort, which every program links anyway,
// rather than an instantiation of slices.SortStableFunc of its own).
type byOffsets []entry

func (e byOffsets) Len() int      { return len(e) }
func (e byOffsets) Swap(a, b int) { e[a], e[b] = e[b], e[a] }
func (e byOffsets) Less(a, b int) bool {
	if e[a].begin != e[b].begin {
		return e[a].begin < e[b].begin
	}
	return e[a].end < e[b].end
}

// checkLayout sorts entries by their data and checks that they tile the
// data section exactly: no gap, no overlap, nothing after the last tensor.
func checkLayout(name string, entries []entry, dataLen uint64) error {
	sort.Stable(byOffsets(entries))
	pos := uint64(0)
	for i, e := range entries {
		switch {
		case e.begin > pos:
			return fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] leave bytes %d..%d of the data to no tensor", name, e.name, e.begin, e.end, pos, e.begin)
		case e.begin < pos:
			return fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] overlap tensor %q, which ends at %d", name, e.name, e.begin, e.end, entries[i-1].name, pos)
		}
		if e.end > dataLen {
			return fmt.Errorf("%s: tensor %q: truncated: data_offsets [%d, %d] end past the data, which has %d bytes", name, e.name, e.begin, e.end, dataLen)
		}
		pos = e.end
	}
	if pos != dataLen {
		return fmt.Errorf("%s: %d bytes after the last tensor's data (%d bytes of data, tensors cover %d); the file is corrupt", name, dataLen-pos, dataLen, pos)
	}
	return nil
}
