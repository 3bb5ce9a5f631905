package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/atomicfile"

	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// Write saves tensors and metadata to path as a safetensors file of F32
// tensors, atomically: a crash or a full disk leaves the previous file
// intact. The bytes depend only on the tensors and metadata, not on the
// order of the slice or the map.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	header, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteFile(path, 0o644, func(w io.Writer) error {
		return writeEncoded(w, header, tensors)
	})
}

// Encode writes the safetensors encoding of tensors and metadata to w, the
// same bytes Write puts in a file.
func Encode(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header, err := encodeHeader(tensors, metadata)
	if err != nil {
		return err
	}
	return writeEncoded(w, header, tensors)
}

// sortedByName returns the tensors in name order, which is also the order of
// their data in the file.
func sortedByName(tensors []Tensor) []*Tensor {
	order := make([]*Tensor, len(tensors))
	for i := range tensors {
		order[i] = &tensors[i]
	}
	slices.SortFunc(order, func(a, b *Tensor) int { return strings.Compare(a.Name, b.Name) })
	return order
}

// encodeHeader checks the tensors and returns the header: the length field
// followed by the JSON, padded with spaces to a multiple of 8 bytes so that
// the data starts aligned.
func encodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	var js bytes.Buffer
	js.WriteByte('{')
	if len(metadata) > 0 {
		writeString(&js, metadataKey)
		js.WriteString(":{")
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Sort(sort.StringSlice(keys))
		for i, k := range keys {
			if i > 0 {
				js.WriteByte(',')
			}
			writeString(&js, k)
			js.WriteByte(':')
			writeString(&js, metadata[k])
		}
		js.WriteByte('}')
	}
	offset := uint64(0)
	order := sortedByName(tensors)
	for i, t := range order {
		if err := checkTensor(t); err != nil {
			return nil, err
		}
		if i > 0 && t.Name == order[i-1].Name {
			return nil, fmt.Errorf("tensor %q: two tensors have this name", t.Name)
		}
		if i > 0 || len(metadata) > 0 {
			js.WriteByte(',')
		}
		writeString(&js, t.Name)
		js.WriteString(`:{"dtype":"F32","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				js.WriteByte(',')
			}
			js.WriteString(strconv.Itoa(d))
		}
		end := offset + 4*uint64(len(t.Data))
		fmt.Fprintf(&js, `],"data_offsets":[%d,%d]}`, offset, end)
		offset = end
	}
	js.WriteByte('}')
	for js.Len()%8 != 0 {
		js.WriteByte(' ')
	}
	if js.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("the header would be %d bytes, more than the %d readers accept (too many or too long names)", js.Len(), MaxHeaderSize)
	}
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+js.Len()), uint64(js.Len()))
	return append(out, js.Bytes()...), nil
}

// writeString writes s as a JSON string; names and metadata may hold any
// characters, which end up escaped.
func writeString(b *bytes.Buffer, s string) {
	b.Write(jsontext.AppendString(nil, s))
}

func checkTensor(t *Tensor) error {
	if t.Name == "" {
		return fmt.Errorf("a tensor has an empty name")
	}
	if t.Name == metadataKey {
		return fmt.Errorf("tensor %q: the name is reserved for metadata", t.Name)
	}
	n := 1
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: negative dimension in shape %s", t.Name, FormatShape(t.Shape))
		}
		if d != 0 && n > math.MaxInt/4/d {
			return fmt.Errorf("tensor %q: shape %s is too large", t.Name, FormatShape(t.Shape))
		}
		n *= d
	}
	if n != len(t.Data) {
		return fmt.Errorf("tensor %q: shape %s holds %d values, but the tensor has %d", t.Name, FormatShape(t.Shape), n, len(t.Data))
	}
	return nil
}

// writeEncoded writes the header and then every tensor's data, in name
// order, as little-endian float32.
func writeEncoded(w io.Writer, header []byte, tensors []Tensor) error {
	if _, err := w.Write(header); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<15)
	for _, t := range sortedByName(tensors) {
		for _, v := range t.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) == cap(buf) {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err := w.Write(buf)
	return err
}
