package jsontext

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// awkwardStrings have every escape and every kind of byte JSON treats
// specially.
var awkwardStrings = []string{
	"", "plain", `quote " backslash \ slash /`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
	"<html> & 'apos'", "é ü 日本 🎉", "line\u2028sep\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate bytes",
}

// write renders v with the Writer; v is what encoding/json encodes: nil,
// bool, int, float64, float32, string, []any or an ordered object.
type object [][2]any

func write(w *Writer, v any) {
	switch v := v.(type) {
	case nil:
		w.Null()
	case bool:
		w.Bool(v)
	case int:
		w.Int(int64(v))
	case float64:
		w.Float(v, 64)
	case float32:
		w.Float(float64(v), 32)
	case string:
		w.String(v)
	case []any:
		w.BeginArray()
		for _, x := range v {
			write(w, x)
		}
		w.EndArray()
	case object:
		w.BeginObject()
		for _, kv := range v {
			w.Key(kv[0].(string))
			write(w, kv[1])
		}
		w.EndObject()
	}
}

// marshalOrdered is encoding/json's text for v, objects in their order.
func marshalOrdered(t *testing.T, v any, indent string) string {
	t.Helper()
	var b bytes.Buffer
	var enc func(v any)
	enc = func(v any) {
		switch v := v.(type) {
		case []any:
			b.WriteByte('[')
			for i, x := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(x)
			}
			b.WriteByte(']')
		case object:
			b.WriteByte('{')
			for i, kv := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(kv[0])
				b.WriteByte(':')
				enc(kv[1])
			}
			b.WriteByte('}')
		default:
			e := json.NewEncoder(&b)
			e.SetEscapeHTML(false)
			if err := e.Encode(v); err != nil {
				t.Fatal(err)
			}
			b.Truncate(b.Len() - 1)
		}
	}
	enc(v)
	if indent == "" {
		return b.String()
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", indent); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func sampleValues() []any {
	var strs []any
	for _, s := range awkwardStrings {
		strs = append(strs, s)
	}
	for c := 0; c < 256; c++ {
		strs = append(strs, string([]byte{'a', byte(c), 'z'}))
	}
	floats := []any{0.0, -0.0, 1.0, -1.5, 0.1, 1e-6, 9.99e-7, 1e-7, 123456789.125, 1e20, 1e21, 1.5e300, 5e-324,
		float32(0.1), float32(1e-7), float32(3.4e38), float32(1e21), float32(-2.5), float32(1.0 / 3)}
	return []any{
		nil, true, false, 0, -7, math.MaxInt64, math.MinInt64,
		strs, floats,
		[]any{}, object{}, []any{[]any{}, object{}},
		object{{"model", "lin"}, {"input", []any{1, 4, 4}}, {"empty", []any{}}, {"nested", object{{"a", []any{object{{"b", nil}}}}}}, {"weights", nil}},
	}
}

// TestWriterMatchesEncodingJSON: the Writer's text is encoding/json's,
// compact and indented.
func TestWriterMatchesEncodingJSON(t *testing.T) {
	for _, indent := range []string{"", "  ", "\t"} {
		for _, v := range sampleValues() {
			w := NewWriter(indent)
			write(w, v)
			if got, want := string(w.Bytes()), marshalOrdered(t, v, indent); got != want {
				t.Errorf("indent %q:\ngot  %s\nwant %s", indent, got, want)
			}
		}
	}
}

// TestWriterNonFiniteIsNull: JSON has no NaN or infinity.
func TestWriterNonFiniteIsNull(t *testing.T) {
	w := NewWriter("")
	w.BeginArray()
	w.Float(math.NaN(), 64)
	w.Float(math.Inf(1), 32)
	w.Float(math.Inf(-1), 64)
	w.EndArray()
	if got := string(w.Bytes()); got != "[null,null,null]" {
		t.Errorf("got %s", got)
	}
}

// toAny converts a parsed value to what encoding/json's Unmarshal into an
// any gives.
func toAny(t *testing.T, v Value) any {
	switch v.Kind {
	case Null:
		return nil
	case Bool:
		return v.Text == "true"
	case Number:
		f, err := strconv.ParseFloat(v.Text, 64)
		if err != nil {
			t.Fatalf("number %q: %v", v.Text, err)
		}
		return f
	case String:
		return v.Text
	case Array:
		out := []any{}
		for _, x := range v.Items {
			out = append(out, toAny(t, x))
		}
		return out
	}
	out := map[string]any{}
	for _, f := range v.Fields {
		out[f.Key] = toAny(t, f.Value)
	}
	return out
}

// checkAgainstEncodingJSON parses data and compares with encoding/json:
// both accept it with the same value, or both reject it (or it repeats a
// key, which Parse rejects and encoding/json accepts).
func checkAgainstEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	v, err := Parse(data)
	var want any
	wantErr := json.Unmarshal(data, &want)
	var rangeErr *json.UnmarshalTypeError
	if errors.As(wantErr, &rangeErr) && err == nil {
		return // a number out of float64's range (1e700): valid text, which Parse keeps as written
	}
	switch {
	case err != nil && wantErr != nil:
		return
	case err != nil && strings.Contains(err.Error(), "duplicate key"):
		return
	case err != nil && strings.Contains(err.Error(), "nest more than"):
		return
	case err != nil:
		t.Fatalf("Parse(%q): %v; encoding/json accepts it", data, err)
	case wantErr != nil:
		t.Fatalf("Parse(%q) accepts it; encoding/json: %v", data, wantErr)
	}
	if got := toAny(t, v); !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%q) = %#v, encoding/json %#v", data, got, want)
	}
	if !bytes.Equal(bytes.TrimSpace(data), v.Raw) {
		t.Fatalf("Parse(%q): Raw %q", data, v.Raw)
	}
}

var parseCases = []string{
	`null`, ` true `, `false`, `0`, `-0`, `1.5e-7`, `-12.25E+3`, `123456789012345678901234567890`,
	`""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u65e5\ud83c\udf89"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, "\"\xff\xfe\"",
	`[]`, `[1,[2,[3]],{}]`, `{"a":1,"b":{"c":[true,null]},"d":"e"}`, "\t{ \"a\" : [ 1 , 2 ] }\n",
	// invalid
	``, ` `, `nul`, `tru`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`, `NaN`, `"abc`, "\"a\nb\"", `"\x"`, `"\u12"`, `"\u12g4"`,
	`[1,]`, `[1 2]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{a:1}`, `{"a":1}}`, `[1]x`, `{} x`, `{"a":1,"a":2}`,
	strings.Repeat("[", 1001) + strings.Repeat("]", 1001), strings.Repeat("[", 999) + strings.Repeat("]", 999),
}

// TestParseMatchesEncodingJSON: valid text parses to encoding/json's
// value, invalid text fails in both.
func TestParseMatchesEncodingJSON(t *testing.T) {
	for _, c := range parseCases {
		checkAgainstEncodingJSON(t, []byte(c))
	}
	for _, v := range sampleValues() {
		w := NewWriter("  ")
		write(w, v)
		checkAgainstEncodingJSON(t, w.Bytes())
	}
}

// TestParseErrors: errors say where and what.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1,"a":2}`, `duplicate key "a"`},
		{`{} x`, "unexpected data after the object at byte 3"},
		{`[1,]`, "byte 3: want a value, found ']'"},
		{`{"a":tru}`, `key "a": byte 8: want "true", found '}'`},
		{`{"a":1`, "the text ends where ',' or '}' should be"},
		{strings.Repeat("[", 1001), "nest more than 1000 deep"},
	} {
		if _, err := Parse([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): %v, want %q", c.in, err, c.want)
		}
	}
	v, err := Parse([]byte(`{"x":[1,2],"y":"z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if y, ok := v.Lookup("y"); !ok || y.Text != "z" || string(y.Raw) != `"z"` {
		t.Errorf("Lookup(y) = %+v, %v", y, ok)
	}
	if _, ok := v.Lookup("w"); ok {
		t.Error("Lookup(w) found a member")
	}
}

// FuzzParse compares Parse with encoding/json on any input.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstEncodingJSON(t, data)
	})
}
