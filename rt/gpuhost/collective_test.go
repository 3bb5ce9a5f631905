package gpuhost

import (
	"fmt"
	"strings"
	"testing"
)

type testBuf struct {
	name string
	n    int
}

func (b *testBuf) Len() int { return b.n }

func TestBuckets(t *testing.T) {
	a, b := &testBuf{"a", 1000}, &testBuf{"b", 64}
	show := func(args []Arg) string {
		var s []string
		for _, x := range args {
			s = append(s, fmt.Sprintf("%s[%d:%d]", x.Buf.(*testBuf).name, x.Offset, x.Offset+x.Bytes))
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		name  string
		spans []Arg
		max   int
		want  string
		err   string
	}{
		{"one small span", []Arg{{a, 0, 40}}, 100, "a[0:40]", ""},
		{"adjacent spans merge", []Arg{{a, 0, 40}, {a, 40, 40}}, 100, "a[0:80]", ""},
		{"merge up to the bound, then a new bucket", []Arg{{a, 0, 60}, {a, 60, 60}}, 100, "a[0:100] a[100:120]", ""},
		{"a large span is split", []Arg{{a, 0, 1000}}, 400, "a[0:400] a[400:800] a[800:1000]", ""},
		{"a gap is not merged", []Arg{{a, 0, 40}, {a, 44, 40}}, 100, "a[0:40] a[44:84]", ""},
		{"another buffer is not merged", []Arg{{a, 960, 40}, {b, 0, 40}}, 100, "a[960:1000] b[0:40]", ""},
		{"the order is kept", []Arg{{b, 0, 64}, {a, 0, 8}}, 100, "b[0:64] a[0:8]", ""},
		{"empty spans vanish", []Arg{{a, 0, 0}, {a, 0, 8}}, 100, "a[0:8]", ""},
		{"the bound is rounded to whole floats", []Arg{{a, 0, 20}}, 10, "a[0:8] a[8:16] a[16:20]", ""},
		{"outside the buffer", []Arg{{b, 32, 64}}, 100, "", "span 0: bytes 32 to 96 are outside its buffer of 64"},
		{"not whole floats", []Arg{{a, 0, 8}, {a, 2, 8}}, 100, "", "span 1: offset 2 and length 8: want whole float32s"},
		{"no buffer", []Arg{{nil, 0, 8}}, 100, "", "span 0: no buffer"},
		{"a bound too small", []Arg{{a, 0, 8}}, 3, "", "buckets of 3 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Buckets(c.spans, c.max)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Buckets = %s, %v; want an error containing %q", show(got), err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if show(got) != c.want {
				t.Errorf("Buckets = %s, want %s", show(got), c.want)
			}
		})
	}
}
