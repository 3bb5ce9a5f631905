package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// handMade builds a safetensors file from its parts exactly as the format
// describes it, without using this package's writer: the header length as a
// little-endian uint64, the JSON header padded with spaces, then the data.
func handMade(headerJSON string, data []byte) []byte {
	for len(headerJSON)%8 != 0 {
		headerJSON += " "
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(headerJSON)))
	out = append(out, headerJSON...)
	return append(out, data...)
}

func f32le(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// TestReadHandMade reads a file built byte by byte from the format's
// description: the JSON lists the tensors out of data order, with metadata
// last and an extra field the reader must ignore.
func TestReadHandMade(t *testing.T) {
	header := `{"fc.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[4,28]},` +
		`"fc.bias":{"dtype":"F32","shape":[],"data_offsets":[0,4],"note":"ignored"},` +
		`"__metadata__":{"format":"pt","epoch":"3"}}`
	data := f32le(-0.5, 1, 2, 3, 4, 5, float32(math.Inf(-1)))
	f, err := ReadBytes("hand.safetensors", handMade(header, data))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 2 || f.Tensors[0].Name != "fc.bias" || f.Tensors[1].Name != "fc.weight" {
		t.Fatalf("tensors not in data order: %+v", f.Tensors)
	}
	bias, _ := f.Tensor("fc.bias")
	if len(bias.Shape) != 0 || !slices.Equal(bias.Data, []float32{-0.5}) || bias.DType != "F32" {
		t.Fatalf("fc.bias = %+v", bias)
	}
	w, _ := f.Tensor("fc.weight")
	if !slices.Equal(w.Shape, []int{2, 3}) || !slices.Equal(w.Data[:5], []float32{1, 2, 3, 4, 5}) || !math.IsInf(float64(w.Data[5]), -1) {
		t.Fatalf("fc.weight = %+v", w)
	}
	if f.Metadata["format"] != "pt" || f.Metadata["epoch"] != "3" || len(f.Metadata) != 2 {
		t.Fatalf("metadata = %v", f.Metadata)
	}
	dst := make([]float32, 6)
	if err := f.CopyInto("fc.weight", dst); err != nil || dst[0] != 1 {
		t.Fatalf("CopyInto: %v, %v", err, dst)
	}
	if err := f.CopyInto("fc.weight", make([]float32, 5)); err == nil || !strings.Contains(err.Error(), "has 6 values (shape [2 3]), the model's buffer holds 5") {
		t.Fatalf("CopyInto with a short buffer: %v", err)
	}
	if err := f.CopyInto("nope", dst); err == nil || !strings.Contains(err.Error(), `no tensor "nope"`) {
		t.Fatalf("CopyInto of a missing tensor: %v", err)
	}
}

// TestReadConverts reads F64, F16 and BF16 tensors, as PyTorch saves them,
// with hand-encoded values whose float32 results are known exactly.
func TestReadConverts(t *testing.T) {
	var data []byte
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(0.5))
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(-1e300)) // overflows to -Inf
	// F16: 1, -2, +Inf, smallest subnormal 2^-24, largest normal 65504, -0.
	for _, h := range []uint16{0x3C00, 0xC000, 0x7C00, 0x0001, 0x7BFF, 0x8000} {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	// BF16: 1, -3.5
	for _, h := range []uint16{0x3F80, 0xC060} {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	header := `{"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},` +
		`"h":{"dtype":"F16","shape":[6],"data_offsets":[16,28]},` +
		`"b":{"dtype":"BF16","shape":[2],"data_offsets":[28,32]}}`
	f, err := ReadBytes("pt.safetensors", handMade(header, data))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := f.Tensor("d")
	if d.DType != "F64" || d.Data[0] != 0.5 || !math.IsInf(float64(d.Data[1]), -1) {
		t.Errorf("F64: %+v", d)
	}
	h, _ := f.Tensor("h")
	wantH := []float32{1, -2, float32(math.Inf(1)), 1.0 / (1 << 24), 65504, 0}
	if !slices.Equal(h.Data, wantH) || !math.Signbit(float64(h.Data[5])) {
		t.Errorf("F16: got %v, want %v", h.Data, wantH)
	}
	if nan := halfToFloat32(0x7E00); !math.IsNaN(float64(nan)) {
		t.Errorf("F16 NaN converted to %v", nan)
	}
	b, _ := f.Tensor("b")
	if !slices.Equal(b.Data, []float32{1, -3.5}) {
		t.Errorf("BF16: got %v", b.Data)
	}
}

// TestHalfSubnormals checks every F16 subnormal against its definition.
func TestHalfSubnormals(t *testing.T) {
	for frac := uint16(1); frac < 0x400; frac++ {
		want := float32(float64(frac) * math.Pow(2, -24))
		if got := halfToFloat32(frac); got != want {
			t.Fatalf("0x%04x: got %v, want %v", frac, got, want)
		}
		if got := halfToFloat32(0x8000 | frac); got != -want {
			t.Fatalf("0x%04x: got %v, want %v", 0x8000|frac, got, -want)
		}
	}
}

func sample() []Tensor {
	return []Tensor{
		{Name: "fc2.weight", Shape: []int{2, 2}, Data: []float32{1, 2, 3, float32(math.NaN())}},
		{Name: "fc1.bias", Shape: []int{3}, Data: []float32{-1, 0, 1}},
		{Name: "empty", Shape: []int{0, 4}, Data: []float32{}},
	}
}

// TestWriteFormat checks the exact bytes Write produces against the format:
// tensors in name order, metadata first, spaces to an 8-byte boundary.
func TestWriteFormat(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sample(), map[string]string{"model": "mnist", "a<b": "x\ny"}); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"__metadata__":{"a<b":"x\ny","model":"mnist"},` +
		`"empty":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},` +
		`"fc1.bias":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},` +
		`"fc2.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[12,28]}}`
	want := handMade(wantJSON, append(f32le(-1, 0, 1, 1, 2, 3), f32le(float32(math.NaN()))...))
	if got := buf.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	if n := binary.LittleEndian.Uint64(want); n%8 != 0 {
		t.Fatalf("header length %d is not a multiple of 8", n)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	tensors := sample()
	if err := Write(path, tensors, map[string]string{"epoch": "7"}); err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path || f.Metadata["epoch"] != "7" {
		t.Fatalf("path %q metadata %v", f.Path, f.Metadata)
	}
	for _, want := range tensors {
		got, ok := f.Tensor(want.Name)
		if !ok {
			t.Fatalf("tensor %q missing", want.Name)
		}
		if !slices.Equal(got.Shape, want.Shape) || len(got.Data) != len(want.Data) {
			t.Fatalf("%q: got %v %v, want %v %v", want.Name, got.Shape, got.Data, want.Shape, want.Data)
		}
		for i := range want.Data {
			if math.Float32bits(got.Data[i]) != math.Float32bits(want.Data[i]) {
				t.Fatalf("%q[%d]: got %v, want %v (bit-exact)", want.Name, i, got.Data[i], want.Data[i])
			}
		}
	}
	if err := CheckShapes(f, f.Specs()); err != nil {
		t.Fatal(err)
	}
	// Same tensors in another order: the same bytes.
	first, _ := os.ReadFile(path)
	slices.Reverse(tensors)
	if err := Write(path, tensors, map[string]string{"epoch": "7"}); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(path)
	if !bytes.Equal(first, second) {
		t.Fatal("the order of the tensors changed the file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keep.safetensors")
	if err := Write(path, sample(), nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	tests := []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"duplicate", []Tensor{{Name: "a", Data: []float32{1}}, {Name: "a", Data: []float32{2}}}, `tensor "a": two tensors have this name`},
		{"short data", []Tensor{{Name: "w", Shape: []int{2, 3}, Data: make([]float32, 5)}}, `tensor "w": shape [2 3] holds 6 values, but the tensor has 5`},
		{"negative", []Tensor{{Name: "w", Shape: []int{-1}, Data: nil}}, "negative dimension"},
		{"empty name", []Tensor{{Name: "", Data: []float32{1}}}, "empty name"},
		{"reserved", []Tensor{{Name: "__metadata__", Data: []float32{1}}}, "reserved"},
		{"huge", []Tensor{{Name: "w", Shape: []int{1 << 20, 1 << 20, 1 << 20, 1 << 20}}}, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Write(path, tt.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, path, tt.want)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("a failed write changed the file")
			}
		})
	}
}

// TestReadErrors reads broken files; each error must name the file, the
// tensor where there is one, and what is wrong.
func TestReadErrors(t *testing.T) {
	good := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	withLen := func(n uint64, rest string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
	}
	tests := []struct {
		name string
		data []byte
		want []string
	}{
		{"empty", nil, []string{"truncated", "has 0 bytes"}},
		{"short", []byte{1, 2, 3}, []string{"truncated", "has 3 bytes"}},
		{"huge header length", withLen(1<<40, "{}"), []string{"header length field says 1099511627776", "more than the 104857600"}},
		{"header past end", withLen(100, "{}      "), []string{"truncated", "says 100 bytes", "only 8 bytes"}},
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"), []string{"header length field says"}},
		{"not an object", handMade(`[1,2]`, nil), []string{"must be a JSON object", `"[1,2]`}},
		{"bad json", handMade(`{"a":`, nil), []string{"not valid JSON"}},
		{"invalid utf-8", handMade("{\"\xff\":1}", nil), []string{"not valid UTF-8"}},
		{"trailing garbage", handMade(`{} x`, nil), []string{"not valid JSON", "after the object"}},
		{"duplicate tensor", handMade(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32le(1, 2)), []string{`duplicate key "a"`}},
		{"duplicate field", handMade(`{"a":{"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]}}`, f32le(1, 2)), []string{`tensor "a"`, `duplicate key "dtype"`}},
		{"tensor not object", handMade(`{"a":3}`, nil), []string{`tensor "a"`, "want an object with dtype"}},
		{"no dtype", handMade(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, f32le(1, 2)), []string{`tensor "a"`, "no dtype"}},
		{"no shape", handMade(`{"a":{"dtype":"F32","data_offsets":[0,8]}}`, f32le(1, 2)), []string{`tensor "a"`, "no shape"}},
		{"no offsets", handMade(`{"a":{"dtype":"F32","shape":[2]}}`, f32le(1, 2)), []string{`tensor "a"`, "no data_offsets"}},
		{"dtype not string", handMade(`{"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}}`, f32le(1, 2)), []string{"dtype must be a string, found 32"}},
		{"unknown dtype", handMade(`{"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}`, f32le(1, 2)), []string{`tensor "a"`, `unknown dtype "F31"`}},
		{"unsupported dtype", handMade(`{"fc1.weight":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)), []string{`tensor "fc1.weight"`, "dtype I64 is not supported", "F32, F64, F16 and BF16"}},
		{"negative dim", handMade(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, f32le(1, 2)), []string{"shape", "non-negative integers, found -2"}},
		{"fractional dim", handMade(`{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, f32le(1, 2)), []string{"non-negative integers, found 2.5"}},
		{"one offset", handMade(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, f32le(1, 2)), []string{"data_offsets must be two byte offsets"}},
		{"backwards offsets", handMade(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, f32le(1, 2)), []string{"end before they begin"}},
		{"shape vs span", handMade(`{"fc1.weight":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, f32le(1, 2)), []string{`tensor "fc1.weight"`, "shape [3] of F32 needs 12 bytes", "span 8"}},
		{"absurd shape", handMade(`{"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}`, nil), []string{"absurdly large"}},
		{"zero times huge", handMade(`{"a":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}}`, nil), []string{"absurdly large"}},
		{"gap", handMade(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32le(1, 2)), []string{`tensor "a"`, "leave bytes 0..4 of the data to no tensor"}},
		{"overlap", handMade(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32le(1, 2)), []string{`tensor "b"`, `overlap tensor "a"`}},
		{"truncated data", handMade(good, f32le(1)), []string{`tensor "a"`, "truncated", "end past the data, which has 4 bytes"}},
		{"trailing data", handMade(good, f32le(1, 2, 3)), []string{"4 bytes after the last tensor"}},
		{"metadata not object", handMade(`{"__metadata__":[1]}`, nil), []string{"__metadata__", "want an object"}},
		{"metadata number", handMade(`{"__metadata__":{"epoch":3}}`, nil), []string{"__metadata__", `value of "epoch" must be a string, found 3`}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".safetensors")
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(path)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range append([]string{path + ": "}, tt.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// ReadBytes must agree with Read.
			if _, err2 := ReadBytes(path, tt.data); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("ReadBytes: %v, Read: %v", err2, err)
			}
		})
	}
}

func TestReadNotAFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing: %v", err)
	}
}

func TestCheckShapes(t *testing.T) {
	var buf bytes.Buffer
	Encode(&buf, []Tensor{
		{Name: "conv3.weight", Shape: []int{2}, Data: []float32{1, 2}},
		{Name: "fc1.weight", Shape: []int{2, 3}, Data: make([]float32, 6)},
		{Name: "fc1.bias", Shape: []int{2}, Data: make([]float32, 2)},
	}, nil)
	f, err := ReadBytes("other.safetensors", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{{"fc1.weight", []int{3, 2}}, {"fc1.bias", []int{2}}, {"fc2.bias", []int{10}}}
	err = CheckShapes(f, want)
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{
		"other.safetensors: these weights do not fit this model",
		`missing tensor "fc2.bias" [10]`,
		`unexpected tensor "conv3.weight" [2]`,
		`tensor "fc1.weight" is [2 3] in the file, the model needs [3 2]`,
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if strings.Contains(err.Error(), `"fc1.bias"`) {
		t.Errorf("error %q mentions a tensor that fits", err)
	}
	many := make([]Spec, 30)
	for i := range many {
		many[i] = Spec{Name: string(rune('A' + i)), Shape: []int{1}}
	}
	if err := CheckShapes(f, many); err == nil || !strings.Contains(err.Error(), "... and 13 more") {
		t.Errorf("long report not capped: %v", err)
	}
}

// twoTensors is the seed file kept in testdata/.
func twoTensors(t testing.TB) []byte {
	var buf bytes.Buffer
	err := Encode(&buf, []Tensor{
		{Name: "fc.weight", Shape: []int{2, 3}, Data: []float32{0.25, -1, 2, 3.5, 0, -0.125}},
		{Name: "fc.bias", Shape: []int{2}, Data: []float32{0.5, -0.5}},
	}, map[string]string{"format": "pt", "mlbuild.model": "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestTestdata keeps testdata/two.safetensors equal to its generator; run
// with MLBUILD_UPDATE=1 to rewrite it.
func TestTestdata(t *testing.T) {
	path := filepath.Join("testdata", "two.safetensors")
	want := twoTensors(t)
	if os.Getenv("MLBUILD_UPDATE") != "" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from its generator; run with MLBUILD_UPDATE=1", path)
	}
}
