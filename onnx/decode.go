package onnx

import (
	"fmt"
	"math"
	"strconv"
)

// MaxDepth bounds how deeply graphs may nest inside attributes (the
// branches of If and the bodies of Loop and Scan), so that a hostile file
// cannot exhaust the stack.
const MaxDepth = 32

// Decode parses the bytes of an .onnx file. It does no I/O: tensors whose
// data is external keep a reference (Tensor.External) that ReadFile
// resolves.
func Decode(data []byte) (*Model, error) {
	r := &wireReader{buf: data}
	m := &Model{}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		switch field {
		case 1:
			m.IRVersion, err = r.int64Field(field, wire, "ir_version")
		case 2:
			m.ProducerName, err = r.stringField(field, wire, "producer_name")
		case 3:
			m.ProducerVersion, err = r.stringField(field, wire, "producer_version")
		case 7:
			if err = r.expect(field, wire, wireBytes, "graph"); err == nil {
				var sub *wireReader
				if sub, err = r.sub("graph"); err == nil {
					m.Graph, err = decodeGraph(sub, 0)
				}
			}
		case 8:
			if err = r.expect(field, wire, wireBytes, "opset_import"); err == nil {
				var sub *wireReader
				if sub, err = r.sub(fmt.Sprintf("opset_import[%d]", len(m.Opsets))); err == nil {
					var o OpsetID
					o, err = decodeOpset(sub)
					m.Opsets = append(m.Opsets, o)
				}
			}
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return nil, err
		}
	}
	if m.Graph == nil {
		return nil, &DecodeError{Msg: "no graph: this is not an ONNX model (or the file is empty)"}
	}
	return m, nil
}

func decodeOpset(r *wireReader) (OpsetID, error) {
	var o OpsetID
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return o, err
		}
		switch field {
		case 1:
			o.Domain, err = r.stringField(field, wire, "domain")
		case 2:
			o.Version, err = r.int64Field(field, wire, "version")
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

func decodeGraph(r *wireReader, depth int) (*Graph, error) {
	if depth > MaxDepth {
		return nil, r.errorf("graphs nest more than %d deep", MaxDepth)
	}
	g := &Graph{}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		if field == 1 || field == 5 || field == 11 || field == 12 || field == 13 {
			// node, initializer, input, output, value_info: messages
			if err := r.expect(field, wire, wireBytes, "of GraphProto"); err != nil {
				return nil, err
			}
		}
		switch field {
		case 1:
			var sub *wireReader
			if sub, err = r.sub(fmt.Sprintf("%s.node[%d]", r.path, len(g.Nodes))); err == nil {
				var n *Node
				n, err = decodeNode(sub, depth)
				g.Nodes = append(g.Nodes, n)
			}
		case 2:
			g.Name, err = r.stringField(field, wire, "name")
		case 5:
			var sub *wireReader
			if sub, err = r.sub(fmt.Sprintf("%s.initializer[%d]", r.path, len(g.Initializers))); err == nil {
				var t *Tensor
				t, err = decodeTensor(sub)
				g.Initializers = append(g.Initializers, t)
			}
		case 11, 12, 13:
			list := map[int]*[]*ValueInfo{11: &g.Inputs, 12: &g.Outputs, 13: &g.ValueInfo}[field]
			name := map[int]string{11: "input", 12: "output", 13: "value_info"}[field]
			var sub *wireReader
			if sub, err = r.sub(fmt.Sprintf("%s.%s[%d]", r.path, name, len(*list))); err == nil {
				var v *ValueInfo
				v, err = decodeValueInfo(sub)
				*list = append(*list, v)
			}
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return nil, err
		}
	}
	return g, nil
}

func decodeNode(r *wireReader, depth int) (*Node, error) {
	n := &Node{}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		var s string
		switch field {
		case 1:
			s, err = r.stringField(field, wire, "input")
			n.Inputs = append(n.Inputs, s)
		case 2:
			s, err = r.stringField(field, wire, "output")
			n.Outputs = append(n.Outputs, s)
		case 3:
			n.Name, err = r.stringField(field, wire, "name")
		case 4:
			n.OpType, err = r.stringField(field, wire, "op_type")
		case 7:
			n.Domain, err = r.stringField(field, wire, "domain")
		case 5:
			if err = r.expect(field, wire, wireBytes, "attribute"); err == nil {
				var sub *wireReader
				if sub, err = r.sub(fmt.Sprintf("%s.attribute[%d]", r.path, len(n.Attrs))); err == nil {
					var a *Attribute
					a, err = decodeAttribute(sub, depth)
					n.Attrs = append(n.Attrs, a)
				}
			}
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

func decodeAttribute(r *wireReader, depth int) (*Attribute, error) {
	a := &Attribute{}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		switch field {
		case 1:
			a.Name, err = r.stringField(field, wire, "name")
		case 20:
			var v int64
			v, err = r.int64Field(field, wire, "type")
			a.Type = AttrType(v)
		case 2:
			a.F, err = r.float32Field(field, wire, "f")
		case 3:
			a.I, err = r.int64Field(field, wire, "i")
		case 4:
			if err = r.expect(field, wire, wireBytes, "s"); err == nil {
				a.S, _, err = r.bytes()
			}
		case 5, 10:
			if err = r.expect(field, wire, wireBytes, "tensor"); err == nil {
				var sub *wireReader
				if sub, err = r.sub(r.path + "." + map[int]string{5: "t", 10: "tensors[" + strconv.Itoa(len(a.Tensors)) + "]"}[field]); err == nil {
					var t *Tensor
					if t, err = decodeTensor(sub); err == nil {
						if field == 5 {
							a.T = t
						} else {
							a.Tensors = append(a.Tensors, t)
						}
					}
				}
			}
		case 6, 11:
			if err = r.expect(field, wire, wireBytes, "graph"); err == nil {
				var sub *wireReader
				if sub, err = r.sub(r.path + "." + map[int]string{6: "g", 11: "graphs[" + strconv.Itoa(len(a.Graphs)) + "]"}[field]); err == nil {
					var g *Graph
					if g, err = decodeGraph(sub, depth+1); err == nil {
						if field == 6 {
							a.G = g
						} else {
							a.Graphs = append(a.Graphs, g)
						}
					}
				}
			}
		case 7:
			var bits []uint32
			bits, err = r.repeatedFixed32(nil, field, wire, "floats")
			for _, b := range bits {
				a.Floats = append(a.Floats, math.Float32frombits(b))
			}
		case 8:
			a.Ints, err = r.repeatedVarints(a.Ints, field, wire, "ints")
		case 9:
			if err = r.expect(field, wire, wireBytes, "strings"); err == nil {
				var b []byte
				b, _, err = r.bytes()
				a.Strings = append(a.Strings, b)
			}
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return nil, err
		}
	}
	if a.Type == AttrUndefined {
		// IR version 1 files may leave the type out: infer it from the
		// field that is set.
		switch {
		case a.T != nil:
			a.Type = AttrTensor
		case a.G != nil:
			a.Type = AttrGraph
		case len(a.Floats) > 0:
			a.Type = AttrFloats
		case len(a.Ints) > 0:
			a.Type = AttrInts
		case len(a.Strings) > 0:
			a.Type = AttrStrings
		case a.S != nil:
			a.Type = AttrString
		}
	}
	return a, nil
}

func decodeValueInfo(r *wireReader) (*ValueInfo, error) {
	v := &ValueInfo{}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		switch field {
		case 1:
			v.Name, err = r.stringField(field, wire, "name")
		case 2:
			if err = r.expect(field, wire, wireBytes, "type"); err == nil {
				var sub *wireReader
				if sub, err = r.sub(r.path + ".type"); err == nil {
					err = decodeType(sub, v)
				}
			}
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return nil, err
		}
	}
	return v, nil
}

// decodeType reads a TypeProto; only tensor types fill v.
func decodeType(r *wireReader, v *ValueInfo) error {
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return err
		}
		if field != 1 {
			if err := r.skip(wire); err != nil {
				return err
			}
			continue
		}
		if err := r.expect(field, wire, wireBytes, "tensor_type"); err != nil {
			return err
		}
		tt, err := r.sub(r.path + ".tensor_type")
		if err != nil {
			return err
		}
		for !tt.done() {
			f, w, err := tt.key()
			if err != nil {
				return err
			}
			switch f {
			case 1:
				var e int64
				e, err = tt.int64Field(f, w, "elem_type")
				v.ElemType = DataType(e)
			case 2:
				if err = tt.expect(f, w, wireBytes, "shape"); err == nil {
					var sh *wireReader
					if sh, err = tt.sub(tt.path + ".shape"); err == nil {
						v.HasShape = true
						v.Dims, err = decodeShape(sh)
					}
				}
			default:
				err = tt.skip(w)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeShape(r *wireReader) ([]Dim, error) {
	var dims []Dim
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		if field != 1 {
			if err := r.skip(wire); err != nil {
				return nil, err
			}
			continue
		}
		if err := r.expect(field, wire, wireBytes, "dim"); err != nil {
			return nil, err
		}
		if len(dims) >= MaxRank {
			return nil, r.errorf("shape has more than %d dimensions", MaxRank)
		}
		dr, err := r.sub(fmt.Sprintf("%s.dim[%d]", r.path, len(dims)))
		if err != nil {
			return nil, err
		}
		var d Dim
		for !dr.done() {
			f, w, err := dr.key()
			if err != nil {
				return nil, err
			}
			switch f {
			case 1:
				d.Value, err = dr.int64Field(f, w, "dim_value")
				d.Known = true
				if err == nil && (d.Value < 0 || d.Value > MaxElements) {
					err = dr.errorf("dimension %d is out of range [0, %d]", d.Value, int64(MaxElements))
				}
			case 2:
				d.Param, err = dr.stringField(f, w, "dim_param")
			default:
				err = dr.skip(w)
			}
			if err != nil {
				return nil, err
			}
		}
		dims = append(dims, d)
	}
	return dims, nil
}

// DecodeTensor parses a serialised TensorProto, the format of the inputs
// and expected outputs of ONNX's backend tests (input_0.pb, output_0.pb).
func DecodeTensor(data []byte) (*Tensor, error) {
	return decodeTensor(&wireReader{buf: data, path: "tensor"})
}

func decodeTensor(r *wireReader) (*Tensor, error) {
	t := &Tensor{}
	var external []string // key, value pairs
	isExternal := false
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		switch field {
		case 1:
			if t.Dims, err = r.repeatedVarints(t.Dims, field, wire, "dims"); err == nil && len(t.Dims) > MaxRank {
				err = r.errorf("tensor has more than %d dimensions", MaxRank)
			}
		case 2:
			var v int64
			v, err = r.int64Field(field, wire, "data_type")
			t.DataType = DataType(v)
		case 4:
			t.floats, err = r.repeatedFixed32(t.floats, field, wire, "float_data")
		case 5:
			t.int32s, err = r.repeatedVarints(t.int32s, field, wire, "int32_data")
		case 6:
			if err = r.expect(field, wire, wireBytes, "string_data"); err == nil {
				_, _, err = r.bytes()
				t.nStrings++
			}
		case 7:
			t.int64s, err = r.repeatedVarints(t.int64s, field, wire, "int64_data")
		case 8:
			t.Name, err = r.stringField(field, wire, "name")
		case 9:
			if err = r.expect(field, wire, wireBytes, "raw_data"); err == nil {
				t.raw, _, err = r.bytes()
				t.hasRaw = true
			}
		case 10:
			t.doubles, err = r.repeatedFixed64(t.doubles, field, wire, "double_data")
		case 11:
			t.uint64s, err = r.repeatedVarints(t.uint64s, field, wire, "uint64_data")
		case 13:
			if err = r.expect(field, wire, wireBytes, "external_data"); err == nil {
				var sub *wireReader
				if sub, err = r.sub(r.path + ".external_data"); err == nil {
					var k, v string
					k, v, err = decodeStringPair(sub)
					external = append(external, k, v)
				}
			}
		case 14:
			var v int64
			v, err = r.int64Field(field, wire, "data_location")
			isExternal = v == 1
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return nil, err
		}
	}
	if isExternal {
		ext := &ExternalData{Length: -1}
		for i := 0; i < len(external); i += 2 {
			k, v := external[i], external[i+1]
			switch k {
			case "location":
				ext.Location = v
			case "offset", "length":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, r.errorf("tensor %q: external data %s %q is not a byte count", t.Name, k, v)
				}
				if k == "offset" {
					ext.Offset = n
				} else {
					ext.Length = n
				}
			}
		}
		if ext.Location == "" {
			return nil, r.errorf("tensor %q: external data without a location", t.Name)
		}
		t.External = ext
	}
	if err := t.checkData(); err != nil {
		// point at the start of the tensor, where its shape is
		return nil, &DecodeError{Path: r.path, Offset: r.base, Msg: fmt.Sprintf("tensor %q: %v", t.Name, err)}
	}
	return t, nil
}

func decodeStringPair(r *wireReader) (string, string, error) {
	var k, v string
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return "", "", err
		}
		switch field {
		case 1:
			k, err = r.stringField(field, wire, "key")
		case 2:
			v, err = r.stringField(field, wire, "value")
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return "", "", err
		}
	}
	return k, v, nil
}
