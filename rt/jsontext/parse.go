// Package jsontext reads and writes JSON text without reflection: a
// parser into a tree of values that keeps object members in order (and
// rejects duplicate keys), and a writer of objects, arrays and scalars.
// Produced programs use it instead of encoding/json, whose reflection and
// encoders for every kind of Go value cost a program about a tenth of its
// size; what they read and write (safetensors headers, the metadata of
// weights files, the --json outputs) is a few objects of strings and
// numbers.
package jsontext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the kind of a JSON value.
type Kind uint8

// The kinds of JSON values.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{Null: "null", Bool: "boolean", Number: "number", String: "string", Array: "array", Object: "object"}

func (k Kind) String() string { return kindNames[k] }

// Value is one parsed JSON value.
type Value struct {
	Kind Kind
	// Text is a String's decoded text, a Number's literal as written
	// (for strconv's parsers), or "true" or "false".
	Text string
	// Raw is the value as it is written in the input, for messages.
	Raw []byte
	// Items are an Array's elements.
	Items []Value
	// Fields are an Object's members, in the input's order.
	Fields []Field
}

// Field is one member of an object.
type Field struct {
	Key   string
	Value Value
}

// Lookup returns the value of an object's member key.
func (v *Value) Lookup(key string) (*Value, bool) {
	for i := range v.Fields {
		if v.Fields[i].Key == key {
			return &v.Fields[i].Value, true
		}
	}
	return nil, false
}

// MaxDepth is how deeply arrays and objects may nest: deeper input is an
// error, not a stack overflow.
const MaxDepth = 1000

// Parse parses data, which must hold one JSON value and nothing else but
// whitespace. Objects may not repeat a key. Invalid UTF-8 in strings and
// lone UTF-16 surrogates in escapes become U+FFFD, as encoding/json does.
// An error names the byte offset where the text goes wrong.
func Parse(data []byte) (Value, error) {
	p := &parser{data: data}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.space()
	if p.pos < len(p.data) {
		return Value{}, &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf("unexpected data after the %s at byte %d", v.Kind, p.pos)}
	}
	return v, nil
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\r', '\n':
			p.pos++
		default:
			return
		}
	}
}

// SyntaxError says where and why text is not JSON, or repeats a key.
type SyntaxError struct {
	// Keys are the keys of the object members the error is inside,
	// outermost first.
	Keys   []string
	Offset int // the byte where the text goes wrong
	Msg    string
}

func (e *SyntaxError) Error() string {
	var b strings.Builder
	for _, k := range e.Keys {
		fmt.Fprintf(&b, "key %q: ", k)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// errorf reports what was found at the current position.
func (p *parser) errorf(want string) error {
	if p.pos >= len(p.data) {
		return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf("the text ends where %s should be", want)}
	}
	c := p.data[p.pos]
	found := strconv.QuoteRune(rune(c))
	if c >= utf8.RuneSelf {
		found = fmt.Sprintf("byte 0x%02x", c)
	}
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf("byte %d: want %s, found %s", p.pos, want, found)}
}

func (p *parser) value(depth int) (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.errorf("a value")
	}
	start := p.pos
	var v Value
	var err error
	switch c := p.data[p.pos]; {
	case c == '{':
		v, err = p.object(depth + 1)
	case c == '[':
		v, err = p.array(depth + 1)
	case c == '"':
		var s string
		s, err = p.string()
		v = Value{Kind: String, Text: s}
	case c == '-' || c >= '0' && c <= '9':
		err = p.number()
		v = Value{Kind: Number, Text: string(p.data[start:p.pos])}
	case c == 't':
		err = p.literal("true")
		v = Value{Kind: Bool, Text: "true"}
	case c == 'f':
		err = p.literal("false")
		v = Value{Kind: Bool, Text: "false"}
	case c == 'n':
		err = p.literal("null")
	default:
		return Value{}, p.errorf("a value")
	}
	if err != nil {
		return Value{}, err
	}
	v.Raw = p.data[start:p.pos]
	return v, nil
}

func (p *parser) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if p.pos >= len(p.data) || p.data[p.pos] != word[i] {
			return p.errorf(strconv.Quote(word))
		}
		p.pos++
	}
	return nil
}

// smallObject is the number of members up to which an object's keys are
// checked for duplicates by searching them rather than with a map.
const smallObject = 16

func (p *parser) object(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf("byte %d: arrays and objects nest more than %d deep", p.pos, MaxDepth)}
	}
	p.pos++ // {
	v := Value{Kind: Object}
	var seen map[string]struct{} // the keys so far, once there are smallObject of them
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errorf("a key")
		}
		at := p.pos
		key, err := p.string()
		if err != nil {
			return Value{}, err
		}
		// A small object is searched; a large one keeps a set of its keys,
		// so that a header of many keys parses in linear time (comparing
		// each key with every earlier one took 23 s for 80 000 keys).
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			for _, f := range v.Fields {
				if f.Key == key {
					dup = true
					break
				}
			}
			if len(v.Fields) >= smallObject {
				seen = make(map[string]struct{}, 2*len(v.Fields))
				for _, f := range v.Fields {
					seen[f.Key] = struct{}{}
				}
				seen[key] = struct{}{}
			}
		}
		if dup {
			return Value{}, &SyntaxError{Offset: at, Msg: fmt.Sprintf("duplicate key %q at byte %d", key, at)}
		}
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errorf("':' after the key")
		}
		p.pos++
		p.space()
		member, err := p.value(depth)
		if err != nil {
			se := err.(*SyntaxError)
			se.Keys = append([]string{key}, se.Keys...)
			return Value{}, se
		}
		v.Fields = append(v.Fields, Field{key, member})
		p.space()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			return v, nil
		}
		return Value{}, p.errorf("',' or '}'")
	}
}

func (p *parser) array(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf("byte %d: arrays and objects nest more than %d deep", p.pos, MaxDepth)}
	}
	p.pos++ // [
	v := Value{Kind: Array}
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.space()
		item, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		v.Items = append(v.Items, item)
		p.space()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			return v, nil
		}
		return Value{}, p.errorf("',' or ']'")
	}
}

// number checks a number's grammar: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
func (p *parser) number() error {
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return p.errorf("a digit")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errorf("a digit after the decimal point")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errorf("a digit of the exponent")
		}
	}
	return nil
}

// string decodes a string; p.pos is at its opening quote.
func (p *parser) string() (string, error) {
	p.pos++ // "
	var out []byte
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("the end of the string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(out), nil
		case c < 0x20:
			return "", p.errorf("a character of the string (control characters must be escaped)")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			out = utf8.AppendRune(out, r)
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			out = utf8.AppendRune(out, r) // RuneError for invalid UTF-8
			p.pos += size
		}
	}
}

// escape decodes one escape sequence; p.pos is at its backslash.
func (p *parser) escape() (rune, error) {
	p.pos++
	if p.pos >= len(p.data) {
		return 0, p.errorf("an escape")
	}
	c := p.data[p.pos]
	p.pos++
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		// A high surrogate followed by an escaped low one is one rune.
		if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
			save := p.pos
			p.pos += 2
			r2, err := p.hex4()
			if err != nil {
				return 0, err
			}
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, nil
			}
			p.pos = save
		}
		return utf8.RuneError, nil
	}
	p.pos--
	return 0, p.errorf("an escape (\\\", \\\\, \\/, \\b, \\f, \\n, \\r, \\t or \\uXXXX)")
}

func (p *parser) hex4() (rune, error) {
	var r rune
	for i := 0; i < 4; i++ {
		if p.pos >= len(p.data) {
			return 0, p.errorf("a hexadecimal digit")
		}
		c := p.data[p.pos]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, p.errorf("a hexadecimal digit")
		}
		p.pos++
	}
	return r, nil
}
