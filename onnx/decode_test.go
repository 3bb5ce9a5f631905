package onnx

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pb is a minimal protobuf encoder for building test inputs by hand,
// including ones no honest writer would make.
type pb []byte

func (b pb) varint(v uint64) pb {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
func (b pb) key(field, wire int) pb    { return b.varint(uint64(field<<3 | wire)) }
func (b pb) int(field int, v int64) pb { return b.key(field, wireVarint).varint(uint64(v)) }
func (b pb) bytes(field int, v []byte) pb {
	return append(b.key(field, wireBytes).varint(uint64(len(v))), v...)
}
func (b pb) str(field int, s string) pb { return b.bytes(field, []byte(s)) }
func (b pb) msg(field int, m pb) pb     { return b.bytes(field, m) }
func (b pb) f32(field int, v float32) pb {
	return binary.LittleEndian.AppendUint32(b.key(field, wireFixed32), math.Float32bits(v))
}
func packedInts(vs ...int64) pb {
	var p pb
	for _, v := range vs {
		p = p.varint(uint64(v))
	}
	return p
}
func rawFloats(vs ...float32) []byte {
	var out []byte
	for _, v := range vs {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out
}

// model wraps a graph message into a ModelProto of opset 13.
func model(graph pb) []byte {
	return pb{}.int(1, 8).msg(8, pb{}.int(2, 13)).msg(7, graph)
}

func readTestModel(t *testing.T, name string) *Model {
	t.Helper()
	m, err := ReadFile(filepath.Join("..", "testdata", "onnx", name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDecodeRealModels decodes files of ONNX's own test suite and checks
// what onnx.proto says they hold (read with the reference Python package's
// printer when the files were chosen).
func TestDecodeRealModels(t *testing.T) {
	m := readTestModel(t, "test_Conv2d.onnx")
	if m.IRVersion != 3 || m.ProducerName != "pytorch" || m.Opset() != 6 {
		t.Errorf("header: ir %d producer %q opset %d", m.IRVersion, m.ProducerName, m.Opset())
	}
	g := m.Graph
	if len(g.Nodes) != 1 || g.Nodes[0].OpType != "Conv" || !slices.Equal(g.Nodes[0].Inputs, []string{"0", "1", "2"}) {
		t.Fatalf("nodes: %+v", g.Nodes)
	}
	if a := g.Nodes[0].Attr("kernel_shape"); a == nil || a.Type != AttrInts || !slices.Equal(a.Ints, []int64{3, 2}) {
		t.Errorf("kernel_shape: %+v", a)
	}
	if len(g.Initializers) != 2 || !slices.Equal(g.Initializers[0].Dims, []int64{4, 3, 3, 2}) {
		t.Fatalf("initializers: %+v", g.Initializers)
	}
	w, err := g.Initializers[0].Float32s()
	if err != nil || len(w) != 72 {
		t.Fatalf("weights: %d values, %v", len(w), err)
	}
	if len(g.Inputs) != 3 || len(g.Inputs[0].Dims) != 4 || g.Inputs[0].Dims[2].Value != 7 || !g.Inputs[0].Dims[2].Known {
		t.Errorf("inputs: %+v", g.Inputs[0])
	}

	m = readTestModel(t, "test_gemm_all_attributes.onnx")
	n := m.Graph.Nodes[0]
	if a := n.Attr("alpha"); a == nil || a.Type != AttrFloat || a.F != 0.25 {
		t.Errorf("alpha: %+v", a)
	}
	if a := n.Attr("transA"); a == nil || a.Type != AttrInt || a.I != 1 {
		t.Errorf("transA: %+v", a)
	}

	m = readTestModel(t, "test_constant.onnx")
	a := m.Graph.Nodes[0].Attr("value")
	if a == nil || a.Type != AttrTensor || !slices.Equal(a.T.Dims, []int64{5, 5}) {
		t.Fatalf("Constant value: %+v", a)
	}
	v, err := a.T.Float32s()
	if err != nil || v[0] != 1.7640524 {
		t.Errorf("Constant value[0] = %v, %v", v, err)
	}
}

// TestTensorEncodings reads the same values from each field a writer may
// choose, packed and unpacked.
func TestTensorEncodings(t *testing.T) {
	dims := pb{}.msg(1, packedInts(2))
	cases := []struct {
		name string
		msg  pb
		want []float32
	}{
		{"raw float", dims.int(2, int64(Float)).bytes(9, rawFloats(1.5, -2)), []float32{1.5, -2}},
		{"float_data packed", dims.int(2, int64(Float)).bytes(4, rawFloats(1.5, -2)), []float32{1.5, -2}},
		{"float_data unpacked", pb{}.int(1, 2).int(2, int64(Float)).f32(4, 1.5).f32(4, -2), []float32{1.5, -2}},
		{"int64_data", dims.int(2, int64(Int64)).msg(7, packedInts(7, -3)), []float32{7, -3}},
		{"int32_data negative", dims.int(2, int64(Int32)).int(5, -4).int(5, 9), []float32{-4, 9}},
		{"float16 raw", dims.int(2, int64(Float16)).bytes(9, []byte{0x00, 0x3c, 0x00, 0xc0}), []float32{1, -2}},
		{"double raw", dims.int(2, int64(Double)).bytes(9, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.25)), math.Float64bits(3))), []float32{0.25, 3}},
	}
	for _, c := range cases {
		tn, err := DecodeTensor(c.msg)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got, err := tn.Float32s()
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// TestHostileInputs: every malformed input is an error that says where,
// never a panic or a huge allocation.
func TestHostileInputs(t *testing.T) {
	node := pb{}.str(1, "x").str(2, "y").str(4, "Relu")
	deep := pb{}.str(1, "x")
	for i := 0; i < MaxDepth+2; i++ {
		attr := pb{}.str(1, "body").int(20, int64(AttrGraph)).msg(6, deep)
		deep = pb{}.msg(1, pb{}.str(4, "If").msg(5, attr))
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no graph"},
		{"truncated length", model(pb{}.msg(1, node))[:20], "runs past the end"},
		{"length past end", pb{}.key(7, wireBytes).varint(1 << 40), "length 1099511627776 runs past the end"},
		{"varint overflow", append(pb{}.key(1, wireVarint), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), "overflows"},
		{"group wire type", pb{}.key(9, wireGroupSt), "groups are obsolete"},
		{"field zero", []byte{0x02, 0x00}, "field number 0"},
		{"wrong wire type for graph", pb{}.int(7, 3), "wire type 0"},
		{"huge dims", model(pb{}.msg(5, pb{}.msg(1, packedInts(1<<20, 1<<20, 1<<20)).int(2, int64(Float)).str(8, "w"))), `graph.initializer[0]`},
		{"negative dim", model(pb{}.msg(5, pb{}.int(1, -1).int(2, int64(Float)).str(8, "w"))), "negative"},
		{"rank too high", model(pb{}.msg(5, pb{}.msg(1, packedInts(slices.Repeat([]int64{1}, MaxRank+1)...)).int(2, int64(Float)))), "more than 16 dimensions"},
		{"raw_data too short", model(pb{}.msg(5, pb{}.msg(1, packedInts(3)).int(2, int64(Float)).str(8, "w").bytes(9, rawFloats(1, 2)))), `tensor "w": raw_data holds 8 bytes but shape [3] of float32 needs 12`},
		{"no data", model(pb{}.msg(5, pb{}.msg(1, packedInts(3)).int(2, int64(Float)).str(8, "w"))), "holds 0 values"},
		{"bad node field", model(pb{}.msg(1, pb{}.int(4, 5))), "graph.node[0]"},
		{"graphs nest too deep", model(deep), "nest more than"},
		{"declared dim too large", model(pb{}.msg(11, pb{}.str(1, "x").msg(2, pb{}.msg(1, pb{}.int(1, 1).msg(2, pb{}.msg(1, pb{}.int(1, 1<<40))))))), "out of range"},
		{"external without location", model(pb{}.msg(5, pb{}.msg(1, packedInts(3)).int(2, int64(Float)).str(8, "w").int(14, 1))), "without a location"},
	}
	for _, c := range cases {
		_, err := Decode(c.data)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: error %T is not a *DecodeError", c.name, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say %q", c.name, err, c.want)
		}
	}
}

// externalModel is a model whose one initializer, w of 3 floats, lives in
// location.
func externalModel(location string) []byte {
	ext := func(k, v string) pb { return pb{}.str(1, k).str(2, v) }
	w := pb{}.msg(1, packedInts(3)).int(2, int64(Float)).str(8, "w").
		msg(13, ext("location", location)).msg(13, ext("offset", "4")).int(14, 1)
	return model(pb{}.msg(5, w).msg(1, pb{}.str(1, "x").str(1, "w").str(2, "y").str(4, "Add")))
}

// TestExternalData reads weights from a file next to the model and refuses
// every location that leaves the model's folder.
func TestExternalData(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(filepath.Join(models, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := append([]byte{9, 9, 9, 9}, rawFloats(1, 2, 3)...)
	for _, p := range []string{filepath.Join(models, "sub", "w.bin"), filepath.Join(dir, "secret.bin")} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "secret.bin"), filepath.Join(models, "link.bin")); err != nil {
		t.Fatal(err)
	}
	write := func(name string, loc string) string {
		p := filepath.Join(models, name)
		if err := os.WriteFile(p, externalModel(loc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	m, err := ReadFile(write("ok.onnx", "sub/w.bin"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Graph.Initializers[0].Float32s()
	if err != nil || !slices.Equal(got, []float32{1, 2, 3}) {
		t.Fatalf("external weights: %v, %v", got, err)
	}

	for _, loc := range []string{"../secret.bin", filepath.Join(dir, "secret.bin"), "link.bin", "sub/../../secret.bin", "missing.bin"} {
		_, err := ReadFile(write("bad.onnx", loc))
		if err == nil {
			t.Errorf("location %q: read, want an error", loc)
			continue
		}
		if !strings.Contains(err.Error(), "bad.onnx: tensor \"w\": external data") {
			t.Errorf("location %q: error %q does not name the file and tensor", loc, err)
		}
	}

	// A length that disagrees with the shape.
	ext := func(k, v string) pb { return pb{}.str(1, k).str(2, v) }
	w := pb{}.msg(1, packedInts(3)).int(2, int64(Float)).str(8, "w").msg(13, ext("location", "sub/w.bin")).msg(13, ext("length", "8")).int(14, 1)
	p := filepath.Join(models, "len.onnx")
	os.WriteFile(p, model(pb{}.msg(5, w)), 0o644)
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), "needs 12 bytes") {
		t.Errorf("wrong length: %v", err)
	}
}
