package safetensors

import (
	"bytes"
	"encoding/binary"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestReadBytesInPlace: a file read in place decodes nothing until
// CopyInto, which converts each tensor (F32, F64, F16, BF16) from the
// file's bytes straight into the caller's buffer, to the values ReadBytes
// gives, and refuses a buffer of the wrong size; the File allocates no
// tensor data.
func TestReadBytesInPlace(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sample(), map[string]string{"model": "m"}); err != nil {
		t.Fatal(err)
	}
	var data []byte
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(0.5))
	for _, h := range []uint16{0x3C00, 0xC000} {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	for _, h := range []uint16{0x3F80, 0xC060} {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	mixed := handMade(`{"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},`+
		`"h":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},`+
		`"b":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]}}`, data)
	for _, file := range [][]byte{buf.Bytes(), mixed} {
		want, err := ReadBytes("w.safetensors", file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadBytesInPlace("w.safetensors", file)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Metadata, want.Metadata) || !slices.EqualFunc(got.Specs(), want.Specs(), func(a, b Spec) bool { return a.Name == b.Name && slices.Equal(a.Shape, b.Shape) }) {
			t.Errorf("in place: metadata %v and specs %v, want %v and %v", got.Metadata, got.Specs(), want.Metadata, want.Specs())
		}
		for _, w := range want.Tensors {
			g, _ := got.Tensor(w.Name)
			if g.Data != nil {
				t.Errorf("%s: decoded on reading (%d values)", w.Name, len(g.Data))
			}
			dst := make([]float32, len(w.Data))
			if err := got.CopyInto(w.Name, dst); err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(dst, w.Data, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Errorf("%s: CopyInto gave %v, want %v", w.Name, dst, w.Data)
			}
			if err := got.CopyInto(w.Name, make([]float32, len(w.Data)+1)); err == nil || !strings.Contains(err.Error(), w.Name) {
				t.Errorf("%s: CopyInto into a buffer one too long: %v", w.Name, err)
			}
		}
	}
}

// TestReadAllocatesTheFileOnce: Read of a 4 MB file allocates little more
// than the file and its decoded tensors; it used to grow its buffer to
// twice the file at the end of reading (and copy it there), 4× in all.
func TestReadAllocatesTheFileOnce(t *testing.T) {
	const n = 1 << 20
	path := t.TempDir() + "/w.safetensors"
	if err := Write(path, []Tensor{{Name: "w", Shape: []int{n}, Data: make([]float32, n)}}, nil); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := Read(path)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got, file := after.TotalAlloc-before.TotalAlloc, uint64(4*n); got > 2*file+file/4 {
		t.Errorf("Read of a %d-byte file allocated %d bytes (%.2f×); the bytes and the tensor take 2×", file, got, float64(got)/float64(file))
	}
	if tt, _ := f.Tensor("w"); len(tt.Data) != n {
		t.Errorf("read %d values, want %d", len(tt.Data), n)
	}
}
