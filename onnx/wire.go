package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Protocol buffer wire types (https://protobuf.dev/programming-guides/encoding/).
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireGroupSt = 3
	wireGroupEn = 4
	wireFixed32 = 5
)

// wireReader walks the fields of one protobuf message. Every read checks
// the bytes that are left, so a length or a count in the input can never
// make it read past the message or allocate more than the input backs.
type wireReader struct {
	buf  []byte
	pos  int
	base int    // offset of buf[0] in the whole input, for messages
	path string // where in the model this message is, e.g. graph.node[3]
}

// DecodeError is a malformed or hostile input: where in the model it was
// (a path such as graph.node[3].attribute[0]), at which byte offset of the
// input, and what is wrong.
type DecodeError struct {
	Path   string
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("byte %d: %s", e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s (byte %d): %s", e.Path, e.Offset, e.Msg)
}

func (r *wireReader) errorf(format string, args ...any) error {
	return &DecodeError{Path: r.path, Offset: r.base + r.pos, Msg: fmt.Sprintf(format, args...)}
}

func (r *wireReader) done() bool { return r.pos >= len(r.buf) }

// varint reads a base-128 varint of at most 10 bytes.
func (r *wireReader) varint() (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		if r.pos >= len(r.buf) {
			return 0, r.errorf("varint runs past the end of the message")
		}
		b := r.buf[r.pos]
		r.pos++
		if i == 9 && b > 1 {
			return 0, r.errorf("varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, r.errorf("varint longer than 10 bytes")
}

// key reads a field key: the field number and the wire type.
func (r *wireReader) key() (field int, wire int, err error) {
	k, err := r.varint()
	if err != nil {
		return 0, 0, err
	}
	field, wire = int(k>>3), int(k&7)
	if k>>3 == 0 || k>>3 > 1<<29-1 {
		return 0, 0, r.errorf("field number %d is not valid", k>>3)
	}
	return field, wire, nil
}

// bytes reads a length-delimited field; the slice aliases the input.
func (r *wireReader) bytes() ([]byte, int, error) {
	n, err := r.varint()
	if err != nil {
		return nil, 0, err
	}
	if n > uint64(len(r.buf)-r.pos) {
		return nil, 0, r.errorf("length %d runs past the end of the message (%d bytes left)", n, len(r.buf)-r.pos)
	}
	start := r.pos
	r.pos += int(n)
	return r.buf[start:r.pos], r.base + start, nil
}

// sub returns a reader over an embedded message.
func (r *wireReader) sub(path string) (*wireReader, error) {
	b, off, err := r.bytes()
	if err != nil {
		return nil, err
	}
	return &wireReader{buf: b, base: off, path: path}, nil
}

func (r *wireReader) fixed32() (uint32, error) {
	if len(r.buf)-r.pos < 4 {
		return 0, r.errorf("fixed32 runs past the end of the message")
	}
	v := binary.LittleEndian.Uint32(r.buf[r.pos:])
	r.pos += 4
	return v, nil
}

func (r *wireReader) fixed64() (uint64, error) {
	if len(r.buf)-r.pos < 8 {
		return 0, r.errorf("fixed64 runs past the end of the message")
	}
	v := binary.LittleEndian.Uint64(r.buf[r.pos:])
	r.pos += 8
	return v, nil
}

// skip passes over a field this decoder does not read.
func (r *wireReader) skip(wire int) error {
	switch wire {
	case wireVarint:
		_, err := r.varint()
		return err
	case wireFixed64:
		_, err := r.fixed64()
		return err
	case wireBytes:
		_, _, err := r.bytes()
		return err
	case wireFixed32:
		_, err := r.fixed32()
		return err
	}
	return r.errorf("wire type %d is not used by ONNX (groups are obsolete)", wire)
}

// expect checks that a field has the wire type its schema gives it.
func (r *wireReader) expect(field, wire, want int, name string) error {
	if wire != want {
		return r.errorf("field %s (%d) has wire type %d, want %d", name, field, wire, want)
	}
	return nil
}

func (r *wireReader) int64Field(field, wire int, name string) (int64, error) {
	if err := r.expect(field, wire, wireVarint, name); err != nil {
		return 0, err
	}
	v, err := r.varint()
	return int64(v), err
}

func (r *wireReader) stringField(field, wire int, name string) (string, error) {
	if err := r.expect(field, wire, wireBytes, name); err != nil {
		return "", err
	}
	b, _, err := r.bytes()
	return string(b), err
}

func (r *wireReader) float32Field(field, wire int, name string) (float32, error) {
	if err := r.expect(field, wire, wireFixed32, name); err != nil {
		return 0, err
	}
	v, err := r.fixed32()
	return math.Float32frombits(v), err
}

// repeatedVarints appends one element, or a packed run of elements, of a
// repeated varint field to dst. A packed run holds at most its byte length
// of elements, so the input bounds the growth.
func (r *wireReader) repeatedVarints(dst []int64, field, wire int, name string) ([]int64, error) {
	switch wire {
	case wireVarint:
		v, err := r.varint()
		return append(dst, int64(v)), err
	case wireBytes:
		packed, err := r.sub(r.path + "." + name)
		if err != nil {
			return dst, err
		}
		for !packed.done() {
			v, err := packed.varint()
			if err != nil {
				return dst, err
			}
			dst = append(dst, int64(v))
		}
		return dst, nil
	}
	return dst, r.errorf("field %s (%d) has wire type %d, want a varint or a packed run", name, field, wire)
}

// repeatedFixed32 appends one element or a packed run of a repeated
// fixed32 (float) field.
func (r *wireReader) repeatedFixed32(dst []uint32, field, wire int, name string) ([]uint32, error) {
	switch wire {
	case wireFixed32:
		v, err := r.fixed32()
		return append(dst, v), err
	case wireBytes:
		b, _, err := r.bytes()
		if err != nil {
			return dst, err
		}
		if len(b)%4 != 0 {
			return dst, r.errorf("packed field %s has %d bytes, not a multiple of 4", name, len(b))
		}
		for i := 0; i < len(b); i += 4 {
			dst = append(dst, binary.LittleEndian.Uint32(b[i:]))
		}
		return dst, nil
	}
	return dst, r.errorf("field %s (%d) has wire type %d, want fixed32 or a packed run", name, field, wire)
}

// repeatedFixed64 appends one element or a packed run of a repeated
// fixed64 (double) field.
func (r *wireReader) repeatedFixed64(dst []uint64, field, wire int, name string) ([]uint64, error) {
	switch wire {
	case wireFixed64:
		v, err := r.fixed64()
		return append(dst, v), err
	case wireBytes:
		b, _, err := r.bytes()
		if err != nil {
			return dst, err
		}
		if len(b)%8 != 0 {
			return dst, r.errorf("packed field %s has %d bytes, not a multiple of 8", name, len(b))
		}
		for i := 0; i < len(b); i += 8 {
			dst = append(dst, binary.LittleEndian.Uint64(b[i:]))
		}
		return dst, nil
	}
	return dst, r.errorf("field %s (%d) has wire type %d, want fixed64 or a packed run", name, field, wire)
}
