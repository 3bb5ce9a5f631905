package jsontext

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Writer builds JSON text: BeginObject, Key and a value per member,
// EndObject; BeginArray, the elements, EndArray. It puts the commas (and,
// with an indent, the line breaks) where they go. Its text is what
// encoding/json's Encoder writes with SetEscapeHTML(false) (and SetIndent("",
// indent)), except that a NaN or infinite number is written as null, where
// encoding/json fails.
type Writer struct {
	buf    []byte
	indent string // "" for compact text
	// open holds, per open array or object, whether it has an element.
	open     []bool
	afterKey bool
}

// NewWriter returns a writer of compact text, or of text indented by
// indent per level.
func NewWriter(indent string) *Writer { return &Writer{indent: indent} }

// Bytes is the text written so far.
func (w *Writer) Bytes() []byte { return w.buf }

// next puts what separates a value (or a key) from the one before it.
func (w *Writer) next() {
	if w.afterKey {
		w.afterKey = false
		return
	}
	if len(w.open) == 0 {
		return
	}
	if w.open[len(w.open)-1] {
		w.buf = append(w.buf, ',')
	}
	w.open[len(w.open)-1] = true
	w.newline(len(w.open))
}

func (w *Writer) newline(depth int) {
	if w.indent == "" {
		return
	}
	w.buf = append(w.buf, '\n')
	for range depth {
		w.buf = append(w.buf, w.indent...)
	}
}

func (w *Writer) begin(c byte) {
	w.next()
	w.buf = append(w.buf, c)
	w.open = append(w.open, false)
}

func (w *Writer) end(c byte) {
	if w.open[len(w.open)-1] {
		w.newline(len(w.open) - 1)
	}
	w.open = w.open[:len(w.open)-1]
	w.buf = append(w.buf, c)
}

// BeginObject opens an object.
func (w *Writer) BeginObject() { w.begin('{') }

// EndObject closes the object opened last.
func (w *Writer) EndObject() { w.end('}') }

// BeginArray opens an array.
func (w *Writer) BeginArray() { w.begin('[') }

// EndArray closes the array opened last.
func (w *Writer) EndArray() { w.end(']') }

// Key writes the key of the object's next member, whose value follows.
func (w *Writer) Key(k string) {
	w.next()
	w.buf = AppendString(w.buf, k)
	w.buf = append(w.buf, ':')
	if w.indent != "" {
		w.buf = append(w.buf, ' ')
	}
	w.afterKey = true
}

// String writes a string.
func (w *Writer) String(s string) {
	w.next()
	w.buf = AppendString(w.buf, s)
}

// Int writes an integer.
func (w *Writer) Int(v int64) {
	w.next()
	w.buf = strconv.AppendInt(w.buf, v, 10)
}

// Float writes a float64 (bits 64) or a float32 (bits 32) in the shortest
// form that reads back as the same value.
func (w *Writer) Float(f float64, bits int) {
	w.next()
	w.buf = AppendFloat(w.buf, f, bits)
}

// Bool writes true or false.
func (w *Writer) Bool(b bool) {
	w.next()
	w.buf = strconv.AppendBool(w.buf, b)
}

// Null writes null.
func (w *Writer) Null() {
	w.next()
	w.buf = append(w.buf, "null"...)
}

// Strings writes an array of strings.
func (w *Writer) Strings(v []string) {
	w.BeginArray()
	for _, s := range v {
		w.String(s)
	}
	w.EndArray()
}

// Ints writes an array of integers.
func (w *Writer) Ints(v []int) {
	w.BeginArray()
	for _, x := range v {
		w.Int(int64(x))
	}
	w.EndArray()
}

// AppendFloat appends f as encoding/json writes it: the shortest decimal
// that reads back as f at the given bit size, in exponent form below 1e-6
// and from 1e21 on, with a one-digit exponent not padded ("1e-7"); null
// for a NaN or an infinity, which JSON cannot hold.
func AppendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 becomes e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 as U+FFFD, and U+2028 and U+2029
// escaped (JavaScript takes them for line ends); <, > and & as they are.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
