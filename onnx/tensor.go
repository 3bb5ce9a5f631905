package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DataType is TensorProto.DataType.
type DataType int32

// The element types of onnx.proto that mlbuild reads or names.
const (
	Undefined DataType = 0
	Float     DataType = 1
	Uint8     DataType = 2
	Int8      DataType = 3
	Uint16    DataType = 4
	Int16     DataType = 5
	Int32     DataType = 6
	Int64     DataType = 7
	String    DataType = 8
	Bool      DataType = 9
	Float16   DataType = 10
	Double    DataType = 11
	Uint32    DataType = 12
	Uint64    DataType = 13
	Complex64 DataType = 14
	Complex   DataType = 15
	BFloat16  DataType = 16
)

var dataTypeNames = map[DataType]string{
	Undefined: "undefined", Float: "float32", Uint8: "uint8", Int8: "int8", Uint16: "uint16",
	Int16: "int16", Int32: "int32", Int64: "int64", String: "string", Bool: "bool",
	Float16: "float16", Double: "float64", Uint32: "uint32", Uint64: "uint64",
	Complex64: "complex64", Complex: "complex128", BFloat16: "bfloat16",
}

func (t DataType) String() string {
	if s, ok := dataTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("data type %d", int32(t))
}

// size is the bytes of one element in raw_data, or 0 for types without a
// fixed little-endian layout (string) or unknown types.
func (t DataType) size() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16, Float16, BFloat16:
		return 2
	case Float, Int32, Uint32:
		return 4
	case Int64, Double, Uint64, Complex64:
		return 8
	case Complex:
		return 16
	}
	return 0
}

// Bounds on what a tensor may declare. They are far above any model mlbuild
// can build and far below what would exhaust memory before the data is read.
const (
	MaxRank     = 16
	MaxElements = 1 << 31 // elements of one tensor
)

// Tensor is a TensorProto: a name, a shape and the data in whichever field
// the writer chose (raw_data, or the typed float_data, int32_data,
// int64_data, double_data, uint64_data), or a reference to external data.
type Tensor struct {
	Name     string
	Dims     []int64
	DataType DataType
	External *ExternalData // set when the data lives in another file

	raw      []byte
	hasRaw   bool
	floats   []uint32 // float_data (bits; also complex64 pairs)
	int32s   []int64  // int32_data (also int8..uint16, bool, float16 bits)
	int64s   []int64  // int64_data
	doubles  []uint64 // double_data (bits)
	uint64s  []int64  // uint64_data (also uint32)
	nStrings int      // string_data entries
}

// ExternalData is where a tensor's bytes are when data_location is
// EXTERNAL: a file named relative to the model's folder, and a byte range.
type ExternalData struct {
	Location string
	Offset   int64
	Length   int64 // -1 when not given: to the end of the file
}

// NumElements is the product of the dimensions (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Shape returns the dimensions as ints.
func (t *Tensor) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[i] = int(d)
	}
	return s
}

// checkShape bounds the rank, each dimension and the element count.
func checkShape(dims []int64) error {
	if len(dims) > MaxRank {
		return fmt.Errorf("rank %d is above the limit of %d", len(dims), MaxRank)
	}
	n := int64(1)
	for i, d := range dims {
		if d < 0 {
			return fmt.Errorf("dimension %d is negative (%d)", i, d)
		}
		if d > MaxElements || (d > 0 && n > MaxElements/d) {
			return fmt.Errorf("dimensions %v hold more than %d elements", dims, int64(MaxElements))
		}
		n *= d
	}
	return nil
}

// checkData checks that the data the tensor carries agrees with its shape.
func (t *Tensor) checkData() error {
	if err := checkShape(t.Dims); err != nil {
		return err
	}
	n := t.NumElements()
	if t.External != nil {
		return nil // checked when the external file is read
	}
	var have int64
	switch {
	case t.hasRaw:
		size := t.DataType.size()
		if size == 0 {
			return fmt.Errorf("raw_data for element type %v, which has no fixed size", t.DataType)
		}
		if int64(len(t.raw)) != n*int64(size) {
			return fmt.Errorf("raw_data holds %d bytes but shape %v of %v needs %d", len(t.raw), t.Dims, t.DataType, n*int64(size))
		}
		return nil
	case t.DataType == Float:
		have = int64(len(t.floats))
	case t.DataType == Complex64:
		have = int64(len(t.floats)) / 2
	case t.DataType == Double:
		have = int64(len(t.doubles))
	case t.DataType == Complex:
		have = int64(len(t.doubles)) / 2
	case t.DataType == Int64:
		have = int64(len(t.int64s))
	case t.DataType == Uint32 || t.DataType == Uint64:
		have = int64(len(t.uint64s))
	case t.DataType == String:
		have = int64(t.nStrings)
	case t.DataType.size() > 0:
		have = int64(len(t.int32s))
	default:
		return fmt.Errorf("element type %v is not an ONNX tensor type", t.DataType)
	}
	if have != n {
		return fmt.Errorf("holds %d values but shape %v needs %d", have, t.Dims, n)
	}
	return nil
}

// Float32s returns the values as float32, converting from the floating and
// integer types. Strings, complex numbers and unresolved external data are
// errors.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.External != nil {
		return nil, fmt.Errorf("tensor %q: its external data (%s) has not been read", t.Name, t.External.Location)
	}
	n := int(t.NumElements())
	out := make([]float32, n)
	if t.hasRaw {
		b := t.raw
		switch t.DataType {
		case Float:
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case Double:
			for i := range out {
				out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
			}
		case Float16:
			for i := range out {
				out[i] = halfToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
			}
		case BFloat16:
			for i := range out {
				out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
			}
		default:
			ints, err := t.Int64s()
			if err != nil {
				return nil, err
			}
			for i, v := range ints {
				out[i] = float32(v)
			}
		}
		return out, nil
	}
	switch t.DataType {
	case Float:
		for i := range out {
			out[i] = math.Float32frombits(t.floats[i])
		}
	case Double:
		for i := range out {
			out[i] = float32(math.Float64frombits(t.doubles[i]))
		}
	case Float16:
		for i := range out {
			out[i] = halfToFloat32(uint16(t.int32s[i]))
		}
	case BFloat16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(uint16(t.int32s[i])) << 16)
		}
	default:
		ints, err := t.Int64s()
		if err != nil {
			return nil, err
		}
		for i, v := range ints {
			out[i] = float32(v)
		}
	}
	return out, nil
}

// Int64s returns the values of an integer or boolean tensor.
func (t *Tensor) Int64s() ([]int64, error) {
	if t.External != nil {
		return nil, fmt.Errorf("tensor %q: its external data (%s) has not been read", t.Name, t.External.Location)
	}
	n := int(t.NumElements())
	out := make([]int64, n)
	if t.hasRaw {
		b := t.raw
		for i := range out {
			switch t.DataType {
			case Int64:
				out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			case Uint64:
				out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			case Int32:
				out[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
			case Uint32:
				out[i] = int64(binary.LittleEndian.Uint32(b[4*i:]))
			case Int16:
				out[i] = int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
			case Uint16:
				out[i] = int64(binary.LittleEndian.Uint16(b[2*i:]))
			case Int8:
				out[i] = int64(int8(b[i]))
			case Uint8, Bool:
				out[i] = int64(b[i])
			default:
				return nil, fmt.Errorf("tensor %q has element type %v, not an integer type", t.Name, t.DataType)
			}
		}
		return out, nil
	}
	switch t.DataType {
	case Int64:
		copy(out, t.int64s)
	case Uint32, Uint64:
		copy(out, t.uint64s)
	case Int32, Int16, Int8, Uint16, Uint8, Bool:
		for i := range out {
			v := t.int32s[i]
			switch t.DataType {
			case Int32:
				v = int64(int32(v))
			case Int16:
				v = int64(int16(v))
			case Int8:
				v = int64(int8(v))
			}
			out[i] = v
		}
	default:
		return nil, fmt.Errorf("tensor %q has element type %v, not an integer type", t.Name, t.DataType)
	}
	return out, nil
}

// halfToFloat32 widens an IEEE 754 half-precision value.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for frac&0x400 == 0 {
			frac <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (frac&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// NewFloatTensor makes a float32 tensor, as the importer's tests and the
// binding of test inputs need.
func NewFloatTensor(name string, dims []int64, data []float32) *Tensor {
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return &Tensor{Name: name, Dims: dims, DataType: Float, raw: raw, hasRaw: true}
}

// NewInt64Tensor makes an int64 tensor.
func NewInt64Tensor(name string, dims []int64, data []int64) *Tensor {
	return &Tensor{Name: name, Dims: dims, DataType: Int64, int64s: append([]int64(nil), data...)}
}
